"""Dataset readers and sweeps against hostile and broken files: secrets never written on any route, one rule for
every file a reader opens (a regular file, inside the dataset, within a size cap), work bounded by what was
asked, content-addressed release caches, and one sentence (never a traceback) for every malformed file."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from conftest import run_cli

KEY = "PLANTEDsecret0123456789abcdefXYZ"
ENVKEY = "PLANTEDenv0123456789abcdefXYZ"


def _cli(*args, env=None, cwd=None):
    e = {**os.environ, **(env or {})}
    return run_cli(*args, env=e, cwd=cwd)


def _manifest(tmp_path: Path) -> Path:
    (tmp_path / "img").mkdir(exist_ok=True)
    rows = []
    for i in range(2):
        Image.new("RGB", (12 + i, 12), (i * 60, 50, 200)).save(tmp_path / "img" / f"{i}.png")
        rows.append({"id": f"s{i}", "image": f"img/{i}.png", "prompt": "Describe."})
    path = tmp_path / "manifest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _grep(root: Path, *needles: str) -> list[str]:
    hits = []
    for p in [root, *root.rglob("*")]:
        if p.name in ("sweep.yaml", "server-log.jsonl"):  # the user's own config; the fake server's request log
            continue
        for n in needles:
            if n in p.name or n[:12] in p.name:
                hits.append(f"name {p}")
        if p.is_file():
            data = p.read_bytes()
            for n in needles:
                if n.encode() in data or n[:12].encode() in data:
                    hits.append(str(p))
    return hits


def test_a_planted_key_is_written_nowhere_on_any_route(fake_server, tmp_path, capsys, monkeypatch):
    """A key in a sweep's model spec (YAML), on the command line, in the environment and in the endpoint URL's
    userinfo: every file a sweep, a run, a report and an export write, and the terminal, hold none of them."""
    _manifest(tmp_path)
    url = fake_server.base_url
    host = url.split("://", 1)[1]
    specs = [f"openai:fake-a@{url}?api_key={KEY}",                       # the key as a spec parameter
             f"openai:fake-b@http://user:{KEY}X@{host}"]                   # the key as the URL's password
    (tmp_path / "sweep.yaml").write_text(
        "out: sw\nmodels:\n" + "".join(f"  - {json.dumps(s)}\n" for s in specs)
        + "methods:\n  - method: describe\n    data: manifest.jsonl\n")
    env = {"OPENAI_API_KEY": ENVKEY, "VLMCHECK_URL_CREDENTIALS": "1", "VLMCHECK_CACHE": str(tmp_path / "cache")}
    outs = [_cli("run", "sweep.yaml", "--no-progress", env=env, cwd=tmp_path)]
    outs.append(_cli("describe", "--vlm", specs[0], "--data", "manifest.jsonl", "--out", "one", "--no-progress",
                     env=env, cwd=tmp_path))
    outs.append(_cli("report", "sw", "--out", "rep.html", env=env, cwd=tmp_path))
    outs.append(_cli("export", "sw", "--out", "exp", env=env, cwd=tmp_path))
    for o in outs[:2]:
        assert o.returncode == 0, o.stderr[-2000:]
    # the Python API: the same spec, in this process
    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask

    monkeypatch.setenv("OPENAI_API_KEY", ENVKEY)
    run_task(DescribeTask(DescribeSpec(vlm=specs[0], data=str(tmp_path / "manifest.jsonl"))), tmp_path / "api",
             RunOptions(progress=False))
    captured = capsys.readouterr()
    assert KEY[:12] not in captured.out + captured.err
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) > 10
    assert _grep(tmp_path / "sw", KEY, ENVKEY) == []
    assert _grep(tmp_path, KEY, ENVKEY) == []
    for o in outs:
        for n in (KEY, ENVKEY):
            assert n[:12] not in o.stdout + o.stderr


# ---------------------------------------------------------------- one rule for every file a reader opens

import io  # noqa: E402
import pickle  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

from vlmcheck.core import inputs  # noqa: E402
from vlmcheck.datasets import DatasetFormError, load  # noqa: E402


def _png(colour=(10, 20, 30), size=(8, 8)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


def _lamm(tmp_path: Path, meta: str | None = None) -> Path:
    root = tmp_path / "LAMM"
    (root / "meta_file").mkdir(parents=True)
    (root / "imgs").mkdir()
    (root / "imgs" / "1.png").write_bytes(_png())
    if meta is not None:
        (root / "meta_file" / "VQA_X.json").write_text(meta)
    return root


def _limited(code: str, cwd: Path, mem_mb: int = 1500, timeout: float = 60) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python under an address-space cap and a time limit (a test that fails never hangs
    the suite or the machine)."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          preexec_fn=cap, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


@pytest.mark.timeout(30)
def test_a_fifo_or_device_meta_file_is_refused_without_reading(tmp_path):
    root = _lamm(tmp_path)
    os.mkfifo(root / "meta_file" / "VQA_X.json")
    with pytest.raises(DatasetFormError, match=r"VQA_X\.json: .*not a regular file"):
        load(root)
    (root / "meta_file" / "VQA_X.json").unlink()
    os.symlink("/dev/zero", root / "meta_file" / "VQA_X.json")
    with pytest.raises(DatasetFormError, match=r"VQA_X\.json: .*not a regular file"):
        load(root)


@pytest.mark.timeout(60)  # the CLI runs in this process: a read that blocks on the FIFO fails here
def test_a_fifo_meta_file_is_refused_at_once(tmp_path):
    """Before: ``data inspect`` and every run blocked forever on a LAMM meta file that is a FIFO."""
    root = _lamm(tmp_path)
    os.mkfifo(root / "meta_file" / "VQA_X.json")
    t = time.monotonic()
    run = _cli("data", "inspect", str(root))
    assert time.monotonic() - t < 30
    assert run.returncode == 2, run.stderr
    assert "VQA_X.json" in run.stderr and "not a regular file" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_meta_file_linked_to_dev_zero_reads_nothing(tmp_path):
    """Before: read until memory ran out (5.4 GB, then a MemoryError traceback)."""
    root = _lamm(tmp_path)
    os.symlink("/dev/zero", root / "meta_file" / "VQA_X.json")
    t = time.monotonic()
    run = _limited(f"from vlmcheck.datasets import load\nload({str(root)!r})", tmp_path, mem_mb=1500, timeout=60)
    assert time.monotonic() - t < 30
    assert "DatasetFormError" in run.stderr and "not a regular file" in run.stderr, run.stderr[-500:]
    assert "MemoryError" not in run.stderr


def test_a_meta_file_linked_outside_the_release_is_refused_unless_allowed(tmp_path):
    """Before: its text became the prompt sent to the model, without --allow-outside."""
    root = _lamm(tmp_path)
    secret = tmp_path / "elsewhere.json"
    secret.write_text(json.dumps([{"image": "imgs/1.png", "query": "PRIVATE TEXT"}]))
    os.symlink(secret, root / "meta_file" / "VQA_X.json")
    with pytest.raises(DatasetFormError, match=r"VQA_X\.json: .*outside the dataset folder.*--allow-outside"):
        load(root)
    token = inputs.active_policy.set(inputs.InputPolicy(allow_outside=True))
    try:
        assert load(root).records[0].question == "PRIVATE TEXT"
    finally:
        inputs.active_policy.reset(token)


def test_a_text_file_over_the_cap_is_refused_naming_it(tmp_path, monkeypatch):
    root = _lamm(tmp_path, json.dumps([{"image": "imgs/1.png", "query": "q" * 5000}]))
    monkeypatch.setenv("VLMCHECK_MAX_TEXT_MB", "0.001")  # 1,048 bytes
    tracemalloc.start()
    try:
        with pytest.raises(DatasetFormError, match=r"VQA_X\.json: .*exceeds the .* limit .*VLMCHECK_MAX_TEXT_MB"):
            load(root)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    monkeypatch.setenv("VLMCHECK_MAX_TEXT_MB", "1")
    assert len(load(root).records) == 1


# ---------------------------------------------------------------- work bounded by what was asked

def _tsv(path: Path, rows: list[dict]) -> Path:
    cols = list(rows[0])
    path.write_text("\t".join(cols) + "\n" + "".join("\t".join(str(r[c]) for c in cols) + "\n" for r in rows))
    return path


def _files(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def test_a_base64_image_over_max_image_mb_is_never_decoded_or_stored(tmp_path, monkeypatch):
    """Before: a base64 field was decoded and stored whatever --max-image-mb said (100 MB: ~700 MB of memory)."""
    import base64

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    big = base64.b64encode(_png() + os.urandom(3 << 20)).decode()  # a 4 MB field, a 3 MB "image"
    small = base64.b64encode(_png((200, 0, 0))).decode()
    tsv = _tsv(tmp_path / "x.tsv", [{"index": 0, "image": big, "question": "Q?", "answer": "A"},
                                    {"index": 1, "image": small, "question": "Q?", "answer": "A"}])
    from vlmcheck.datasets import vlmeval_tsv

    decoded = []
    real = vlmeval_tsv.base64.b64decode
    monkeypatch.setattr(vlmeval_tsv.base64, "b64decode", lambda x, **k: decoded.append(len(x)) or real(x, **k))
    token = inputs.active_policy.set(inputs.InputPolicy(max_file_bytes=1 << 20))  # --max-image-mb 1
    tracemalloc.start()
    try:
        ds = load(tsv)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        inputs.active_policy.reset(token)
    assert [r.id for r in ds.records] == ["1"]
    assert any("exceeds the image file size limit" in why for _, why in ds.skipped)
    assert _files(tmp_path / "cache") == 1  # the small image only
    assert max(decoded) < 1 << 20  # never the 3 MB image
    assert peak < 12 * len(big)  # the csv module's own buffer for the field (4 bytes a character), no more


def test_a_tsv_field_over_the_field_cap_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("VLMCHECK_MAX_FIELD_MB", "0.5")
    tsv = _tsv(tmp_path / "x.tsv", [{"index": 0, "image": "x" * (1 << 20), "question": "Q?", "answer": "A"}])
    with pytest.raises(DatasetFormError, match=r"x\.tsv: a field near line \d+ is larger than .*VLMCHECK_MAX_FIELD_MB"):
        load(tsv)


def test_an_image_list_per_item_is_capped_before_anything_is_stored(tmp_path, monkeypatch):
    """Before: a shard whose one cell listed 100,000 images wrote 100,001 files for a 2-sample run."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    snap = tmp_path / "snap"
    (snap / "data").mkdir(parents=True)
    many = [{"bytes": _png((i, 0, 7)), "path": None} for i in range(100)]
    rows = [{"id": "a", "images": many, "question": "Q?"},
            {"id": "b", "images": [{"bytes": _png((1, 2, 3)), "path": None}], "question": "Q?"}]
    pq.write_table(pa.Table.from_pylist(rows), snap / "data" / "test-00000-of-00001.parquet")
    (snap / "README.md").write_text("# replica\n")
    ds = load(snap)
    assert [r.id for r in ds.records] == ["b"]
    assert any("100 images, more than the 64" in why for _, why in ds.skipped)
    assert _files(tmp_path / "cache") == 1
    # the TSV form: a list of images, and a list of paths
    tsv = _tsv(tmp_path / "x.tsv", [{"index": 0, "image": repr(["aGVsbG8gd29ybGQgdGhpcyBpcyBsb25nZXIgdGhhbiA2NCBjaGFycyBzbyBpdCBpcyBiYXNlNjQ="] * 100),
                                     "question": "Q?", "answer": "A"},
                                    {"index": 1, "image": base64_png(), "question": "Q?", "answer": "A"}])
    ds = load(tsv)
    assert [r.id for r in ds.records] == ["1"] and "more than the 64 images" in ds.skipped[0][1]


