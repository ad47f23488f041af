"""The built-in methods' views (``run/views.py``): what the report, export, terminal and CLI show about their runs,
registered here so that none of those names a method (a new method gives its task class a ``report_view``).
Light on purpose (no numpy): the report and ``vlmcheck --help`` import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..run.views import GENERIC, Line, MethodView, label_of, register_view, view_for  # noqa: F401 (re-exported)
from . import view_lines as _lines
from .cast_rows import cast_verdict_rows


def _row(summary: Any = "", answer: Any = "", correct: Any = None, images: list | None = None) -> dict[str, Any]:
    return {"summary": summary, "answer": answer, "correct": correct, "images": images or []}


def _image(path: Any, label: str, **extra: Any) -> dict[str, Any]:
    return {"path": path, "label": label, **extra}


def generic_row(r: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A method without a view: its ``answer``, its numeric fields as the summary, its ``image_path``."""
    summary = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool))[:300]
    images = [_image(r["image_path"], str(r.get("image", "")))] if r.get("image_path") else []
    return _row(summary, r.get("answer", ""), r.get("correct") if isinstance(r.get("correct"), bool) else None,
                images)


def _describe_row(r: dict[str, Any], folder: Path) -> dict[str, Any]:
    summary = f"keyword recall {r['keyword_recall']:.2f}" if r.get("keyword_recall") is not None else ""
    return {**generic_row(r, folder), "summary": summary}


def _genception_row(r: dict[str, Any], folder: Path) -> dict[str, Any]:
    summary = " ".join(f"s({i + 1})={v:.3f}" for i, v in enumerate(r.get("s", [])))
    answer = (r.get("steps") or [{}])[0].get("description", "")
    # the chain itself: X0 (the dataset's image), then each generated X_t with its s(t)
    images = [_image(r["image_path"], "X0")] if r.get("image_path") else []
    for st in r.get("steps", []):
        if st.get("image"):
            images.append(_image(folder / st["image"], f"X{st['t']}",
                                 note=f"s={st['s']:.3f}" if st.get("s") is not None else None))
    return _row(summary, answer, None, images)


def _blind_mark(r: dict[str, Any], units: str, summary: str) -> str:
    blind = (r.get(units) or {}).get("blind")
    # the blind control: this item needs no image to get right
    return f"[right without the image] {summary}" if blind and blind.get("correct") else summary


def _vhexpansion_row(r: dict[str, Any], folder: Path) -> dict[str, Any]:
    o = r.get("variants", {}).get("original", {})
    neg = (r.get("negation") or {}).get("question")
    summary = r.get("question", "") + (f" / negated: {neg}" if neg else "")
    images = []
    # the original first (samples.jsonl keeps keys sorted, so the variants come alphabetically)
    for name, v in sorted(r.get("variants", {}).items(), key=lambda kv: kv[0] != "original"):
        path = r.get("image") if name == "original" else (folder / v["image"] if v.get("image") else None)
        images.append(_image(path, name, answer=v.get("answer", ""), ok=v.get("correct"),
                             neg_answer=v.get("neg_answer"), neg_ok=v.get("neg_correct")))
    return _row(_blind_mark(r, "variants", summary), o.get("answer", ""), o.get("correct"), images)


def _chef_row(r: dict[str, Any], folder: Path) -> dict[str, Any]:
    first = next(iter(r.get("settings", {}).values()), {})
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
    images = [_image(r["image"], "original")] if r.get("image") else []
    for name, st in r.get("settings", {}).items():
        if st.get("image"):  # a corrupted image, with the chain that made it
            chain = ", ".join(f"{c['name']}:{c['severity']}" for c in st.get("image_chain", []))
            images.append(_image(folder / st["image"], name, answer=said(st), ok=st.get("correct"), note=chain))
    return _row(_blind_mark(r, "settings", summary), answer, first.get("correct"), images)


def _cast_row(r: dict[str, Any], folder: Path) -> dict[str, Any]:
    g = r.get("generation", {})
    images = [_image(r["images"][key], str(r.get(key))) for key in ("a", "b") if (r.get("images") or {}).get(key)]
    return _row(f"{r.get('a')} ~ {r.get('b')}", (g.get("text") or {}).get("raw", ""), None, images)


def _gc_leaderboard(folders: list[Path], external_csv: Any = None) -> dict[str, Any]:
    from .leaderboard import leaderboard

    return leaderboard(folders, external_csv)


register_view("describe", MethodView(label="describe", row=_describe_row))
register_view("genception", MethodView(
    label="GenCeption", row=_genception_row, panels=("chains",), together=("s_curve",), leaderboard=_gc_leaderboard,
    key_answer=lambda r: round(r.get("gc", {}).get(f"GC@{r.get('T')}", -1), 3), units=("steps", "t"),
    summary=_lines.genception))
register_view("vhexpansion", MethodView(
    label="VHExpansion", row=_vhexpansion_row, panels=("variants",), units=("variants", "variant"),
    key_answer=lambda r: r.get("variants", {}).get("original", {}).get("parsed"), summary=_lines.vhexpansion))
register_view("chef", MethodView(
    label="ChEF", row=_chef_row, panels=("settings",), units=("settings", "setting"),
    key_answer=lambda r: next(iter(r.get("settings", {}).values()), {}).get("pred"), summary=_lines.chef,
    # both are the right option's index, not an answer of the model (that is `pred`): the setting's, in the
    # order it showed the options, and the item's own
    columns={"answer": "truth", "sample.answer": "sample.truth"}))
register_view("cast", MethodView(
    label="CAST", row=_cast_row, panels=("heatmaps",), units=("generation", "generation"),
    tables={"verdicts": cast_verdict_rows}, summary=_lines.cast))
