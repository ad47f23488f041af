"""What an image file is, read from its header and structure without decoding a pixel (:func:`probe`).

An API model is sent a dataset file as it is when the file is a whole PNG, JPEG or WebP of 8-bit RGB, one
frame, upright; :mod:`vlmcheck.core.inputs` then keys it by the hash of its bytes and never decodes it.  Any
other file is decoded (:func:`vlmcheck.core.images.decode_image`), which has the last word on whether it is
damaged.
"""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image

from .images import DEFAULT_MAX_PIXELS, SENDABLE_FORMATS, _open, _pillow_errors

try:
    # zlib-ng's crc32 (carry-less multiply) is several times faster than zlib's, and the pre-send check runs it
    # over every PNG chunk of every request.  The same CRC-32, tested.
    from zlib_ng.zlib_ng import crc32
except ImportError:  # a platform without a zlib-ng wheel: zlib's, the same value
    from zlib import crc32


@dataclass(frozen=True)
class Header:
    """What an image file's header says, read without decoding a pixel (:func:`probe`)."""

    format: str
    width: int
    height: int
    #: the file can go to an API model as it is, known by the hash of its bytes: a PNG, JPEG or WebP of 8-bit
    #: RGB, one frame, upright (no EXIF rotation to apply), whose structure is whole (see :func:`_intact`)
    sendable: bool


def probe(data: bytes, label: str = "<bytes>", *, max_pixels: int = DEFAULT_MAX_PIXELS) -> Header:
    """Format, size and whether the file can be sent as it is, from its header and structure only.

    Costs about 0.7 ms for a 1-MB PNG (the chunks' CRCs) against 25 ms to decode it.  Raises
    :class:`BadImageError` for what no decoder would take (empty, not an image, too many pixels); a file that
    is not ``sendable`` is decoded as before, and the decoder has the last word on whether it is damaged.
    """
    plain = _plain_png(data, max_pixels)
    if plain is not None:
        return plain
    return _probe_with_pillow(data, label, max_pixels)


#: Chunks that may come before a plain PNG's pixels: Pillow reads them without a way to fail (see _plain_png)
_PLAIN_PNG_HEAD = frozenset({b"IHDR", b"sRGB", b"gAMA", b"pHYs", b"cHRM"})


def _plain_png(data: bytes, max_pixels: int) -> Header | None:
    """The header of the commonest image a run sends, a whole 8- or 16-bit RGB PNG, read from its chunks
    without Pillow; None for anything else, which :func:`_probe_with_pillow` reads as before.

    Written by hand for one measured reason: opening the file with Pillow cost as much as checking every CRC
    (20 us of 60 for a 110-kB PNG, twice that inside a busy run) for four bytes of IHDR.  Gives what Pillow
    would, exactly: only files whose chunks before the pixels are ones Pillow reads without failing
    (``_PLAIN_PNG_HEAD``: no text, no profile, no animation control), with a filter method of 0 (else Pillow
    refuses it), some pixels and no more than ``max_pixels`` take this way (tested against Pillow's reading)."""
    if not data.startswith(_PNG_SIGNATURE) or data[8:16] != b"\x00\x00\x00\rIHDR" or len(data) < 33:
        return None
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    depth, colour, filter_method = data[24], data[25], data[27]
    if colour != 2 or depth not in (8, 16) or filter_method != 0 or not 0 < width * height <= max_pixels:
        return None
    chunks = png_chunks(data)
    if chunks is None or b"IDAT" not in chunks or b"eXIf" in chunks:
        return None
    if not _PLAIN_PNG_HEAD.issuperset(chunks[:chunks.index(b"IDAT")]):
        return None
    return Header("PNG", width, height, True)


def _probe_with_pillow(data: bytes, label: str, max_pixels: int) -> Header:
    with _pillow_errors(label, bomb_warning="ignore"):
        img = _open(data, label, max_pixels)
        width, height = img.size
        fmt = img.format or ""
        sendable = fmt in SENDABLE_FORMATS and img.mode == "RGB" and not getattr(img, "is_animated", False)
        if sendable and fmt == "PNG":  # whole (every chunk's CRC up to IEND) and no eXIf chunk (see _upright)
            chunks = png_chunks(data)
            sendable = chunks is not None and b"eXIf" not in chunks
        elif sendable:
            sendable = _upright(img) and _intact(img, data)
    return Header(fmt, width, height, sendable)


def _upright(img: Image.Image) -> bool:
    """A JPEG or WebP with no EXIF orientation other than 1.  (A PNG's eXIf chunk may follow its pixels, where
    reading it would mean decoding them, so a PNG with one counts as not upright and is decoded: rare.)"""
    return img.getexif().get(0x0112, 1) == 1


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_chunks(data: bytes) -> list[bytes] | None:
    """The types of a PNG's chunks in order, up to IEND, each chunk's CRC checked; None when the file is not
    whole (truncated, a CRC that does not match, no IEND).

    Written by hand for one measured reason: Pillow checks the same CRCs in ``verify()`` but has no way to
    list the chunks, and looking for an ``eXIf`` chunk by searching the whole file for the four letters cost
    more than all the rest of :func:`probe` (70 us for a 110-kB PNG, 0.6 ms per MB).  The walk reads each
    chunk's 8-byte header and 4-byte CRC and hashes its bytes once (the CRC-32 Pillow checks, zlib-ng's)."""
    if not data.startswith(_PNG_SIGNATURE):
        return None
    view = memoryview(data)
    types: list[bytes] = []
    pos, end = len(_PNG_SIGNATURE), len(data)
    while pos + 8 <= end:
        kind = bytes(view[pos + 4:pos + 8])
        types.append(kind)
        if kind == b"IEND":  # as Pillow's verify: the walk ends at IEND's type (its length and CRC unread)
            return types
        length = int.from_bytes(view[pos:pos + 4], "big")
        stop = pos + 8 + length
        if length > 0x7FFFFFFF or stop + 4 > end:
            return None
        if crc32(view[pos + 4:stop]) != int.from_bytes(view[stop:stop + 4], "big"):
            return None
        pos = stop + 4
    return None


def _intact(img: Image.Image, data: bytes) -> bool:
    """The file's structure is whole, checked without decoding: a JPEG ending in its EOI marker, a WebP as
    long as its RIFF header says (a PNG: :func:`png_chunks`, its chunks' CRCs up to IEND, as Pillow's
    ``verify`` checks them: catches truncation and flipped bytes).  A file that fails is decoded instead, and
    fails its own sample there if the decoder cannot read it either: never at the server."""
    if img.format == "JPEG":
        return data.rstrip(b"\x00\r\n ")[-2:] == b"\xff\xd9"
    if img.format == "WEBP":
        return len(data) >= 12 and int.from_bytes(data[4:8], "little") + 8 <= len(data)
    return False
