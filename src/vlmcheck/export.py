"""Runs as tidy tables, for pandas and every tool that reads Parquet or CSV (docs/usage.md, "Results in pandas").

Lists become JSON text; embeddings are left out (they stay in samples.jsonl); failed samples are rows too (``status``
error, the error's type and message).  Sample, metric and run tables share one flattening and one streaming writer.
"""

from __future__ import annotations

import json
import os
import re
from itertools import chain, islice
from pathlib import Path
from typing import Any, Iterable, Iterator

from .core.files import (InputFileError, JsonlRecords, SampleRecords, _atomic,  # noqa: F401
                         read_results, read_text_input, write_text_atomic)
from .core.printable import printable
from .methods.views import view_for
from .run.labels import run_label

_DROP = ("embedding",)  # long vectors: kept in samples.jsonl, not in tables


def _flatten(obj: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if str(k).startswith(_DROP):
                continue
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)):
        out[prefix] = printable(json.dumps(obj, ensure_ascii=False))
    elif isinstance(obj, str):
        out[prefix] = printable(obj)  # a file name that is not UTF-8: escaped, as in the sample ids
    else:
        out[prefix] = obj


def _model_of(info: dict[str, Any]) -> str | None:
    spec = (info.get("spec") or {}).get("task_spec") or {}
    return spec.get("vlm") or spec.get("model")


def iter_sample_rows(folder: str | Path) -> Iterator[dict[str, Any]]:
    """The tidy rows of one run folder one at a time, from samples.jsonl a line at a time."""
    folder = Path(folder)
    info = read_results(folder)
    task = info["task"]
    base = {"run": str(folder), "task": task, "model": _model_of(info)}
    unit = view_for(task).units  # the unit the method's view names (methods/views.py); None: a row per sample
    path = folder / "samples.jsonl"
    if not path.is_file():
        read_text_input(path, "samples file")  # the one sentence saying why not
    names = view_for(task).columns  # the method's own names for misleading fields (ChEF's truth)
    n = 0
    try:
        for n, rec in enumerate(SampleRecords(path), 1):
            for row in _rows_of(rec, base, unit):
                yield {names.get(k, k): v for k, v in row.items()} if names else row
    except UnicodeDecodeError:
        raise InputFileError(f"{path}: not UTF-8 text; rebuild the file from the run's store with: vlmcheck "
                             f"resume {folder}") from None
    except json.JSONDecodeError as exc:
        raise InputFileError(f"{path}: record {n + 1} is not JSON ({exc.msg}); rebuild the file from the run's "
                             f"store with: vlmcheck resume {folder}") from None


def _rows_of(rec: dict[str, Any], base: dict[str, Any], unit: tuple[str, str] | None) -> Iterator[dict[str, Any]]:
    """The tidy rows of one sample record."""
    head = {**base, "sample_id": rec.get("sample_id"), "status": rec.get("status")}
    if rec.get("status") == "error":
        head.update({"error_type": (rec.get("error") or {}).get("type"),
                     "error_message": (rec.get("error") or {}).get("message")})
    result = dict(rec.get("result") or {})
    units = result.pop(unit[0], None) if unit else None
    common: dict[str, Any] = {}
    _flatten(result, "", common)
    if isinstance(units, dict):
        units = [{unit[1]: name, **u} for name, u in units.items() if isinstance(u, dict)]
    if isinstance(units, list) and units and all(isinstance(u, dict) for u in units):
        for u in units:
            flat: dict[str, Any] = {}
            _flatten(u, "", flat)
            # a unit's field wins a name it shares with its sample's (GenCeption: a step's image and s);
            # the sample's value stays, as sample.<name>
            mine = {(f"sample.{k}" if k in flat else k): v for k, v in common.items()}
            yield {**head, **mine, **flat}
    else:
        yield {**head, **common}


#: numbers that describe a metric rather than being one, and the subtrees that say how an interval was made
_NOT_METRICS = {"n", "n_units", "n_pairs", "categories", "T", "seed"}
_HOW = ("interval", "intervals", "headline")
#: the key holding a metric's value in a dict that has a ``ci95`` beside it (GenCeption, CAST, describe)
_VALUE_KEYS = ("score", "value", "mean")
METRIC_COLUMNS = ["run", "model", "task", "metric", "value", "ci_low", "ci_high", "n", "unit", "headline",
                  "not_measured"]


def _how(node: dict[str, Any], key: str | None) -> dict[str, Any]:
    """How the interval of ``node[key]`` (or of the node's own value) was made: its ``interval`` entry, or
    ``intervals[key]``."""
    if isinstance(node.get("intervals"), dict) and key and isinstance(node["intervals"].get(key), dict):
        return node["intervals"][key]
    return node.get("interval") if isinstance(node.get("interval"), dict) else {}


