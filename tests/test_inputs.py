"""Dataset inputs: confined to their folder, regular files only, a size cap, reads off the event loop, and a
budget on decoded pixels in flight (core/inputs.py)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlmcheck.core.inputs import InputPolicy, PixelBudget, read_image, sample_lease, active_policy
from vlmcheck.core.images import BadImageError, read_file_bytes
from vlmcheck.core.roles import Capabilities, Generation
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.run.runner import RunOptions, run_task


class _Recorder:
    """A VLM that records the pixels of every image it is sent."""

    model_id = "test:recorder"

    def __init__(self) -> None:
        self.capabilities = Capabilities()
        self.seen: list[tuple[int, int, int]] = []

    async def generate(self, messages, config):
        for m in messages:
            for part in m.content:
                if part.type == "image":
                    self.seen.append(part.to_pil().getpixel((0, 0)))
        return Generation(text="a photo", finish_reason="stop")


def _dataset(tmp_path):
    """A manifest in ds/ whose rows point inside, outside (../, absolute, symlink), at a FIFO, /dev/zero and a
    folder.  Each outside image has its own colour no inside image has, so a test can tell which were sent (one
    shared outside image would let the call cache answer a repeat without calling the model)."""
    ds, secret = tmp_path / "ds", tmp_path / "private"
    ds.mkdir()
    secret.mkdir()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(ds / "ok.png")
    for i, name in enumerate(("outside", "outside2", "outside3")):
        Image.new("RGB", (8, 8), (250, i, 250)).save(secret / f"{name}.png")
    os.symlink(secret / "outside3.png", ds / "link.png")
    os.mkfifo(ds / "fifo.png")
    os.symlink("/dev/zero", ds / "zero.png")
    (ds / "dir.png").mkdir()
    rows = [("ok", "ok.png"), ("dotdot", "../private/outside.png"), ("absolute", str(secret / "outside2.png")),
            ("symlink", "link.png"), ("fifo", "fifo.png"), ("zero", "zero.png"), ("dir", "dir.png")]
    (ds / "manifest.jsonl").write_text("".join(json.dumps({"id": i, "image": p}) + "\n" for i, p in rows))
    return ds / "manifest.jsonl"


def _errors(res_folder):
    rows = [json.loads(line) for line in (res_folder / "samples.jsonl").read_text().split("\n") if line]
    return {r["sample_id"]: (r["error"]["message"] if r["status"] == "error" else None) for r in rows}


def test_images_outside_the_dataset_are_refused_per_sample_and_never_sent(tmp_path):
    vlm = _Recorder()
    t0 = time.monotonic()
    res = run_task(DescribeTask(DescribeSpec(vlm=vlm.model_id, data=str(_dataset(tmp_path))), vlm=vlm),
                   tmp_path / "run", RunOptions(progress=False, report=False))
    assert time.monotonic() - t0 < 30  # the FIFO did not hang the run
    errors = _errors(tmp_path / "run")
    assert errors["ok"] is None and res.results["counts"]["done"] == 1
    for sid in ("dotdot", "absolute", "symlink", "zero"):
        assert "outside the dataset folder" in errors[sid] and "--allow-outside" in errors[sid], sid
    assert "not a regular file" in errors["fifo"]
    assert "is a directory" in errors["dir"]
    assert vlm.seen == [(1, 2, 3)]  # only the inside image reached the model


def test_allow_outside_reads_outside_images_but_still_only_regular_files(tmp_path):
    vlm = _Recorder()
    res = run_task(DescribeTask(DescribeSpec(vlm=vlm.model_id, data=str(_dataset(tmp_path))), vlm=vlm),
                   tmp_path / "run", RunOptions(progress=False, report=False, allow_outside=True))
    errors = _errors(tmp_path / "run")
    assert [errors[s] for s in ("ok", "dotdot", "absolute", "symlink")] == [None] * 4
    assert sorted(vlm.seen) == [(1, 2, 3), (250, 0, 250), (250, 1, 250), (250, 2, 250)]
    assert "not a regular file" in errors["zero"]  # /dev/zero is a device: never read
    assert "not a regular file" in errors["fifo"]
    assert res.results["counts"]["failed"] == 3


def test_the_file_size_cap_is_checked_before_reading(tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(ds / "big.png")
    Image.new("RGB", (4, 4)).save(ds / "small.png")
    size = (ds / "big.png").stat().st_size
    assert size > 10_000
    vlm = _Recorder()
    run_task(DescribeTask(DescribeSpec(vlm=vlm.model_id, data=str(ds)), vlm=vlm), tmp_path / "run",
             RunOptions(progress=False, report=False, max_image_bytes=10_000))
    errors = _errors(tmp_path / "run")
    assert errors["small.png"] is None
    assert f"{size} bytes exceeds the image file size limit of 10000 bytes" in errors["big.png"]


@pytest.mark.parametrize("size", [0, 1, 65_535, 65_537, 3_000_000])
def test_a_file_is_read_whole(tmp_path, size):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    (tmp_path / "f.bin").write_bytes(data)
    assert read_file_bytes(tmp_path / "f.bin", max_bytes=3_000_000) == data


def test_a_file_that_grows_after_the_check_is_read_whole_up_to_the_cap(tmp_path, monkeypatch):
    # The file is 200 kB but stat and fstat say 10 bytes, as if it grew between the check and the read: all of it is
    # read, and a cap it passes is still enforced.
    import vlmcheck.core.images as images_mod

    data = bytes(range(256)) * 800
    (tmp_path / "f.bin").write_bytes(data)
    real_stat, real_fstat = os.stat, os.fstat

    class _Small:
        def __init__(self, st):
            self.st_mode, self.st_size = st.st_mode, 10

    monkeypatch.setattr(images_mod.os, "fstat", lambda fd: _Small(real_fstat(fd)))
    monkeypatch.setattr(images_mod.os, "stat", lambda p: _Small(real_stat(p)))
    assert read_file_bytes(tmp_path / "f.bin", max_bytes=300_000) == data
    with pytest.raises(BadImageError, match="larger than the image file size limit of 100000 bytes"):
        read_file_bytes(tmp_path / "f.bin", max_bytes=100_000)


def test_reading_a_fifo_never_blocks_the_event_loop(tmp_path):
    # With the old code, open() on a FIFO blocked the loop's only thread until a writer came.
    fifo = tmp_path / "f.png"
    os.mkfifo(fifo)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            for _ in range(5):
                await asyncio.sleep(0.01)
                ticks += 1

        t = asyncio.create_task(ticker())
        with pytest.raises(BadImageError, match="not a regular file"):
            await read_image(fifo)
        await t
        return ticks

    assert asyncio.run(asyncio.wait_for(main(), 10)) == 5


def test_decoding_runs_in_a_worker_thread(tmp_path, monkeypatch):
    import vlmcheck.core.inputs as inputs_mod

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    threads = []
    real = inputs_mod.decode_image

    def spy(*a, **k):
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*a, **k)

    monkeypatch.setattr(inputs_mod, "decode_image", spy)
    asyncio.run(read_image(tmp_path / "a.png"))
    assert threads == [False]


def test_images_are_decoded_on_at_most_one_thread_per_cpu(tmp_path, monkeypatch):
    # More decoding threads than cores keep the event loop's thread waiting for the GIL (core/inputs.py).
    import vlmcheck.core.inputs as inputs_mod

    for i in range(40):
        Image.new("RGB", (8, 8), (i, 0, 0)).save(tmp_path / f"{i}.png")
    names, real = set(), inputs_mod.decode_image

    def spy(*a, **k):
        names.add(threading.current_thread().name)
        time.sleep(0.005)  # keep each thread busy long enough that a pool would grow to its size
        return real(*a, **k)

    monkeypatch.setattr(inputs_mod, "decode_image", spy)

    async def main():
        return await asyncio.gather(*(read_image(tmp_path / f"{i}.png") for i in range(40)))

    images = asyncio.run(main())
    assert [im.getpixel((0, 0)) for im in images] == [(i, 0, 0) for i in range(40)]
    assert 1 <= len(names) <= len(os.sched_getaffinity(0))
    assert all(n.startswith("vlmcheck-io") for n in names)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_reads_images_with_threads_of_its_own(tmp_path):
    # The reader pool is made in the parent; a child forked after has none of its threads and must not wait
    # on them forever.
    import multiprocessing

    Image.new("RGB", (8, 8), (9, 8, 7)).save(tmp_path / "a.png")
    assert asyncio.run(read_image(tmp_path / "a.png")).getpixel((0, 0)) == (9, 8, 7)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        result = pool.apply_async(_child_reads, (str(tmp_path / "a.png"),))
        assert result.get(timeout=30) == (9, 8, 7)


def _child_reads(path):
    return asyncio.run(read_image(path)).getpixel((0, 0))


def test_the_pixel_budget_bounds_decoded_images_in_flight(tmp_path):
    # Eight 1000x1000 images (3 MB decoded each) in flight at once under a 7 MB budget: at most two are held
    # at any time, and every sample still finishes.
    for i in range(8):
        Image.new("RGB", (1000, 1000), (i, 0, 0)).save(tmp_path / f"{i}.png")
    budget = PixelBudget(7_000_000)
    held_max = 0

    async def sample(i):
        nonlocal held_max
        async with sample_lease():
            img = await read_image(tmp_path / f"{i}.png")
            held_max = max(held_max, budget.used)
            await asyncio.sleep(0.02)  # the model call, while the image is held
            return img.getpixel((0, 0))[0]

    async def main():
        token = active_policy.set(InputPolicy(budget=budget))
        try:
            return await asyncio.gather(*(sample(i) for i in range(8)))
        finally:
            active_policy.reset(token)

    assert asyncio.run(main()) == list(range(8))
    assert budget.peak == 6_000_000 and held_max <= 7_000_000
    assert budget.used == 0  # everything released


def test_an_image_larger_than_the_budget_still_runs_alone_and_a_sample_never_waits_on_itself(tmp_path):
    Image.new("RGB", (100, 100)).save(tmp_path / "a.png")  # 30,000 bytes decoded
    budget = PixelBudget(10_000)

    async def main():
        token = active_policy.set(InputPolicy(budget=budget))
        try:
            async with sample_lease():
                await read_image(tmp_path / "a.png")
                await read_image(tmp_path / "a.png")  # the same sample's second image: charged, no wait
                return budget.used
        finally:
            active_policy.reset(token)

    assert asyncio.run(asyncio.wait_for(main(), 5)) == 60_000
    assert budget.used == 0


def test_the_runner_holds_the_budget(tmp_path):
    # Through run_task: with a budget of one image, samples run one image at a time, and all of them finish.
    ds = tmp_path / "ds"
    ds.mkdir()
    for i in range(6):
        Image.new("RGB", (200, 200), (i, 0, 0)).save(ds / f"{i}.png")
    in_flight, peak = 0, 0

    class Slow(_Recorder):
        async def generate(self, messages, config):
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.02)
            in_flight -= 1
            return await super().generate(messages, config)

    vlm = Slow()
    # describe sends each file as it is: what a sample holds is its file's bytes and data URL, not pixels, so a
    # budget smaller than one file runs one sample at a time
    res = run_task(DescribeTask(DescribeSpec(vlm=vlm.model_id, data=str(ds)), vlm=vlm), tmp_path / "run",
                   RunOptions(progress=False, report=False, max_concurrency=6, pixel_budget=100))
    assert res.results["counts"]["done"] == 6 and peak == 1
    # ... and a budget of one decoded image no longer limits it: nothing is decoded
    peak = 0
    res = run_task(DescribeTask(DescribeSpec(vlm=vlm.model_id, data=str(ds)), vlm=vlm), tmp_path / "run1",
                   RunOptions(progress=False, report=False, max_concurrency=6, pixel_budget=200 * 200 * 3))
    assert res.results["counts"]["done"] == 6 and peak == 6
    res = run_task(DescribeTask(DescribeSpec(vlm=vlm.model_id, data=str(ds)), vlm=vlm), tmp_path / "run2",
                   RunOptions(progress=False, report=False, max_concurrency=6))
    assert res.results["counts"]["done"] == 6 and peak == 6  # the default budget does not limit small images


def test_read_image_part_is_the_file_keyed_by_its_bytes_made_off_the_loop(tmp_path):
    import base64
    import hashlib

    from vlmcheck.core.inputs import InputPolicy, read_image_part

    pixels = np.arange(5 * 7 * 3, dtype=np.uint8).reshape(5, 7, 3)
    Image.fromarray(pixels).save(tmp_path / "a.png")
    part = asyncio.run(read_image_part(tmp_path / "a.png", root=tmp_path))
    raw = (tmp_path / "a.png").read_bytes()
    # the key is the hash of the file's bytes, which are what is sent
    assert (part.key, part.sha256) == ("file", hashlib.sha256(raw).hexdigest())
    assert (part.data, part.format, part.width, part.height) == (raw, "PNG", 7, 5)
    # the pixel hash (width x height, then RGB rows) is still there for stores made before key version 3
    assert part.pixel_sha256() == hashlib.sha256(b"7x5:" + pixels.tobytes()).hexdigest()

    async def old_store():  # a run whose store has pixel keys reads the file decoded, keyed by its pixels
        token = active_policy.set(InputPolicy(file_keys=False))
        try:
            return await read_image_part(tmp_path / "a.png", root=tmp_path)
        finally:
            active_policy.reset(token)

    old = asyncio.run(old_store())
    assert (old.key, old.sha256, old.data) == ("pixels", hashlib.sha256(b"7x5:" + pixels.tobytes()).hexdigest(), raw)
    assert part.data_url() == "data:image/png;base64," + base64.b64encode(raw).decode()
    # a grey file is not what the model gets (RGB): its pixels travel re-encoded, hashed as RGB
    grey = np.arange(6 * 4, dtype=np.uint8).reshape(4, 6) * 10
    Image.fromarray(grey).save(tmp_path / "g.png")
    part = asyncio.run(read_image_part(tmp_path / "g.png", root=tmp_path))
    rgb = np.repeat(grey[:, :, None], 3, axis=2)
    assert part.sha256 == hashlib.sha256(b"6x4:" + rgb.tobytes()).hexdigest()
    assert part.data != (tmp_path / "g.png").read_bytes() and np.array_equal(np.asarray(part.to_pil()), rgb)
    (tmp_path / "b.png").write_text("not an image")
    with pytest.raises(BadImageError, match="not a recognised image format"):
        asyncio.run(read_image_part(tmp_path / "b.png", root=tmp_path))
    with pytest.raises(BadImageError, match="outside the dataset folder"):
        asyncio.run(read_image_part(tmp_path / "a.png", root=tmp_path / "elsewhere"))


def test_small_files_are_read_on_the_loop_large_ones_and_slow_disks_in_workers(tmp_path, monkeypatch):
    """A file sent as it is, up to INLINE_MAX_BYTES, is read on the loop's thread; a larger one in a worker;
    three slow inline reads in a row (a slow disk) send every later read to the workers, one slow read alone
    does not."""
    import vlmcheck.core.inputs as inputs_mod
    from vlmcheck.core.inputs import read_image_part

    rng = np.random.default_rng(3)
    Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(tmp_path / "small.png")
    Image.fromarray(rng.integers(0, 256, (200, 200, 3), dtype=np.uint8)).save(tmp_path / "large.png")
    small, large = (tmp_path / "small.png").stat().st_size, (tmp_path / "large.png").stat().st_size
    monkeypatch.setattr(inputs_mod, "INLINE_MAX_BYTES", (small + large) // 2)
    monkeypatch.setattr(inputs_mod, "_inline", inputs_mod._Inline())
    threads = []
    real = inputs_mod.probe

    def spy(*a, **k):
        threads.append("loop" if threading.current_thread() is threading.main_thread() else "worker")
        return real(*a, **k)

    monkeypatch.setattr(inputs_mod, "probe", spy)

    def read(name):
        return asyncio.run(read_image_part(tmp_path / name, root=tmp_path))

    assert read("small.png").data == (tmp_path / "small.png").read_bytes()
    assert read("large.png").data == (tmp_path / "large.png").read_bytes()
    assert threads == ["loop", "worker"]
    clock = iter([0.0, 1.0, 1.0, 1.0001])  # one slow read (1 s), then a fast one
    monkeypatch.setattr(inputs_mod.time, "perf_counter", lambda: next(clock))
    read("small.png"), read("small.png")
    assert inputs_mod._inline.ok and threads[2:] == ["loop", "loop"]
    clock = iter([0.0, 1.0] * 3)  # three slow reads in a row
    read("small.png"), read("small.png"), read("small.png")
    assert not inputs_mod._inline.ok
    monkeypatch.setattr(inputs_mod.time, "perf_counter", time.perf_counter)
    read("small.png")
    assert threads[4:] == ["loop", "loop", "loop", "worker"]


def test_real_path_resolves_as_realpath_does(tmp_path, monkeypatch):
    """_real_path (the folder resolved once per folder) gives os.path.realpath's answer: plain files, a linked
    file, a file in a linked folder, a link re-pointed between two calls, relative paths and missing files."""
    from vlmcheck.core.inputs import _real_path

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        (tmp_path / d / "x.png").write_bytes(b"x")
    (tmp_path / "a" / "link.png").symlink_to(tmp_path / "b" / "x.png")
    (tmp_path / "via").symlink_to(tmp_path / "a")
    monkeypatch.chdir(tmp_path)
    paths = [str(tmp_path / "a" / "x.png"), str(tmp_path / "a" / "link.png"), str(tmp_path / "via" / "x.png"),
             "a/x.png", "via/link.png", "x.png", str(tmp_path / "a" / "missing.png"), str(tmp_path / "a" / ".."),
             str(tmp_path / "gone" / "x.png")]
    for p in paths:
        assert _real_path(p) == os.path.realpath(p), p
    (tmp_path / "via").unlink()
    (tmp_path / "via").symlink_to(tmp_path / "b")  # re-pointed: resolved again, not served from the cache
    assert _real_path(str(tmp_path / "via" / "x.png")) == str(tmp_path / "b" / "x.png")


def test_a_file_part_read_for_a_request_holds_its_image_once_as_the_data_url(tmp_path):
    """Issue 51 goal 5: a part in flight held the file's bytes and their base64 (the data URL); it now holds the
    URL only, and reads, compares, dumps, keys and converts for every provider as the part made from the bytes."""
    import base64
    import hashlib

    from vlmcheck.core.inputs import read_image_part
    from vlmcheck.core.messages import (ImagePart, Message, canonical_messages, to_anthropic, to_gemini, to_hf,
                                        to_openai)
    from vlmcheck.core.probe import probe

    pixels = np.arange(6 * 9 * 3, dtype=np.uint8).reshape(6, 9, 3)
    Image.fromarray(pixels).save(tmp_path / "a.png")
    raw = (tmp_path / "a.png").read_bytes()
    part = asyncio.run(read_image_part(tmp_path / "a.png", root=tmp_path))
    assert "data" not in part.__dict__  # the bytes let go of: the URL is what the part holds
    assert part.data_url() == "data:image/png;base64," + base64.b64encode(raw).decode()
    whole = ImagePart.from_file(raw, probe(raw, "a.png"))  # the same file, bytes kept
    assert "data" in whole.__dict__ and part.data == raw and part == whole and whole == part
    assert part.b64() == base64.b64encode(raw).decode() and part.pixel_sha256() == whole.pixel_sha256()
    assert part.pixel_sha256() == hashlib.sha256(b"9x6:" + pixels.tobytes()).hexdigest()
    assert np.array_equal(np.asarray(part.to_pil()), pixels)
    m, w = [Message.make("user", "what?", part)], [Message.make("user", "what?", whole)]
    assert m[0].model_dump_json() == w[0].model_dump_json() and m[0].model_dump() == w[0].model_dump()
    assert Message.model_validate_json(m[0].model_dump_json()).content[1] == whole
    assert canonical_messages(m) == canonical_messages(w)
    assert canonical_messages(m, file_keys=False) == canonical_messages(w, file_keys=False)
    assert to_openai(m) == to_openai(w) and to_anthropic(m) == to_anthropic(w) and to_gemini(m) == to_gemini(w)
    assert to_hf(m)[0] == to_hf(w)[0] and np.array_equal(np.asarray(to_hf(m)[1][0]), pixels)
    with pytest.raises(AttributeError):
        part.no_such_attribute  # noqa: B018


def test_a_manifest_image_path_is_joined_as_pathlib_joins_it():
    """dataset_path joins a relative image's folder to the manifest's once per folder, then the name after it:
    the same text as ``str(Path(base) / image)`` (or the image itself when absolute), whatever the shapes."""
    import itertools

    from vlmcheck.core.inputs import dataset_path

    bases = ["", ".", "/", "//", "/tmp/hp", "/tmp/hp/", "rel", "rel/", "./rel", "a//b", "..", "../x", "/a/./b", "a b"]
    images = ["x.png", "img/x.png", "img//x.png", "./x.png", "img/./x.png", "img/", "img/.", "img/..", "../x.png",
              "a/../b.png", ".", "..", "/abs/x.png", "//abs.png", "a/b/c/d.png", "\u00e9/\u00fc.png", ".hidden",
              "img/.hidden", "x.png/", "  sp .png", "a\\b.png", ".../x"]
    for base, image in itertools.product(bases, images):
        p = Path(image)
        want = str(p if p.is_absolute() else Path(base) / p)
        assert dataset_path(base, image) == want == dataset_path(Path(base), image), (base, image)
