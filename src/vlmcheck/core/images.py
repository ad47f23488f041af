"""Image I/O: safe loading, normalisation to RGB, deterministic encoding and hashing.  Anything that cannot be
turned into an RGB image raises :class:`BadImageError` naming the problem, which fails that one sample."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from PIL import UnidentifiedImageError  # Pillow's package alone: cheap

from .._lazy import lazy_module
from .files import open_regular, read_upto, stat_regular

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)
Image, ImageOps = lazy_module("PIL.Image"), lazy_module("PIL.ImageOps")  # Pillow on first use

#: Ceiling on decoded pixels (width x height): Pillow's default, which only warns, made a per-sample error.
DEFAULT_MAX_PIXELS = 89_478_485
#: Lossless format of every image vlmcheck writes or sends unless a caller asks otherwise.
DEFAULT_FORMAT = "PNG"


class BadImageError(ValueError):
    """An input that cannot be used as an image for one sample."""


def _wide_to_8bit(img: Image.Image) -> Image.Image:
    """16/32-bit integer and float greyscale scaled to 8 bits by their range (Pillow's ``convert("L")`` clips
    at 255, which turns most 16-bit images white)."""
    arr = np.asarray(img, dtype=np.float64)
    lo, hi = float(np.nanmin(arr)), float(np.nanmax(arr))
    scaled = np.zeros_like(arr) if hi <= lo else (arr - lo) / (hi - lo) * 255.0
    grey = Image.fromarray(np.nan_to_num(scaled).round().astype(np.uint8), mode="L")
    return grey.convert("RGB")


def to_rgb(img: Image.Image) -> Image.Image:
    """An 8-bit RGB copy of ``img`` whatever its mode: transparency composited on white, EXIF orientation
    applied."""
    with contextlib.suppress(Exception):  # a broken EXIF block must not sink an otherwise fine image
        img = ImageOps.exif_transpose(img)
    mode = img.mode
    if mode == "RGB":
        return img.copy()
    if mode in ("RGBA", "LA", "RGBa", "La", "PA") or (mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")  # composited on white
        return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        return _wide_to_8bit(img)
    try:
        return img.convert("RGB")
    except Exception as exc:  # pragma: no cover - exotic modes
        raise BadImageError(f"cannot convert image mode {mode!r} to RGB: {exc}") from exc


DEFAULT_MAX_FILE_BYTES = 256 * 1024 * 1024


def read_file_bytes(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES,
                    st: os.stat_result | None = None) -> bytes:
    """The bytes of a regular file no larger than ``max_bytes``, checked before anything is opened (``st``: the
    caller's ``os.stat(path)``, taken just before; see :func:`vlmcheck.core.files.stat_regular`)."""
    st = stat_regular(path, "an image", BadImageError, missing="file not found", folder="a directory", st=st)
    if st.st_size > max_bytes:
        raise BadImageError(f"{path}: {st.st_size} bytes exceeds the image file size limit of {max_bytes} bytes")
    fd, fst = open_regular(path, "an image", BadImageError)
    try:
        data = read_upto(fd, fst.st_size, max_bytes)
    except OSError as exc:
        raise BadImageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise BadImageError(f"{path}: larger than the image file size limit of {max_bytes} bytes")
    return data


def image_size(data: bytes, label: str = "<bytes>") -> tuple[int, int]:
    """(width, height) from the header alone: nothing is decoded."""
    with _pillow_errors(label, bomb_warning="ignore"), Image.open(io.BytesIO(data)) as img:
        return img.size


#: Formats every supported API accepts as they are (OpenAI, Anthropic and Gemini all take these three).
SENDABLE_FORMATS = frozenset({"PNG", "JPEG", "WEBP"})


@dataclass(frozen=True)
class SourceFile:
    """The bytes an image was decoded from, when they decode to exactly its RGB pixels (``sha256``).  Sending
    them saves the encode, the largest per-request cost of an API run, and keeps a JPEG a JPEG; the hash is
    compared again when the image is sent, so an image drawn on after loading is re-encoded, never sent stale."""

    data: bytes
    format: str
    sha256: str


def source_file(img: Image.Image) -> SourceFile | None:
    """The :class:`SourceFile` that :func:`decode_image` attached to ``img``, if any (Pillow drops it with every
    operation that makes a new image)."""
    return getattr(img, "_vlmcheck_source", None)


@contextlib.contextmanager
def _pillow_errors(label: str, bomb_warning: str):
    """Pillow's failures inside the block as one :class:`BadImageError` sentence naming ``label``; Pillow's
    decompression-bomb warning is an error (``"error"``) or ignored (``"ignore"``: the pixel limit is ours)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter(bomb_warning, Image.DecompressionBombWarning)
            yield
    except BadImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise BadImageError(f"{label}: rejected as a possible decompression bomb ({exc})") from exc
    except UnidentifiedImageError as exc:
        raise BadImageError(f"{label}: not a recognised image format") from exc
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise BadImageError(f"{label}: cannot decode image ({exc})") from exc


def _open(data: bytes, label: str, max_pixels: int) -> Image.Image:
    """The image's header opened (nothing decoded), its pixel count within ``max_pixels``."""
    if not data:
        raise BadImageError(f"{label}: empty file (0 bytes)")
    img = Image.open(io.BytesIO(data))
    width, height = img.size
    if width * height > max_pixels:
        raise BadImageError(f"{label}: {width}x{height} = {width * height} pixels exceeds the limit of "
                            f"{max_pixels} (possible decompression bomb)")
    return img


def decode_image(data: bytes, label: str = "<bytes>", *, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Decode image bytes to 8-bit RGB (see :func:`load_image` for what is rejected)."""
    with _pillow_errors(label, bomb_warning="error"):
        img = _open(data, label, max_pixels)
        if getattr(img, "is_animated", False):
            img.seek(0)
        img.load()
    if img.mode == "RGB" and not img.getexif().get(0x0112):
        # freshly decoded and already RGB: no copy (a copy doubles the peak memory)
        if img.format in SENDABLE_FORMATS and not getattr(img, "is_animated", False):
            img._vlmcheck_source = SourceFile(data, img.format, image_hash(img))  # type: ignore[attr-defined]
        return img
    return to_rgb(img)


def load_image(source: str | os.PathLike | bytes, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """An image file (or bytes) as 8-bit RGB (an animation's first frame); :class:`BadImageError` for anything
    missing, empty, truncated, oversized, not regular or undecodable.  Dataset images in a run go through
    :func:`vlmcheck.core.inputs.read_image` instead (confinement, a memory budget, off the event loop)."""
    if isinstance(source, (bytes, bytearray)):
        return decode_image(bytes(source), "<bytes>", max_pixels=max_pixels)
    return decode_image(read_file_bytes(source), str(source), max_pixels=max_pixels)


#: Pillow's save options by format (a PNG's level is the caller's)
_SAVE_OPTIONS: dict[str, dict[str, Any]] = {"JPEG": {"quality": 95, "subsampling": 0}, "WEBP": {"lossless": True}}


def encode_image(img: Image.Image, fmt: str = DEFAULT_FORMAT, *, compress_level: int = 6) -> bytes:
    """Encode deterministically: the same pixels always give the same bytes (Pillow writes a PNG with no
    timestamp or text chunk)."""
    buf, fmt = io.BytesIO(), "JPEG" if fmt.upper() == "JPG" else fmt.upper()
    options = {"compress_level": compress_level} if fmt == "PNG" else _SAVE_OPTIONS.get(fmt, {})
    (img.convert("RGB") if fmt == "JPEG" else img).save(buf, format=fmt, **options)
    return buf.getvalue()


#: PNG level for bytes that travel to a model and a run's artifacts: several times faster than level 6 for a few
#: per cent more bytes (the world's files, written once and kept, use 6)
TRANSPORT_PNG_LEVEL = 1


class BoundedCache:
    """Values by key, least recently used out once their weights (``weigh``: bytes, or 1 per entry) pass
    ``limit``; the newest stays even when it alone passes it.  Thread-safe (worker threads use it too)."""

    def __init__(self, limit: int, weigh: Callable[[Any], int] = lambda value: 1) -> None:
        self.limit, self.weigh, self.size = limit, weigh, 0
        self.entries: OrderedDict[Any, Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Any, default: Any = None) -> Any:
        with self.lock:
            if key not in self.entries:
                return default
            self.entries.move_to_end(key)
            return self.entries[key]

    def put(self, key: Any, value: Any) -> None:
        with self.lock:
            if key not in self.entries:
                self.entries[key] = value
                self.size += self.weigh(value)
            while self.size > self.limit and len(self.entries) > 1:
                self.size -= self.weigh(self.entries.popitem(last=False)[1])


#: Encoded bytes by (pixel hash, format).  GenCeption, VHExpansion and ChEF send the same picture many times
#: (one per question, perturbation or step): each is encoded once per process.
_ENCODED = BoundedCache(64 * 1024 * 1024, len)


def transport_bytes(img: Image.Image, sha256: str, fmt: str = DEFAULT_FORMAT) -> bytes:
    """``img`` (RGB, whose pixel hash is ``sha256``) encoded as ``fmt`` to send to a model, once per process."""
    key = (sha256, fmt.upper())
    data = _ENCODED.get(key)
    if data is None:
        data = encode_image(img, fmt, compress_level=TRANSPORT_PNG_LEVEL)
        if len(data) <= _ENCODED.limit // 4:  # one huge image never empties the cache
            _ENCODED.put(key, data)
    return data


def image_hash(img: Image.Image) -> str:
    """sha256 of the decoded RGB pixels plus the size: a PNG and a BMP of one picture share cache entries."""
    rgb = img if img.mode == "RGB" else to_rgb(img)
    h = hashlib.sha256()
    h.update(f"{rgb.width}x{rgb.height}:".encode())
    h.update(rgb.tobytes())
    return h.hexdigest()


MIME_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "JPG": "image/jpeg", "WEBP": "image/webp"}


def mime_type(fmt: str) -> str:
    return MIME_TYPES.get(fmt.upper(), f"image/{fmt.lower()}")


IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"}


def iter_image_files(folder: str | os.PathLike) -> list[Path]:
    """All files under ``folder`` with an image suffix, sorted for determinism."""
    root = Path(folder)
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