def _row(metric: str, value: float | None, ci: Any, how: dict[str, Any], n: Any = None, headline: bool = False,
         **more: Any) -> dict[str, Any]:
    low, high = ci if isinstance(ci, list) and len(ci) == 2 else (None, None)
    return {"metric": metric, "value": value, "ci_low": low, "ci_high": high, "n": how.get("n_units", n),
            "unit": how.get("unit"), "headline": headline, **more}


def _metric_rows(node: Any, path: str, out: list[dict[str, Any]]) -> None:
    if not isinstance(node, dict):
        return
    own = next((k for k in _VALUE_KEYS if k in node and "ci95" in node), None)
    for k, v in node.items():
        if k in _HOW or k in _NOT_METRICS or str(k).endswith("_ci95") or k == "ci95":
            continue
        name = f"{path}.{k}" if path else str(k)
        if isinstance(v, dict):
            _metric_rows(v, name, out)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(_row(path if k == own and path else name, float(v),
                            node.get("ci95") if k == own else node.get(f"{k}_ci95"),
                            _how(node, None if k == own else k), node.get("n")))


def metric_rows(folder: str | Path, info: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The long metrics table of one run: one row per scalar metric of its results.json (dotted path), with its
    95 % interval, number of units and resampling unit where the run computed one; the headline first, with
    ``headline`` True."""
    from .methods.headline import headline_of
    from .metrics.measured import reason_of

    folder = Path(folder)
    info = info if info is not None else read_results(folder)
    base = {"run": str(folder), "model": _model_of(info), "task": info["task"]}
    rows: list[dict[str, Any]] = []
    h = headline_of(info)
    why = reason_of(h)  # the headline's row says why it is no number (value null)
    if why:
        rows.append(_row(h["name"], None, None, {}, headline=True, not_measured=why))
    elif h.get("value") is not None:
        rows.append(_row(h["name"], float(h["value"]), h.get("ci95"), h.get("interval") or {}, headline=True))
    _metric_rows(info.get("metrics") or {}, "", rows)
    return [{**base, **r} for r in rows]


def load_runs(folders: Iterable[str | Path]):
    """(samples, metrics) as pandas DataFrames: every run's tidy sample rows, and the long metrics table
    (``run, model, task, metric, value, ci_low, ci_high, n, unit, headline``; one row per run and metric)."""
    import pandas as pd

    samples, metrics = [], []
    for f in folders:
        samples.extend(iter_sample_rows(f))
        metrics.extend(metric_rows(f))
    return pd.DataFrame(samples), pd.DataFrame(metrics, columns=METRIC_COLUMNS)


def _typed(df):
    """Each column one type: integers stay integers beside missing values (Int64, not float), text is
    ``string``, flags ``boolean``."""
    return df.convert_dtypes(convert_floating=False) if len(df.columns) else df


def load_tables(folders: Iterable[str | Path]) -> dict[str, Any]:
    """One tidy samples table per method with only that method's columns, each column one meaning and one type;
    each further table a method's view declares as ``<method>_<suffix>`` (``cast_verdicts``:
    :func:`cast_verdict_rows`); and ``metrics`` (:func:`load_runs`).  A method without a run is absent."""
    import pandas as pd

    rows: dict[str, list[dict[str, Any]]] = {}  # by table name
    metrics: list[dict[str, Any]] = []
    for f in map(Path, folders):
        info = read_results(f)
        task = str(info["task"])
        rows.setdefault(task, []).extend({k: v for k, v in r.items() if k != "task"} for r in iter_sample_rows(f))
        for suffix, extra_rows in view_for(task).tables.items():  # CAST's verdicts, and the like
            if extra := list(extra_rows(f)):
                rows.setdefault(f"{task}_{suffix}", []).extend(extra)
        metrics.extend(metric_rows(f, info))
    tables = {name: _typed(pd.DataFrame(table)) for name, table in rows.items()}
    tables["metrics"] = pd.DataFrame(metrics, columns=METRIC_COLUMNS)
    return tables


def run_rows(folders: Iterable[str | Path]) -> list[dict[str, Any]]:
    """One row per run: its identity, sample counts and headline with its interval."""
    out = []
    for f in folders:
        info = read_results(Path(f))
        head = next((r for r in metric_rows(f, info) if r["headline"]), {})
        out.append({"run": str(f), "task": info["task"], "model": _model_of(info),
                    **{f"counts.{k}": v for k, v in (info.get("counts") or {}).items() if isinstance(v, int)},
                    **{k: head.get(k) for k in ("metric", "value", "ci_low", "ci_high", "n", "unit", "not_measured")}})
    return out


def _file_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_.")[:100] or "run"


def table_names(folders: list[Path]) -> list[str]:
    """A file name per run's table, the run's own: its method and label, ``<method>-<label>`` (run/labels.py:
    the model's id, or the run's ``--label``), the same whatever else is exported; only runs of one method and
    label exported together add their folder's name (then ``-2``, ``-3``)."""
    infos = []
    for f in folders:
        try:
            infos.append(read_results(f, need_samples=False))
        except (OSError, ValueError):
            infos.append({})
    names = [_file_name(f"{info.get('task') or 'run'}-{run_label(info, f)}") for f, info in zip(folders, infos)]
    for name in {n for n in names if names.count(n) > 1}:
        group = [i for i, n in enumerate(names) if n == name]
        if len({folders[i].name for i in group}) > 1:
            for i in group:
                names[i] = _file_name(f"{name}-{folders[i].name}")
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        seen[name] = seen.get(name, 0) + 1
        names[i] = name if seen[name] == 1 else f"{name}-{seen[name]}"
    return names


