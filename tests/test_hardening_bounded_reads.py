"""Work bounded by what was asked: ``data inspect --rows N`` and ``--limit N`` read the rows N samples need, on
every route (a Hub parquet shard, a VLMEvalKit TSV, a JSON Lines manifest or pairs file) and for every method
command whose samples follow the dataset's rows; more rows only where those give fewer than N samples.

Each route's file holds many rows (cheap to make: one small image repeated, or a reference to row 0); the
commands run in-process with the run itself left out (``execute`` replaced), under tracemalloc and a CPU bound.
Before: every row became a record before ``--limit`` applied (10^6 rows of a 130 kB shard: 700 MB, 60 s)."""

from __future__ import annotations

import base64
import io
import json
import time
import tracemalloc
from pathlib import Path

import pytest
from conftest import HalfThenFull
from PIL import Image
from typer.testing import CliRunner

from vlmcheck.cli import _common as C
from vlmcheck.cli import app

ROWS = 100_000
PEAK = 25_000_000  # bytes; reading every row: 100-250 MB
CPU = 1.5  # seconds; reading every row: 10-60 s


def _png(colour=(10, 20, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> dict[str, Path]:
    """One file per route, each of ROWS rows: a Hub snapshot, a TSV, a describe manifest, a CAST pairs file;
    the methods and reference models imported before anything is measured."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import vlmcheck.cli.cast, vlmcheck.cli.chef, vlmcheck.cli.data, vlmcheck.cli.describe, vlmcheck.cli.vhx  # noqa: E401,F401
    import vlmcheck.methods.cast, vlmcheck.methods.chef, vlmcheck.methods.describe  # noqa: E401,F401
    import vlmcheck.methods.vhexpansion  # noqa: F401
    from vlmcheck.core.spec import load_model

    load_model("ref:describer", "vlm"), load_model("ref:photo", "vlm")

    root = tmp_path_factory.mktemp("big")
    snap = root / "snap"
    (snap / "data").mkdir(parents=True)
    table = pa.table({"image": pa.repeat(pa.scalar({"bytes": _png(), "path": None}), ROWS),
                      "question": pa.repeat(pa.scalar("Is it red?"), ROWS),
                      "answer": pa.repeat(pa.scalar("yes"), ROWS)})
    pq.write_table(table, snap / "data" / "test-00000-of-00001.parquet", row_group_size=8192)
    (snap / "README.md").write_text("# replica\n")
    tsv = root / "cases.tsv"
    first = base64.b64encode(_png()).decode()
    tsv.write_text("index\timage\tquestion\tanswer\n" + f"0\t{first}\tIs it red?\tyes\n"
                   + "".join(f"{i}\t0\tIs it red?\tyes\n" for i in range(1, ROWS)))  # image: row 0's
    (root / "a.png").write_bytes(_png())
    manifest = root / "manifest.jsonl"
    manifest.write_text("".join(f'{{"id": "{i}", "image": "a.png"}}\n' for i in range(ROWS)))
    pairs = root / "pairs.jsonl"
    side = '{{"image": "a.png", "description": "a {} square"}}'
    pairs.write_text("".join(f'{{"id": "p{i}", "a": {side.format("red")}, "b": {side.format("blue")}}}\n'
                             for i in range(ROWS)))
    return {"snap": snap, "tsv": tsv, "manifest": manifest, "pairs": pairs}


def _bounded(args: list[str], monkeypatch) -> tuple[object, dict, int, float]:
    """(CLI result, what the run would have got, tracemalloc peak, CPU seconds) of ``vlmcheck ARGS`` run
    in-process with the run itself replaced."""
    seen: dict = {}

    def execute(task, out, run, *a, **k):
        seen["samples"] = [s.id for s in task.samples()]
        return None  # as --dry-run: the command prints nothing more

    monkeypatch.setattr(C, "execute", execute)
    runner = CliRunner()
    tracemalloc.start()
    t = time.process_time()
    try:
        out = runner.invoke(app, args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    cpu = time.process_time() - t
    assert out.exit_code == 0, out.output
    return out, seen, peak, cpu


@pytest.mark.slow  # the files' making and the methods' imports: 3-10 s
@pytest.mark.timeout(60)
@pytest.mark.parametrize("route", ["snap", "tsv"])
def test_data_inspect_rows_reads_those_rows_only(big, route, monkeypatch, tmp_path):
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    out, _, peak, cpu = _bounded(["data", "inspect", str(big[route]), "--rows", "2", "--json"], monkeypatch)
    info = json.loads(out.stdout)
    assert info["items"] == 2 and len(info["rows"]) == 2
    assert any("--all reads every row" in n for n in info["notes"])
    assert peak < PEAK, peak
    assert cpu < CPU, cpu
    assert not (tmp_path / "cache").exists()  # inspect writes nothing


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("route,command", [
    ("snap", ["vhx", "run", "--vlm", "ref:describer", "--cases"]),
    ("tsv", ["vhx", "run", "--vlm", "ref:describer", "--cases"]),
    ("snap", ["chef", "run", "--recipe", "hallucination", "--inferencer", "direct", "--vlm", "ref:describer",
              "--data"]),
    ("tsv", ["chef", "run", "--recipe", "hallucination", "--inferencer", "direct", "--vlm", "ref:describer",
             "--data"]),
    ("manifest", ["describe", "--vlm", "ref:photo", "--data"]),
    ("pairs", ["cast", "run", "--vlm", "ref:describer", "--pairs"]),
])
def test_limit_reads_the_rows_its_samples_need_for_every_method(big, route, command, monkeypatch, tmp_path):
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    _, seen, peak, cpu = _bounded([*command, str(big[route]), "--limit", "2", "--out", str(tmp_path / "run")],
                                  monkeypatch)
    assert len(seen["samples"]) >= 2
    assert peak < PEAK, peak
    assert cpu < CPU, cpu


def _tsv(path: Path, rows: list[dict]) -> Path:
    cols = list(rows[0])
    path.write_text("\t".join(cols) + "\n" + "".join("\t".join(str(r[c]) for c in cols) + "\n" for r in rows))
    return path


def test_a_limit_widens_the_rows_read_until_its_samples_are_whole(tmp_path, monkeypatch):
    """Rows a method cannot use, or a pair whose second row comes later, widen the window (N, 2N, 4N, ... rows)
    rather than give other samples than a whole read: the first N samples are the whole read's first N, read
    from far fewer rows than the file holds."""
    from vlmcheck.core.dataset_files import first_rows
    from vlmcheck.methods import records
    from vlmcheck.methods.cast import load_pairs
    from vlmcheck.methods.vhx_cases import load_cases

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    img = base64.b64encode(_png()).decode()
    # vhx: the first 5 rows have no question (left out), then 1000 usable ones
    rows = [{"index": i, "image": img if i == 0 else 0, "question": "" if i < 5 else f"Is {i} red?",
             "answer": "yes"} for i in range(1005)]
    cases_tsv = _tsv(tmp_path / "cases.tsv", rows)
    # cast: pair g0's second row comes after g1's and g2's rows; then 1000 more pairs
    order = ["g0", "g1", "g1", "g2", "g2", "g0"] + [f"h{k // 2}" for k in range(2000)]
    rows = [{"index": i, "image": img if i == 0 else 0, "description": f"scene {i}", "group": g}
            for i, g in enumerate(order)]
    pairs_tsv = _tsv(tmp_path / "pairs.tsv", rows)

    held = []
    real = records.dataset_for

    def spy(*a, **k):
        ds = real(*a, **k)
        held.append(len(ds.records) if ds is not None else None)
        return ds

    monkeypatch.setattr(records, "dataset_for", spy)
    whole_cases, whole_pairs = load_cases(str(cases_tsv)), load_pairs(str(pairs_tsv))
    held.clear()
    with first_rows(3):
        cases, got = records.read_items(load_cases, str(cases_tsv))
    assert [c.id for c in cases[:3]] == [c.id for c in whole_cases[:3]] == ["5", "6", "7"]
    assert max(held) <= 24 and len(got) == 1  # 3, 6, 12 rows: not the 1005; one dataset said read
    held.clear()
    with first_rows(2):
        pairs = load_pairs(str(pairs_tsv))
    assert [p["id"] for p in pairs[:2]] == [p["id"] for p in whole_pairs[:2]] == ["g0", "g1"]
    assert (pairs[0]["a"]["id"], pairs[0]["b"]["id"]) == (whole_pairs[0]["a"]["id"], whole_pairs[0]["b"]["id"])
    assert max(held) <= 16, held  # 2, 4, 8 rows: not the 2006


def test_which_chef_scenarios_follow_their_rows():
    """A scenario of one item per row under the standard instruction reads the first rows; a classification
    (its options pooled from every row's label), retrieval, turns or in-context examples read every row."""
    from vlmcheck.methods.chef import ChefTask, resolve_recipe

    follows = {name: ChefTask.samples_follow_rows({"recipe": resolve_recipe(name).model_dump()})
               for name in ("hallucination", "mmbench", "scienceqa", "cifar10", "flickr30k", "icl", "fsc147")}
    assert follows == {"hallucination": True, "mmbench": True, "scienceqa": True, "cifar10": False,
                       "flickr30k": False, "icl": False, "fsc147": False}


# ---------------------------------------------------------------- the CIFAR-10 release cache


def _cifar(tmp_path: Path, n: int = 6) -> Path:
    import pickle

    import numpy as np

    root = tmp_path / "cifar-10-batches-py"
    root.mkdir(exist_ok=True)
    pixels = np.random.default_rng(0).integers(0, 256, size=(n, 3072), dtype=np.uint8)
    (root / "test_batch").write_bytes(pickle.dumps({b"labels": [i % 10 for i in range(n)], b"data": pixels,
                                                     b"filenames": [b"x.png"] * n}, protocol=4))
    names = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]
    (root / "batches.meta").write_bytes(pickle.dumps({b"label_names": names}, protocol=2))
    return tmp_path


def test_a_cifar_reuse_encodes_no_image_and_still_checks_each_file(tmp_path, monkeypatch):
    """Before: every reuse encoded every image as PNG again to find its file (10,000 images: ~5-10 s); now a
    reuse reads each cached file and checks its SHA-256, and encodes only a file that fails the check."""
    from PIL import Image

    from vlmcheck.datasets import cifar10, load

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    folder = _cifar(tmp_path)
    first = load(folder)
    encoded, real = [], cifar10._png
    monkeypatch.setattr(cifar10, "_png", lambda px: encoded.append(1) or real(px))
    again = load(folder)
    assert [r.images for r in again.records] == [r.images for r in first.records] and encoded == []
    Image.new("RGB", (32, 32), (255, 0, 0)).save(first.records[2].images[0], format="PNG")  # tampered
    third = load(folder)
    assert len(encoded) == 1 and third.records[2].images == first.records[2].images
    with Image.open(third.records[2].images[0]) as im:
        assert im.getpixel((0, 0)) != (255, 0, 0)  # written again from the batch's pixels


def test_a_full_cache_during_cifar_writes_leaves_no_temp_file_and_names_the_cache(tmp_path, monkeypatch):
    """Before: "resume the run" where no run existed, and .tmp files left in the cache."""

    from vlmcheck.core import files
    from vlmcheck.datasets import DatasetFormError, load

    cache = tmp_path / "cache"
    monkeypatch.setenv("VLMCHECK_CACHE", str(cache))
    folder = _cifar(tmp_path)
    real, writes = files.os.fdopen, [0]

    def fdopen(fd, mode="r", *a, **k):
        fh = real(fd, mode, *a, **k)
        writes[0] += "w" in mode
        return HalfThenFull(fh) if "w" in mode and writes[0] == 3 else fh  # the third image: the disk fills

    monkeypatch.setattr(files.os, "fdopen", fdopen)
    with pytest.raises(DatasetFormError) as err:
        load(folder)
    monkeypatch.undo()
    message = str(err.value)
    assert str(cache / "releases" / "cifar10") in message and "No space left on device" in message
    assert "VLMCHECK_CACHE" in message and "resume" not in message
    assert [p.name for p in cache.rglob("*") if p.name.endswith(".tmp")] == []
    assert len([p for p in cache.rglob("*.png")]) == 2  # the two written before the disk filled, whole


# ---------------------------------------------------------------- a TSV's huge field


def test_a_huge_base64_field_costs_under_three_times_its_size(tmp_path, monkeypatch):
    """Before: csv's field buffer (four bytes a character, doubled as it grows) took a base64 field to ~7.7
    times its size (a 53 MB field: 410 MB)."""
    import os

    from vlmcheck.datasets import load

    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    raw = _png() + os.urandom(6 << 20)  # stored as it is: never decoded as pixels by the reader
    tsv = tmp_path / "big.tsv"
    tsv.write_text("index\timage\tquestion\tanswer\n" + f'0\t{base64.b64encode(raw).decode()}\tSay "hi"?\tyes\n')
    del raw
    size = tsv.stat().st_size
    small = tmp_path / "small.tsv"
    small.write_text(f"index\timage\tquestion\tanswer\n0\t{base64.b64encode(_png()).decode()}\tQ?\tyes\n")
    load(str(small))  # the readers' imports, before the measure
    tracemalloc.start()
    try:
        ds = load(str(tsv))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(ds.records) == 1 and ds.records[0].question == 'Say "hi"?'
    assert Path(ds.records[0].images[0]).stat().st_size == (6 << 20) + len(_png())
    assert peak < 3.2 * size, peak / size


def test_tsv_rows_are_the_rows_csv_reads():
    """TsvRows against csv.DictReader on random TSVs of quotes, tabs, CR, LF and CR LF (blank lines, quoted
    fields across tabs and lines, text after a closing quote, a byte-order mark)."""
    import csv
    import random

    from vlmcheck.datasets.tsv_rows import TsvRows

    rng = random.Random(0)
    alphabet = ["a", '"', "\t", "\n", "\r\n", "b", '""', " ", "\r", "é"]
    for _ in range(3000):
        text = ("\ufeff" if rng.random() < 0.1 else "") + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4))) \
            + "index\tq\ta\n" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        data = text.encode()
        try:
            ref = csv.DictReader(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline=""),
                                 delimiter="\t")
            want = (ref.fieldnames, list(ref))
        except csv.Error:
            want = "error"
        try:
            mine = TsvRows(io.BytesIO(data), 1 << 20)
            got = (mine.fieldnames, list(mine))
        except csv.Error:
            got = "error"
        assert got == want, repr(text)


@pytest.mark.slow  # a real run of 2 samples first: ~5 s
@pytest.mark.timeout(120)
def test_a_resume_reads_the_rows_its_recorded_limit_needs(tmp_path, monkeypatch):
    """`vlmcheck resume` rebuilds the task under the run's recorded --limit: before, it read every row."""
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.png").write_bytes(_png())
    (tmp_path / "manifest.jsonl").write_text("".join(f'{{"id": "{i}", "image": "a.png"}}\n' for i in range(200_000)))
    first = CliRunner().invoke(app, ["describe", "--vlm", "ref:photo", "--data", "manifest.jsonl", "--limit", "2",
                                     "--out", "run"])
    assert first.exit_code == 0, first.output
    tracemalloc.start()
    t = time.process_time()
    try:
        again = CliRunner().invoke(app, ["resume", "run"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    cpu = time.process_time() - t
    assert again.exit_code == 0 and "done 2/2 samples" in again.output, again.output
    assert peak < PEAK, peak  # every row: ~60 MB
    assert cpu < CPU, cpu
