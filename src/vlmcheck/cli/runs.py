"""``vlmcheck run`` (a sweep), ``resume``, ``retry-failed`` and ``merge``: runs as a whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..run.options import RESUME, RETRY
from . import _common as C


def run_cmd(
    config: Optional[Path] = typer.Argument(None, metavar="CONFIG", help="Sweep config (YAML): models x methods"),
    example: bool = typer.Option(False, "--example",
                                 help="Print an annotated example config and exit; `--example offline` prints one "
                                      "that runs here with the reference models."),
    progress: bool = C.PROGRESS, dry_run: bool = C.DRY_RUN, json_output: bool = C.JSON_OUT, report: bool = C.REPORT,
) -> None:
    """Run a sweep: every method of the config on every model, into one folder, with one report."""
    from ..sweep import EXAMPLE, OFFLINE_EXAMPLE, estimate_sweep, run_sweep

    if example:
        if config is not None and str(config) != "offline":
            C.fail(f"--example takes nothing or `offline` (got {str(config)!r})")
        typer.echo(OFFLINE_EXAMPLE if config is not None else EXAMPLE, nl=False)
        return
    if config is None:
        C.fail("give a sweep config (vlmcheck run sweep.yaml); `vlmcheck run --example offline` prints one that "
               "runs offline")
    C.setup_logging()
    if dry_run:
        with C.user_errors(FileNotFoundError), C.refused():
            est = estimate_sweep(config)
        C.print_estimate([est], json_output)
        return

    def announce(method: str, model: str) -> None:
        C.console.rule(f"[bold]{method}[/bold]: {model}")

    def execute(task, folder, opts):
        with C.user_errors(FileNotFoundError):
            return C.execute(task, folder, opts, again=("run", config))  # the sweep resumes each of its runs

    with C.user_errors(FileNotFoundError), C.quiet_tables(json_output):  # --json: one JSON object, no tables
        done = run_sweep(config, progress=progress, execute=execute, announce=announce, report=report)
    if json_output:  # the summary as one JSON object on stdout, instead of the table
        typer.echo(json.dumps({"summary": done.summary, "folder": str(done.out)}, default=str))
    else:
        C.terminal.sweep_summary(done.summary, f"sweep {config}")
    C.console.print(f"Summary: {done.out / 'summary.json'}" + (f"  Report: {done.report}" if done.report else ""),
                    highlight=False)
    C.check_failures(done.results, done.max_failures)


def _recorded(spec: dict) -> dict:
    """What a resumed run keeps from its first session (run/options.py: refused by resume and retry-failed)."""
    return {"resume": True, "limit": spec.get("limit"), "seed": spec.get("seed", 0), "shard": spec.get("shard")}


@C.run_command(entry=RESUME)
def resume(run_folder: Path = typer.Argument(..., metavar="RUN", help="Run folder"), *, run: C.RunArgs) -> None:
    """Continue an interrupted run with its recorded spec (API keys from the environment)."""
    C.setup_logging()
    task, spec = C.task_of(run_folder)
    C.run_method(task, run_folder, run, **_recorded(spec))


@C.run_command(entry=RETRY)
def retry_failed_cmd(run_folder: Path = typer.Argument(..., metavar="RUN", help="Run folder"), *,
                     run: C.RunArgs) -> None:
    """Run again only the samples that failed; finished ones are kept."""
    C.setup_logging()
    task, spec = C.task_of(run_folder)
    C.run_method(task, run_folder, run, retry=True, **_recorded(spec))


def merge(
    out: Path = typer.Argument(..., metavar="OUT", help="Folder for the merged run"),
    shards: list[Path] = typer.Argument(..., metavar="SHARD...", help="The shard run folders (--shard i/N)"),
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="Replace the run in OUT when it is another run (only a run folder)."),
    max_failures: float = C.MAX_FAILURES, report: bool = C.REPORT,
) -> None:
    """Join the folders of a run split with --shard i/N into one run folder (idempotent, any N)."""
    C.setup_logging()
    with C.refused(), C.user_errors(FileNotFoundError):
        results = C.api.merge_runs(shards, out, overwrite=overwrite, report=report)
    c = results["counts"]
    C.console.print(f"[green]merged[/green] {len(shards)} shards: {c['done']}/{c['samples']} samples done, "
                    f"{c['failed']} failed, {c['pending']} pending. Results: {out / 'results.json'}")
    if c["pending"]:
        C.console.print(f"[yellow]note:[/yellow] {c['pending']} samples are in no finished shard yet; merge again "
                        "when the other shards finish")
    C.check_failures([{**results, "_folder": str(out)}], max_failures)
