"""Image encoders: images -> (n, d) float32 matrix, batched: ``hf-encoder:`` (a transformers vision model),
``timm:`` (a timm model's pooled features; parameters in docs/usage.md) and :class:`TorchEncoder` (any
``torch.nn.Module`` with a preprocessing callable, for the Python API).  They run in a worker thread; ``embed_tensor``
gives gradients for attacks on a bare vision tower.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
from PIL import Image

from ..core.roles import Capabilities
from ..core.spec import ModelSpec, SpecError
from ._vision import normalise, processor_size
from .hf import ensure_available, resolve_device, resolve_dtype


class TorchEncoder:
    """Wrap any module: ``preprocess(list[PIL]) -> (B, 3, H, W)`` tensor, ``module(x) -> (B, d)``;
    ``preprocess_tensor`` (optional) maps [0, 1] pixels to model input, differentiably (``embed_tensor``)."""

    def __init__(self, module, preprocess: Callable[[list[Image.Image]], Any], *, model_id: str,
                 batch_size: int = 32, device: str = "cpu",
                 preprocess_tensor: Callable[[Any], Any] | None = None,
                 input_size: tuple[int, int] | None = None) -> None:
        self.module = module.to(device).eval()
        self.preprocess, self.preprocess_tensor, self.input_size = preprocess, preprocess_tensor, input_size
        self.model_id, self.batch_size, self.device = model_id, batch_size, device
        self.capabilities = Capabilities(multi_image=True, vision_embedding=preprocess_tensor is not None)
        self.concurrency_key = model_id
        self.max_concurrency = 1
        # one forward pass at a time, on the encoder's own thread: a sample waits for its turn as a queued future,
        # not as a thread of the loop's shared pool blocked on a lock (the pool also reads and decodes images)
        self._forward_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"encoder-{model_id}")

    async def encode(self, images: list[Image.Image]) -> np.ndarray:
        batches = await asyncio.to_thread(self._prepare, images)  # preprocessing: concurrent, off the loop
        return await asyncio.get_running_loop().run_in_executor(self._forward_thread, self._run, batches)

    def _forward(self, x):
        return self.module(x)

    def _prepare(self, images: list[Image.Image]) -> list[Any]:
        return [self.preprocess(images[start:start + self.batch_size]).to(self.device)
                for start in range(0, len(images), self.batch_size)]

    def _run(self, batches: list[Any]) -> np.ndarray:
        import torch

        with torch.inference_mode():
            rows = [self._forward(x).float().reshape(x.shape[0], -1).cpu().numpy() for x in batches]
        return np.concatenate(rows, axis=0).astype(np.float32) if rows else np.zeros((0, 0), np.float32)

    def embed_tensor(self, pixels):
        """Differentiable embedding of ``pixels`` in [0, 1] (B, 3, H, W)."""
        if self.preprocess_tensor is None:
            raise NotImplementedError(f"{self.model_id}: no differentiable preprocessing given")
        return self._forward(self.preprocess_tensor(pixels)).reshape(pixels.shape[0], -1)

    vision_embedding = embed_tensor

    def vision_pad_colour(self) -> tuple[int, int, int]:
        mean = getattr(getattr(self, "processor", None), "image_mean", None) or [0.5] * 3
        return tuple(int(round(float(m) * 255)) for m in list(mean)[:3])  # type: ignore[return-value]

    def vision_input_size(self) -> tuple[int, int]:
        if self.input_size is None:
            raise NotImplementedError(f"{self.model_id}: input size unknown")
        return self.input_size


class HFEncoder(TorchEncoder):
    def __init__(self, spec: ModelSpec) -> None:
        import torch
        from transformers import AutoConfig, AutoImageProcessor, AutoModel

        device = resolve_device(spec.get_str("device"))
        dtype = resolve_dtype(spec.get_str("dtype"), device)
        ensure_available(spec.name)
        config = AutoConfig.from_pretrained(spec.name)
        model = AutoModel.from_pretrained(spec.name, dtype=dtype)
        self.processor = AutoImageProcessor.from_pretrained(spec.name)
        default_pool = "image_features" if callable(getattr(model, "get_image_features", None)) else "cls"
        self.pool = spec.get_str("pool", default_pool)
        if self.pool not in ("cls", "image_features", "mean"):
            raise SpecError(f"{spec.canonical()}: pool must be cls, image_features or mean")
        if self.pool == "cls" and hasattr(model, "vision_model"):
            model = model.vision_model  # CLIP/SigLIP full models: take the vision tower's CLS
        self._dtype = dtype
        size = processor_size(self.processor, config)

        def preprocess(images):
            return self.processor(images=[im.convert("RGB") for im in images], return_tensors="pt")["pixel_values"]

        def preprocess_tensor(pixels):
            resized = torch.nn.functional.interpolate(pixels, size=size, mode="bilinear", align_corners=False)
            return normalise(resized, self.processor).to(dtype)

        super().__init__(model, preprocess, model_id=spec.canonical(), batch_size=spec.get_int("batch_size", 32),
                         device=device, preprocess_tensor=preprocess_tensor, input_size=size)

    def _forward(self, x):
        x = x.to(self._dtype)
        if self.pool == "image_features":
            out = self.module.get_image_features(pixel_values=x)
            return getattr(out, "pooler_output", out)
        hidden = self.module(pixel_values=x).last_hidden_state
        return hidden[:, 0] if self.pool == "cls" else hidden.mean(dim=1)


class TimmEncoder(TorchEncoder):
    def __init__(self, spec: ModelSpec) -> None:
        import timm
        import torch
        from timm.data import resolve_data_config

        device = resolve_device(spec.get_str("device"))
        checkpoint = spec.get_str("checkpoint")  # a local weights file: pretrained, from that file
        overlay = {"pretrained_cfg_overlay": {"file": checkpoint}} if checkpoint else {}
        model = timm.create_model(spec.name, pretrained=bool(checkpoint) or spec.get_bool("pretrained", False),
                                  num_classes=0, **overlay)
        cfg = resolve_data_config({}, model=model)
        _, h, w = cfg["input_size"]
        stats = {"image_mean": cfg["mean"], "image_std": cfg["std"]}

        def preprocess_tensor(pixels):
            resized = torch.nn.functional.interpolate(pixels, size=(h, w), mode="bilinear", align_corners=False)
            return normalise(resized, stats)

        def preprocess(images):
            arr = np.stack([np.asarray(im.convert("RGB").resize((w, h), Image.BICUBIC), np.float32) / 255.0
                            for im in images])
            return preprocess_tensor(torch.from_numpy(arr).permute(0, 3, 1, 2))

        super().__init__(model, preprocess, model_id=spec.canonical(), batch_size=spec.get_int("batch_size", 32),
                         device=device, preprocess_tensor=preprocess_tensor, input_size=(h, w))
