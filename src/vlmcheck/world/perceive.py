"""Seeing a scene from pixels alone: the eyes of ``ref:describer``.

Steps: estimate the background from the border; label every pixel with the nearest of the eight object
colours, black (text) or the background; take connected components per colour; classify each component's shape
from its geometry (fill of its bounding box, aspect ratio, solidity, where its widest row is); put it on the
3x3 grid by its centre and call it large or small by its extent. Text: the black pixels are cropped to one
line and read with RapidOCR's recognition model.

An image whose border is not one flat colour, or whose pixels are not explained by the palette, is not a clean
world scene. With ``robust=True`` (``ref:describer?robust=1``, docs/world.md), :func:`perceive` then tries
:func:`perceive_degraded`, which reads a scene under ChEF's corruptions; a reading that explains too little of
the coloured foreground, or finds a coloured region larger than a grid cell, is no scene (``None``), and the
describer falls back to its photo pipeline.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image
from scipy import ndimage

from .scene import BACKGROUNDS, NAMED_COLORS, SHAPES, Scene, SceneObject, canonical_text, shape_polygon

_PALETTE = np.array(list(NAMED_COLORS.values()) + [(15, 15, 15)], dtype=np.float32)
_BG_NAMES = list(BACKGROUNDS)
_BG_RGB = np.array(list(BACKGROUNDS.values()), dtype=np.float32)


@dataclass
class Perceived:
    scene: Scene
    confidence: dict[int, float]  # per object index: how sure the shape/colour reading is
    text_confidence: float = 1.0
    degraded: bool = False  # read by perceive_degraded: attributes are guesses, answer from the closest match


@functools.lru_cache(maxsize=1)
def _ocr_engine():
    """(engine, name): rapidocr 3 (PP-OCR models inside the wheel, onnxruntime; what ``vlmcheck[ref]``
    installs), else rapidocr-onnxruntime (PP-OCRv4), which older environments may hold.  The one used is
    logged once and returned by :func:`ocr_backend`."""
    try:
        from rapidocr import RapidOCR

        # its default log level is info: a line for every model file it opens; and it warns of every image with
        # no text in it ("The text detection result is empty"), which for a photo is the expected answer
        params = {"Global.log_level": "error"}
        if os.environ.get("OMP_NUM_THREADS", "").isdigit():  # one setting for every math thread pool, as torch's
            params["EngineConfig.onnxruntime.intra_op_num_threads"] = int(os.environ["OMP_NUM_THREADS"])
        engine, name = RapidOCR(params=params), "rapidocr"
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
    text, score = next(iter(_ocr(crop, rec_only=True)), ("", 0.0))
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


def _unit_areas() -> dict[str, float]:
    out = {}
    for shape in SHAPES:
        poly = shape_polygon(shape, 0.0, 0.0, 1.0)
        if poly is None:
            out[shape] = float(np.pi)
        else:
            x, y = np.array(poly).T
            out[shape] = float(0.5 * abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))))
    return out


_UNIT_AREA = _unit_areas()


def classify_shape_by_template(mask: np.ndarray) -> tuple[str, float]:
    """Shape name and confidence for a degraded mask: the shape whose outline, scaled to the mask's area,
    centred on its centroid and turned by up to 15 degrees either way (ChEF's rotation), overlaps the mask
    best (IoU).  Blur rounds corners and noise frays edges, which thresholds on extent and solidity do not
    survive; a whole-outline overlap degrades gradually instead."""
    ys, xs = np.nonzero(mask)
    area = float(len(ys))
    y0, x0 = ys.min(), xs.min()
    sub = mask[y0: ys.max() + 1, x0: xs.max() + 1].astype(bool)
    pad = max(sub.shape) // 2 + 2
    win = np.zeros((sub.shape[0] + 2 * pad, sub.shape[1] + 2 * pad), bool)
    win[pad: pad + sub.shape[0], pad: pad + sub.shape[1]] = sub
    cy, cx = ys.mean() - y0 + pad, xs.mean() - x0 + pad
    scores = {}
    for shape in SHAPES:
        r = float(np.sqrt(area / _UNIT_AREA[shape]))
        best = 0.0
        for deg in (0,) if shape == "circle" else (-15, -10, -5, 0, 5, 10, 15):  # a circle does not turn
            tmpl = np.zeros(win.shape, np.uint8)
            if shape == "circle":
                cv2.circle(tmpl, (int(round(cx)), int(round(cy))), int(round(r)), 1, -1)
            else:
                pts = np.array(shape_polygon(shape, 0.0, 0.0, r))
                pts = pts - pts.mean(0)  # centroid of the vertices (exact for these symmetric shapes but the
                # triangle, whose vertex mean is its centroid too)
                t = np.deg2rad(deg)
                rot = pts @ np.array([[np.cos(t), np.sin(t)], [-np.sin(t), np.cos(t)]])
                cv2.fillPoly(tmpl, [np.round(rot + [cx, cy]).astype(np.int32)], 1)
            tm = tmpl.astype(bool)
            best = max(best, float((tm & win).sum()) / max(float((tm | win).sum()), 1.0))
        scores[shape] = best
    ranked = sorted(scores, key=lambda k: -scores[k])
    return ranked[0], _conf(scores[ranked[0]] - scores[ranked[1]], 0.1)


def _conf(margin: float, scale: float) -> float:
    """Map a positive margin to a confidence in [0.55, 0.99]."""
    return float(0.55 + 0.44 * np.clip(margin / scale, 0.0, 1.0))


def _background(arr: np.ndarray) -> tuple[str, np.ndarray] | None:
    border = np.concatenate([arr[0], arr[-1], arr[:, 0], arr[:, -1]]).astype(np.float32)
    med = np.median(border, axis=0)
    if np.mean(np.abs(border - med).sum(axis=1) < 40) < 0.9:
        return None
    return _BG_NAMES[int(np.argmin(((_BG_RGB - med) ** 2).sum(axis=1)))], med


def perceive(img: Image.Image, *, read_text_lines: bool = True, robust: bool = False) -> Perceived | None:
    """The scene in ``img``: the strict reading of a clean scene, else (``robust``) the degraded one."""
    strict = perceive_strict(img, read_text_lines=read_text_lines)
    if not robust or (strict is not None and (strict.scene.objects or strict.scene.text)):
        return strict
    # robust: an empty strict reading of a corrupted scene (a clean-looking border, nothing inside it
    # recognised) is no reading
    return perceive_degraded(img) or strict


def perceive_strict(img: Image.Image, *, read_text_lines: bool = True) -> Perceived | None:
    arr = np.asarray(img.convert("RGB"))
    H, W = arr.shape[:2]
    # a 5x5 median removes pixel noise (and JPEG ringing) but keeps shapes and their corners
    smooth8 = cv2.medianBlur(np.ascontiguousarray(arr), 5)
    bg = _background(smooth8)
    if bg is None:
        return None
    bg_name, bg_rgb = bg
    refs = np.concatenate([_PALETTE, bg_rgb[None]], axis=0)
    # each pixel's nearest reference colour, computed once per distinct colour (a median-filtered scene has a
    # few hundred; the same float32 arithmetic per colour as per pixel, so the same labels)
    flat = smooth8.reshape(-1, 3).astype(np.int32)
    colours, inverse = np.unique((flat[:, 0] << 16) | (flat[:, 1] << 8) | flat[:, 2], return_inverse=True)
    rgb = np.stack([colours >> 16, (colours >> 8) & 255, colours & 255], axis=1).astype(np.float32)
    dist = ((rgb[:, None, :] - refs[None]) ** 2).sum(-1)
    inverse = inverse.reshape(H, W)
    label = dist.argmin(-1)[inverse]
    explained = (dist.min(-1) < 60.0 ** 2)[inverse]
    if explained.mean() < 0.85:
        return None
    objects, confidence, _, _ = _objects(label, degraded=False)
    text, tconf = None, 1.0
    # text: dark pixels of the unsmoothed image (a median filter erases thin strokes)
    dark = arr.max(axis=2) < 80  # near-black; the darkest object colour (brown) has a channel at 130
    if dark.sum() > 30 and read_text_lines:
        rows = np.nonzero(dark.sum(axis=1) >= 2)[0]
        cols = np.nonzero(dark.sum(axis=0) >= 2)[0]
        if rows.size and cols.size:
            box = _grown((slice(rows.min(), rows.max() + 1), slice(cols.min(), cols.max() + 1)), arr.shape,
                         max(4, int(0.02 * H)))
            read, tconf = read_text(np.ascontiguousarray(arr[box]))
            text = read or None
    scene = Scene(background=bg_name, objects=objects, text=text)
    return Perceived(scene=scene, confidence=dict(enumerate(confidence)), text_confidence=tconf)


_PAL01 = _PALETTE[:-1] / 255.0
MIN_COVERAGE = 0.6  # share of the coloured foreground the objects must explain to be a scene


def _hsv01(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.ascontiguousarray((np.clip(rgb, 0, 1) * 255).astype(np.uint8).reshape(-1, 1, 3))
    hsv = cv2.cvtColor(a, cv2.COLOR_RGB2HSV_FULL).reshape(rgb.shape).astype(np.float32)
    return hsv[..., 0] / 256.0, hsv[..., 1] / 255.0, hsv[..., 2] / 255.0


_PH, _PS, _PV = _hsv01(_PAL01)


_PAD = 8  # > what the opening (2 px) and the closing (3 px, then 1 px of erosion's reach) can move an edge


def _grown(box: tuple[slice, slice], shape: tuple[int, ...], pad: int) -> tuple[slice, slice]:
    """``box``, ``pad`` px wider on each side within an image of ``shape``."""
    return (slice(max(box[0].start - pad, 0), min(box[0].stop + pad, shape[0])),
            slice(max(box[1].start - pad, 0), min(box[1].stop + pad, shape[1])))


def _objects(label: np.ndarray, degraded: bool) -> tuple[list[SceneObject], list[float], int, int]:
    """The objects in an image labelled with the index of each pixel's object colour (others: no object), the
    biggest per grid cell, in reading order, and their confidences; and the pixels of the components kept and of
    those larger than a cell.  ``degraded``: each colour's pixels are opened before and each component closed
    and filled after labelling, a component larger than a cell is no object (a tinted patch), and shapes are
    read by template (:func:`classify_shape_by_template`)."""
    H, W = label.shape
    cell = min(H, W) / 3.0
    min_area = (0.2 * 0.5 * cell) ** 2  # well under a small object's area
    pad = _PAD if degraded else 0
    classify = classify_shape_by_template if degraded else classify_shape
    found: dict[tuple[int, int], tuple[float, SceneObject, float]] = {}
    kept = big = 0
    for ci, cname in enumerate(NAMED_COLORS):
        # the morphology runs in a window around this colour's pixels, PAD px wider than they reach: outside
        # it everything is 0 before and after, so the window gives the same components as the whole image
        sel = label == ci
        box = ndimage.find_objects(sel.astype(np.int8))
        if not box:
            continue
        win = _grown(box[0], sel.shape, pad)
        comp, n = ndimage.label(ndimage.binary_opening(sel[win], iterations=2) if degraded else sel[win])
        areas = np.bincount(comp.ravel(), minlength=n + 1)[1:]
        boxes = ndimage.find_objects(comp)
        for k in np.nonzero(areas >= min_area)[0]:
            box = _grown(boxes[k], comp.shape, pad)  # the component's box: its mask, pixels and shape read there
            mask = comp[box] == (k + 1)
            if degraded:
                mask = ndimage.binary_fill_holes(ndimage.binary_closing(mask, iterations=3))
            ys, xs = np.nonzero(mask)
            ys, xs = ys + (win[0].start + box[0].start), xs + (win[1].start + box[1].start)
            extent = max(ys.max() - ys.min(), xs.max() - xs.min()) + 1
            if degraded and extent > 1.25 * cell:
                big += int(areas[k])
                continue
            kept += int(areas[k])
            cy, cx = (ys.min() + ys.max()) / 2.0, (xs.min() + xs.max()) / 2.0
            row, col = min(int(cy / (H / 3.0)), 2), min(int(cx / (W / 3.0)), 2)
            if (row, col) in found and found[(row, col)][0] >= areas[k]:
                continue
            shape, c = classify(mask)  # moving the mask moves no shape measure
            size = "large" if extent > 0.55 * cell else "small"
            obj = SceneObject(shape=shape, color=cname, size=size, row=row, col=col)
            found[(row, col)] = (float(areas[k]), obj, c)
    cells = sorted(found)
    return [found[rc][1] for rc in cells], [found[rc][2] for rc in cells], kept, big


def perceive_degraded(img: Image.Image) -> Perceived | None:
    """A corrupted world scene's objects (see the module docstring); no text.  None when it does not look
    like a scene."""
    arr = np.asarray(img.convert("RGB"))
    H, W = arr.shape[:2]
    if min(H, W) < 24:
        return None
    sm = cv2.medianBlur(np.ascontiguousarray(arr), 7)
    q = (sm // 16).reshape(-1, 3).astype(np.int32)
    keys = q[:, 0] * 256 + q[:, 1] * 16 + q[:, 2]
    bg_obs = np.median(sm.reshape(-1, 3)[keys == np.bincount(keys).argmax()].astype(np.float32), axis=0)
    chroma = bg_obs / max(float(bg_obs.sum()), 1.0)
    bg_name = _BG_NAMES[int(np.argmin(((_BG_RGB / _BG_RGB.sum(1, keepdims=True) - chroma) ** 2).sum(1)))]
    bg_ref = np.asarray(BACKGROUNDS[bg_name], np.float32)
    corr = np.clip(sm.astype(np.float32) * (bg_ref / np.maximum(bg_obs, 1.0)) / 255.0, 0, 1)
    fg = np.sqrt(((corr - bg_ref / 255.0) ** 2).sum(-1)) > 0.12
    if fg.sum() < 50:
        return None
    h, s, v = _hsv01(corr)
    s_hi = float(np.percentile(s[fg], 95))
    s_n = s * (0.8 / max(s_hi, 0.2)) if s_hi < 0.8 else s
    fg &= (s_n > 0.25) & (v > 0.25)  # grey and near-black pixels (text, a rotation's corners) are no object
    dh = np.abs(h[..., None] - _PH)
    dh = np.minimum(dh, 1 - dh)
    label = ((dh / 0.08) ** 2 + ((s_n[..., None] - _PS) / 0.35) ** 2
             + ((v[..., None] - _PV) / 0.3) ** 2).argmin(-1)
    objects, confidence, kept, big = _objects(np.where(fg, label, -1), degraded=True)
    coverage = kept / float(fg.sum()) if fg.sum() else 0.0
    if not objects or coverage < MIN_COVERAGE or big > kept:
        return None  # mostly regions larger than a cell: a photograph, not a world scene
    # confidence falls with the reading's quality: a degraded reading is never as sure as a clean one
    quality = 0.5 + 0.3 * coverage
    text, tconf = None, 0.3
    if not any(o.row == 2 for o in objects):  # a world scene's text line is in the bottom row, never beside objects
        # the line's band (centred at 5/6 of the height), recognition only: detection gives up on blurred text
        band = np.ascontiguousarray(sm[int(H * 0.74): int(H * 0.93), int(W * 0.06): int(W * 0.94)])
        t, sc = read_text(band)
        if sc >= 0.5 and any(ch.isalnum() for ch in t):
            text, tconf = t, float(sc) * quality
    return Perceived(scene=Scene(background=bg_name, objects=objects, text=text),
                     confidence={i: c * quality for i, c in enumerate(confidence)}, text_confidence=tconf,
                     degraded=True)
