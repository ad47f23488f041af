"""``ref:renderer``: a text-to-image generator for the reference world.

It reads a free English description (see :mod:`vlmcheck.world.language`) into
a scene graph and renders it.  Whatever it cannot read is left out, as a weak
generator would; a description with nothing it understands gives an empty
background.  Deterministic: the seed is accepted and recorded, not needed.
"""

from __future__ import annotations

import asyncio

from PIL import Image

from ..core.roles import Capabilities
from ..core.spec import ModelSpec, SpecError
from .language import parse_description
from .ref_models import RefModel
from .scene import render_scene


class RefRenderer(RefModel):
    name, capabilities = "renderer", Capabilities(seeded=True)

    def __init__(self, spec: ModelSpec | None = None) -> None:
        params = dict(spec.params) if spec else {}
        unknown = set(params) - {"size", "concurrency"}
        if unknown:
            raise SpecError(f"ref:renderer: unknown parameter(s) {sorted(unknown)}; known: size")
        self.size = int(params.get("size", 384))
        super().__init__(spec)

    def render(self, prompt: str) -> Image.Image:
        scene, _notes = parse_description(prompt)
        return render_scene(scene, self.size)

    async def generate_image(self, prompt: str, seed: int | None = None) -> Image.Image:
        return await asyncio.to_thread(self.render, prompt)
