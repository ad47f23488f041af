"""Runs as tidy tables, for pandas and every tool that reads Parquet or CSV.

One row per sample and unit of the method - a GenCeption step, a VHExpansion
variant, a ChEF setting, a CAST generation modality, a described image - with
the run's identity (``run``, ``task``, ``model``) and the sample's own fields as
columns.  Nested fields are flattened into dotted column names; lists of
scalars become JSON text; embeddings (long float vectors) are left out (they
stay in samples.jsonl and the store).  Failed samples are rows too, with
``status`` = ``error`` and the error's type and message.

    import vlmcheck
    samples, runs = vlmcheck.load_runs(["runs/a", "runs/b"])
    samples.groupby(["model", "t"])["s"].mean()

``vlmcheck export RUN... --format parquet|csv|jsonl --out DIR`` writes the same
tables, one file per run, plus ``runs.<ext>`` with one row of headline metrics
per run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from .core.files import InputFileError, atomic_path, printable, jsonl_lines, read_results, read_text_input, write_text_atomic

#: The unit each method's sample record is exploded into: (field holding the units, column naming the unit).
UNITS = {
    "genception": ("steps", "t"),
    "vhexpansion": ("variants", "variant"),
    "chef": ("settings", "setting"),
    "cast": ("generation", "generation"),
}
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


def _run_info(folder: Path) -> dict[str, Any]:
    return read_results(folder)


def _model_of(info: dict[str, Any]) -> str | None:
    spec = (info.get("spec") or {}).get("task_spec") or {}
    return spec.get("vlm") or spec.get("model")


def sample_rows(folder: str | Path) -> list[dict[str, Any]]:
    """The tidy rows of one run folder (see the module docstring)."""
    folder = Path(folder)
    info = _run_info(folder)
    task = info["task"]
    base = {"run": str(folder), "task": task, "model": _model_of(info)}
    unit = UNITS.get(task)
    rows: list[dict[str, Any]] = []
    text = read_text_input(folder / "samples.jsonl", "samples file")
    records = [json.loads(line) for _, line in jsonl_lines(text)]
    for rec in records:
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
                rows.append({**head, **mine, **flat})
        else:
            rows.append({**head, **common})
    return rows


def _headline(info: dict[str, Any]) -> dict[str, Any]:
    """The run's scalar metrics, flattened (per-category and per-bin detail stays in results.json)."""
    out: dict[str, Any] = {}
    _flatten(info.get("metrics") or {}, "", out)
    return {k: v for k, v in out.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def load_runs(folders: Iterable[str | Path]):
    """(samples, runs) as pandas DataFrames: every run's tidy sample rows, and one row per run with its counts
    and headline metrics."""
    import pandas as pd

    samples, runs = [], []
    for f in folders:
        f = Path(f)
        info = _run_info(f)
        samples.extend(sample_rows(f))
        runs.append({"run": str(f), "task": info["task"], "model": _model_of(info),
                     **{f"counts.{k}": v for k, v in (info.get("counts") or {}).items() if isinstance(v, int)},
                     **_headline(info)})
    return pd.DataFrame(samples), pd.DataFrame(runs)


def export_runs(folders: Iterable[str | Path], out: str | Path, fmt: str = "parquet") -> list[Path]:
    """One table per run (``<run-name>.<fmt>``) and ``runs.<fmt>``; returns the files written."""
    import pandas as pd

    if fmt not in ("parquet", "csv", "jsonl"):
        raise InputFileError(f"unknown format {fmt!r}: use parquet, csv or jsonl")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    folders = [Path(f) for f in folders]
    written = []
    names: set[str] = {"runs"}  # runs.<fmt> is the per-run table
    for f in folders:
        name = f.name or "run"
        while name in names:
            name += "_"
        names.add(name)
        written.append(_write(pd.DataFrame(sample_rows(f)), out / f"{name}.{fmt}", fmt))
    _, runs = load_runs(folders)
    written.append(_write(runs, out / f"runs.{fmt}", fmt))
    return written


def _write(df, path: Path, fmt: str) -> Path:
    import os

    if fmt == "csv":
        write_text_atomic(path, df.to_csv(index=False))
    elif fmt == "jsonl":
        write_text_atomic(path, df.to_json(orient="records", lines=True, force_ascii=False))
    else:
        # mixed-type object columns (a field that is a number in one row and text in another) as text
        for col in df.columns:
            if df[col].dtype == object and df[col].map(type).nunique() > 1:
                df[col] = df[col].map(lambda v: None if v is None else v if isinstance(v, str) else json.dumps(v))
        fd, tmp = atomic_path(path)
        os.close(fd)
        try:
            df.to_parquet(tmp, index=False)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return path
