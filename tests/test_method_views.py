"""Issue 50 item 1: a method added as docs/architecture.md says is shown by the report (first screen and its own
section), the export, the terminal and ``compare`` from what it declares (its ``decision_outcomes`` and its
``report_view``, run/views.py), never from its name; a method that declares no view still appears, generically.

The toy methods are registered here, in the test, and run through the runner on a tiny store; nothing in
src/ knows them.  Each check reads something only the toy's view says (its row's summary, its unit column, its
extra table, its terminal line), so a consumer that stops asking the view fails here."""

from __future__ import annotations

import csv
import json
import re
from typing import Any

import pytest
from pydantic import BaseModel

from vlmcheck.run.task import Outcome, Sample, SpecTask
from vlmcheck.run.views import Line, MethodView


class ToySpec(BaseModel):
    vlm: str
    right: list[int]


def _toy_row(result: dict[str, Any], folder) -> dict[str, Any]:
    return {"summary": f"toy-view says {result['image']} scored {result['score']}", "answer": result["answer"],
            "correct": bool(result["score"]), "images": []}


def _toy_lines(model: str, metrics: dict[str, Any]) -> list[Line]:
    return [Line(f"toy-view line: {model} got {metrics['right']} of {metrics['n']}", markup=False)]


def _toy_extra(folder):
    for rec in (json.loads(x) for x in (folder / "samples.jsonl").read_text().splitlines()):
        yield {"sample_id": rec["sample_id"], "extra": f"extra-{rec['sample_id']}"}


class ToyTask(SpecTask):
    """A method with per-sample outcomes and a view: a sample's score is 1 when its image is answered right."""

    name = "toy50"
    spec_model = ToySpec
    report_view = MethodView(label="Toy", row=_toy_row, units=("parts", "part"), tables={"extra": _toy_extra},
                             summary=_toy_lines, key_answer=lambda r: r["answer"])

    def __init__(self, cfg: ToySpec) -> None:
        self.cfg = cfg

    @staticmethod
    def decision_outcomes(result, run_metrics):
        return {"toy score": Outcome(float(result["score"]), str(result["image"]), binary=True)}

    def samples(self) -> list[Sample]:
        return [Sample(f"s{i}", {"image": f"i{i}", "right": r}, i) for i, r in enumerate(self.cfg.right)]

    async def run_sample(self, sample: Sample, session) -> dict[str, Any]:
        p = sample.payload
        return {"image": p["image"], "score": p["right"], "answer": f"ans-{p['image']}-{p['right']}",
                "parts": {"left": {"hit": p["right"]}, "right": {"hit": 1}}}

    def summarize(self, records: list[dict[str, Any]], failed=()) -> dict[str, Any]:
        from vlmcheck.metrics.decisions import headline_entry, proportion_interval

        res = [r.get("result", r) for r in records]
        k, n = sum(r["score"] for r in res), len(res)
        ci, how = proportion_interval([r["score"] for r in res], [r["image"] for r in res], "image") if n else (None, {})
        return {"right": k, "n": n, "headline": headline_entry("toy score", k / n if n else None, ci, how)}


class PlainTask(ToyTask):
    """The same method declaring no view: the generic rendering."""

    name = "plain50"
    report_view = None


def _runs(tmp_path, name, cls):
    from vlmcheck.api import run_task
    from vlmcheck.run.runner import RunOptions
    from vlmcheck.run.task import register_task

    register_task(name, cls)
    folders = []
    for model, right in (("toy:T1", [1] * 8), ("toy:T2", [0] * 8)):
        folder = tmp_path / name / model.split(":")[1]
        run_task(cls(ToySpec(vlm=model, right=right)), folder, RunOptions(progress=False))
        folders.append(folder)
    return folders


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.mark.slow
def test_a_new_method_is_shown_by_the_report_export_terminal_and_compare_from_its_view(tmp_path, capsys):
    from typer.testing import CliRunner

    from vlmcheck.cli import app
    from vlmcheck.core.files import read_results
    from vlmcheck.export import export_runs, load_tables
    from vlmcheck.report import terminal
    from vlmcheck.report.html import build_report

    runs = _runs(tmp_path, "toy50", ToyTask)
    page = build_report(runs, tmp_path / "report.html").read_text()
    first = page[page.index('id="decisions"'):page.index("</section>", page.index('id="decisions"'))]
    assert "toy50" in first and "T1" in first  # the first screen: the toy's leader, by its label
    assert "toy score" in _text(page)  # the summary and the leaderboards
    # its own section: each sample's row as the toy's view writes it (the generic row would not say "toy-view")
    assert "toy-view says i3 scored 1" in page and "toy-view says i3 scored 0" in page

    written = export_runs(runs, tmp_path / "csv", "csv")
    t1 = next(p for p in written if p.name == "toy50-T1.csv")
    rows = list(csv.DictReader(t1.open()))
    assert len(rows) == 16 and {r["part"] for r in rows} == {"left", "right"}  # the view's unit: a row per part
    extra = next(p for p in written if p.name == "toy50-T1-extra.csv")
    assert [r["extra"] for r in csv.DictReader(extra.open())] == [f"extra-s{i}" for i in range(8)]
    tables = load_tables(runs)
    assert len(tables["toy50"]) == 32 and len(tables["toy50_extra"]) == 16

    capsys.readouterr()
    terminal.results(read_results(runs[0]))
    assert "toy-view line: T1 got 8 of 8" in capsys.readouterr().out

    out = CliRunner().invoke(app, ["compare", str(runs[0]), str(runs[1]), "-o", str(tmp_path / "lb.json")])
    said = " ".join(out.output.split())
    assert out.exit_code == 0, out.output
    assert "toy50: paired comparisons" in said and "toy score:" in said and "separated" in said
    assert not (tmp_path / "lb.json").exists()  # the toy declares no leaderboard


@pytest.mark.slow
def test_a_method_without_a_view_is_never_silently_absent(tmp_path, capsys):
    from vlmcheck.core.files import read_results
    from vlmcheck.export import export_runs
    from vlmcheck.report import terminal
    from vlmcheck.report.html import build_report

    runs = _runs(tmp_path, "plain50", PlainTask)
    page = build_report(runs, tmp_path / "report.html").read_text()
    assert "plain50" in page and "toy-view" not in page
    # the generic row: its answer and its numeric fields
    assert "ans-i3-1" in page and "score 1" in page
    written = export_runs(runs, tmp_path / "csv", "csv")
    rows = list(csv.DictReader(next(p for p in written if p.name == "plain50-T1.csv").open()))
    assert len(rows) == 8 and "parts.left.hit" in rows[0]  # a row per sample, its record flattened
    capsys.readouterr()
    terminal.results(read_results(runs[0]))
    assert "T1: toy score = 1.0000" in capsys.readouterr().out  # the headline
