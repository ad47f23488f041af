"""One static HTML report for any run or set of runs.

The page is self-contained: no network assets; figures are inline SVG
(matplotlib); image thumbnails go to a folder beside the page
(``<name>_files/``).  Per-sample data is embedded as JSON and rendered in
pages of 50 rows by a small inline script, so a 2,000-sample run stays fast.

Safety: every model-produced or dataset-provided string reaches the page
either through Jinja2 autoescaping or through ``textContent`` in the script;
the embedded JSON is escaped so that it cannot close its ``<script>`` tag.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Iterator

from jinja2 import Environment, PackageLoader, select_autoescape

from ..core.files import SampleRecords, read_results, write_bytes_atomic, write_text_atomic
from ..methods.headline import headline, headline_of, vision_gain_of  # noqa: F401  (headline re-exported: the report shows it)
from .boards import decisions_view, leaderboards
from .pages import prune_rows, rows_json
from .thumbs import _Thumbs
from .charts import _cast_heatmaps, cast_k, _reliability, _s_curve
from .terminal import rank_text



def _load_run(folder: Path) -> dict[str, Any]:
    res = read_results(folder, need_samples=False)  # a damaged file: one sentence (core/files.py)
    # read a line at a time by each view that walks them: a million samples are never in memory at once; each
    # record checked as it is read
    samples = SampleRecords(folder / "samples.jsonl", missing_ok=True)
    return {"folder": folder, "results": res, "samples": samples, "task": res.get("task")}


# ----------------------------------------------------------------------------- per-task views


SHOWN_CHAINS = 30


def _genception(run: dict[str, Any], thumbs: _Thumbs) -> dict[str, Any]:
    """The chains, worst first (failed ones, then by the last step's s(T) ascending): the 30 a reader should
    look at, each step with a thumbnail and a full-size copy for the lightbox."""
    m = run["results"]["metrics"]
    folder = run["folder"]
    T = m.get("T", 0)
    rows = []
    for s in run["samples"]:
        r = s.get("result") or {}
        src = r.get("image_path")
        strip = [{"path": src, "s": None, "gc": None, "text": ""}]
        for st in r.get("steps", []):
            t = st["t"]
            strip.append({"path": folder / st["image"] if st.get("image") else None, "s": st.get("s"),
                          "gc": r.get("gc", {}).get(f"GC@{t}"), "text": st.get("description", "")})
        last = next((x["s"] for x in reversed(strip) if x["s"] is not None), None)
        rows.append({"id": s["sample_id"], "status": s["status"], "failed": s["status"] != "done" or
                     not r.get("complete", False), "category": r.get("category"), "s_last": last,
                     "score": r.get("gc", {}).get(f"GC@{T}"), "strip": strip,
                     "error": (s.get("error") or {}).get("message") or (r.get("stopped") or {}).get("reason")
                     or (f"refused at t={r['refused_at']} (scored s = -1 from there)" if r.get("refused_at") else None)})
    rows.sort(key=lambda row: (not row["failed"], row["s_last"] if row["s_last"] is not None else -2.0))
    shown = rows[:SHOWN_CHAINS]
    for row in shown:
        for x in row["strip"]:
            path = x.pop("path")
            x["thumb"], x["full"] = thumbs(path), thumbs.full(path)
    return {"T": T, "rows": shown, "n": len(rows)}


def _sample_rows(run: dict[str, Any], thumbs: _Thumbs, disagree: set[str] = frozenset()
                 ) -> Iterator[dict[str, Any]]:
    """Generic rows for the paged table, one at a time: id, status, a one-line summary, a key answer, details."""
    task = run["task"]
    for s in run["samples"]:
        r = s.get("result") or {}
        summary, answer, images, correct = "", "", [], None
        if task == "describe":
            answer = r.get("answer", "")
            summary = f"keyword recall {r['keyword_recall']:.2f}" if r.get("keyword_recall") is not None else ""
            if r.get("image_path"):
                images.append(thumbs.image(r["image_path"], str(r.get("image", ""))))
        elif task == "genception":
            summary = " ".join(f"s({i + 1})={v:.3f}" for i, v in enumerate(r.get("s", [])))
            answer = (r.get("steps") or [{}])[0].get("description", "")
            # the chain itself: X0 (the dataset's image), then each generated X_t with its s(t)
            if r.get("image_path"):
                images.append(thumbs.image(r["image_path"], "X0"))
            for st in r.get("steps", []):
                if st.get("image"):
                    images.append(thumbs.image(run["folder"] / st["image"], f"X{st['t']}",
                                               note=f"s={st['s']:.3f}" if st.get("s") is not None else None))
        elif task == "vhexpansion":
            o = r.get("variants", {}).get("original", {})
            answer, correct = o.get("answer", ""), o.get("correct")
            neg = (r.get("negation") or {}).get("question")
            summary = r.get("question", "") + (f" / negated: {neg}" if neg else "")
            # the original first (samples.jsonl keeps keys sorted, so the variants come alphabetically)
            for name, v in sorted(r.get("variants", {}).items(), key=lambda kv: kv[0] != "original"):
                path = r.get("image") if name == "original" else (run["folder"] / v["image"] if v.get("image")
                                                                  else None)
                images.append(thumbs.image(path, name, answer=v.get("answer", ""), ok=v.get("correct"),
                                           neg_answer=v.get("neg_answer"), neg_ok=v.get("neg_correct")))
        elif task == "chef":
            first = next(iter(r.get("settings", {}).values()), {})
            correct = first.get("correct")
            summary = r.get("question", "")
            options = r.get("options") or []

            def said(st: dict[str, Any]) -> str:
                pred = st.get("pred")
                chosen = options[pred] if isinstance(pred, int) and 0 <= pred < len(options) else None
                return " - ".join(str(x) for x in (chosen, st.get("answer_text") or st.get("rationale")) if x)

            # the chosen option by name ("Yes" / "No" for POPE), then the model's own words
            answer = said(first) or (f"option {first.get('pred')}" if first else "")
            if first.get("turns"):  # a turn scenario: what was chosen in each turn, marked right or wrong
                turns = first["turns"]
                summary = f"{len(turns)} turns: " + "; ".join(
                    f"{t['role']}" + (f" ({t['label']})" if t.get("label") else "") for t in turns[:8])
                answer = "; ".join(f"{t['continuation']} {'✓' if t['correct'] else '✗'}" for t in turns[:8])
                if len(turns) > 8:
                    summary, answer = summary + f"; ... {len(turns) - 8} more", answer + "; ..."
            if r.get("image"):
                images.append(thumbs.image(r["image"], "original"))
            for name, st in r.get("settings", {}).items():
                if st.get("image"):  # a corrupted image, with the chain that made it
                    chain = ", ".join(f"{c['name']}:{c['severity']}" for c in st.get("image_chain", []))
                    images.append(thumbs.image(run["folder"] / st["image"], name, answer=said(st),
                                               ok=st.get("correct"), note=chain))
        elif task == "cast":
            g = r.get("generation", {})
            summary = f"{r.get('a')} ~ {r.get('b')}"
            answer = (g.get("text") or {}).get("raw", "")
            for key in ("a", "b"):
                if (r.get("images") or {}).get(key):
                    images.append(thumbs.image(r["images"][key], str(r.get(key))))
        blind = (r.get("variants") or r.get("settings") or {}).get("blind") if task in ("vhexpansion", "chef") else None
        if blind and blind.get("correct"):  # the blind control: this item needs no image to get right
            summary = f"[right without the image] {summary}"
        yield {"id": s["sample_id"], "status": s["status"],
               "error": (s.get("error") or {}).get("message", ""), "summary": str(summary),
               "answer": str(answer), "correct": correct, "images": images,
               "detail": _json_head(_readable(r), DETAIL_CHARS),
               "disagree": s["sample_id"] in disagree}


DETAIL_CHARS = 6000  # of a sample's record, shown in its row
_INDENTED = json.JSONEncoder(indent=1, ensure_ascii=False, default=str)


LONG_VECTOR = 16  # a list of more numbers than this is shown as its length, not its values


def _readable(obj: Any) -> Any:
    """A record as a reader wants it in "show": a vector of numbers (GenCeption's 1,280-float embeddings) as
    "[1280 numbers]", everything else as it is."""
    if isinstance(obj, dict):
        return {k: _readable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        if len(obj) > LONG_VECTOR and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in obj):
            return f"[{len(obj)} numbers]"
        return [_readable(x) for x in obj]
    return obj


def _json_head(obj: Any, limit: int) -> str:
    """The first ``limit`` characters of ``obj`` as indented JSON, encoding no further: json.dumps of a CAST
    pair's record (25 kB, in Python: indented JSON has no C encoder) was a third of a report's time."""
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


def _headline_ci(run: dict[str, Any]) -> list | None:
    return headline_of(run["results"]).get("ci95")


def _headline(run: dict[str, Any]) -> tuple[str, float | None]:
    return headline(run["results"])


def chef_settings(m: dict[str, Any]) -> dict[str, Any] | None:
    """Accuracy per setting (clean first, then each corruption) and ChEF's robustness figures, for the
    report: what a robustness headline is made of."""
    settings = m.get("settings") or {}
    if not settings:
        return None
    rows = [{"setting": k, "accuracy": v.get("accuracy"), "n": v.get("n"), "unread_share": v.get("unread_share")}
            for k, v in settings.items()]
    rows.sort(key=lambda r: (r["setting"] not in ("original", "standard", "clean"), r["setting"]))
    # issue 47: which inferencer gave the numbers, and (generated answers) the share the parser could not read
    return {"rows": rows, "rrm": m.get("rrm"), "acc_random": m.get("acc_random"), "inferencer": m.get("inferencer"),
            "unread": bool(m.get("answers_generated")), "notes": [m[k] for k in ("inferencer_note", "calibration_note",
                                                                                   "unread_warning") if m.get(k)]}


def degenerate_note(v: dict[str, Any]) -> str | None:
    """Say when a VHExpansion variant's numbers come from one answer given to everything."""
    ratio = v.get("yes_ratio")
    if ratio is None:
        return None
    if ratio >= 0.999:
        return "answered yes to every question"
    if ratio <= 0.001:
        return "answered no to every question"
    return None


def _key_answer(task: str, r: dict[str, Any]) -> Any:
    """The answer two runs of the same task are compared on."""
    if task == "vhexpansion":
        return r.get("variants", {}).get("original", {}).get("parsed")
    if task == "chef":
        return next(iter(r.get("settings", {}).values()), {}).get("pred")
    if task == "genception":
        return round(r.get("gc", {}).get(f"GC@{r.get('T')}", -1), 3)
    return r.get("answer")


def _disagreements(runs: list[dict[str, Any]]) -> set[str]:
    """Sample ids whose key answer differs between runs of the same task."""
    if len(runs) < 2:
        return set()
    by_id: dict[str, set] = {}
    for run in runs:
        for s in run["samples"]:
            key = _key_answer(run["task"], s.get("result") or {})
            by_id.setdefault(s["sample_id"], set()).add(json.dumps(key, default=str))
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


@functools.lru_cache(maxsize=1)
def _template() -> Any:
    """The page's template, compiled once per process (compiling it took a quarter of a small run's report) and
    its compiled code kept in jinja2's bytecode cache (a private folder of the user's in the temporary folder,
    checked against the template's source), so that a one-image run does not compile it again (issue 51)."""
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
    thumbs = _Thumbs(out.parent / files_rel, files_rel, parallel=True)
    rows_files: set[str] = set()  # the rows files this build wrote; an earlier build's others are removed
    try:
        loaded = [_load_run(Path(r)) for r in runs]
        disagree = _disagreements(loaded)
        views = []
        for run in track(loaded, "report", enabled=progress and len(loaded) > 1):
            res = run["results"]
            view: dict[str, Any] = {"name": str(run["folder"]), "task": run["task"], "spec": res.get("spec") or {},
                                    "counts": res.get("counts", {}), "metrics_json": json.dumps(res.get("metrics", {}),
                                                                                                 indent=1, default=str),
                                    "headline": _headline(run), "ci": _headline_ci(run), "usage": res.get("usage", {}),
                                    "gain": vision_gain_of(res),
                                    "mde": (headline_of(res).get("interval") or {}).get("min_detectable_difference"),
                                    "ci_note": bound_note(headline_of(res))}
            view["server_warnings"] = (res.get("server_checks") or {}).get("warnings", [])
            view["failures"] = [{"id": s["sample_id"], "type": s["error"]["type"], "message": s["error"]["message"]}
                                for s in run["samples"] if s["status"] == "error"]
            if run["task"] == "genception":
                view["genception"] = _genception(run, thumbs)
                view["categories"] = res["metrics"].get("by_category", {})
            if run["task"] == "cast":
                view["heatmaps"] = _cast_heatmaps(run)
                view["heatmap_k"] = f"Top-{cast_k(res)}, as the headline"
                view["cast_empty"] = res["metrics"].get("empty_reason")
            if run["task"] == "chef":
                view["reliability"] = _reliability(run)
                view["pope"] = res["metrics"].get("pope")
                view["chef_settings"] = chef_settings(res["metrics"])
                if res["metrics"].get("vanilla_accuracy") is not None:
                    view["mmbench"] = {"vanilla": res["metrics"]["vanilla_accuracy"],
                                       "circular": res["metrics"].get("circular_accuracy")}
            if run["task"] == "vhexpansion":
                view["vhx"] = res["metrics"].get("variants", {})
                view["vhx_notes"] = {name: degenerate_note(v) for name, v in view["vhx"].items() if degenerate_note(v)}
                view["vhx_unread"] = res["metrics"].get("unread_warning")
            # small runs: every row in the page; large ones: the first page there, the rest in files (report/pages.py)
            view["rows_json"] = rows_json(_sample_rows(run, thumbs, disagree), len(views), out.parent / files_rel,
                                          files_rel, written=rows_files)
            views.append(view)
        board = None
        gens = [r["folder"] for r in loaded if r["task"] == "genception"]
        if len(gens) > 1:
            from ..methods.leaderboard import leaderboard

            try:
                board = leaderboard(gens, external_csv)
            except ValueError as exc:
                board = {"error": str(exc)}
        curve = _s_curve([r for r in loaded if r["task"] == "genception"])
        gallery = _gallery(Path(gallery_image), thumbs, out.parent / files_rel) if gallery_image else None
        vhx_runs = [v for v in views if v.get("vhx")]
        vhx_compare = None
        if len(vhx_runs) > 1:  # per-model comparison: symmetric accuracy per variant (paper Tables 3-5 shape)
            variants = list(dict.fromkeys(k for v in vhx_runs for k in v["vhx"]))
            vhx_compare = {"variants": variants, "rows": [
                {"model": (v["spec"].get("task_spec") or {}).get("vlm", v["name"]),
                 "cells": [(v["vhx"].get(k) or {}).get("symmetric_accuracy") for k in variants],
                 "acc": [(v["vhx"].get(k) or {}).get("accuracy") for k in variants],
                 "new": sum((v["vhx"].get(k) or {}).get("new_vh_cases", 0) for k in variants)} for v in vhx_runs]}
        decisions = decisions_view([r["folder"] for r in loaded])
        boards = leaderboards(views, decisions)
        notes = {v["name"]: v["ci_note"] for v in views}
        for d in decisions:  # the first screen: a leader's interval that is a bound says so
            if "run" in d:
                d["ci_note"] = notes.get(d["run"])
        for b in boards:
            for r in b["rows"]:
                r["ci_note"] = notes.get(r["run"])
        summary = [{"name": v["name"], "task": v["task"], "metric": v["headline"][0], "value": v["headline"][1],
                    "ci": v["ci"], "ci_note": v["ci_note"], "gain": v["gain"], "mde": v["mde"],
                    "model": (v["spec"].get("task_spec") or {}).get("vlm", "")} for v in views]
        # by method, then best first (every headline is higher-is-better), not by run path
        summary.sort(key=lambda s: (s["task"], s["metric"], -(s["value"] if s["value"] is not None else float("-inf"))))
        page = _template().render(title=title, views=views, board=board, curve=curve,
                                                      summary=summary, gallery=gallery, vhx_compare=vhx_compare,
                                                      before_after=before_after, boards=boards,
                                                      decisions=decisions)
        thumbs.wait()
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out, page, errors="backslashreplace")  # a file name that is not UTF-8 shows escaped
        prune_rows(out.parent / files_rel, rows_files)  # after the new page: the old one worked until then
    finally:
        thumbs.wait()  # also when the report failed: no thread left behind
    return out




def write_run_report(folder: str | Path) -> Path:
    folder = Path(folder)
    return build_report([folder], folder / "report.html", title=f"vlmcheck: {folder.name}")
