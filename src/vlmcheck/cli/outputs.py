"""``vlmcheck report``, ``export``, ``compare`` and ``plan``: outputs over finished runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from . import _common as C


def compare(
    runs: list[Path] = typer.Argument(..., metavar="RUN...", help="Finished runs of one method"),
    external: Optional[Path] = typer.Option(None, "--external", metavar="CSV",
                                            help="CSV model,benchmark,score (GenCeption leaderboard)"),
    output: Path = typer.Option(Path("leaderboard.json"), "-o", "--output", metavar="FILE",
                                help="Where GenCeption runs' leaderboard goes"),
    as_json: bool = typer.Option(False, "--json", help="Print the comparisons as one JSON object"),
) -> None:
    """Paired comparison of runs of one method (difference, 95% CI, p-value, Holm); GenCeption runs also get
    their leaderboard."""
    from ..core.files import read_results, write_text_atomic
    from ..methods.compare import compare_runs
    from ..methods.views import label_of, view_for

    with C.user_errors(FileNotFoundError):
        cmp = compare_runs(runs)
        board = None
        make_board = view_for(cmp["method"]).leaderboard  # the method's view says whether it has a leaderboard
        if make_board is not None and {read_results(r)["task"] for r in runs} == {cmp["method"]}:
            try:
                board = make_board(runs, external)
                write_text_atomic(output, json.dumps(board, indent=2))
            except (KeyError, TypeError, ValueError) as exc:  # the comparisons stand without it
                board = None
                C.console.print(f"No {label_of(cmp['method'])} leaderboard: the runs' results lack what it needs "
                                f"({exc}).", highlight=False, soft_wrap=True)
    if as_json:
        typer.echo(json.dumps(cmp, indent=2))
        return
    if board is not None:
        C.terminal.leaderboard(board)
        C.console.print(f"Leaderboard: {output}", highlight=False)
    for u in cmp.get("not_measured", ()) if board is None else ():  # in place of a number (a leaderboard says it)
        C.terminal.tables.print(f"{u['model']}: {u['metric']} not measured: {u['reason']} (left out of the "
                              "comparisons)", highlight=False, markup=False, soft_wrap=True)
    if cmp.get("note"):
        C.console.print(f"{cmp['method']}: {cmp['note']}", highlight=False, soft_wrap=True)
    C.terminal.comparisons(cmp)
    for c in cmp["comparisons"]:
        if c.get("note"):
            C.console.print(f"  {c['metric']}: {c['a']} vs {c['b']}: {c['note']}", highlight=False, soft_wrap=True)


def plan(
    pilot: list[Path] = typer.Option(..., "--pilot", metavar="RUN",
                                     help="A finished pilot run; give two to plan a paired comparison"),
    delta: float = typer.Option(..., "--delta", metavar="D", help="The difference to detect"),
    power: float = typer.Option(0.8, "--power", metavar="P",
                                help="Chance of detecting a true difference D (0.8: four times in five)"),
    alpha: float = typer.Option(0.05, "--alpha", metavar="A",
                                help="Two-sided significance level of the test (0.05: 95% intervals)"),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as one JSON object"),
) -> None:
    """How many samples detect a difference D: from one pilot run's spread, or two pilot runs' paired one."""
    import itertools

    from ..methods.plan import plan as make_plan
    from ..metrics.decisions import too_few_units

    with C.user_errors(FileNotFoundError):
        out = make_plan(pilot, delta, power, alpha)
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    if out.get("note"):
        C.console.print(out["note"], highlight=False)
    # the fewest units at which compare's sign-flip test can reject at alpha (6 at 0.05)
    floor, raised = next(n for n in itertools.count(1) if not too_few_units(n, alpha)), []

    def _n(n: int | None) -> str:  # never an n at which the decision's test cannot reject
        if n is not None and n < floor:
            raised.append(n)
        return "over ten million" if n is None else str(max(n, floor))

    for m in out["metrics"]:
        if "warning" in m:
            C.console.print(f"{m['metric']}: {m['warning']}", highlight=False)
            continue
        lo, hi = m["n_per_run_range"]
        mde = ("no difference within the metric's range" if m["mde_at_pilot_n"] is None
               else f"{m['mde_at_pilot_n']:.4f}")
        line = (f"{m['metric']}: to detect {delta:g} with power {power:g} at alpha {alpha:g} "
                f"({m.get('test', 't-test')}): "
                f"{_n(m['n_per_run_independent'])} samples per run for two independent runs (from {_n(lo)} to "
                f"{_n(hi)} over the pilot's uncertainty about its spread; sd {m['sd']:.4f}, {m['sd_basis']}); "
                f"at the pilot's n = {m['pilot_n']} the smallest detectable difference is {mde}")
        if "n_paired" in m:
            plo, phi = m["n_paired_range"]
            line += (f"; paired on common samples ({m.get('paired_test', 't-test')}; "
                     f"{m['sd_difference_basis']}): {_n(m['n_paired'])} samples (from {_n(plo)} to {_n(phi)})")
        if m.get("estimand"):
            line += f"; planned on {m['estimand']}"
        C.console.print(line, highlight=False, soft_wrap=True)
        if m.get("pilot_warning"):
            C.console.print(f"{m['metric']}: {m['pilot_warning']}", highlight=False, soft_wrap=True)
    if raised:
        C.console.print(f"(no n below {floor}: with fewer units the sign-flip test of compare cannot reject at "
                        f"alpha {alpha:g}, whatever the difference)", highlight=False, soft_wrap=True)


def export_cmd(
    runs: list[Path] = typer.Argument(..., metavar="RUN...", help="Finished run folders"),
    out: Path = typer.Option(..., "--out", metavar="DIR", help="Folder for the tables"),
    fmt: str = typer.Option("parquet", "--format", metavar="parquet|csv|jsonl", help="parquet, csv or jsonl"),
) -> None:
    """Tidy tables: one row per sample and step/variant/setting, one file per run, plus runs.<format>."""
    from ..export import export_runs

    with C.user_errors():
        files = export_runs(runs, out, fmt)
    C.console.print(f"[green]wrote[/green] {len(files)} tables to {out}: " + ", ".join(f.name for f in files),
                    highlight=False)


def report(
    runs: list[Path] = typer.Argument(..., metavar="RUN...", help="Run folders"),
    output: Path = typer.Option(Path("report.html"), "-o", "--output", metavar="FILE",
                                help="The HTML page to write (its images stay where they are, linked)"),
    external: Optional[Path] = typer.Option(None, "--external", metavar="CSV", help="CSV model,benchmark,score"),
    title: str = typer.Option("vlmcheck report", "--title", metavar="TEXT", help="The page's title and first heading"),
    gallery: Optional[Path] = typer.Option(None, "--gallery", metavar="IMAGE",
                                           help="Add a corruption gallery of this image"),
) -> None:
    """One static HTML report for any run or set of runs (images linked where they are; a large run's rows in
    <output>_files/)."""
    from ..report.html import build_report

    absent = [r for r in runs if not r.exists()]
    if absent:  # a mistyped folder is missing, not unfinished
        C.fail(f"{absent[0]}: no such folder" if len(absent) == 1 else
               f"no such folders: {', '.join(map(str, absent))}")
    missing = [r for r in runs if not (r / "results.json").exists()]
    if missing:
        C.fail(f"not finished run folders (no results.json): {', '.join(map(str, missing))}")
    with C.user_errors():  # a damaged results.json or samples.jsonl: one sentence
        page = build_report(runs, output, external, title, gallery_image=gallery, progress=True)
    C.console.print(f"[green]wrote[/green] {page}", highlight=False)
