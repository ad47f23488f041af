"""``vlmcheck data inspect PATH [--benchmark NAME] [--json]``: what vlmcheck reads from a dataset, before a run
(docs/datasets.md).  It reads and never writes: embedded images are hashed, not stored (datasets/imagestore.py
``read_only``).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Optional

import typer

from . import _common as C

data_app = typer.Typer(no_args_is_help=True, help="Datasets: what vlmcheck reads from them.")


def shown(ds: Any, r: Any) -> str:
    """A record's text as a run sends it: a multiple-choice record as ChEF's standard instruction asks it (the
    hint under the word the run uses - "Context:" for ScienceQA - the question, "Options:", the lettered
    options; VHExpansion asks such a record as yes/no questions about its options), a yes/no record as its bare
    question (ChEF's pope scenario, VHExpansion); its description where it has no text."""
    from ..methods.chef.recipe import format_query
    from ..methods.records import prompt_of

    text = prompt_of(ds, r)
    if r.options:
        text = format_query(text, list(r.options))
    if not text and r.description:
        return f"(description) {r.description[:200]}"
    return text


def _unopenable(paths: Any, embedded: dict[str, str | None] | None) -> dict[str, Any]:
    from ..datasets.imagestore import unopenable

    bad = unopenable(paths, embedded)
    return {"count": len(bad), "examples": [{"path": p, "why": why} for p, why in bad[:20]]}


def _official_figure(ds: Any) -> str | None:
    """The official figure a run of these records reports beside the method's (datasets/official.py)."""
    from ..datasets.official import official_for
    from ..methods.records import official_benchmark

    off = official_for(next((b for r in ds.records if (b := official_benchmark(ds, r))), None))
    return f"{off.name} ({off.source})" if off else None


def summary(ds: Any, rows: int = 3, embedded: dict[str, str | None] | None = None) -> dict[str, Any]:
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
        "unopenable_images": _unopenable((p for r in recs for p in r.images), embedded),
        "official_figure": _official_figure(ds),
        "rows": [{"id": r.id, "images": r.images, "text": shown(ds, r), "answer": r.answer,
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
            "unopenable_images": _unopenable((it.path for it in items), None),
            "rows": [{"id": it.id, "images": [it.path], "text": "", "category": it.category} for it in items[:3]]}


@data_app.command("inspect")
def inspect(
    path: str = typer.Argument(..., metavar="PATH", help="A dataset in any form (hfds:ORG/NAME, a folder, a file; "
                                                          "NAME:PATH names its benchmark)"),
    benchmark: Optional[str] = C.BENCHMARK,
    rows: Optional[int] = typer.Option(None, "--rows", min=0, metavar="N",
                                       help="Show N rows as the model sees them and read only those (the counts "
                                            "are then of those rows); without it every row is read and 3 shown"),
    every: bool = typer.Option(False, "--all", help="With --rows N: read and count every row all the same"),
    as_json: bool = typer.Option(False, "--json", help="Everything as one JSON object on stdout"),
    allow_outside: bool = typer.Option(False, "--allow-outside",
                                       help="Read dataset files that resolve outside the dataset's folder"),
) -> None:
    """The form detected, items, distinct images, categories/splits, options, a few rows, anything dropped."""
    from rich.markup import escape

    from ..core import inputs
    from ..core.dataset_files import first_rows
    from ..core.printable import inert_obj, json_inert
    from ..datasets.imagestore import read_only
    from ..methods.records import dataset_for

    source = C.with_benchmark(path, benchmark)
    token = inputs.active_policy.set(inputs.InputPolicy(allow_outside=allow_outside))
    # --rows N: the first N rows of a streamed file (shards, TSV, JSON Lines, workbooks, manifests), not all
    with C.user_errors(FileNotFoundError), read_only() as embedded, first_rows(None if every else rows) as window:
        try:
            ds = dataset_for(source)
            info = summary(ds, 3 if rows is None else rows, embedded) if ds is not None else _legacy(source)
        finally:
            inputs.active_policy.reset(token)
    if window is not None and window.cut:
        info["notes"].append(f"the first {rows} rows read (--rows {rows}): the counts are of those; --all reads "
                             "every row")
    if as_json:
        typer.echo(json_inert(json.dumps(info, ensure_ascii=False, indent=2, default=str)))
        return
    info = inert_obj(info)  # a dataset's questions, options, ids, categories: no escape sequence reaches the terminal

    def out(text: str) -> None:  # never read as markup: a category '[link=...]' stays text
        C.console.print(text, highlight=False, markup=False)

    out(f"source:   {info['source']}")
    out(f"form:     {info['form']}" + (f" (benchmark {info['benchmark']})" if info["benchmark"] else ""))
    out(f"items:    {info['items']}   distinct images: {info['distinct_images']}"
        + (f"   groups: {info['groups']}" if info["groups"] else ""))
    for key in ("categories", "splits", "options_per_item"):
        if info[key]:
            shown_ = ", ".join(f"{k}: {v}" for k, v in list(info[key].items())[:12])
            more = f", ... ({len(info[key])} in all)" if len(info[key]) > 12 else ""
            out(f"{key.replace('_', ' ')}: {shown_}{more}")
    if info.get("official_figure"):
        out(f"official figure reported: {info['official_figure']}")
    for n in info["notes"]:
        out(f"note:     {n}")
    odd = [("without an image", info["without_image"], []),
           ("answers outside the options", info["answers_outside_options"]["count"],
            info["answers_outside_options"]["examples"]),
           ("without an answer", info["without_answer"]["count"], info["without_answer"]["examples"]),
           ("rows skipped", info["skipped"]["count"], info["skipped"]["examples"]),
           ("images that cannot be opened (their samples would fail)", info["unopenable_images"]["count"], [])]
    for label, n, ex in odd:
        if n:
            C.console.print("[yellow]odd:[/yellow]      " + escape(
                f"{n} {label}" + (f" (e.g. {', '.join(map(str, ex[:3]))})" if ex else "")), highlight=False)
    for bad in info["unopenable_images"]["examples"]:
        out(f"          {bad['path']}: {bad['why']}")
    if info["rows"]:
        out("\nrows as the run sends them (a multiple-choice row as ChEF's standard instruction asks it):")
    for r in info["rows"]:
        out(f"\n--- {r['id']}  images: {', '.join(r['images']) or '(none)'}")
        if r.get("text"):
            out(r["text"])
        if "answer" in r:
            out(f"answer: {r['answer']}" + (f" ({r['answer_text']})" if "answer_text" in r else ""))