def base64_png() -> str:
    import base64

    return base64.b64encode(_png((9, 9, 9))).decode()


def test_a_shard_claiming_more_rows_than_the_cap_is_refused(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    snap = tmp_path / "snap"
    (snap / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"id": str(i), "question": "Q?"} for i in range(3000)]),
                   snap / "data" / "test-00000-of-00001.parquet")
    (snap / "README.md").write_text("# replica\n")
    monkeypatch.setenv("VLMCHECK_MAX_ROWS", "1000")
    with pytest.raises(DatasetFormError, match=r"test-00000-of-00001\.parquet: 3000 rows, more than the 1000"):
        load(snap)



def test_an_arrow_file_shard_is_refused_on_the_rows_it_declares(tmp_path, monkeypatch):
    import pyarrow as pa

    snap = tmp_path / "snap"
    (snap / "data").mkdir(parents=True)
    table = pa.Table.from_pylist([{"id": str(i), "question": "Q?"} for i in range(30)])
    with pa.ipc.new_file(snap / "data" / "test-00000-of-00001.arrow", table.schema) as w:
        w.write_table(table, max_chunksize=10)
    (snap / "README.md").write_text("# replica\n")
    monkeypatch.setenv("VLMCHECK_MAX_ROWS", "20")
    with pytest.raises(DatasetFormError, match=r"test-00000-of-00001\.arrow: 30 rows, more than the 20"):
        load(snap)

