"""How images travel to a model (issue 21): the file's own bytes when they decode to exactly the pixels that key
the cache, else a fast PNG encoded once per process; in every case the cache key is the pixels' hash."""

import hashlib
import io
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from vlmcheck import RunOptions, run_task
from vlmcheck.core import images as images_mod
from vlmcheck.core.images import load_image
from vlmcheck.core.messages import ImagePart, Message, to_openai
from vlmcheck.methods.describe import DescribeSpec, DescribeTask

FIXTURE = Path(__file__).parent / "data" / "prechange"


def pixel_sha(img: Image.Image) -> str:
    """The cache's image identity, from its definition: sha256 of 'WxH:' and the RGB bytes."""
    rgb = np.asarray(img.convert("RGB"))
    return hashlib.sha256(f"{rgb.shape[1]}x{rgb.shape[0]}:".encode() + rgb.tobytes()).hexdigest()


def decoded(part: ImagePart) -> Image.Image:
    return Image.open(io.BytesIO(part.data))


@pytest.mark.parametrize("name,fmt", [("rgb.png", "PNG"), ("rgb.jpg", "JPEG")])
def test_a_file_that_decodes_to_its_pixels_is_sent_as_it_is(name, fmt):
    path = FIXTURE / "imgs" / name
    part = Message.user(load_image(path), "x").images[0]
    assert part.data == path.read_bytes() and part.format == fmt
    assert part.sha256 == pixel_sha(Image.open(path))
    url = to_openai([Message.user(load_image(path), "x")])[0]["content"][0]["image_url"]["url"]
    assert url.startswith(f"data:image/{fmt.lower()};base64,")


@pytest.mark.parametrize("name", ["rgba.png", "grey.png"])
def test_a_converted_image_is_sent_as_a_png_of_the_pixels_it_is_keyed_by(name):
    path = FIXTURE / "imgs" / name
    img = load_image(path)
    part = Message.user(img, "x").images[0]
    assert part.data != path.read_bytes() and part.format == "PNG"
    assert pixel_sha(decoded(part)) == part.sha256 == pixel_sha(img)


def test_an_image_changed_in_place_after_loading_is_not_sent_as_its_stale_file():
    path = FIXTURE / "imgs" / "rgb.png"
    img = load_image(path)
    ImageDraw.Draw(img).rectangle((0, 0, 10, 10), fill=(255, 0, 0))
    part = ImagePart.from_pil(img)
    assert part.data != path.read_bytes()
    assert pixel_sha(decoded(part)) == part.sha256 == pixel_sha(img) != pixel_sha(Image.open(path))
    # an image Pillow makes from a loaded one never inherits the file
    assert ImagePart.from_pil(load_image(path).rotate(90)).data != path.read_bytes()


def test_each_picture_is_encoded_once_per_process(monkeypatch):
    calls = []
    real = images_mod.encode_image
    monkeypatch.setattr(images_mod, "encode_image", lambda *a, **k: calls.append(k) or real(*a, **k))
    rng = np.random.default_rng(3)
    img = Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8))
    parts = [ImagePart.from_pil(img), ImagePart.from_pil(img.copy()), ImagePart.from_pil(img.convert("RGBA"))]
    assert len(calls) == 1 and calls[0]["compress_level"] == images_mod.TRANSPORT_PNG_LEVEL
    assert len({p.data for p in parts}) == 1 and pixel_sha(decoded(parts[0])) == pixel_sha(img)


def test_a_run_made_before_the_change_resumes_with_zero_calls_and_the_same_results(fake_server, tmp_path,
                                                                                   monkeypatch):
    """The fixture's store was written by the code before files were sent as they are (see make_fixture.py).
    Its journal is emptied so every sample runs again: each must find its answer under the same key."""
    work = tmp_path / "prechange"
    shutil.copytree(FIXTURE, work, ignore=shutil.ignore_patterns("make_fixture.py"))
    monkeypatch.chdir(work)
    with sqlite3.connect(work / "run" / "store.sqlite") as db:
        before = dict(db.execute("SELECT sample_id, result FROM samples WHERE status = 'done'"))
        db.execute("DELETE FROM samples")
    assert len(before) == 4
    task = DescribeTask(DescribeSpec(vlm=f"openai:fake@{fake_server.base_url}", data="manifest.jsonl"))
    result = run_task(task, "run", RunOptions(progress=False, report=False, preflight=False, resume=True))
    assert fake_server.requests() == []
    assert result.counters.calls == 0 and result.counters.hits == 4
    with sqlite3.connect(work / "run" / "store.sqlite") as db:
        after = dict(db.execute("SELECT sample_id, result FROM samples WHERE status = 'done'"))
    assert after == before


@pytest.mark.parametrize("text", ["Describe it.", "a\x00vlmcheck-image-0\x00b", "\\u0000vlmcheck-image-0\\u0000",
                                  "\x00vlmcheck-image-1\x00", "é ü \u2028 \"quoted\""])
def test_request_json_with_spliced_images_is_the_plain_encoding(text):
    """The body is byte for byte what json.dumps gives with the SDK's settings, whatever the text holds."""
    import base64
    import json

    from vlmcheck.models.http import json_body

    rng = np.random.default_rng(0)
    urls = ["data:image/png;base64," + base64.b64encode(rng.bytes(n)).decode() for n in (3000, 5000)]
    body = {"model": "m", "temperature": 0.0, "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": text},
                                     {"type": "image_url", "image_url": {"url": urls[0]}},
                                     {"type": "image_url", "image_url": {"url": urls[1], "detail": "low"}}]}]}
    plain = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    assert json_body(body) == plain


@pytest.mark.slow
def test_the_cli_and_a_describe_task_import_nothing_heavy():
    """Start-up (issue 21 item 4): `vlmcheck --help` and building an API describe task load no torch,
    transformers, OpenCV, scipy, pandas, openai or Ray; other methods' modules are imported when first named."""
    import subprocess
    import sys

    code = ("import sys, vlmcheck.cli\n"
            "from vlmcheck.methods import task_class\n"
            "task_class('describe')\n"
            "print(' '.join(m for m in ('torch', 'transformers', 'cv2', 'scipy', 'pandas', 'ray', 'openai',\n"
            "      'vlmcheck.methods.vhexpansion', 'vlmcheck.perturb.image') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    from vlmcheck.methods import TASK_NAMES, task_class

    assert [task_class(t).name for t in TASK_NAMES] == list(TASK_NAMES)


def test_a_body_sent_in_pieces_is_byte_for_byte_the_joined_body():
    """The aiohttp path sends the JSON piece by piece (the data URL as the string the message holds, 256 kB at a
    time): what reaches the socket, and the Content-Length, are exactly the joined body's."""
    import asyncio
    import base64

    from vlmcheck.models.http import PiecesPayload
    from vlmcheck.models.http import json_body, json_pieces

    rng = np.random.default_rng(5)
    url = "data:image/png;base64," + base64.b64encode(rng.bytes(700_000)).decode()
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Describe it."}, {"type": "image_url", "image_url": {"url": url}}]}]}
    pieces = json_pieces(body)
    assert any(p is url for p in pieces)  # the message's own string, not a copy
    sent = []

    class Writer:
        async def write(self, chunk):
            assert len(chunk) <= 1 << 18
            sent.append(bytes(chunk))

    payload = PiecesPayload(pieces)
    asyncio.run(payload.write_with_length(Writer(), None))
    assert b"".join(sent) == json_body(body) and payload.size == len(json_body(body))
