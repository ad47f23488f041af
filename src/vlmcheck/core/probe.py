"""What an image file is, read from its header and structure without decoding a pixel (:func:`probe`): a whole
PNG, JPEG or WebP of 8-bit RGB, one frame, upright, is sent to an API model as it is.  Any other file is decoded
(:func:`vlmcheck.core.images.decode_image`), which has the last word on whether it is damaged.

The plain PNG, JPEG and WebP readers are written by hand for one measured reason: opening a file with Pillow for
its size cost as much as the rest of the probe.  Each gives what Pillow would, exactly, for the files it takes
(tested against Pillow's reading of files it wrote, and of every bit flip and cut); anything else (None) goes
to :func:`_probe_with_pillow`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._lazy import lazy_module

Image = lazy_module("PIL.Image")  # Pillow on first use (vlmcheck/_lazy.py)

from .images import DEFAULT_MAX_PIXELS, SENDABLE_FORMATS, _open, _pillow_errors

# zlib-ng's crc32: zlib's CRC-32 (tested), several times faster, over every PNG chunk of every request
from zlib_ng.zlib_ng import crc32


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
    """Format, size and whether the file can be sent as it is, from its header and structure only (0.7 ms for
    a 1-MB PNG against 25 ms to decode it); :class:`BadImageError` for what no decoder would take."""
    plain = _plain_webp if data[:4] == b"RIFF" else _plain_jpeg if data[:2] == b"\xff\xd8" else _plain_png
    return plain(data, max_pixels) or _probe_with_pillow(data, label, max_pixels)


#: Chunks that may come before a plain PNG's pixels: Pillow reads them without a way to fail (see _plain_png)
_PLAIN_PNG_HEAD = frozenset({b"IHDR", b"sRGB", b"gAMA", b"pHYs", b"cHRM"})


def _plain_png(data: bytes, max_pixels: int) -> Header | None:
    """A whole 8- or 16-bit RGB PNG whose chunks before the pixels are ones Pillow reads without failing
    (``_PLAIN_PNG_HEAD``), with filter method 0 and some pixels, no more than ``max_pixels``."""
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


#: JPEG markers that may come before the scan on the Pillow-free way: APP0 (JFIF), APP2 (ICC; not MPF), DQT,
#: DHT, DRI, COM (not APP1's EXIF, which may rotate the image)
_PLAIN_JPEG_SEGMENTS = frozenset({0xE0, 0xE2, 0xDB, 0xC4, 0xDD, 0xFE})
#: start of frame, baseline, extended or progressive Huffman: Pillow reads all three
_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2})


def _plain_jpeg(data: bytes, max_pixels: int) -> Header | None:
    """A whole 8-bit, 3-component JPEG with no EXIF and no second picture, read from its markers up to the
    scan."""
    end = len(data)
    if data[:3] != b"\xff\xd8\xff" or data.rstrip(b"\x00\r\n ")[-2:] != b"\xff\xd9":  # not whole: Pillow's way
        return None
    pos, size = 2, None
    while pos + 4 <= end:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        length = int.from_bytes(data[pos + 2:pos + 4], "big")
        if length < 2 or pos + 2 + length > end:
            return None
        body = data[pos + 4:pos + 2 + length]
        if marker == 0xDA:  # start of scan: the header is over
            break
        if marker in _JPEG_SOF:
            if size is not None or len(body) < 6 or body[0] != 8 or body[5] != 3:
                return None
            size = (int.from_bytes(body[3:5], "big"), int.from_bytes(body[1:3], "big"))
        elif marker not in _PLAIN_JPEG_SEGMENTS or not _jpeg_segment_readable(marker, body):
            return None
        pos += 2 + length
    else:
        return None
    if size is None or not 0 < size[0] * size[1] <= max_pixels:
        return None
    return Header("JPEG", size[0], size[1], True)


def _jpeg_segment_readable(marker: int, body: bytes) -> bool:
    """A segment Pillow reads without failing (as its JpegImagePlugin handlers do) and that leaves the file a
    plain JPEG: a JFIF APP0 with its version, an ICC APP2 with its sequence bytes (no MPF: a second picture
    makes it an MPO), quantisation tables that fill the segment's length."""
    if marker == 0xE0:
        return not body.startswith(b"JFIF") or len(body) >= 7
    if marker == 0xE2:
        return not body.startswith(b"MPF\x00") and (not body.startswith(b"ICC_PROFILE\x00") or len(body) >= 14)
    if marker == 0xDB:
        while body:
            length = 65 if body[0] < 16 else 129  # 8- or 16-bit table
            if len(body) < length:
                return False
            body = body[length:]
    return True


