"""Key version 3 (issue 36): a dataset file that goes to an API model as it is is read without being decoded,
validated from its header and structure, and keyed by the sha256 of its bytes; stores made before keep pixel
keys and resume with 0 calls."""

import asyncio
import hashlib
import io
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFile

from vlmcheck import RunOptions, run_task
from vlmcheck.core.images import BadImageError
from vlmcheck.core.probe import probe
from vlmcheck.core.inputs import read_image_part
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.run import calls, runner

RNG = np.random.default_rng(11)
PIXELS = RNG.integers(0, 256, (40, 56, 3), dtype=np.uint8)


def save(path: Path, pixels=PIXELS, fmt: str | None = None, **kw) -> bytes:
    Image.fromarray(pixels).save(path, format=fmt, **kw)
    return path.read_bytes()


def image_requests(folder: Path) -> list[dict]:
    """The image entries of every request the store recorded (sorted: samples run concurrently)."""
    with sqlite3.connect(folder / "store.sqlite") as db:
        rows = db.execute("SELECT request FROM calls ORDER BY rowid").fetchall()
    found = [p for (r,) in rows for m in json.loads(r)["messages"] for p in m["content"] if p["type"] == "image"]
    return sorted(found, key=lambda e: json.dumps(e, sort_keys=True))


def describe(server, data: Path, out: Path, **kw):
    task = DescribeTask(DescribeSpec(vlm=f"openai:fake@{server.base_url}", data=str(data)))
    return run_task(task, out, RunOptions(progress=False, report=False, preflight=False, **kw))


@pytest.mark.parametrize("fmt,ext", [("PNG", "png"), ("JPEG", "jpg"), ("WEBP", "webp")])
def test_a_whole_rgb_file_is_sendable_and_read_without_decoding(tmp_path, monkeypatch, fmt, ext):
    data = save(tmp_path / f"a.{ext}", fmt=fmt)
    header = probe(data, "a")
    assert (header.format, header.width, header.height, header.sendable) == (fmt, 56, 40, True)
    loads = []
    real = ImageFile.ImageFile.load
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda self: loads.append(self) or real(self))
    part = asyncio.run(read_image_part(tmp_path / f"a.{ext}", root=tmp_path))
    assert loads == []  # not one pixel decoded
    assert (part.key, part.sha256, part.data) == ("file", hashlib.sha256(data).hexdigest(), data)


def test_files_that_are_not_sent_as_they_are(tmp_path):
    grey = save(tmp_path / "g.png", PIXELS[..., 0])
    rgba = save(tmp_path / "a.png", np.dstack([PIXELS, PIXELS[..., :1]]))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated 90 degrees: the pixels the model should see are not the file's as stored
    rotated = save(tmp_path / "r.jpg", fmt="JPEG", exif=exif.tobytes())
    frames = [Image.fromarray(PIXELS), Image.fromarray(PIXELS[::-1])]
    frames[0].save(tmp_path / "anim.webp", save_all=True, append_images=frames[1:])
    bmp = save(tmp_path / "b.bmp", fmt="BMP")
    for data in (grey, rgba, rotated, (tmp_path / "anim.webp").read_bytes(), bmp):
        assert not probe(data).sendable
    # they are decoded and keyed by their pixels, as before
    part = asyncio.run(read_image_part(tmp_path / "r.jpg", root=tmp_path))
    assert part.key == "pixels" and (part.width, part.height) == (40, 56)


