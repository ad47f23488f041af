"""Outputs in bounded memory (issue 37 item 1): samples.jsonl is written from a cursor in the run's order and
describe's summary is folded one sample at a time; bench/outputs.py measures the memory at 1M samples."""

import json
import math
import sqlite3

from vlmcheck import RunOptions, run_task
from vlmcheck.methods.describe import DescribeSpec, DescribeSummary, DescribeTask
from vlmcheck.run import runner
from vlmcheck.store.db import RunStore

from conftest import distinct_images


def _lines(folder):
    return [json.loads(x) for x in (folder / "samples.jsonl").read_text().splitlines()]


def test_samples_jsonl_is_in_the_runs_order_also_when_the_store_numbered_them_otherwise(tmp_path, fake_server):
    data = distinct_images(tmp_path / "imgs", 5)
    task = DescribeTask(DescribeSpec(vlm=f"openai:fake@{fake_server.base_url}", data=str(data)))
    run_task(task, tmp_path / "run", RunOptions(progress=False, report=False, preflight=False))
    want = [s.id for s in runner.select_samples(task, RunOptions())]
    assert [r["sample_id"] for r in _lines(tmp_path / "run")] == want
    before = (tmp_path / "run" / "samples.jsonl").read_text()
    # a store whose seq runs backwards (renumbered samples): the records still come out in the run's order
    with sqlite3.connect(tmp_path / "run" / "store.sqlite") as db:
        db.execute("UPDATE samples SET seq = 100 - seq")
    store = RunStore(tmp_path / "run", existing=True)
    try:
        results = runner.write_outputs(store, task, runner.select_samples(task, RunOptions()))
    finally:
        store.close()
    rows = _lines(tmp_path / "run")
    assert [r["sample_id"] for r in rows] == want and [r["seq"] for r in rows] == [100 - i for i in range(5)]
    assert [r["result"] for r in rows] == [r["result"] for r in map(json.loads, before.splitlines())]
    assert results["counts"] == {"samples": 5, "done": 5, "failed": 0, "pending": 0, "errors_by_type": {},
                                 "failure_kinds": {}}


def test_describes_folded_summary_by_hand():
    folder = DescribeSummary()
    for status, answer in [("ok", "a red cat"), ("refusal", "I can not help"), ("ok", "x")]:
        folder.add({"result": {"answer_status": status, "answer": answer}})
    out = folder.result()
    assert out["n"] == 3 and out["answer_status"] == {"ok": 2, "refusal": 1}
    assert out["mean_answer_words"] == (3 + 4 + 1) / 3
    # share answered 2 of 3, clustered Wilson at z = 1.959964 with each image its own cluster of one answer: no
    # clustering, design effect 1 (issue 50 item 4), so Wilson on n = 3 answers, 2 of them right
    z, p, n = 1.959964, 2 / 3, 3
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    h = out["headline"]
    assert h["value"] == 2 / 3
    assert abs(h["ci95"][0] - (centre - half)) < 1e-5 and abs(h["ci95"][1] - (centre + half)) < 1e-5
    # with keywords: the mean recall is the headline
    folder = DescribeSummary()
    for recall in (1.0, 0.5, 0.0, 0.5):
        folder.add({"result": {"answer_status": "ok", "answer": "w", "keyword_recall": recall}})
    out = folder.result()
    assert out["keyword_recall"]["mean"] == 0.5 and out["keyword_recall"]["n"] == 4
    assert out["headline"]["name"] == "keyword recall"