def _plain_webp(data: bytes, max_pixels: int) -> Header | None:
    """A whole, still WebP without alpha or EXIF, read from its chunks; only a file whose RIFF length is the
    file's and whose chunks tile it exactly (libwebp's demuxer, which Pillow opens it with, refuses the rest)."""
    if len(data) < 30 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    if int.from_bytes(data[4:8], "little") + 8 != len(data):
        return None
    chunks, pos = [], 12
    while pos < len(data):
        size = int.from_bytes(data[pos + 4:pos + 8], "little")
        stop = pos + 8 + size + (size & 1)
        if pos + 8 > len(data) or stop > len(data):
            return None
        chunks.append((data[pos:pos + 4], data[pos + 8:pos + 8 + size]))
        pos = stop
    kind, body = chunks[0]
    if kind == b"VP8X":  # extended: flags (ICC 0x20, alpha 0x10, EXIF 0x08, XMP 0x04, animation 0x02)
        if len(body) != 10 or body[0] & ~0x24 or [k for k, _ in chunks[1:] if k != b"ICCP"] not in ([b"VP8 "],
                                                                                                  [b"VP8L"]):
            return None
        canvas = (int.from_bytes(body[4:7], "little") + 1, int.from_bytes(body[7:10], "little") + 1)
        frame = _webp_frame(*next((k, v) for k, v in chunks[1:] if k != b"ICCP"))
        if frame != canvas or [k for k, _ in chunks].count(b"ICCP") != (1 if body[0] & 0x20 else 0):
            return None
    elif len(chunks) == 1:
        frame = _webp_frame(kind, body)
    else:
        return None
    if frame is None or not 0 < frame[0] * frame[1] <= max_pixels:
        return None
    return Header("WEBP", frame[0], frame[1], True)


def _webp_frame(kind: bytes, body: bytes) -> tuple[int, int] | None:
    """The size in a VP8 key frame's header or a VP8L header without alpha, checked as libwebp checks it."""
    if kind == b"VP8 ":  # frame tag: key frame (bit 0 clear), profile <= 3, shown, first partition inside
        if len(body) < 10 or body[3:6] != b"\x9d\x01\x2a":
            return None
        tag = int.from_bytes(body[0:3], "little")
        if tag & 1 or tag >> 1 & 7 > 3 or not tag >> 4 & 1 or tag >> 5 >= len(body):
            return None
        size = (int.from_bytes(body[6:8], "little") & 0x3FFF, int.from_bytes(body[8:10], "little") & 0x3FFF)
        return size if size[0] and size[1] else None
    if kind == b"VP8L":  # signature 0x2f, 14 bits width - 1, 14 bits height - 1, alpha bit, version 0
        if len(body) < 5 or body[0] != 0x2F:
            return None
        bits = int.from_bytes(body[1:5], "little")
        if bits >> 28 & 1 or bits >> 29:  # alpha used (Pillow: RGBA), or a version other than 0
            return None
        return (bits & 0x3FFF) + 1, (bits >> 14 & 0x3FFF) + 1
    return None


def _probe_with_pillow(data: bytes, label: str, max_pixels: int) -> Header:
    with _pillow_errors(label, bomb_warning="ignore"):
        img = _open(data, label, max_pixels)
        width, height = img.size
        fmt = img.format or ""
        sendable = fmt in SENDABLE_FORMATS and img.mode == "RGB" and not getattr(img, "is_animated", False)
        # upright: no EXIF orientation other than 1.  A PNG's eXIf chunk may follow its pixels, where reading it
        # would mean decoding them, so a PNG with one is decoded (rare); it must also be whole (png_chunks)
        if sendable and fmt == "PNG":
            chunks = png_chunks(data)
            sendable = chunks is not None and b"eXIf" not in chunks
        elif sendable:
            sendable = img.getexif().get(0x0112, 1) == 1 and _intact(img, data)
    return Header(fmt, width, height, sendable)


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_chunks(data: bytes) -> list[bytes] | None:
    """The types of a PNG's chunks in order, up to IEND, each chunk's CRC checked (as Pillow's ``verify()``,
    which cannot list them); None when the file is not whole (truncated, a CRC that does not match, no IEND)."""
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
    """A JPEG ending in its EOI marker, a WebP as long as its RIFF header says (a PNG: :func:`png_chunks`).  A
    file that fails is decoded instead, and fails its own sample there if it must: never at the server."""
    if img.format == "JPEG":
        return data.rstrip(b"\x00\r\n ")[-2:] == b"\xff\xd9"
    if img.format == "WEBP":
        return len(data) >= 12 and int.from_bytes(data[4:8], "little") + 8 <= len(data)
    return False
