"""Malformed dataset files, one reader at a time: truncated, wrong types, deep nesting, huge claims, cycles.
Each is read in bounded time and memory and ends in a Dataset (its bad rows skipped with a reason) or one
sentence naming the file, never a traceback; on the command line, exit 2 and that sentence."""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlmcheck.datasets import DatasetFormError, load

DEEP = 100_000
NAMES = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]


def _png(colour=(10, 20, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


# ---------------------------------------------------------------- builders: (path to read, file the sentence names)

def _cifar(tmp: Path, batch: bytes | None = None, meta: bytes | None = None) -> tuple[Path, str]:
    root = tmp / "cifar-10-batches-py"
    root.mkdir()
    (root / "batches.meta").write_bytes(meta if meta is not None else pickle.dumps({b"label_names": NAMES}))
    (root / "test_batch").write_bytes(batch if batch is not None else b"")
    return tmp, "test_batch" if meta is None else "batches.meta"


def _batch(fields: dict | None = None) -> bytes:
    data = np.zeros((2, 3072), dtype=np.uint8)
    return pickle.dumps({b"data": data, b"labels": [1, 2], b"filenames": [b"a", b"b"], **(fields or {})},
                        protocol=4)


def _lamm(tmp: Path, meta: str) -> tuple[Path, str]:
    root = tmp / "LAMM"
    (root / "meta_file").mkdir(parents=True)
    (root / "imgs").mkdir()
    (root / "imgs" / "1.png").write_bytes(_png())
    (root / "meta_file" / "VQA_X.json").write_text(meta)
    return root, "VQA_X.json"


def _tsv(tmp: Path, image: str, column: str = "image") -> tuple[Path, str]:
    path = tmp / "MMBench.tsv"
    ok = __import__("base64").b64encode(_png()).decode()
    path.write_text(f"index\t{column}\tquestion\tanswer\n0\t{image}\tQ?\tA\n1\t{ok}\tQ?\tA\n")
    return path, "MMBench.tsv"


def _xlsx(tmp: Path, sheet_edit) -> tuple[Path, str]:
    import openpyxl

    bench = tmp / "Benchmark"
    (bench / "YNQ_Benchmark").mkdir(parents=True)
    (bench / "Images" / "color").mkdir(parents=True)
    (bench / "Images" / "color" / "1.png").write_bytes(_png())
    wb = openpyxl.Workbook()
    wb.active.append(["image_path", "yes_or_no_question", "yes_or_no_ground_truth"])
    wb.active.append(["1.png", "Is it red?", "y"])
    buf = io.BytesIO()
    wb.save(buf)
    with zipfile.ZipFile(buf) as src, zipfile.ZipFile(bench / "YNQ_Benchmark" / "color.xlsx", "w") as out:
        for info in src.infolist():
            data = src.read(info.filename)
            out.writestr(info.filename, sheet_edit(data) if info.filename == "xl/worksheets/sheet1.xml" else data)
    return bench, "color.xlsx"


LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
          + b"".join(b'<!ENTITY lol%d "%s">' % (i, b"&lol%d;" % (i - 1) * 10 if i > 1 else b"&lol;" * 10)
                     for i in range(1, 10)) + b"]>")
XXE = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'


def _doctype(prefix: bytes, entity: bytes):
    def edit(xml: bytes) -> bytes:
        body = xml.split(b"?>", 1)[1] if xml.startswith(b"<?xml") else xml
        return prefix + body.replace(b"1.png", entity, 1)
    return edit


def _omni(tmp: Path, tree: dict | str) -> tuple[Path, str]:
    root = tmp / "omni"
    (root / "annotation" / "mammal" / "meta").mkdir(parents=True)
    (root / "trainid2name.json").write_text(json.dumps({"mammal": {"0": "cat"}}))
    (root / "annotation" / "mammal" / "meta" / "test.txt").write_text("test/images/a.jpg 0\n")
    (root / "data" / "mammal" / "images").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(root / "data" / "mammal" / "images" / "a.jpg")
    (tmp / "bamboo.json").write_text(tree if isinstance(tree, str) else json.dumps(tree))
    return root, "bamboo.json"


def _shard(tmp: Path, cut: int | None = None, rows: list[dict] | None = None) -> tuple[Path, str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    snap = tmp / "snap"
    (snap / "data").mkdir(parents=True)
    shard = snap / "data" / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows or [{"id": "a", "image": {"bytes": _png(), "path": None},
                                                  "question": "Q?"}] * 3), shard)
    if cut is not None:
        shard.write_bytes(shard.read_bytes()[:cut])
    (snap / "README.md").write_text("---\nconfigs: [[[[[[[[[[]]]]]]]]]]\n---\n")
    return snap, "test-00000-of-00001.parquet"


# a cycle: cat's father is feline, feline's father is cat
CYCLE = {"id2name": {"c": ["cat"], "f": ["feline"]}, "father2child": {"f": ["c"], "c": ["f"]},
         "child2father": {"c": ["f"], "f": ["c"]}}

