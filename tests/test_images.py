import io

import numpy as np
import pytest
from PIL import Image

from vlmcheck.core.images import BadImageError, encode_image, image_hash, load_image


def _png_bytes(img, fmt="PNG", **kw):
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def test_zero_byte_file(tmp_path):
    p = tmp_path / "empty.png"
    p.write_bytes(b"")
    with pytest.raises(BadImageError, match="empty file"):
        load_image(p)


def test_truncated_png(tmp_path):
    data = _png_bytes(Image.effect_noise((64, 64), 50).convert("RGB"))
    p = tmp_path / "trunc.png"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadImageError, match="cannot decode"):
        load_image(p)


def test_not_an_image(tmp_path):
    p = tmp_path / "notes.jpg"
    p.write_text("hello, I am text")
    with pytest.raises(BadImageError, match="not a recognised image"):
        load_image(p)


def test_missing_and_directory(tmp_path):
    with pytest.raises(BadImageError, match="not found"):
        load_image(tmp_path / "nope.png")
    with pytest.raises(BadImageError, match="directory"):
        load_image(tmp_path)


def test_decompression_bomb(tmp_path):
    p = tmp_path / "bomb.png"
    Image.new("1", (5000, 5000)).save(p)  # tiny file, 25 M pixels
    with pytest.raises(BadImageError, match="decompression bomb"):
        load_image(p, max_pixels=1_000_000)


def test_rgba_is_composited_on_white():
    img = Image.new("RGBA", (4, 4), (255, 0, 0, 0))  # fully transparent red
    out = load_image(_png_bytes(img))
    assert out.mode == "RGB"
    assert out.getpixel((0, 0)) == (255, 255, 255)


def test_cmyk_palette_16bit_animated_and_la():
    cmyk = Image.new("CMYK", (4, 4), (0, 255, 255, 0))
    assert load_image(_png_bytes(cmyk, "JPEG")).mode == "RGB"
    pal = Image.new("P", (4, 4))
    pal.putpalette([0, 0, 255] * 256)
    assert load_image(_png_bytes(pal)).getpixel((0, 0)) == (0, 0, 255)
    wide = Image.fromarray(np.array([[0, 1000], [30000, 65535]], dtype=np.uint16))
    out = load_image(_png_bytes(wide))
    assert out.mode == "RGB"
    assert out.getpixel((0, 0)) == (0, 0, 0) and out.getpixel((1, 1)) == (255, 255, 255)
    frames = [Image.new("RGB", (8, 8), c) for c in [(255, 0, 0), (0, 255, 0)]]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:])
    assert load_image(buf.getvalue()).convert("RGB").getpixel((0, 0))[0] > 200  # first frame
    la = Image.new("LA", (2, 2), (0, 255))
    assert load_image(_png_bytes(la)).getpixel((0, 0)) == (0, 0, 0)


def test_unicode_path(tmp_path):
    p = tmp_path / "chat noir — 猫.png"
    Image.new("RGB", (3, 3), (1, 2, 3)).save(p)
    assert load_image(p).getpixel((0, 0)) == (1, 2, 3)


def test_hash_depends_on_pixels_not_format():
    img = Image.effect_noise((20, 10), 40).convert("RGB")
    png = load_image(_png_bytes(img))
    bmp = load_image(_png_bytes(img, "BMP"))
    assert image_hash(png) == image_hash(bmp)
    other = img.copy()
    other.putpixel((0, 0), (0, 0, 1))
    assert image_hash(other) != image_hash(img)
    # same pixels, different size -> different hash
    assert image_hash(Image.new("RGB", (2, 8))) != image_hash(Image.new("RGB", (8, 2)))


def test_encoding_is_deterministic_and_lossless():
    img = Image.effect_noise((32, 32), 60).convert("RGB")
    assert encode_image(img) == encode_image(img.copy())
    assert np.array_equal(np.asarray(load_image(encode_image(img))), np.asarray(img))
