"""Seeing a scene from pixels alone: the eyes of ``ref:describer``.

Steps: estimate the background from the border; label every pixel with the
nearest of the eight object colours, black (text) or the background; take
connected components per colour; classify each component's shape from its
geometry (fill of its bounding box, aspect ratio, solidity, where its widest
row is); put it on the 3x3 grid by its centre and call it large or small by
its extent.  Text: the black pixels are cropped to one line and read with
RapidOCR's recognition model (PP-OCRv4, ONNX weights shipped in the PyPI
package).

An image whose border is not one flat colour, or whose pixels are not
explained by the palette, is not a world scene (a photograph, say):
:func:`perceive` then returns ``None`` and the describer falls back to its
photo pipeline.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import numpy as np
from PIL import Image
from scipy import ndimage

from .colors import NAMED_COLORS
from .scene import BACKGROUNDS, Scene, SceneObject, canonical_text

_PALETTE_NAMES = list(NAMED_COLORS) + ["_text"]
_PALETTE = np.array(list(NAMED_COLORS.values()) + [(15, 15, 15)], dtype=np.float32)


@dataclass
class Perceived:
    scene: Scene
    confidence: dict[int, float]  # per object index: how sure the shape/colour reading is
    text_confidence: float = 1.0


@functools.lru_cache(maxsize=1)
def _ocr_engine():
    """(engine, name): rapidocr 3 (PP-OCR models inside the wheel, onnxruntime; what ``vlmcheck[ref]``
    installs), else rapidocr-onnxruntime (PP-OCRv4), which older environments may hold.  The one used is
    logged once and returned by :func:`ocr_backend`."""
    import logging

    try:
        from rapidocr import RapidOCR

        # its default log level is info: a line for every model file it opens
        engine, name = RapidOCR(params={"Global.log_level": "warning"}), "rapidocr"
    except ImportError:
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as exc:
            raise ImportError("the reference world's OCR needs rapidocr (pip install 'vlmcheck[ref]')") from exc
        engine, name = RapidOCR(), "rapidocr-onnxruntime"
    logging.getLogger(__name__).info("reference OCR: %s", name)
    return engine, name


def ocr_backend() -> str:
    """The OCR package the reference world reads text with."""
    return _ocr_engine()[1]


def _ocr(arr: np.ndarray, rec_only: bool) -> list[tuple[str, float]]:
    """(text, score) per recognised line, whichever RapidOCR package is installed."""
    engine, name = _ocr_engine()
    kwargs = {"use_det": False, "use_cls": False, "use_rec": True} if rec_only else {}
    with _ocr_lock:  # the ONNX session is shared; one call at a time keeps memory flat
        out = engine(arr, **kwargs)
    if name == "rapidocr-onnxruntime":
        result, _ = out
        if not result:
            return []
        return [(r[0], float(r[1])) if rec_only else (r[1], float(r[2])) for r in result]
    txts, scores = getattr(out, "txts", None) or (), getattr(out, "scores", None) or ()
    return [(t, float(sc)) for t, sc in zip(txts, scores)]


_ocr_lock = threading.Lock()


def read_text(crop: np.ndarray) -> tuple[str, float]:
    """Recognise one line of text in an RGB crop; returns (text, score)."""
    lines = _ocr(crop, rec_only=True)
    if not lines:
        return "", 0.0
    text, score = lines[0]
    return canonical_text(text), score


def read_photo_text(img: Image.Image, min_score: float = 0.8) -> str:
    """Text anywhere in a photograph (RapidOCR detection + recognition); confident lines only."""
    arr = np.ascontiguousarray(np.asarray(img.convert("RGB")))
    return " ".join(t for t, sc in _ocr(arr, rec_only=False) if sc >= min_score and t.strip())


def classify_shape(mask: np.ndarray) -> tuple[str, float]:
    """Shape name and a confidence in (0, 1] from a binary component mask."""
    ys, xs = np.nonzero(mask)
    h = ys.max() - ys.min() + 1
    w = xs.max() - xs.min() + 1
    area = len(ys)
    extent = area / float(h * w)
    aspect = h / float(w)
    import cv2

    pts = np.stack([xs, ys], axis=1).astype(np.int32)
    hull = cv2.convexHull(pts)
    hull_area = max(cv2.contourArea(hull), 1.0)
    solidity = min(area / hull_area, 1.0)
    sub = mask[ys.min(): ys.max() + 1, xs.min(): xs.max() + 1]
    widths = sub.sum(axis=1)
    widest = float(np.argmax(widths)) / max(h - 1, 1)  # 0 = top row, 1 = bottom row
    # Each rule's margin to its threshold becomes the confidence.
    if solidity < 0.82:
        return "star", _conf(0.82 - solidity, 0.15)
    if extent > 0.9:
        return "square", _conf(extent - 0.9, 0.08)
    if extent < 0.64:
        if aspect < 1.1 and widest > 0.7:
            return "triangle", _conf(min(1.1 - aspect, widest - 0.7), 0.2)
        return "diamond", _conf(min(aspect - 1.1, 0.64 - extent), 0.2)
    if aspect > 0.93:
        return "circle", _conf(aspect - 0.93, 0.06)
    return "hexagon", _conf(0.93 - aspect, 0.06)


def _conf(margin: float, scale: float) -> float:
    """Map a positive margin to a confidence in [0.55, 0.99]."""
    return float(0.55 + 0.44 * np.clip(margin / scale, 0.0, 1.0))


def _background(arr: np.ndarray) -> tuple[str, np.ndarray] | None:
    border = np.concatenate([arr[0], arr[-1], arr[:, 0], arr[:, -1]]).astype(np.float32)
    med = np.median(border, axis=0)
    if np.mean(np.abs(border - med).sum(axis=1) < 40) < 0.9:
        return None
    names = list(BACKGROUNDS)
    ref = np.array([BACKGROUNDS[n] for n in names], dtype=np.float32)
    d = ((ref - med) ** 2).sum(axis=1)
    return names[int(np.argmin(d))], med


def perceive(img: Image.Image, *, read_text_lines: bool = True) -> Perceived | None:
    import cv2

    arr = np.asarray(img.convert("RGB"))
    H, W = arr.shape[:2]
    # a 5x5 median removes pixel noise (and JPEG ringing) but keeps shapes and their corners
    smooth8 = cv2.medianBlur(np.ascontiguousarray(arr), 5)
    bg = _background(smooth8)
    if bg is None:
        return None
    bg_name, bg_rgb = bg
    smooth = smooth8.astype(np.float32)
    refs = np.concatenate([_PALETTE, bg_rgb[None]], axis=0)
    dist = ((smooth[:, :, None, :] - refs[None, None]) ** 2).sum(-1)
    label = dist.argmin(-1)
    explained = dist.min(-1) < 60.0 ** 2
    if explained.mean() < 0.85:
        return None
    cell = min(H, W) / 3.0
    min_area = (0.2 * 0.5 * cell) ** 2  # well under a small object's area
    found: dict[tuple[int, int], tuple[float, SceneObject, float]] = {}  # cell -> (area, object, conf)
    for ci, cname in enumerate(_PALETTE_NAMES[:-1]):
        comp, n = ndimage.label(label == ci)
        if n == 0:
            continue
        areas = ndimage.sum_labels(np.ones_like(comp), comp, index=np.arange(1, n + 1))
        for k in np.nonzero(areas >= min_area)[0]:
            mask = comp == (k + 1)
            ys, xs = np.nonzero(mask)
            cy, cx = (ys.min() + ys.max()) / 2.0, (xs.min() + xs.max()) / 2.0
            row, col = min(int(cy / (H / 3.0)), 2), min(int(cx / (W / 3.0)), 2)
            if (row, col) in found and found[(row, col)][0] >= areas[k]:
                continue  # one object per cell: keep the biggest
            extent = max(ys.max() - ys.min(), xs.max() - xs.min()) + 1
            size = "large" if extent > 0.55 * cell else "small"
            shape, c = classify_shape(mask)
            found[(row, col)] = (float(areas[k]), SceneObject(shape=shape, color=cname, size=size, row=row, col=col), c)
    cells = sorted(found)
    objects = [found[rc][1] for rc in cells]
    confidence = {i: found[rc][2] for i, rc in enumerate(cells)}
    text, tconf = None, 1.0
    # text: dark pixels of the unsmoothed image (a median filter erases thin strokes)
    dark = arr.max(axis=2) < 80  # near-black; the darkest object colour (brown) has a channel at 130
    if dark.sum() > 30 and read_text_lines:
        rows = np.nonzero(dark.sum(axis=1) >= 2)[0]
        cols = np.nonzero(dark.sum(axis=0) >= 2)[0]
        if rows.size and cols.size:
            pad = max(4, int(0.02 * H))
            crop = arr[max(rows.min() - pad, 0): rows.max() + pad + 1, max(cols.min() - pad, 0): cols.max() + pad + 1]
            read, tconf = read_text(np.ascontiguousarray(crop))
            text = read or None
    scene = Scene(background=bg_name, objects=objects, text=text)
    return Perceived(scene=scene, confidence=confidence, text_confidence=tconf)
