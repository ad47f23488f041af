"""Exports in bounded memory (issue 37 item 1): a run's sample table is written in chunks with one schema for the
whole table, and reads back as the in-memory table pandas builds from the same rows."""

import json

import numpy as np
import pandas as pd
import pytest

from vlmcheck import export
from vlmcheck.export import export_runs, iter_sample_rows


def _run(folder, records):
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"task": "describe", "spec": {"task_spec": {"vlm": "m"}},
                                                     "counts": {}, "metrics": {}}))
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def _records(n):
    out = []
    for i in range(n):
        result = {"answer": f"text {i}", "n": i, "score": i / 3, "ok": i % 2 == 0,
                  "mixed": i if i % 3 else f"s{i}",  # a number in some rows, text in others
                  "late": None if i < 15 else i * 1.5,  # absent (null) for the first chunks
                  "tags": [i, i + 1]}
        if i % 4 == 0:
            result["sometimes"] = "here"
        rec = {"sample_id": f"id{i}", "status": "done", "result": result}
        if i == 5:
            rec = {"sample_id": "id5", "status": "error", "error": {"type": "bad_image", "message": "truncated"}}
        out.append(rec)
    return out


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_a_table_written_in_chunks_reads_back_as_the_in_memory_one(tmp_path, monkeypatch, fmt):
    monkeypatch.setattr(export, "CHUNK_ROWS", 4)  # 23 rows: six chunks, the last one short
    run = _run(tmp_path / "r", _records(23))
    (path,) = [p for p in export_runs([run], tmp_path / "out", fmt) if p.name == f"{export.table_names([run])[0]}.{fmt}"]
    ref = pd.DataFrame(list(iter_sample_rows(run)))
    back = (pd.read_parquet(path) if fmt == "parquet" else pd.read_csv(path) if fmt == "csv"
            else pd.read_json(path, lines=True))
    assert list(back.columns) == list(ref.columns) and len(back) == 23
    assert back["sample_id"].tolist() == [f"id{i}" for i in range(23)]
    assert np.allclose(back["score"].astype(float), ref["score"].astype(float), equal_nan=True)
    assert back["late"].isna().sum() == 15 and back["late"].iloc[20] == 30.0
    assert back["error_type"].iloc[5] == "bad_image" and back["status"].iloc[5] == "error"
    assert back["sometimes"].isna().sum() == 23 - 6  # rows 0, 4, 8, 12, 16, 20 only
    if fmt == "parquet":
        # one schema for every chunk: a column of mixed types is JSON text throughout, as before
        assert back["mixed"].tolist()[:4] == ["s0", "1", "2", "s3"]  # text stays, numbers as JSON
        assert back["ok"].dropna().tolist() == [i % 2 == 0 for i in range(23) if i != 5]
        assert str(back["n"].dtype) == "float64"  # an int column with a null (the failed sample) reads as float


def test_export_reads_samples_a_line_at_a_time(tmp_path, monkeypatch):
    """No whole-file read: the rows come from the file as it is read, twice (columns, then the chunks)."""
    run = _run(tmp_path / "r", _records(10))
    opened = []
    real = export.JsonlRecords.__iter__

    def counting(self):
        opened.append(self.path.name)
        return real(self)

    monkeypatch.setattr(export.JsonlRecords, "__iter__", counting)
    monkeypatch.setattr(export, "read_text_input", lambda *a, **k: pytest.fail("the whole file was read"))
    export_runs([run], tmp_path / "out", "parquet")
    assert opened.count("samples.jsonl") >= 2


def test_a_damaged_samples_file_is_one_sentence_naming_the_record_and_the_fix(tmp_path):
    from vlmcheck.core.files import InputFileError

    run = _run(tmp_path / "r", _records(3))
    with open(run / "samples.jsonl", "a") as fh:
        fh.write('{"sample_id": "x", "status": "do\n')  # a line cut short
    with pytest.raises(InputFileError, match=r"record 4 is not JSON .*vlmcheck resume"):
        export_runs([run], tmp_path / "out", "parquet")
    (run / "samples.jsonl").write_bytes(b'{"sample_id": "\xff"}\n')
    with pytest.raises(InputFileError, match="not UTF-8 text"):
        export_runs([run], tmp_path / "out", "csv")
