"""What the reference models share, and the small ones (docs/world.md): ``ref:pixels`` (a 4x4 grid of mean
colours plus a 4-bin-per-channel colour histogram, L2-normalised), ``ref:effnet`` (EfficientNet-Lite0 pooled
features), ``ref:photo`` (EfficientNet-Lite0 top labels and dominant colours in English; it only describes,
and says so to any other request, as a weak model would) and ``ref:renderer`` (text to world scene).
"""

from __future__ import annotations

import asyncio
import re

import numpy as np
from PIL import Image

from ..core.messages import Message
from ..core.roles import Capabilities, Generation, GenerationConfig, Usage
from ..core.spec import ModelSpec, SpecError
from .effnet import EffNetLite0
from .language import parse_description
from .scene import NAMED_COLORS, render_scene


class RefModel:
    """What every reference model declares: its id (``ref:<name>``, or its spec's canonical form), capabilities,
    and the concurrency key and limit its calls share (``ref:<name>`` unless the class names another)."""

    name = ""
    capabilities = Capabilities()
    concurrency_key: str | None = None
    max_concurrency: int | None = 2

    def __init__(self, spec: ModelSpec | None = None) -> None:
        self.model_id = spec.canonical() if spec else f"ref:{self.name}"
        self.concurrency_key = self.concurrency_key or f"ref:{self.name}"


def generation(text: str, max_tokens: int | None, input_tokens: int) -> Generation:
    """``text`` as said: cut to ``max_tokens`` words (finish reason "length"), with word counts for usage."""
    words = text.split()
    cut = max_tokens is not None and len(words) > max_tokens
    text = " ".join(words[:max_tokens]) if cut else text
    return Generation(text=text, finish_reason="length" if cut else "stop",
                      usage=Usage(input_tokens=input_tokens, output_tokens=len(text.split())))


def article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def pixel_features(img: Image.Image) -> np.ndarray:
    arr = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
    grid = np.asarray(img.convert("RGB").resize((4, 4), Image.BOX), dtype=np.float32).reshape(-1) / 255.0
    q = np.minimum((arr * 4).astype(np.int64), 3)
    codes = (q[..., 0] * 16 + q[..., 1] * 4 + q[..., 2]).reshape(-1)
    hist = np.bincount(codes, minlength=64).astype(np.float32) / codes.size
    vec = np.concatenate([grid, hist])
    return vec / (np.linalg.norm(vec) + 1e-12)


class PixelEncoder(RefModel):
    name, max_concurrency = "pixels", None

    def __init__(self, spec: ModelSpec | None = None) -> None:
        super().__init__(spec)
        self.concurrency_key = self.model_id

    async def encode(self, images: list[Image.Image]) -> np.ndarray:
        return np.stack([pixel_features(im) for im in images]).astype(np.float32)


class EffNetEncoder(RefModel):
    name, capabilities, max_concurrency = "effnet", Capabilities(vision_embedding=True), 1

    def __init__(self, spec: ModelSpec | None = None) -> None:
        self.net = EffNetLite0.get()
        super().__init__(spec)

    async def encode(self, images: list[Image.Image]) -> np.ndarray:
        return await asyncio.to_thread(self.net.features, images)

    def vision_embedding(self, pixels):
        return self.net.features_tensor(pixels)

    def vision_input_size(self) -> tuple[int, int]:
        return (224, 224)


#: The named colours a photograph's dominant colours are called by: the objects' and neutral tones.
PHOTO_COLORS = {**NAMED_COLORS, "white": (250, 250, 250), "black": (15, 15, 15), "gray": (128, 128, 128)}


def dominant_colors(img: Image.Image, k: int = 3, min_share: float = 0.08) -> list[tuple[str, float]]:
    """Named colours covering the largest shares of the image (on a 64x64 thumbnail)."""
    arr = np.asarray(img.convert("RGB").resize((64, 64), Image.BILINEAR), dtype=np.float32).reshape(-1, 3)
    names = list(PHOTO_COLORS)
    ref = np.array([PHOTO_COLORS[n] for n in names], dtype=np.float32)
    idx = ((arr[:, None, :] - ref[None]) ** 2).sum(-1).argmin(1)
    share = np.bincount(idx, minlength=len(names)) / len(idx)
    order = np.argsort(-share)
    return [(names[i], float(share[i])) for i in order[:k] if share[i] >= min_share]


_DESCRIBE = re.compile(r"\b(describe|description|caption|what (is|do you see) in)\b", re.IGNORECASE)


def describe_photo(img: Image.Image) -> str:
    labels = EffNetLite0.get().top_labels(img, k=3)
    colors = dominant_colors(img)
    first, p = labels[0]
    hedge = "most likely" if p >= 0.5 else "possibly"
    text = f"The image shows {article(first)} {first} ({hedge})."
    others = [name for name, q in labels[1:] if q >= 0.05]
    if others:
        text += " It may also contain " + " or ".join(f"{article(o)} {o}" for o in others) + "."
    if colors:
        text += " The dominant colours are " + ", ".join(c for c, _ in colors) + "."
    return text


class PhotoDescriber(RefModel):
    name, capabilities, concurrency_key = "photo", Capabilities(multi_image=False, seeded=True), "ref:effnet"

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        user = [m for m in messages if m.role == "user"]
        images = [im for m in user for im in m.images]
        prompt = " ".join(m.text for m in user)
        if not images:
            text = "I can only describe images, and this request has no image."
        elif not _DESCRIBE.search(prompt):
            text = "I do not understand this request; I can only describe the image."
        else:
            text = await asyncio.to_thread(describe_photo, images[0].to_pil())
        return generation(text, config.max_tokens, len(prompt.split()))


class RefRenderer(RefModel):
    """A text-to-image generator for the reference world: a free English description
    (:mod:`vlmcheck.world.language`) read into a scene graph and rendered.  What it cannot read is left out, as a
    weak generator would (nothing understood: an empty background).  Deterministic: the seed is accepted and
    recorded, not needed."""

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