def export_runs(folders: Iterable[str | Path], out: str | Path, fmt: str = "parquet") -> list[Path]:
    """One table per run (``<run-name>.<fmt>``), ``metrics.<fmt>`` and ``runs.<fmt>``; returns the files
    written."""
    if fmt not in ("parquet", "csv", "jsonl"):
        raise InputFileError(f"unknown format {fmt!r}: use parquet, csv or jsonl")
    out = Path(out)
    folders = [Path(f) for f in folders]
    infos = [read_results(f) for f in folders]  # every run read before the output folder is made: a mistyped run
    out.mkdir(parents=True, exist_ok=True)   # leaves nothing behind
    written = []
    for f, info, name in zip(folders, infos, table_names(folders)):
        written.append(_write_rows(lambda f=f: iter_sample_rows(f), out / f"{name}.{fmt}", fmt))
        for suffix, extra_rows in view_for(info.get("task")).tables.items():  # CAST's verdicts, ...
            written.append(_write_rows(lambda f=f, rows=extra_rows: rows(f), out / f"{name}-{suffix}.{fmt}", fmt))
    metrics = [row for f, info in zip(folders, infos) for row in metric_rows(f, info)]  # not the samples again
    written.append(_write_rows(lambda: metrics, out / f"metrics.{fmt}", fmt, METRIC_COLUMNS))
    runs = run_rows(folders)
    written.append(_write_rows(lambda: runs, out / f"runs.{fmt}", fmt))
    return written


CHUNK_ROWS = 20_000


def _columns(rows: Iterable[dict[str, Any]], names: Iterable[str]) -> dict[str, set[type]]:
    """Every column (``names`` first, the rest in first-seen order), with the types of its values (None left
    out)."""
    cols: dict[str, set[type]] = {k: set() for k in names}
    for row in rows:
        for k, v in row.items():
            kinds = cols.setdefault(k, set())
            if v is not None:
                kinds.add(type(v))
    return cols


def _arrow_type(kinds: set[type]):
    import pyarrow as pa

    if kinds == {bool}:
        return pa.bool_()
    if kinds == {int}:
        return pa.int64()
    if kinds and kinds <= {int, float}:
        return pa.float64()
    return pa.string()  # text, or values of mixed types as JSON text


def _cell(v: Any, as_text: bool) -> Any:
    if v is None or not as_text or isinstance(v, str):
        return v
    return json.dumps(v)


def _write_rows(rows, path: Path, fmt: str, columns: Iterable[str] = ()) -> Path:
    """A table written as its rows come: ``rows()`` is walked twice (its columns and their types first, so every
    line and every Parquet chunk of :data:`CHUNK_ROWS` has the same schema), never held whole.  ``columns``:
    those it has even without rows."""
    cols = _columns(rows(), columns)
    names = list(cols)
    if fmt == "jsonl":
        return write_text_atomic(path, (json.dumps({k: row.get(k) for k in names}, ensure_ascii=False) + "\n"
                                        for row in rows()))
    if fmt == "csv":
        import csv
        from types import SimpleNamespace

        line = csv.writer(SimpleNamespace(write=str), lineterminator="\n")  # writerow returns the line it wrote
        return write_text_atomic(path, chain([line.writerow(names)], (
            line.writerow(["" if row.get(k) is None else row.get(k) for k in names]) for row in rows())))
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(k, _arrow_type(kinds)) for k, kinds in cols.items()])
    text_cols = {k for k, kinds in cols.items() if _arrow_type(kinds) == pa.string()}

    def write(fd: int, tmp: str) -> None:
        os.close(fd)
        it = iter(rows())
        with pq.ParquetWriter(tmp, schema) as writer:
            while chunk := list(islice(it, CHUNK_ROWS)):
                writer.write_table(pa.Table.from_pylist([{k: _cell(row.get(k), k in text_cols) for k in names}
                                                         for row in chunk], schema=schema))

    return _atomic(path, write)  # whole or not at all
