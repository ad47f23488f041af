"""Local ``diffusers`` text-to-image pipelines (``AutoPipelineForText2Image``):
``diffusers:REPO_OR_PATH[?steps=4&guidance=0&width=512&height=512&device=auto&dtype=auto]``; a seed gives a
reproducible image (``torch.Generator`` on the pipeline's device).
"""

from __future__ import annotations

import asyncio
import threading

from PIL import Image

from ..core.images import to_rgb
from ..core.roles import Capabilities
from ..core.spec import ModelSpec
from .hf import ensure_available, resolve_device, resolve_dtype


class DiffusersGenerator:
    def __init__(self, spec: ModelSpec) -> None:
        from diffusers import AutoPipelineForText2Image

        self.model_id = spec.canonical()
        self.device = resolve_device(spec.get_str("device"))
        dtype = resolve_dtype(spec.get_str("dtype"), self.device)
        ensure_available(spec.name, "model_index.json")
        self.pipe = AutoPipelineForText2Image.from_pretrained(spec.name, dtype=dtype).to(self.device)
        self.pipe.set_progress_bar_config(disable=True)
        self.steps = spec.get_int("steps", 25)
        self.guidance = spec.get_float("guidance", 7.5)
        self.width = spec.get_int("width", 0) or None
        self.height = spec.get_int("height", 0) or None
        self.capabilities = Capabilities(multi_image=False, seeded=True)
        self.concurrency_key = self.model_id
        self.max_concurrency = 1
        self._lock = threading.Lock()

    async def generate_image(self, prompt: str, seed: int | None = None) -> Image.Image:
        return await asyncio.to_thread(self._generate, prompt, seed)

    def _generate(self, prompt: str, seed: int | None) -> Image.Image:
        import torch

        generator = torch.Generator(device="cpu" if self.device == "mps" else self.device)
        generator.manual_seed(0 if seed is None else seed)
        kwargs = {"prompt": prompt, "num_inference_steps": self.steps, "guidance_scale": self.guidance,
                  "generator": generator}
        if self.width and self.height:
            kwargs.update(width=self.width, height=self.height)
        with self._lock, torch.inference_mode():
            image = self.pipe(**kwargs).images[0]
        return to_rgb(image)
