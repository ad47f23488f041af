"""Adversarial image perturbations on a model's visual embedding (VHExpansion eq. 1; the settings and where they
differ from the authors' code: docs/methods.md, VHExpansion).  The target is anything with a differentiable
``vision_embedding(pixels)`` (pixels in [0, 1], (B, 3, H, W)) and ``vision_input_size()``: a white-box ``hf:`` VLM,
or a bare image encoder.  The result is quantised to 8 bits as saved, epsilon rounded down to whole 1/255 steps, so
the recorded L-inf norm and final cosine are those of the saved image and the bound holds exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from PIL import Image
from pydantic import BaseModel

from ..core.images import image_hash
from ..core.progress import Progress


class AttackConfig(BaseModel):
    method: Literal["ifgsm", "pgd"] = "ifgsm"
    epsilon: float = 8 / 255
    step: float | None = None  # default: 0.5/255 (I-FGSM), 1.0 (PGD: multiplies the raw gradient; model-dependent)
    steps_clean: int = 500
    steps_hallucinated: int = 100
    init_hallucinated: float = 5 / 255
    early_stop_cosine: float = 0.995
    pgd_init: float = 0.5 / 255  # PGD only, non-hallucinated cases: see _run
    cosine: Literal["flat", "per_token"] = "flat"
    seed: int = 0


@dataclass
class AttackResult:
    image: Image.Image
    hallucinated: bool
    cosine_start: float
    cosine_final: float
    linf: float  # measured on the saved 8-bit image, in [0, 1] units
    steps: int
    random_start: bool = False  # the gradient at the start was exactly zero: restarted from seeded tiny noise


def expand_to_square(img: Image.Image, colour: tuple[int, int, int]) -> Image.Image:
    """Pad to a square with ``colour``, the image centred (the authors' LLaVA ``expand2square``): the attacked
    image keeps its aspect ratio, as the model's own preprocessing would."""
    w, h = img.size
    if w == h:
        return img
    side = max(w, h)
    out = Image.new("RGB", (side, side), colour)
    out.paste(img, ((side - w) // 2, (side - h) // 2))
    return out


def _device_of(model: Any):
    import torch

    dev = getattr(model, "device", None)
    if dev is not None:
        return torch.device(dev)
    inner = getattr(model, "model", None) or getattr(model, "net", None)
    try:
        return next(inner.parameters()).device  # type: ignore[union-attr]
    except (AttributeError, StopIteration, TypeError):
        return torch.device("cpu")


def _cos(a, b, mode: str):
    import torch.nn.functional as F

    a, b = a.float(), b.float()  # float32 even for bf16 models: a bf16 cosine near 1 has no resolution left
    if mode == "per_token" and a.dim() == 3:
        return F.cosine_similarity(a, b, dim=-1).mean(dim=-1)
    return F.cosine_similarity(a.flatten(1), b.flatten(1), dim=1)


def attack(model: Any, images: list[Image.Image], hallucinated: list[bool], cfg: AttackConfig | None = None
           ) -> list[AttackResult]:
    """Attack a batch of images; returns one result per image, in order."""
    import torch

    cfg = cfg or AttackConfig()
    h, w = model.vision_input_size()
    device = _device_of(model)
    pad = getattr(model, "vision_pad_colour", None)
    colour = pad() if callable(pad) else (127, 127, 127)
    base = np.stack([np.asarray(expand_to_square(im.convert("RGB"), colour).resize((w, h), Image.BICUBIC))
                     for im in images])
    x = torch.from_numpy(base).permute(0, 3, 1, 2).float().div(255).to(device)
    # each image's random draws are seeded by (seed, its pixels): its result never depends on which images
    # share its batch, nor on concurrency
    seeds = [int(image_hash(im.convert("RGB"))[:8], 16) ^ cfg.seed for im in images]
    results: dict[int, AttackResult] = {}
    groups = [(flag, idx) for flag in (False, True)
              if (idx := [i for i, hflag in enumerate(hallucinated) if bool(hflag) == flag])]
    total = sum(cfg.steps_hallucinated if flag else cfg.steps_clean for flag, _ in groups)
    # plain lines every few seconds, and only when the attack takes that long (the run's own bar is live)
    with Progress(f"attack {cfg.method}, {len(images)} images", total, plain=True, quiet_if_fast=True) as progress:
        for flag, idx in groups:
            results.update(zip(idx, _run(model, x[idx], flag, cfg, device, progress, [seeds[i] for i in idx])))
    return [results[i] for i in range(len(images))]


def _noise(seeds: list[int], shape, kind: str):
    """Per-image random tensors (CPU, then moved): 'sign' in {-1, 1}, 'uniform' in [-1, 1]."""
    import torch

    gens = [torch.Generator(device="cpu").manual_seed(sd) for sd in seeds]
    if kind == "sign":
        return torch.stack([torch.randint(0, 2, shape, generator=g) for g in gens]).float().mul(2).sub(1)
    return torch.stack([torch.rand(shape, generator=g) for g in gens]) * 2 - 1


def _run(model, x, hallucinated: bool, cfg: AttackConfig, device, progress: Progress,
         seeds: list[int]) -> list[AttackResult]:
    import torch

    eps_q = math.floor(cfg.epsilon * 255 + 1e-6) / 255  # whole 8-bit steps: the bound survives saving
    restarted = torch.zeros(x.shape[0], dtype=torch.bool)
    with torch.no_grad():
        e0 = model.vision_embedding(x).detach()
    # hallucinated images: maximise the cosine; the others: minimise it
    steps, direction = (cfg.steps_hallucinated, 1.0) if hallucinated else (cfg.steps_clean, -1.0)
    if hallucinated:
        delta = _noise(seeds, x.shape[1:], "sign").to(device) * cfg.init_hallucinated
    elif cfg.method == "pgd":
        # The cosine is at its maximum at delta = 0, so its raw gradient there is zero and PGD could
        # never leave; start it from tiny uniform noise instead (I-FGSM's sign() breaks the tie itself).
        delta = _noise(seeds, x.shape[1:], "uniform").to(device) * cfg.pgd_init
    else:
        delta = torch.zeros_like(x)
    delta = (torch.clamp(x + delta, 0, 1) - x).clamp(-eps_q, eps_q)
    active = torch.ones(x.shape[0], dtype=torch.bool, device=device)
    used = torch.zeros(x.shape[0], dtype=torch.long)
    gamma = cfg.step if cfg.step is not None else 0.5 / 255 if cfg.method == "ifgsm" else 1.0
    start = None
    for _ in range(steps):
        delta.requires_grad_(True)
        cos = _cos(e0, model.vision_embedding(x + delta), cfg.cosine)
        (grad,) = torch.autograd.grad(cos.sum(), delta)
        flat = None
        if start is None:
            start = cos.detach().cpu()  # the cosine before any step, from the first forward pass
            # exactly zero gradient at the start (a cosine at its maximum, a saturated model): sign() and the raw
            # gradient would never move; those images restart from seeded tiny noise, and it is recorded
            flat = grad.detach().flatten(1).abs().amax(dim=1) == 0
            restarted |= flat.cpu()
        with torch.no_grad():
            upd = grad.sign() if cfg.method == "ifgsm" else grad
            if hallucinated:  # early stopping is per image: frozen images take no more steps
                active &= cos.detach() < cfg.early_stop_cosine
                upd = upd * active.view(-1, 1, 1, 1).to(upd.dtype)
                used += active.cpu().long()
            delta = (delta.detach() + direction * gamma * upd).clamp(-eps_q, eps_q)
            if flat is not None and bool(flat.any()):
                noise = _noise(seeds, x.shape[1:], "uniform").to(device) * cfg.pgd_init
                delta = torch.where(flat.view(-1, 1, 1, 1).to(device), noise, delta)
            delta = torch.clamp(x + delta, 0, 1) - x
        progress.advance()
        if hallucinated and not bool(active.any()):
            break
    if not hallucinated:
        used += steps
    with torch.no_grad():
        if start is None:  # no step taken
            start = _cos(e0, model.vision_embedding(x + delta), cfg.cosine).cpu()
        q = torch.round((x + delta) * 255).clamp(0, 255)
        x8 = torch.round(x * 255)
        q = torch.minimum(torch.maximum(q, x8 - round(eps_q * 255)), x8 + round(eps_q * 255))
        final = _cos(e0, model.vision_embedding(q / 255), cfg.cosine).cpu()
        linf = (q - x8).abs().flatten(1).max(dim=1).values.cpu() / 255
    arr = q.permute(0, 2, 3, 1).to("cpu", torch.uint8).numpy()
    return [AttackResult(Image.fromarray(arr[i], "RGB"), hallucinated, float(start[i]), float(final[i]),
                         float(linf[i]), int(used[i]), bool(restarted[i])) for i in range(x.shape[0])]