CASES = {
    # CIFAR-10 batches
    "cifar-claims-2^62-bytes": lambda t: _cifar(t, b"\x80\x04\x8e" + struct.pack("<Q", 1 << 62) + b"abc"),
    "cifar-truncated": lambda t: _cifar(t, _batch()[:200]),
    "cifar-labels-a-string": lambda t: _cifar(t, _batch({b"labels": "ab"})),
    "cifar-labels-odd-types": lambda t: _cifar(t, _batch({b"labels": [None, [1]]})),
    "cifar-labels-huge": lambda t: _cifar(t, _batch({b"labels": [10 ** 30, -1]})),
    "cifar-data-not-uint8": lambda t: _cifar(t, _batch({b"data": np.zeros((2, 3072), dtype=np.float64)})),
    "cifar-filenames-an-int": lambda t: _cifar(t, _batch({b"filenames": 7})),
    "cifar-label-names-an-int": lambda t: _cifar(t, _batch(), pickle.dumps({b"label_names": 5})),
    "cifar-not-a-dict": lambda t: _cifar(t, pickle.dumps([1, 2, 3])),
    # VLMEvalKit TSV image lists
    "tsv-list-of-ints": lambda t: _tsv(t, "[" + ", ".join(["1234567"] * 12) + "]"),
    "tsv-list-unterminated": lambda t: _tsv(t, "['" + "a" * 100),
    "tsv-list-nested-deep": lambda t: _tsv(t, "[" * 5000 + "]" * 5000),
    "tsv-image-path-ints": lambda t: _tsv(t, "[1, 2]", "image_path"),
    "tsv-image-path-deep": lambda t: _tsv(t, "[" * 5000 + "]" * 5000, "image_path"),
    "tsv-not-utf8": lambda t: (lambda p: (p[0].write_bytes(b"index\timage\n0\t\xff\xfe\xfa\n"), p)[1])(_tsv(t, "")),
    # workbooks
    "xlsx-billion-laughs": lambda t: _xlsx(t, _doctype(LAUGHS, b"&lol9;")),
    "xlsx-xxe": lambda t: _xlsx(t, _doctype(XXE, b"&xxe;")),
    "xlsx-truncated": lambda t: (lambda p: ((p[0] / "YNQ_Benchmark" / "color.xlsx").write_bytes(
        (p[0] / "YNQ_Benchmark" / "color.xlsx").read_bytes()[:-400]), p)[1])(_xlsx(t, lambda x: x)),
    # Hub shards
    "hub-truncated-shard": lambda t: _shard(t, cut=300),
    "hub-image-cells-wrong-types": lambda t: _shard(t, rows=[{"id": "a", "image": {"bytes": None, "path": "../../x"},
                                                              "question": "Q?"},
                                                             {"id": "b", "image": {"bytes": b"notanimage", "path": None},
                                                              "question": "Q?"}]),
    # JSON
    "lamm-nested-100000-deep": lambda t: _lamm(t, "[" * DEEP + "]" * DEEP),
    "lamm-items-wrong-types": lambda t: _lamm(t, json.dumps([{"image": 5}, {"image": ["x"]}, 7, None])),
    "lamm-image-name-too-long": lambda t: _lamm(t, json.dumps([{"image": "a" * 5000}])),
    "lamm-choices-wrong-types": lambda t: _lamm(t, json.dumps([{"image": "imgs/1.png", "gt_choices": 5,
                                                                "gt_choice": "x", "sentences": 3}])),
    "bamboo-nested-100000-deep": lambda t: _omni(t, '{"id2name": ' + "[" * DEEP + "]" * DEEP + "}"),
    "bamboo-wrong-types": lambda t: _omni(t, {"id2name": {"c": 5}, "father2child": {}, "child2father": {}}),
    "bamboo-cycle": lambda t: _omni(t, CYCLE),
}


def _read(name: str, path: Path):
    if name.startswith("bamboo"):
        return load(path, tree=str(path.parent / "bamboo.json"), levels="100000000" if "cycle" in name else "2")
    return load(path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_malformed_file_is_a_dataset_or_one_sentence_naming_it(tmp_path, monkeypatch, name):
    monkeypatch.setenv("VLMCHECK_CACHE", str(tmp_path / "cache"))
    path, file = CASES[name](tmp_path)
    tracemalloc.start()
    t = time.process_time()
    try:
        try:
            ds = _read(name, path)
        except DatasetFormError as exc:
            msg = str(exc)
            assert (file in msg or msg.startswith(str(path))) and "\n" not in msg and "Traceback" not in msg, msg
        else:
            assert all(not r.images or r.images[0] for r in ds.records)
            assert "root:" not in json.dumps([r.question for r in ds.records])  # no XXE read /etc/passwd
            for r in ds.records:  # a cycle never gives a chain that repeats itself
                chain = r.meta.get("chain") or []
                assert len(chain) == len(set(chain)), chain
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.process_time() - t < 10
    assert peak < 64 << 20, peak


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cifar-claims-2^62-bytes", "lamm-nested-100000-deep", "xlsx-billion-laughs"])
def test_data_inspect_on_a_malformed_file_exits_2_in_one_sentence(tmp_path, name):
    path, file = CASES[name](tmp_path)
    run = subprocess.run([sys.executable, "-m", "vlmcheck.cli", "data", "inspect", str(path)], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "VLMCHECK_CACHE": str(tmp_path / "cache")})
    assert run.returncode == 2, run.stderr[-1000:]
    assert file in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