def _xlsx(path: Path, cell: str, edit=None) -> Path:
    """A workbook whose question cell is ``cell`` (written into the sheet's XML as it is: openpyxl itself
    stops at Excel's 32,767 characters), its sheet's XML then passed through ``edit``."""
    import openpyxl
    import zipfile

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["image_path", "yes_or_no_question", "yes_or_no_ground_truth"])
    ws.append(["1.png", "CELLTEXT", "y"])
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    wb.save(buf)
    with zipfile.ZipFile(buf) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            data = src.read(info.filename).replace(b"CELLTEXT", cell.encode())
            if edit is not None and info.filename == "xl/worksheets/sheet1.xml":
                data = edit(data)
            out.writestr(info.filename, data)
    return path


def _vhtest(tmp_path: Path, cell: str = "Is it red?", edit=None) -> Path:
    bench = tmp_path / "Benchmark"
    _xlsx(bench / "YNQ_Benchmark" / "color.xlsx", cell, edit)
    (bench / "Images" / "color").mkdir(parents=True)
    (bench / "Images" / "color" / "1.png").write_bytes(_png())
    return bench


def test_a_workbook_with_a_huge_cell_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    """Before: a 297 kB workbook with one 300 MB cell took `data inspect` to 3.09 GB and past 300 s."""
    pytest.importorskip("openpyxl")
    bench = _vhtest(tmp_path, "Is it red? " + "x" * (3 << 20))
    monkeypatch.setenv("VLMCHECK_MAX_FIELD_MB", "1")
    tracemalloc.start()
    t = time.process_time()
    try:
        with pytest.raises(DatasetFormError, match=r"color\.xlsx: expected a VHTest workbook whose parts hold at "
                                                   r"most 1048576 bytes .*VLMCHECK_MAX_FIELD_MB"):
            load(bench)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000 and time.process_time() - t < 2