@pytest.mark.slow
def test_a_png_is_whole_exactly_when_pillows_verify_says_so(tmp_path):
    """png_chunks (the walk probe uses instead of Pillow's verify) agrees with Pillow on every single-bit flip
    and every truncation of a PNG of several IDAT chunks; a PNG with an eXIf chunk is not sent as it is."""
    import io

    from vlmcheck.core.probe import png_chunks

    data = save(tmp_path / "big.png", RNG.integers(0, 256, (160, 120, 3), dtype=np.uint8))

    def pillow_whole(b: bytes) -> bool:
        try:
            Image.open(io.BytesIO(b)).verify()
        except Exception:  # noqa: BLE001 - any refusal
            return False
        return True

    chunks = png_chunks(data)
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND" and chunks.count(b"IDAT") >= 1
    bits = np.random.default_rng(5).integers(0, 8, len(data))
    for i in range(8, len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 1 << int(bits[i])
        assert (png_chunks(bytes(flipped)) is not None) == pillow_whole(bytes(flipped)), i
    for cut in range(8, len(data), 3):
        assert (png_chunks(data[:cut]) is not None) == pillow_whole(data[:cut]), cut
    assert png_chunks(data + b"trailing bytes") == chunks  # after IEND: ignored, as Pillow does
    exif = Image.Exif()
    exif[0x0112] = 1
    with_exif = save(tmp_path / "exif.png", exif=exif.tobytes())
    assert b"eXIf" in png_chunks(with_exif) and not probe(with_exif).sendable
    assert probe(data).sendable


def hand_png(width: int, height: int, depth: int, interlace: int, rows: bytes) -> bytes:
    """An RGB PNG written chunk by chunk (Pillow writes neither 16-bit RGB nor interlaced files)."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    stride = len(rows) // height
    raw = b"".join(b"\x00" + rows[i * stride:(i + 1) * stride] for i in range(height))  # filter 0 on each row
    ihdr = struct.pack(">IIBBBBB", width, height, depth, 2, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


def test_a_plain_png_read_without_pillow_gives_what_pillow_gives(tmp_path):
    """probe's own reading of a plain RGB PNG (_plain_png) answers exactly as Pillow's reading does, on plain
    files, other kinds of PNG, and every single-bit flip and cut of a plain one; it is taken for plain files."""
    from PIL import PngImagePlugin

    from vlmcheck.core.probe import _plain_png, _probe_with_pillow

    rgb = RNG.integers(0, 256, (30, 44, 3), dtype=np.uint8)
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "made in a test")
    exif = Image.Exif()
    exif[0x0112] = 1
    variants = {
        "plain": save(tmp_path / "p.png", rgb),
        "16-bit": hand_png(44, 30, 16, 0, (rgb.astype(">u2") * 257).tobytes()),
        "interlaced": hand_png(44, 30, 8, 1, rgb.tobytes()),  # Adam7 order is not checked without decoding
        "srgb-gamma": save(tmp_path / "s.png", rgb, dpi=(72, 72)),
        "text": save(tmp_path / "t.png", rgb, pnginfo=info),
        "exif": save(tmp_path / "e.png", rgb, exif=exif.tobytes()),
        "grey": save(tmp_path / "g.png", rgb[..., 0]),
        "rgba": save(tmp_path / "a.png", np.dstack([rgb, rgb[..., :1]])),
        "palette": (Image.fromarray(rgb).convert("P").save(tmp_path / "pal.png"), (tmp_path / "pal.png").read_bytes())[1],
    }
    taken = {name for name, data in variants.items() if _plain_png(data, 10**8) is not None}
    assert taken == {"plain", "16-bit", "interlaced", "srgb-gamma"}  # pHYs (dpi) is plain; text, EXIF, modes are not
    for name, data in variants.items():
        got = _plain_png(data, 10**8)
        assert got is None or got == _probe_with_pillow(data, name, 10**8), name
    plain = variants["plain"]
    assert _plain_png(plain, 30 * 44 - 1) is None  # over the pixel limit: Pillow's way, which says why
    bits = np.random.default_rng(8).integers(0, 8, len(plain))
    for i in range(len(plain)):
        flipped = bytearray(plain)
        flipped[i] ^= 1 << int(bits[i])
        got = _plain_png(bytes(flipped), 10**8)
        if got is not None:
            assert got == _probe_with_pillow(bytes(flipped), "f", 10**8), i
    for cut in range(len(plain)):
        got = _plain_png(plain[:cut], 10**8)
        assert got is None or got == _probe_with_pillow(plain[:cut], "c", 10**8), cut


def _same_as_pillow(reader, variants: dict[str, bytes]) -> set[str]:
    """The variants ``reader`` (probe's Pillow-free reading) answers for, each answer checked against Pillow's."""
    from vlmcheck.core.probe import _probe_with_pillow

    taken = set()
    for name, data in variants.items():
        got = reader(data, 10**8)
        if got is not None:
            assert got == _probe_with_pillow(data, name, 10**8), name
            taken.add(name)
    return taken


def _flips_and_cuts_agree(reader, plain: bytes, every: int = 1) -> None:
    """Every single-bit flip (at every ``every``-th byte) and every cut of ``plain``: the Pillow-free reading
    declines or answers exactly as Pillow does (a damaged file goes Pillow's way: refused, or decoded, as ever)."""
    from vlmcheck.core.probe import _probe_with_pillow

    bits = np.random.default_rng(9).integers(0, 8, len(plain))
    for i in range(0, len(plain), every):
        flipped = bytearray(plain)
        flipped[i] ^= 1 << int(bits[i])
        got = reader(bytes(flipped), 10**8)
        if got is not None:
            assert got == _probe_with_pillow(bytes(flipped), "f", 10**8), i
    for cut in range(len(plain)):
        assert reader(plain[:cut], 10**8) is None, cut  # a cut JPEG has no EOI, a cut WebP is shorter than RIFF says


@pytest.mark.slow
def test_a_plain_jpeg_read_without_pillow_gives_what_pillow_gives(tmp_path):
    """probe's own reading of a JPEG (_plain_jpeg): taken for Pillow's plain RGB files (baseline, progressive,
    with an ICC profile, any subsampling), the same format, size, mode and sendability as Pillow's reading;
    grey, CMYK, EXIF (orientation) and damaged files go Pillow's way."""
    from vlmcheck.core.probe import _plain_jpeg, probe

    rgb = RNG.integers(0, 256, (30, 44, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6
    from PIL import ImageCms

    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    variants = {
        "plain": save(tmp_path / "p.jpg", rgb, "JPEG", quality=90),
        "odd-size": save(tmp_path / "o.jpg", RNG.integers(0, 256, (301, 17, 3), dtype=np.uint8), "JPEG"),
        "progressive": save(tmp_path / "pr.jpg", rgb, "JPEG", progressive=True),
        "444": save(tmp_path / "s.jpg", rgb, "JPEG", subsampling=0),
        "icc": save(tmp_path / "i.jpg", rgb, "JPEG", icc_profile=srgb),
        "comment": save(tmp_path / "c.jpg", rgb, "JPEG", comment=b"made in a test"),
        "exif": save(tmp_path / "e.jpg", rgb, "JPEG", exif=exif.tobytes()),
        "grey": save(tmp_path / "g.jpg", rgb[..., 0], "JPEG"),
        "cmyk": (Image.fromarray(rgb).convert("CMYK").save(tmp_path / "k.jpg"), (tmp_path / "k.jpg").read_bytes())[1],
    }
    assert _same_as_pillow(_plain_jpeg, variants) == {"plain", "odd-size", "progressive", "444", "icc", "comment"}
    assert probe(variants["odd-size"]) == _plain_jpeg(variants["odd-size"], 10**8)  # probe takes this way
    assert (probe(variants["odd-size"]).width, probe(variants["odd-size"]).height) == (17, 301)
    with Image.open(tmp_path / "p.jpg") as im:
        assert (im.mode, im.size) == ("RGB", (44, 30))  # what the plain reading claims: mode RGB, sendable
    assert _plain_jpeg(variants["plain"], 30 * 44 - 1) is None  # over the pixel limit: Pillow's way, which says why
    _flips_and_cuts_agree(_plain_jpeg, variants["plain"], every=3)
    assert not probe(variants["plain"][:-200]).sendable  # cut: decoded (as ever), never sent as it is


@pytest.mark.slow
def test_a_plain_webp_read_without_pillow_gives_what_pillow_gives(tmp_path):
    """probe's own reading of a WebP (_plain_webp): taken for Pillow's still RGB files (lossy VP8, lossless
    VP8L, extended VP8X with an ICC profile), the same as Pillow's reading; alpha, EXIF, animation and damaged
    files go Pillow's way."""
    from vlmcheck.core.probe import _plain_webp

    rgb = RNG.integers(0, 256, (30, 44, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6
    from PIL import ImageCms

    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    frames = [Image.fromarray(rgb), Image.fromarray(255 - rgb)]
    frames[0].save(tmp_path / "anim.webp", save_all=True, append_images=frames[1:], duration=100)
    variants = {
        "lossy": save(tmp_path / "l.webp", rgb, "WEBP", quality=80),
        "odd-size": save(tmp_path / "o.webp", RNG.integers(0, 256, (301, 17, 3), dtype=np.uint8), "WEBP"),
        "lossless": save(tmp_path / "ll.webp", rgb, "WEBP", lossless=True),
        "icc": save(tmp_path / "i.webp", rgb, "WEBP", icc_profile=srgb),
        "exif": save(tmp_path / "e.webp", rgb, "WEBP", exif=exif.tobytes()),
        "rgba": save(tmp_path / "a.webp", np.dstack([rgb, rgb[..., :1]]), "WEBP"),
        "rgba-lossless": save(tmp_path / "al.webp", np.dstack([rgb, rgb[..., :1]]), "WEBP", lossless=True),
        "animated": (tmp_path / "anim.webp").read_bytes(),
    }
    assert _same_as_pillow(_plain_webp, variants) == {"lossy", "odd-size", "lossless", "icc"}
    for name in ("lossy", "lossless", "icc"):
        with Image.open(io.BytesIO(variants[name])) as im:
            assert (im.format, im.mode, im.size) == ("WEBP", "RGB", (44, 30)), name
    assert _plain_webp(variants["lossy"], 30 * 44 - 1) is None
    _flips_and_cuts_agree(_plain_webp, variants["lossy"])
    _flips_and_cuts_agree(_plain_webp, variants["lossless"])


def test_a_damaged_file_fails_its_own_sample_and_never_reaches_the_server(tmp_path, fake_server):
    ds = tmp_path / "ds"
    ds.mkdir()
    png = save(ds / "ok.png")
    jpg = save(ds / "ok.jpg", fmt="JPEG", quality=90)
    (ds / "cut.png").write_bytes(png[: len(png) // 2])  # truncated in its pixel data
    (ds / "cut.jpg").write_bytes(jpg[: len(jpg) - 200])  # no EOI marker: decoded, and the decoder refuses it
    flipped = bytearray(png)
    flipped[len(png) // 2] ^= 0xFF  # a CRC that does not match: not whole
    (ds / "flip.png").write_bytes(bytes(flipped))
    for name in ("cut.png", "cut.jpg", "flip.png"):
        assert not probe((ds / name).read_bytes()).sendable
        with pytest.raises(BadImageError, match="cannot decode image|truncated|broken"):
            asyncio.run(read_image_part(ds / name, root=ds))
    res = describe(fake_server, ds, tmp_path / "run")
    assert res.results["counts"]["done"] == 2 and res.results["counts"]["failed"] == 3
    assert len([r for r in fake_server.requests() if r.get("path", "").endswith("/chat/completions")]) == 2


def test_the_key_is_the_files_bytes_the_same_across_folders_and_runs(tmp_path, fake_server):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    data = save(a / "x.png")
    save(a / "y.jpg", PIXELS[::-1], fmt="JPEG", quality=85)
    shutil.copytree(a, b)  # another folder, other paths and times: the same bytes
    (b / "x.png").touch()
    describe(fake_server, a, tmp_path / "run-a")
    describe(fake_server, b, tmp_path / "run-b")
    want = {hashlib.sha256(data).hexdigest(), hashlib.sha256((a / "y.jpg").read_bytes()).hexdigest()}
    got_a, got_b = image_requests(tmp_path / "run-a"), image_requests(tmp_path / "run-b")
    assert {e["file_sha256"] for e in got_a} == want and got_a == got_b
    assert all("sha256" not in e and e["size"] == [56, 40] for e in got_a)  # the key says its kind
    with sqlite3.connect(tmp_path / "run-a" / "store.sqlite") as db:
        keys_a = {k for (k,) in db.execute("SELECT key FROM calls")}
    with sqlite3.connect(tmp_path / "run-b" / "store.sqlite") as db:
        keys_b = {k for (k,) in db.execute("SELECT key FROM calls")}
    assert keys_a == keys_b and len(keys_a) == 2


def test_changed_bytes_are_a_new_call_where_pixel_keys_shared_one(tmp_path, fake_server, monkeypatch):
    ds = tmp_path / "ds"
    ds.mkdir()
    one = save(ds / "one.png", compress_level=1)
    two = save(ds / "two.png", compress_level=9)  # the same pixels, other bytes
    assert one != two
    res = describe(fake_server, ds, tmp_path / "v3", max_concurrency=1)
    assert (res.counters.calls, res.counters.hits) == (2, 0)
    # a store of key version 2 hashed pixels: the second file was a cache hit
    monkeypatch.setattr(calls, "KEY_VERSION", 2)
    monkeypatch.setattr(runner, "KEY_VERSION", 2)
    res = describe(fake_server, ds, tmp_path / "v2", max_concurrency=1)
    assert (res.counters.calls, res.counters.hits) == (1, 1)
    pixel = hashlib.sha256(b"56x40:" + PIXELS.tobytes()).hexdigest()
    assert [e["sha256"] for e in image_requests(tmp_path / "v2")] == [pixel]


def test_a_store_of_key_version_2_keeps_pixel_keys_and_resumes_with_zero_calls(tmp_path, fake_server,
                                                                                 monkeypatch):
    ds = tmp_path / "ds"
    ds.mkdir()
    for i in range(3):
        save(ds / f"{i}.png", np.roll(PIXELS, i, axis=0))
    monkeypatch.setattr(calls, "KEY_VERSION", 2)
    monkeypatch.setattr(runner, "KEY_VERSION", 2)
    first = describe(fake_server, ds, tmp_path / "run")
    monkeypatch.undo()
    assert first.counters.calls == 3
    with sqlite3.connect(tmp_path / "run" / "store.sqlite") as db:
        db.execute("DELETE FROM samples")  # every sample runs again and must find its answer
    again = describe(fake_server, ds, tmp_path / "run", resume=True)
    assert (again.counters.calls, again.counters.hits) == (0, 3)
    with sqlite3.connect(tmp_path / "run" / "store.sqlite") as db:
        assert json.loads(db.execute("SELECT value FROM meta WHERE key = 'key_version'").fetchone()[0]) == 2
    # the results record the pixel hash they always did
    rows = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert {r["result"]["image_sha256"] for r in rows} == {
        hashlib.sha256(b"56x40:" + np.roll(PIXELS, i, axis=0).tobytes()).hexdigest() for i in range(3)}
