"""``vlmcheck data inspect PATH [--benchmark NAME] [--json]``: what vlmcheck reads from a dataset, before a run.

The form detected, the items, the distinct images, categories and splits, options per item, a few rows as the
model will see them, and anything dropped or odd (rows without an image, answers outside the options, rows a
reader skipped and why).  It reads and never writes: embedded images are hashed, not stored
(datasets/imagestore.py ``read_only``).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Optional

import typer

from . import _common as C

data_app = typer.Typer(no_args_is_help=True, help="Datasets: what vlmcheck reads from them.")

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")


def shown(r: Any) -> str:
    """A record's text as a multiple-choice prompt shows it (hint, question, lettered options)."""
    lines = []
    if r.hint:
        lines.append(f"Hint: {r.hint}")
    if r.question:
        lines.append(r.question)
    lines += [f"{LETTERS[i]}. {o}" for i, o in enumerate(r.options[:26])]
    if not lines and r.description:
        lines.append(f"(description) {r.description[:200]}")
    return "\n".join(lines)


def summary(ds: Any, rows: int = 3) -> dict[str, Any]:
    recs = ds.records
    outside = [r.id for r in recs if r.options and not (isinstance(r.answer, int) and 0 <= r.answer < len(r.options))]
    no_answer = [r.id for r in recs if r.answer is None and r.description is None]
    return {
        "source": ds.source, "form": ds.form, "benchmark": ds.benchmark,
        "items": len(recs), "distinct_images": ds.distinct_images,
        "categories": dict(Counter(r.category or "(none)" for r in recs).most_common()),
        "splits": dict(Counter(r.split or "(none)" for r in recs).most_common()),
        "options_per_item": {str(k): v for k, v in sorted(Counter(len(r.options) for r in recs).items())},
        "groups": len({r.group for r in recs if r.group is not None}),
        "without_image": sum(1 for r in recs if not r.images),
        "answers_outside_options": {"count": len(outside), "examples": outside[:5]},
        "without_answer": {"count": len(no_answer), "examples": no_answer[:5]},
        "skipped": {"count": len(ds.skipped), "examples": [f"{w}: {why}" for w, why in ds.skipped[:5]]},
        "notes": list(ds.notes),
        "rows": [{"id": r.id, "images": r.images, "text": shown(r), "answer": r.answer,
                  **({"answer_text": r.options[r.answer]} if r.options and isinstance(r.answer, int)
                     and 0 <= r.answer < len(r.options) else {}),
                  "category": r.category, "group": r.group} for r in recs[:rows]],
    }


def _legacy(source: str) -> dict[str, Any]:
    """A source the methods' own readers keep (an image folder, a JSONL manifest, a URL)."""
    from ..core.data import load_image_dataset

    items = load_image_dataset(source)
    return {"source": source, "form": "image folder / JSONL manifest (each method's own reader)", "benchmark": None,
            "items": len(items), "distinct_images": len({it.path for it in items}),
            "categories": dict(Counter(it.category or "(none)" for it in items).most_common()), "splits": {},
            "options_per_item": {}, "groups": 0, "without_image": 0,
            "answers_outside_options": {"count": 0, "examples": []}, "without_answer": {"count": 0, "examples": []},
            "skipped": {"count": 0, "examples": []}, "notes": [],
            "rows": [{"id": it.id, "images": [it.path], "text": "", "category": it.category} for it in items[:3]]}


@data_app.command("inspect")
def inspect(
    path: str = typer.Argument(..., metavar="PATH", help="A dataset in any form (hfds:ORG/NAME, a folder, a file; "
                                                          "NAME:PATH names its benchmark)"),
    benchmark: Optional[str] = C.BENCHMARK,
    rows: int = typer.Option(3, "--rows", min=0, metavar="N", help="How many rows to show as the model sees them"),
    as_json: bool = typer.Option(False, "--json", help="Everything as one JSON object on stdout"),
    allow_outside: bool = typer.Option(False, "--allow-outside",
                                       help="Read dataset files that resolve outside the dataset's folder"),
) -> None:
    """The form detected, items, distinct images, categories/splits, options, a few rows, anything dropped."""
    from ..core import inputs
    from ..datasets.imagestore import read_only
    from ..methods.records import dataset_for

    source = C.with_benchmark(path, benchmark)
    token = inputs.set_policy(inputs.InputPolicy(allow_outside=allow_outside))
    with C.user_errors(FileNotFoundError), read_only():
        try:
            ds = dataset_for(source)
        finally:
            inputs.reset_policy(token)
        info = summary(ds, rows) if ds is not None else _legacy(source)
    if as_json:
        typer.echo(json.dumps(info, ensure_ascii=False, indent=2, default=str))
        return
    out = C.console.print
    out(f"source:   {info['source']}", highlight=False)
    out(f"form:     {info['form']}" + (f" (benchmark {info['benchmark']})" if info["benchmark"] else ""),
        highlight=False)
    out(f"items:    {info['items']}   distinct images: {info['distinct_images']}"
        + (f"   groups: {info['groups']}" if info["groups"] else ""), highlight=False)
    for key in ("categories", "splits", "options_per_item"):
        if info[key]:
            shown_ = ", ".join(f"{k}: {v}" for k, v in list(info[key].items())[:12])
            more = f", ... ({len(info[key])} in all)" if len(info[key]) > 12 else ""
            out(f"{key.replace('_', ' ')}: {shown_}{more}", highlight=False)
    for n in info["notes"]:
        out(f"note:     {n}", highlight=False)
    odd = [("without an image", info["without_image"], []),
           ("answers outside the options", info["answers_outside_options"]["count"],
            info["answers_outside_options"]["examples"]),
           ("without an answer", info["without_answer"]["count"], info["without_answer"]["examples"]),
           ("rows skipped", info["skipped"]["count"], info["skipped"]["examples"])]
    for label, n, ex in odd:
        if n:
            out(f"[yellow]odd:[/yellow]      {n} {label}" + (f" (e.g. {', '.join(map(str, ex[:3]))})" if ex else ""),
                highlight=False)
    for r in info["rows"]:
        out(f"\n--- {r['id']}  images: {', '.join(r['images']) or '(none)'}", highlight=False)
        if r.get("text"):
            out(r["text"], highlight=False, markup=False)
        if "answer" in r:
            out(f"answer: {r['answer']}" + (f" ({r['answer_text']})" if "answer_text" in r else ""),
                highlight=False, markup=False)
