"""White-box vision embeddings of local Hugging Face VLMs, differentiable from raw pixels.

An adversarial attack optimises the pixels themselves, but the processors that prepare images are numpy/PIL code:
the part of each that follows resizing (rescale, normalise, and the family's packing of pixels into model inputs)
is written here in torch, and tests check it against the processor's own output.  The packing is chosen from the
signature of the model's ``get_image_features`` (the input contract itself), not from model names:

* ``plain``: ``(B, 3, H, W)`` pixels (LLaVA, Gemma 3, PaliGemma, InternVL...);
* ``grid``: flattened ``temporal x patch x patch`` patches plus ``image_grid_thw`` (Qwen2-VL, Qwen2.5-VL);
* ``tiles``: ``(B, tiles, 3, H, W)`` plus ``pixel_attention_mask`` (Idefics3, SmolVLM), the single global view at
  ``max_image_size`` only (the processor's extra tiles are not formed).
"""

from __future__ import annotations

import inspect
import math
from typing import Any

DEFAULT_GRID_SIZE = 448  # Qwen2-VL family: attack resolution before the processor's own size rules


def packing_of(model: Any) -> str | None:
    """``plain``, ``grid`` or ``tiles`` for a model with ``get_image_features``; None without one."""
    fn = getattr(model, "get_image_features", None)
    if not callable(fn):
        return None
    params = inspect.signature(fn).parameters
    if "image_grid_thw" in params:
        return "grid"
    if "pixel_attention_mask" in params:
        return "tiles"
    return "plain"


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """Read ``name`` from a dict or an attribute object (processors hold both kinds)."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen2-VL's rule: sides divisible by ``factor``, area within [min_pixels, max_pixels],
    aspect ratio kept as closely as those allow (as in the Qwen2-VL image processor)."""
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def input_size(packing: str, image_processor: Any, model_config: Any,
               requested: tuple[int, int] | None = None) -> tuple[int, int]:
    """The (H, W) at which ``vision_embedding`` takes pixels: ``requested`` (the spec's ``vision_size``) for the
    ``grid`` family, which takes any size; the others' one input size, read from the processor."""
    if packing == "grid":
        factor = int(_get(image_processor, "patch_size", 14)) * int(_get(image_processor, "merge_size", 2))
        size = _get(image_processor, "size")
        min_pixels = int(_get(size, "shortest_edge", None) or _get(image_processor, "min_pixels", 56 * 56))
        max_pixels = int(_get(size, "longest_edge", None) or _get(image_processor, "max_pixels", 28 * 28 * 1280))
        h, w = requested or (DEFAULT_GRID_SIZE, DEFAULT_GRID_SIZE)
        return smart_resize(h, w, factor, min_pixels, max_pixels)
    if packing == "tiles":
        side = _get(_get(image_processor, "max_image_size"), "longest_edge", None)
        if side:
            return int(side), int(side)
    return processor_size(image_processor, model_config)


def processor_size(image_processor: Any, config: Any) -> tuple[int, int]:
    """The fixed (H, W) a processor resizes (or crops) to; the vision config's ``image_size``
    when the processor names none.  Also used by the ``hf-encoder:`` adapter."""
    size = _get(image_processor, "crop_size") or _get(image_processor, "size") or {}
    h = _get(size, "height") or _get(size, "shortest_edge")
    w = _get(size, "width") or _get(size, "shortest_edge")
    if not h or not w:
        h = w = _get(_get(config, "vision_config") or config, "image_size", 224)
    return int(h), int(w)


def normalise(pixels: Any, image_processor: Any) -> Any:
    """(pixels - mean) / std with the processor's statistics; pixels in [0, 1]."""
    import torch

    mean = torch.tensor(_get(image_processor, "image_mean", [0.5] * 3), dtype=pixels.dtype, device=pixels.device)
    std = torch.tensor(_get(image_processor, "image_std", [0.5] * 3), dtype=pixels.dtype, device=pixels.device)
    return (pixels - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1)


def grid_patches(normed: Any, patch_size: int, merge_size: int, temporal_patch_size: int) -> tuple[Any, Any]:
    """Qwen2-VL's packing of normalised (B, 3, H, W) images: (B*h*w, 3*t*p*p) patches and grid_thw, ordered
    merge-window by merge-window, each still image repeated ``temporal_patch_size`` times along time."""
    import torch

    b, c, height, width = normed.shape
    gh, gw = height // patch_size, width // patch_size
    x = normed.reshape(b, c, gh // merge_size, merge_size, patch_size, gw // merge_size, merge_size, patch_size)
    x = x.permute(0, 2, 5, 3, 6, 1, 4, 7)  # b, gh/m, gw/m, m, m, c, p, p
    x = x.unsqueeze(6).expand(-1, -1, -1, -1, -1, -1, temporal_patch_size, -1, -1)
    flat = x.reshape(b * gh * gw, c * temporal_patch_size * patch_size * patch_size)
    grid = torch.tensor([[1, gh, gw]] * b, dtype=torch.long, device=normed.device)
    return flat, grid


def embed(model: Any, image_processor: Any, pixels: Any, packing: str, dtype: Any = None) -> Any:
    """Connector output, (B, tokens, dim), for ``pixels`` (B, 3, H, W) in [0, 1]."""
    import torch

    normed = normalise(pixels, image_processor)
    if dtype is not None:
        normed = normed.to(dtype)
    if packing == "grid":
        flat, grid = grid_patches(normed, int(_get(image_processor, "patch_size", 14)),
                                  int(_get(image_processor, "merge_size", 2)),
                                  int(_get(image_processor, "temporal_patch_size", 2)))
        out = model.get_image_features(pixel_values=flat, image_grid_thw=grid)
    elif packing == "tiles":
        b, _, h, w = normed.shape
        mask = torch.ones((b, 1, h, w), dtype=torch.bool, device=normed.device)
        out = model.get_image_features(pixel_values=normed.unsqueeze(1), pixel_attention_mask=mask)
    else:
        out = model.get_image_features(pixel_values=normed)
    feats = getattr(out, "pooler_output", out)
    if isinstance(feats, (list, tuple)):  # one tensor per image (grid, tiles, some plain models)
        feats = torch.stack([f.reshape(-1, f.shape[-1]) for f in feats])
    return feats
