"""The building blocks of the ImageNet-C corruptions (``perturb/image.py``): blur kernels, a centred zoom, plasma
fractal noise, an HSV-channel edit and glass blur's pixel moves, each as the reference code computes it."""

from __future__ import annotations

import math
from typing import Callable

import cv2
import numpy as np

Array = np.ndarray


def disk_kernel(radius: float, alias_blur: float = 0.0) -> Array:
    """A normalised disk; ImageNet-C smooths it with a small Gaussian (``alias_blur``)."""
    r = int(math.ceil(radius))
    size = max(8, r) if radius <= 8 else r
    ax = np.arange(-size, size + 1)
    xx, yy = np.meshgrid(ax, ax)
    k = (xx ** 2 + yy ** 2 <= radius ** 2).astype(np.float32)
    k /= k.sum()
    if alias_blur > 0:
        ksize = (3, 3) if radius <= 8 else (5, 5)
        k = cv2.GaussianBlur(k, ksize=ksize, sigmaX=alias_blur)
    return k


def motion_kernel(radius: int, sigma: float, angle_deg: float) -> Array:
    """ImageMagick's motion blur (used by ImageNet-C, and re-implemented by ``imagecorruptions``):
    a one-sided line of ``2 * radius + 1`` taps weighted by a Gaussian of ``sigma`` from its
    start, at ``angle_deg``; tap offsets rounded half down, as in the reference."""
    width = 2 * radius + 1
    t = np.arange(width, dtype=np.float64)
    w = np.exp(-(t ** 2) / (2 * sigma ** 2))
    a = math.radians(angle_deg)
    dy = np.ceil(t * math.sin(a) - 0.5).astype(int)
    dx = np.ceil(t * math.cos(a) - 0.5).astype(int)
    half = int(max(np.abs(dy).max(), np.abs(dx).max()))
    k = np.zeros((2 * half + 1, 2 * half + 1), np.float64)
    np.add.at(k, (half + dy, half + dx), w)
    return (k / k.sum()).astype(np.float32)


def motion_filter(x: Array, kernel: Array) -> Array:
    # The reference shifts the image with its edge pixels repeated: replicate, not reflect.
    return cv2.filter2D(x, -1, kernel, borderType=cv2.BORDER_REPLICATE)


def clipped_zoom(x: Array, factor: float) -> Array:
    """Zoom in by ``factor`` about the centre, keeping the size."""
    h, w = x.shape[:2]
    ch, cw = int(math.ceil(h / factor)), int(math.ceil(w / factor))
    top, left = (h - ch) // 2, (w - cw) // 2
    crop = x[top: top + ch, left: left + cw]
    out = cv2.resize(crop, (int(round(cw * factor)), int(round(ch * factor))), interpolation=cv2.INTER_LINEAR)
    if out.ndim == 2 and x.ndim == 3:
        out = out[..., None]
    th, tw = (out.shape[0] - h) // 2, (out.shape[1] - w) // 2
    return out[th: th + h, tw: tw + w]


def plasma_fractal(size: int, decay: float, rng: np.random.Generator) -> Array:
    """Diamond-square fractal noise on a size x size grid (size a power of two), values in [0, 1]."""
    maparray = np.zeros((size, size), np.float64)
    step = size
    scale = 100.0

    def wibbled(a):
        return a / 4 + scale * rng.uniform(-scale, scale, a.shape)

    while step >= 2:
        half = step // 2
        # squares: centres from the four corners
        corners = maparray[0:size:step, 0:size:step]
        total = corners + np.roll(corners, -1, 0) + np.roll(corners, -1, 1) + np.roll(np.roll(corners, -1, 0), -1, 1)
        maparray[half:size:step, half:size:step] = wibbled(total)
        # diamonds
        drgrid = maparray[half:size:step, half:size:step]
        ulgrid = maparray[0:size:step, 0:size:step]
        ldrsum = drgrid + np.roll(drgrid, 1, axis=0)
        lulsum = ulgrid + np.roll(ulgrid, -1, axis=1)
        maparray[0:size:step, half:size:step] = wibbled(ldrsum + lulsum)
        tdrsum = drgrid + np.roll(drgrid, 1, axis=1)
        tulsum = ulgrid + np.roll(ulgrid, -1, axis=0)
        maparray[half:size:step, 0:size:step] = wibbled(tdrsum + tulsum)
        step //= 2
        scale /= decay
    maparray -= maparray.min()
    return maparray / max(maparray.max(), 1e-12)


def in_hsv(x: Array, channel: int, fn: Callable[[Array], Array]) -> Array:
    """``x`` with ``fn`` applied to one HSV channel (1: S, 2: V, both in [0, 1]), clipped."""
    hsv = cv2.cvtColor(x.astype(np.float32), cv2.COLOR_RGB2HSV)
    hsv[..., channel] = np.clip(fn(hsv[..., channel]), 0, 1)
    return np.clip(cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB), 0, 1)


def glass_offsets(h: int, w: int, delta: int, rng) -> tuple[Array, Array]:
    """One pass's random offsets, in [-delta, delta), for the visited pixels (rows and columns
    delta+1 .. side-delta, as in the reference), indexed [row - delta - 1, column - delta - 1]."""
    shape = (max(h - 2 * delta, 0), max(w - 2 * delta, 0))
    return rng.integers(-delta, delta, size=shape), rng.integers(-delta, delta, size=shape)


def glass_shuffle(order: Array, h: int, w: int, delta: int, dy: Array, dx: Array) -> Array:
    """One pass of ImageNet-C's glass-blur pixel moves, applied to a flat index map ``order``.

    The reference visits pixels from the bottom-right corner, row by row, right to left, and each takes the value
    of the pixel at a random offset in [-delta, delta) (its "swap" of numpy views copies: docs/perturbations.md);
    values copied earlier are copied on, a chain of dependent steps.  We keep its exact result by wavefronts: visit
    (r, c) gets the time ``t = 2*delta*(last_row - r) + (last_col - c)``.  Visits whose windows can overlap always
    get times in scan order and visits with equal times never overlap, so all copies of one time at once, time
    after time, give the sequential result (tests/test_perturb.py checks it against the plain loop).
    """
    rows = np.arange(h - delta, delta, -1)  # the reference: range(h - delta, delta, -1)
    cols = np.arange(w - delta, delta, -1)
    if rows.size == 0 or cols.size == 0:
        return order
    rr, cc = np.meshgrid(rows, cols, indexing="ij")
    t = 2 * delta * (rows[0] - rr) + (cols[0] - cc)
    p = (rr * w + cc).ravel()
    q = ((rr + dy[rr - delta - 1, cc - delta - 1]) * w + (cc + dx[rr - delta - 1, cc - delta - 1])).ravel()
    by_time = np.argsort(t.ravel(), kind="stable")
    bounds = np.flatnonzero(np.diff(t.ravel()[by_time])) + 1
    order = order.copy()
    for idx in np.split(by_time, bounds):
        order[p[idx]] = order[q[idx]]
    return order