# ---------------------------------------------------------------- the CIFAR-10 release cache

def _cifar(tmp_path: Path, seed: int = 0) -> tuple[Path, np.ndarray]:
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir(exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, size=(4, 32, 32, 3), dtype=np.uint8)
    batch = {b"labels": [3, 8, 0, 1], b"data": pixels.transpose(0, 3, 1, 2).reshape(4, 3072),
             b"filenames": [b"a.png", b"b.png", b"c.png", b"d.png"]}
    (root / "test_batch").write_bytes(pickle.dumps(batch, protocol=4))
    names = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]
    (root / "batches.meta").write_bytes(pickle.dumps({b"label_names": names}, protocol=2))
    return tmp_path, pixels


def _pixels(path: str) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def test_data_inspect_writes_nothing_for_cifar(tmp_path):
    """Before: `data inspect` wrote the batch's PNGs into the release cache."""
    folder, _ = _cifar(tmp_path)
    run = _cli("data", "inspect", str(folder), env={"VLMCHECK_CACHE": str(tmp_path / "cache")})
    assert run.returncode == 0, run.stderr
    assert "distinct images: 4" in run.stdout + run.stderr
    assert _files(tmp_path / "cache") == 0


def test_a_rewritten_batch_with_the_same_size_and_time_is_never_served_stale(tmp_path, monkeypatch):
    """Before: the cache was keyed by path, size and mtime: 4 of 4 images served from the old pixels."""
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    folder, old = _cifar(tmp_path, seed=0)
    batch = folder / "cifar-10-batches-py" / "test_batch"
    first = load(folder)
    st = batch.stat()
    _, new = _cifar(tmp_path, seed=1)
    assert batch.stat().st_size == st.st_size
    os.utime(batch, ns=(st.st_atime_ns, st.st_mtime_ns))
    second = load(folder)
    stale = sum(np.array_equal(_pixels(r.images[0]), old[i]) for i, r in enumerate(second.records))
    fresh = sum(np.array_equal(_pixels(r.images[0]), new[i]) for i, r in enumerate(second.records))
    assert (stale, fresh) == (0, 4)
    assert [np.array_equal(_pixels(r.images[0]), old[i]) for i, r in enumerate(first.records)] == [True] * 4


