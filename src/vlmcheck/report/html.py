"""One static HTML report for any run or set of runs, needing no network (docs/usage.md, "Reports").

Every model-produced or dataset-provided string reaches the page through Jinja2 autoescaping or ``textContent``
in the page's script; the embedded JSON is escaped so that it cannot close its ``<script>`` tag (pages.py).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Iterator

from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic_core import to_json

from ..core.files import SampleRecords, read_results, write_bytes_atomic, write_text_atomic
from ..datasets.base import choices_line
from ..methods.headline import headline, headline_of, not_measured_reason, vision_gain_of
from ..methods.views import generic_row, view_for
from ..run.labels import run_labels
from .boards import decisions_view, leaderboards, unmeasured
from .pages import prune_rows, rows_json
from .panels import PANELS, TOGETHER, variants_compare
from .terminal import rank_text
from .thumbs import _Thumbs


def _load_run(folder: Path) -> dict[str, Any]:
    res = read_results(folder, need_samples=False)  # a damaged file: one sentence (core/files.py)
    # read a line at a time by each view that walks them, each record checked as it is read
    samples = SampleRecords(folder / "samples.jsonl", missing_ok=True)
    return {"folder": folder, "results": res, "samples": samples, "task": res.get("task")}


def _sample_rows(run: dict[str, Any], thumbs: _Thumbs, disagree: set[str] = frozenset(),
                 failures: list[dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
    """Rows for the paged table, one at a time: id, status, details, and what the method's view says of the
    sample (``methods/views.py``; the generic row where it declares none).  ``failures``: the failed samples' id,
    error type and message, appended in the same walk."""
    row_of = view_for(run["task"]).row or generic_row
    folder = Path(run["folder"])
    for s in run["samples"]:
        if failures is not None and s["status"] == "error":
            failures.append({"id": s["sample_id"], "type": s["error"]["type"], "message": s["error"]["message"]})
        r = s.get("result") or {}
        shown = row_of(r, folder)
        images = [thumbs.image(im["path"], im["label"], **{k: v for k, v in im.items() if k not in ("path", "label")})
                  for im in shown.get("images") or []]
        yield {"id": s["sample_id"], "status": s["status"],
               "error": (s.get("error") or {}).get("message", ""), "summary": str(shown.get("summary") or ""),
               "answer": str(shown.get("answer") or ""), "correct": shown.get("correct"), "images": images,
               "detail": _detail(r), "disagree": s["sample_id"] in disagree}


DETAIL_CHARS = 6000  # of a sample's record, shown in its row
_INDENTED = json.JSONEncoder(indent=1, ensure_ascii=False, default=str)
LONG_VECTOR = 16  # a list of more numbers than this is shown as its length, not its values
#: a record whose strings hold more characters than this is encoded by json's own encoder, which stops at
#: DETAIL_CHARS; pydantic-core's encodes the whole record first (fast, but a 1-MB answer is 1 MB of JSON)
RUST_MAX_CHARS = 1 << 16


def _readable_plain(obj: Any) -> tuple[Any, bool]:
    """A record as a reader wants it in "show" (a vector of numbers as "[1280 numbers]"), and whether
    pydantic-core's JSON encoder writes it as json.dumps does: not with a float below 1e-4 in size (0.00001 and
    1e-6 there, 1e-05 and 1e-06 in Python) or more than RUST_MAX_CHARS characters of text."""
    chars, plain = 0, True

    def walk(o: Any) -> Any:
        nonlocal chars, plain
        if isinstance(o, dict):
            return {k: walk(v) for k, v in o.items()}
        if isinstance(o, list):
            if len(o) > LONG_VECTOR and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in o):
                return f"[{len(o)} numbers]"
            return [walk(x) for x in o]
        if isinstance(o, str):
            chars += len(o)
        elif isinstance(o, float) and 0 < abs(o) < 1e-4:
            plain = False
        return o

    shown = walk(obj)
    return shown, plain and chars <= RUST_MAX_CHARS


def _detail(record: Any) -> str:
    """What a row's "show" holds: the first DETAIL_CHARS characters of the record as indented JSON, the text of
    ``json.dumps(indent=1, ensure_ascii=False)``, by pydantic-core's encoder where it writes the same text (json
    has no C encoder for indented output), else by :func:`_json_head`."""
    shown, plain = _readable_plain(record)
    if plain:
        try:
            return to_json(shown, indent=1, fallback=str).decode()[:DETAIL_CHARS]
        except ValueError:  # pydantic-core's PydanticSerializationError (a lone surrogate) is one
            pass
    return _json_head(shown, DETAIL_CHARS)


def _json_head(obj: Any, limit: int) -> str:
    """The first ``limit`` characters of ``obj`` as indented JSON, encoding no further (a CAST pair's record is
    25 kB)."""
    chunks, n = [], 0
    for chunk in _INDENTED.iterencode(obj):
        chunks.append(chunk)
        n += len(chunk)
        if n >= limit:
            break
    return "".join(chunks)[:limit]


def bound_note(h: dict[str, Any]) -> str | None:
    """Where a headline's interval is a bound rather than an estimate (a perfect run's bootstrap interval has no
    width, so the run records the conservative Wilson bound: metrics/decisions.py ``widen_degenerate``), the
    words that say so beside it; None for an ordinary interval."""
    how = str((h.get("interval") or {}).get("method") or "")
    if "bound" not in how:
        return None
    return how[0].upper() + how[1:] + ": a conservative interval, wide on purpose"


def _official(metrics: dict[str, Any]) -> dict[str, Any] | None:
    """The benchmark's official figures (datasets/official.py) as the report's table: what was declared, each
    figure with its interval, the notes."""
    block = metrics.get("official")
    if not block:  # most runs: no benchmark's figure, and no numpy for a one-image run
        return None
    from ..datasets.official import rows

    got = rows(block)
    if not got:
        return None
    blocks = list(block["benchmarks"].values()) if "benchmarks" in block else [block]
    return {"declared": [f"{b['name']} ({b['source']})" for b in blocks],
            "rows": [{"benchmark": b, "figure": name, "value": v.get("value"), "ci95": v.get("ci95"),
                      "units": (v.get("interval") or {}).get("n_units")} for b, name, v in got],
            "notes": [n for b in blocks for n in b.get("notes") or ()]}


def _disagreements(runs: list[dict[str, Any]]) -> set[str]:
    """Sample ids whose key answer (the method's view says which; else its answer) differs between runs."""
    if len(runs) < 2:
        return set()
    by_id: dict[str, set] = {}
    for run in runs:
        key = view_for(run["task"]).key_answer or (lambda r: r.get("answer"))
        for s in run["samples"]:
            by_id.setdefault(s["sample_id"], set()).add(json.dumps(key(s.get("result") or {}), default=str))
    return {k for k, v in by_id.items() if len(v) > 1}


def _gallery(image: Path, thumbs: "_Thumbs", out_dir: Path) -> dict[str, Any]:
    """One image under every corruption and severity (and the VHExpansion presets)."""
    from ..core.images import encode_image, load_image
    from ..perturb.image import CORRUPTIONS, PRESETS, corrupt

    img = load_image(image)
    img.thumbnail((256, 256))
    rows = []
    gdir = out_dir / "gallery"
    gdir.mkdir(parents=True, exist_ok=True)
    for name in list(CORRUPTIONS) + list(PRESETS):
        cells = []
        for sev in (range(1, 6) if name in CORRUPTIONS else [1]):
            path = gdir / f"{name}-{sev}.png"
            write_bytes_atomic(path, encode_image(corrupt(img, name, sev, seed=0), "PNG", compress_level=1))
            cells.append({"severity": sev, "thumb": thumbs(path)})
        rows.append({"name": name, "category": CORRUPTIONS[name].category if name in CORRUPTIONS else "preset",
                     "cells": cells})
    return {"original": thumbs(image), "rows": rows}


def _together(loaded: list[dict[str, Any]], external_csv: Any) -> tuple[Any, dict[str, Any]]:
    """The sections over several runs of one method: its leaderboard (the first method with one and two runs or
    more; a leaderboard that cannot be built says why) and each section its view names together."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in loaded:
        by_task.setdefault(str(r["task"]), []).append(r)
    board, together = None, {}
    for task, runs in by_task.items():
        view = view_for(task)
        if board is None and view.leaderboard is not None and len(runs) > 1:
            try:
                board = view.leaderboard([r["folder"] for r in runs], external_csv)
            except ValueError as exc:
                board = {"error": str(exc)}
        for name in view.together:
            if name not in together:
                together[name] = TOGETHER[name](runs)
    return board, together


@functools.lru_cache(maxsize=1)
def _template() -> Any:
    """The page's template, compiled once per process and kept in jinja2's bytecode cache (a private folder in
    the temporary folder, checked against the template's source) for the next process."""
    from jinja2 import FileSystemBytecodeCache

    try:
        cache = FileSystemBytecodeCache()
    except (OSError, RuntimeError):  # no private temporary folder to be had: compile every time
        cache = None
    env = Environment(loader=PackageLoader("vlmcheck.report", "templates"), autoescape=select_autoescape(["html"]),
                      bytecode_cache=cache)
    env.filters["fmt"] = lambda x, d=4: "-" if x is None else (f"{x:.{d}f}" if isinstance(x, float) else str(x))
    # ranks as people write them: 1, 2= for a shared rank (report/terminal.py)
    env.filters["rank"] = lambda x, ranks=(): "-" if x is None else rank_text(x, list(ranks))
    return env.get_template("report.html")


def build_report(runs: list[str | Path], out: str | Path, external_csv: str | Path | None = None,
                 title: str = "vlmcheck report", gallery_image: str | Path | None = None,
                 progress: bool = False, before_after: dict[str, Any] | None = None) -> Path:
    """``before_after``: a :func:`vlmcheck.finetune.compare.compare_vhx` result, shown after the summary."""
    from ..core.progress import track

    out = Path(out)
    files_rel = out.stem + "_files"
    files_dir = out.parent / files_rel
    thumbs = _Thumbs(files_dir)
    rows_files: set[str] = set()  # the rows files this build wrote; an earlier build's others are removed
    loaded = [_load_run(Path(r)) for r in runs]
    disagree = _disagreements(loaded)
    labels = run_labels((r["results"], r["folder"]) for r in loaded)  # the names people read (run/labels.py)
    views = []
    for run, label in zip(track(loaded, "report", enabled=progress and len(loaded) > 1), labels):
        res = run["results"]
        head = headline_of(res)
        view: dict[str, Any] = {
            "name": str(run["folder"]), "label": label, "task": run["task"], "spec": res.get("spec") or {},
            "counts": res.get("counts", {}), "metrics_json": json.dumps(res.get("metrics", {}), indent=1, default=str),
            "headline": headline(res), "ci": head.get("ci95"), "usage": res.get("usage", {}),
            "gain": vision_gain_of(res), "mde": (head.get("interval") or {}).get("min_detectable_difference"),
            "ci_note": bound_note(head), "not_measured": not_measured_reason(res),
            "server_warnings": (res.get("server_checks") or {}).get("warnings", []),
            "data_read": [choices_line(d) for d in res.get("data_read") or []],
            "official": _official(res.get("metrics") or {}),
            "failures": [],  # filled as the rows are made, before the page is rendered
        }
        for panel in view_for(run["task"]).panels:  # the sections the method's view names
            view.update(PANELS[panel](run, thumbs))
        # small runs: every row in the page; large ones: the first page there, the rest in files (report/pages.py)
        view["rows_json"] = rows_json(_sample_rows(run, thumbs, disagree, view["failures"]), len(views), files_dir,
                                      files_rel, written=rows_files)
        views.append(view)
    board, together = _together(loaded, external_csv)
    gallery = _gallery(Path(gallery_image), thumbs, files_dir) if gallery_image else None
    decisions = decisions_view([r["folder"] for r in loaded])
    boards = leaderboards(views, decisions)
    notes = {v["name"]: v["ci_note"] for v in views}
    for row in [d for d in decisions if "run" in d] + [r for b in boards for r in b["rows"]]:
        row["ci_note"] = notes.get(row["run"])  # a leader's interval that is a bound says so
    summary = [{"name": v["name"], "task": v["task"], "metric": v["headline"][0], "value": v["headline"][1],
                "model": v["label"], **{k: v[k] for k in ("ci", "ci_note", "gain", "mde", "not_measured")}}
               for v in views]
    # by method, then best first (every headline is higher-is-better), not by run path
    summary.sort(key=lambda s: (s["task"], s["metric"], -(s["value"] if s["value"] is not None else float("-inf"))))
    page = _template().render(title=title, views=views, board=board, curve=together.get("s_curve"),
                              summary=summary, gallery=gallery, vhx_compare=variants_compare(views),
                              before_after=before_after, boards=boards, decisions=decisions,
                              unmeasured=unmeasured(views))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, page, errors="backslashreplace")  # a file name that is not UTF-8 shows escaped
    prune_rows(files_dir, rows_files)  # after the new page: the old one worked until then
    return out


def write_run_report(folder: str | Path) -> Path:
    folder = Path(folder)
    return build_report([folder], folder / "report.html", title=f"vlmcheck: {folder.name}")
