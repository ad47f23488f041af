"""Image corruptions: ImageNet-C (Hendrycks & Dietterich, 2019) plus ChEF's "other" category (docs/perturbations.md).

Every corruption takes a float32 RGB array in [0, 1] (H, W, 3), a severity 1..5 and a numpy Generator, and returns
an array of the same kind.  Severity tables are ImageNet-C's (its reference code and ``imagecorruptions``); the code
is our own, vectorised.  :func:`corrupt` is the public entry point: any PIL mode in, the same mode out (alpha kept),
the same size except for ``center_crop`` and ``resize``; randomness comes only from its ``seed``.
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
from dataclasses import dataclass
from typing import Callable

import cv2
import numpy as np
from PIL import Image
from scipy import ndimage

from ..core.registry import Registry
from .kernels import (Array, clipped_zoom, disk_kernel, glass_offsets, glass_shuffle, in_hsv, motion_filter,
                      motion_kernel, plasma_fractal)


@dataclass(frozen=True)
class Corruption:
    name: str
    category: str
    fn: Callable[[Array, int, np.random.Generator], Array]
    keeps_size: bool = True
    pil: bool = False  # works on an RGB PIL image directly (no float round trip)


CORRUPTIONS: Registry[Corruption] = Registry("corruption")


def _register(name: str, category: str, keeps_size: bool = True, pil: bool = False, *, replace: bool = False):
    def deco(fn):
        CORRUPTIONS.add(name, Corruption(name, category, fn, keeps_size, pil), replace=replace, stacklevel=2)
        return fn
    return deco


# ----------------------------------------------------------------------------- noise

@_register("gaussian_noise", "noise")
def gaussian_noise(x, s, rng, sigma: float | None = None):
    c = sigma if sigma is not None else [0.08, 0.12, 0.18, 0.26, 0.38][s - 1]
    return np.clip(x + rng.normal(scale=c, size=x.shape).astype(np.float32), 0, 1)


@_register("shot_noise", "noise")
def shot_noise(x, s, rng):
    c = [60, 25, 12, 5, 3][s - 1]
    return np.clip(rng.poisson(x * c) / float(c), 0, 1).astype(np.float32)


@_register("impulse_noise", "noise")
def impulse_noise(x, s, rng):
    amount = [0.03, 0.06, 0.09, 0.17, 0.27][s - 1]
    out = x.copy()
    u = rng.random(x.shape)
    out[u < amount / 2] = 0.0
    out[(u >= amount / 2) & (u < amount)] = 1.0
    return out


@_register("speckle_noise", "noise")
def speckle_noise(x, s, rng):
    c = [0.15, 0.2, 0.35, 0.45, 0.6][s - 1]
    return np.clip(x + x * rng.normal(scale=c, size=x.shape).astype(np.float32), 0, 1)


# ----------------------------------------------------------------------------- blur

@_register("gaussian_blur", "blur")
def gaussian_blur(x, s, rng):
    c = [1, 2, 3, 4, 6][s - 1]
    return np.clip(ndimage.gaussian_filter(x, sigma=(c, c, 0), mode="nearest"), 0, 1)


@_register("glass_blur", "blur")
def glass_blur(x, s, rng):
    sigma, delta, iterations = [(0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)][s - 1]
    # The reference stores the first blur as uint8 (truncating), then shuffles, then blurs again.
    y = np.floor(ndimage.gaussian_filter(x, sigma=(sigma, sigma, 0), mode="nearest") * 255) / 255
    h, w = y.shape[:2]
    order = np.arange(h * w)
    for _ in range(iterations):
        dy, dx = glass_offsets(h, w, delta, rng)
        order = glass_shuffle(order, h, w, delta, dy, dx)
    y = y.reshape(h * w, -1)[order].reshape(x.shape)
    return np.clip(ndimage.gaussian_filter(y, sigma=(sigma, sigma, 0), mode="nearest"), 0, 1).astype(np.float32)


@_register("defocus_blur", "blur")
def defocus_blur(x, s, rng, radius: float | None = None, alias_blur: float | None = None):
    r, a = [(3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)][s - 1]
    if radius is not None:
        r, a = radius, (alias_blur or 0.0)
    return np.clip(cv2.filter2D(x, -1, disk_kernel(r, a), borderType=cv2.BORDER_REFLECT), 0, 1)


@_register("motion_blur", "blur")
def motion_blur(x, s, rng):
    radius, sigma = [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)][s - 1]
    angle = rng.uniform(-45, 45)
    return np.clip(motion_filter(x, motion_kernel(radius, sigma, angle)), 0, 1)


@_register("zoom_blur", "blur")
def zoom_blur(x, s, rng):
    zooms = np.arange(1, *[(1.11, 0.01), (1.16, 0.01), (1.21, 0.02), (1.26, 0.02), (1.31, 0.03)][s - 1])
    out = x.copy()
    for z in zooms:
        out += clipped_zoom(x, float(z))
    return np.clip(out / (len(zooms) + 1), 0, 1)


# ----------------------------------------------------------------------------- weather

@_register("snow", "weather")
def snow(x, s, rng):
    loc, scale, zoom, thr, radius, sigma, blend = [
        (0.1, 0.3, 3, 0.5, 10, 4, 0.8), (0.2, 0.3, 2, 0.5, 12, 4, 0.7), (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
        (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65), (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55)][s - 1]
    h, w = x.shape[:2]
    layer = rng.normal(loc=loc, scale=scale, size=(h, w)).astype(np.float32)
    layer = clipped_zoom(layer, zoom)
    layer[layer < thr] = 0
    layer = np.clip(layer, 0, 1)
    layer = motion_filter(layer, motion_kernel(radius, sigma, rng.uniform(-135, -45)))
    layer = (np.round(layer * 255) / 255)[..., None]
    gray = cv2.cvtColor(x.astype(np.float32), cv2.COLOR_RGB2GRAY)[..., None]
    y = blend * x + (1 - blend) * np.maximum(x, gray * 1.5 + 0.5)
    return np.clip(y + layer + np.rot90(layer, k=2), 0, 1).astype(np.float32)


@functools.lru_cache(maxsize=4)
def frost_texture(seed: int, size: int = 512) -> Array:
    """A procedural frost texture (RGB float32 in [0, 1]): ice ridges over a pale blue haze."""
    rng = np.random.default_rng(seed)
    acc = np.zeros((size, size), np.float32)
    for sc, wt in ((2.0, 0.5), (5.0, 0.3), (12.0, 0.2)):
        noise = ndimage.gaussian_filter(rng.normal(size=(size, size)).astype(np.float32), sc)
        ridges = np.abs(ndimage.laplace(noise))
        acc += wt * ridges / (ridges.max() + 1e-8)
    acc = (acc - acc.mean()) / (acc.std() + 1e-8)
    # per-channel mean and spread of the ImageNet-C frost photographs, so severities mean the same
    mean = np.array([0.57, 0.65, 0.70], np.float32)
    return np.clip(mean + 0.12 * acc[..., None], 0, 1).astype(np.float32)


@_register("frost", "weather")
def frost(x, s, rng):
    a, b = [(1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75)][s - 1]
    h, w = x.shape[:2]
    tex = frost_texture(int(rng.integers(6)))
    factor = max(h / tex.shape[0], w / tex.shape[1], 1.0) * 1.1
    tex = cv2.resize(tex, (int(math.ceil(tex.shape[1] * factor)), int(math.ceil(tex.shape[0] * factor))),
                     interpolation=cv2.INTER_CUBIC)
    top = int(rng.integers(0, tex.shape[0] - h + 1))
    left = int(rng.integers(0, tex.shape[1] - w + 1))
    return np.clip(a * x + b * tex[top: top + h, left: left + w], 0, 1).astype(np.float32)


@_register("fog", "weather")
def fog(x, s, rng):
    c, decay = [(1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4)][s - 1]
    h, w = x.shape[:2]
    size = 1 << max(max(h, w) - 1, 1).bit_length()  # the next power of two
    layer = plasma_fractal(size, decay, rng)[:h, :w, None].astype(np.float32)
    mx = x.max()
    return np.clip((x + c * layer) * mx / (mx + c), 0, 1).astype(np.float32)


@_register("brightness", "weather")
def brightness(x, s, rng, c: float | None = None):
    c = c if c is not None else [0.1, 0.2, 0.3, 0.4, 0.5][s - 1]
    return in_hsv(x, 2, lambda v: v + c)


@_register("spatter", "weather")
def spatter(x, s, rng):
    loc, scale, sigma, thr, intensity, mud = [(0.65, 0.3, 4, 0.69, 0.6, 0), (0.65, 0.3, 3, 0.68, 0.6, 0),
                                              (0.65, 0.3, 2, 0.68, 0.5, 0), (0.65, 0.3, 1, 0.65, 1.5, 1),
                                              (0.67, 0.4, 1, 0.65, 1.5, 1)][s - 1]
    h, w = x.shape[:2]
    liquid = ndimage.gaussian_filter(rng.normal(loc=loc, scale=scale, size=(h, w)), sigma).astype(np.float32)
    liquid[liquid < thr] = 0
    if not mud:  # water drops: pale turquoise along the edges of the liquid layer
        lq = (liquid * 255).astype(np.uint8)
        dist = 255 - cv2.Canny(lq, 50, 150)
        dist = cv2.distanceTransform(dist, cv2.DIST_L2, 5)
        _, dist = cv2.threshold(dist, 20, 20, cv2.THRESH_TRUNC)
        dist = cv2.blur(dist, (3, 3)).astype(np.uint8)
        dist = cv2.equalizeHist(dist)
        ker = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]], np.float32)
        dist = cv2.filter2D(dist, cv2.CV_8U, ker)
        dist = cv2.blur(dist, (3, 3)).astype(np.float32)
        m = liquid * dist
        m = m / max(m.max(), 1e-8) * intensity
        color = np.array([238, 238, 175], np.float32) / 255.0  # RGB of pale turquoise
        return np.clip(x + m[..., None] * color, 0, 1).astype(np.float32)
    m = ndimage.gaussian_filter((liquid > thr).astype(np.float32), intensity)
    m[m < 0.8] = 0
    color = np.array([63, 42, 20], np.float32) / 255.0  # mud brown
    return np.clip(x * (1 - m[..., None]) + m[..., None] * color, 0, 1).astype(np.float32)


# ----------------------------------------------------------------------------- digital

@_register("contrast", "digital")
def contrast(x, s, rng):
    c = [0.4, 0.3, 0.2, 0.1, 0.05][s - 1]
    means = x.mean(axis=(0, 1), keepdims=True)
    return np.clip((x - means) * c + means, 0, 1)


@_register("elastic_transform", "digital")
def elastic_transform(x, s, rng):
    alpha = 250 * [0.05, 0.065, 0.085, 0.1, 0.12][s - 1]
    h, w = x.shape[:2]
    sigma = (h * 0.01, w * 0.01)
    max_d = h * 0.005
    dx, dy = (ndimage.gaussian_filter(rng.uniform(-max_d, max_d, (h, w)), sigma, mode="reflect", truncate=3) * alpha
              for _ in range(2))
    gx, gy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    out = cv2.remap(x, (gx + dx).astype(np.float32), (gy + dy).astype(np.float32), interpolation=cv2.INTER_LINEAR,
                    borderMode=cv2.BORDER_REFLECT)
    return np.clip(out, 0, 1)


@_register("pixelate", "digital", pil=True)
def pixelate(img, s, rng):
    c = [0.6, 0.5, 0.4, 0.3, 0.25][s - 1]
    w, h = img.size
    return img.resize((max(1, int(w * c)), max(1, int(h * c))), Image.BOX).resize((w, h), Image.NEAREST)


@_register("jpeg_compression", "digital", pil=True)
def jpeg_compression(img, s, rng, quality: int | None = None):
    q = quality if quality is not None else [25, 18, 15, 10, 7][s - 1]
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=q)
    return Image.open(buf).convert("RGB")  # decoded whole, as a copy


@_register("saturate", "digital")
def saturate(x, s, rng):
    mul, add = [(0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (20, 0.2)][s - 1]
    return in_hsv(x, 1, lambda sat: sat * mul + add)


# ----------------------------------------------------------------------------- other (ChEF)

@_register("center_crop", "other", keeps_size=False)
def center_crop(x, s, rng):
    keep = [0.98, 0.96, 0.94, 0.92, 0.90][s - 1]  # share of each side kept (>= 90%)
    h, w = x.shape[:2]
    ch, cw = max(1, int(round(h * keep))), max(1, int(round(w * keep)))
    top, left = (h - ch) // 2, (w - cw) // 2
    return x[top: top + ch, left: left + cw].copy()


@_register("resize", "other", keeps_size=False)
def resize(x, s, rng):
    f = [0.9, 0.8, 0.7, 0.6, 0.5][s - 1]
    h, w = x.shape[:2]
    return cv2.resize(x, (max(1, int(round(w * f))), max(1, int(round(h * f)))), interpolation=cv2.INTER_AREA)


@_register("rotate", "other")
def rotate(x, s, rng):
    angle = [3, 6, 9, 12, 15][s - 1] * (1 if rng.random() < 0.5 else -1)
    h, w = x.shape[:2]
    m = cv2.getRotationMatrix2D((w / 2, h / 2), angle, 1.0)
    return cv2.warpAffine(x, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)


# ----------------------------------------------------------------------------- VHExpansion presets

#: VHExpansion appendix C: the four common perturbations with the paper's parameters.
PRESETS: dict[str, tuple[str, dict]] = {
    "vhx_gaussian_noise": ("gaussian_noise", {"sigma": 0.08}),
    "vhx_brightness": ("brightness", {"c": 0.5}),
    "vhx_defocus_blur": ("defocus_blur", {"radius": 5, "alias_blur": 0.0}),
    "vhx_jpeg": ("jpeg_compression", {"quality": 30}),
}


# ----------------------------------------------------------------------------- public API

def to_float_rgb(img: Image.Image) -> tuple[Array, Image.Image | None, str]:
    """(RGB float array, alpha channel or None, original mode)."""
    mode = img.mode
    alpha = img.getchannel("A") if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in img.info) \
        else None
    if mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        arr = np.asarray(img, dtype=np.float32)
        return np.repeat(arr[..., None] / max(float(arr.max()), 1.0), 3, axis=2), None, mode
    x = np.asarray(img.convert("RGB")).astype(np.float32)
    x *= 1.0 / 255.0
    return x, alpha, mode


def from_float_rgb(x: Array, alpha: Image.Image | None, mode: str) -> Image.Image:
    # convertScaleAbs rounds and saturates in one fast pass; clip first because it takes |x|
    out = Image.fromarray(x if x.dtype == np.uint8 else cv2.convertScaleAbs(np.clip(x, 0.0, 1.0), alpha=255.0), "RGB")
    if alpha is not None:
        if alpha.size != out.size:
            alpha = alpha.resize(out.size, Image.BILINEAR)
        out = out.convert("RGBA")
        out.putalpha(alpha)
        return out.convert("LA") if mode == "LA" else out
    if mode in ("L", "1", "I;16", "I;16B", "I;16L", "I", "F"):
        return out.convert("L")
    if mode in ("P", "CMYK"):
        return out.convert(mode, palette=Image.ADAPTIVE)  # the palette: for P only
    return out


def corrupt(img: Image.Image, name: str, severity: int = 1, seed: int = 0, **params) -> Image.Image:
    """Apply one corruption (or a VHExpansion preset) to a PIL image; deterministic by ``seed``."""
    if name in PRESETS:
        base, preset = PRESETS[name]
        return corrupt(img, base, severity, seed, **{**preset, **params})
    if name not in CORRUPTIONS:
        raise KeyError(f"unknown corruption {name!r}; known: {', '.join(sorted(CORRUPTIONS) + sorted(PRESETS))}")
    corruption = CORRUPTIONS[name]
    if not 1 <= severity <= 5:
        raise ValueError(f"severity must be 1..5, got {severity}")
    name_id = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    rng = np.random.default_rng([seed, severity, name_id])
    if corruption.pil and img.mode in ("RGB", "L", "P", "CMYK", "RGBA", "LA"):
        alpha = img.getchannel("A") if img.mode in ("RGBA", "LA") else None
        out = corruption.fn(img if img.mode == "RGB" else img.convert("RGB"), severity, rng, **params)
        return out if img.mode == "RGB" else from_float_rgb(np.asarray(out), alpha, img.mode)
    x, alpha, mode = to_float_rgb(img)
    y = corruption.fn(np.ascontiguousarray(x, dtype=np.float32), severity, rng, **params)
    return from_float_rgb(np.asarray(y, dtype=np.float32), alpha, mode)