def test_a_tampered_cached_png_is_rewritten_never_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    folder, pixels = _cifar(tmp_path)
    path = load(folder).records[0].images[0]
    Image.new("RGB", (32, 32), (255, 0, 0)).save(path, format="PNG")
    again = load(folder).records[0].images[0]
    assert np.array_equal(_pixels(again), pixels[0])


def test_a_manifest_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path):
    from vlmcheck.core.files import InputFileError, iter_jsonl_objects, read_text_input

    os.mkfifo(tmp_path / "m.jsonl")
    os.symlink("/dev/zero", tmp_path / "z.jsonl")
    for name in ("m.jsonl", "z.jsonl"):
        for read in (lambda p: list(iter_jsonl_objects(p)), read_text_input):
            with pytest.raises(InputFileError, match=rf"{name}: not a regular file"):
                read(tmp_path / name)


def _big_snapshot(folder: Path, n: int) -> Path:
    """A Hub snapshot of ``n`` rows: two distinct images first, then one image repeated (a small file, many rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "data").mkdir(parents=True)
    a, b, c = _png((1, 1, 1)), _png((2, 2, 2)), _png((3, 3, 3))
    images = pa.array([{"bytes": a, "path": None}, {"bytes": b, "path": None}]
                      + [{"bytes": c, "path": None}] * (n - 2))
    table = pa.table({"id": pa.array([str(i) for i in range(n)]), "image": images,
                      "question": pa.array(["Q?"] * n)})
    pq.write_table(table, folder / "data" / "test-00000-of-00001.parquet", row_group_size=4096)
    (folder / "README.md").write_text("# replica\n")
    return folder


def test_limit_reads_the_first_rows_of_a_shard_not_all_of_them(tmp_path, monkeypatch):
    """Before: every row became a record before --limit applied (10^6 rows: 616 MB for `describe --limit 2`)."""
    from vlmcheck.core.dataset_files import first_rows
    from vlmcheck.methods.records import load_images

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    snap = _big_snapshot(tmp_path / "snap", 200_000)
    tracemalloc.start()
    t = time.process_time()
    try:
        with first_rows(2):
            items = load_images(str(snap))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    cpu = time.process_time() - t
    assert len(items) == 2
    assert peak < 20_000_000, peak  # whole: ~200 MB of records
    assert cpu < 1.5, cpu
    with first_rows(3):  # the first 3 rows hold 3 images, the rest one more: still 3 items, from 3 rows
        assert len(load_images(str(snap))) == 3


def test_limit_reads_the_whole_file_where_the_first_rows_hold_too_few_images(tmp_path, monkeypatch):
    from vlmcheck.core.dataset_files import first_rows
    from vlmcheck.methods.records import load_images

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    rows = [{"index": i, "image": base64_png() if i < 3 else __import__("base64").b64encode(_png((i, 0, 0))).decode(),
             "question": "Q?", "answer": "A"} for i in range(6)]
    tsv = _tsv(tmp_path / "x.tsv", rows)  # rows 0-2 share an image; rows 3-5 each their own
    with first_rows(3):
        cut = load_images(str(tsv))  # 3 rows hold 1 image: read again whole, as without --limit
    assert [i.path for i in cut] == [i.path for i in load_images(str(tsv))] and len(cut) == 4


def test_data_inspect_reads_a_file_outside_only_with_allow_outside(tmp_path):
    root = _lamm(tmp_path)
    (tmp_path / "elsewhere.json").write_text(json.dumps([{"image": "imgs/1.png", "query": "PRIVATE TEXT"}]))
    os.symlink(tmp_path / "elsewhere.json", root / "meta_file" / "VQA_X.json")
    refused = _cli("data", "inspect", str(root))
    assert refused.returncode == 2 and "--allow-outside" in refused.stderr and "PRIVATE" not in refused.stdout
    allowed = _cli("data", "inspect", str(root), "--allow-outside")
    assert allowed.returncode == 0 and "PRIVATE TEXT" in allowed.stdout + allowed.stderr


def test_a_spec_that_cannot_be_parsed_never_shows_its_key():
    from vlmcheck.core.spec import ModelSpec, SpecError

    for text in (f"openai:?api_key={KEY}", f"nocolon?token={KEY}", f"openai:m@http://u:{KEY}@h/v1,"):
        with pytest.raises(SpecError) as err:
            ModelSpec.parse(text)
        assert KEY[:12] not in str(err.value), str(err.value)


def test_a_sweep_with_a_limit_reads_the_first_rows_only(tmp_path, monkeypatch):
    """A sweep's `options: limit` bounds reading as the CLI's --limit does, for a method whose samples follow
    the dataset's rows."""
    from vlmcheck.sweep import run_sweep

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    _big_snapshot(tmp_path / "snap", 50_000)
    (tmp_path / "sweep.yaml").write_text("out: out\nmodels:\n  - ref:photo\nmethods:\n  - method: describe\n"
                                         "    data: snap\noptions:\n  limit: 2\n")
    seen = []

    def execute(task, folder, options):
        seen.append((len(task.items), options.limit))
        return {"task": "describe", "metrics": {}, "counts": {"samples": 2, "failed": 0}}

    t = time.process_time()
    run_sweep(tmp_path / "sweep.yaml", progress=False, execute=execute, report=False)
    assert seen == [(2, 2)]
    assert time.process_time() - t < 5  # the model's import and 2 rows, not 50,000 records


def test_a_snapshot_in_the_hugging_face_cache_reads_through_its_blob_links(tmp_path, monkeypatch):
    """The Hub cache's snapshot files are links to ../../blobs/: inside the repository's folder, so read; a
    shard linked out of the repository is refused."""
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    repo = tmp_path / "hub" / "datasets--org--name"
    src = _big_snapshot(tmp_path / "src", 4)
    (repo / "blobs").mkdir(parents=True)
    snap = repo / "snapshots" / "abc123"
    (snap / "data").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    for rel in ("README.md", "data/test-00000-of-00001.parquet"):
        blob = repo / "blobs" / rel.replace("/", "_")
        blob.write_bytes((src / rel).read_bytes())
        os.symlink(os.path.relpath(blob, (snap / rel).parent), snap / rel)
    assert len(load(snap).records) == 4
    assert len(load("hfds:org/name").records) == 4
    outside = tmp_path / "outside.parquet"
    outside.write_bytes((src / "data/test-00000-of-00001.parquet").read_bytes())
    (snap / "data" / "test-00000-of-00001.parquet").unlink()
    os.symlink(outside, snap / "data" / "test-00000-of-00001.parquet")
    with pytest.raises(DatasetFormError, match="outside the dataset folder"):
        load(snap)
