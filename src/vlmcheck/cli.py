"""The ``vlmcheck`` command line."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from . import __version__
from .core.secrets import install_log_redaction, register_secret
from .core.spec import ModelSpec, SpecError, load_model, providers
from .run.runner import RunFolderExists, RunOptions, retry_failed, run_task

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Annotation-free evaluation of vision-language models.")
console = Console(stderr=True)

RESUME = typer.Option(False, "--resume", help="Continue the run in OUT, skipping finished samples.")
OVERWRITE = typer.Option(False, "--overwrite", help="Delete an existing run in OUT first.")
LIMIT = typer.Option(None, "--limit", help="Only the first N samples.")
CONCURRENCY = typer.Option(16, "--max-concurrency", help="Samples and model calls in flight at once.")
SEED = typer.Option(0, "--seed", help="Seed for every random choice of the run.")
API_KEY = typer.Option(None, "--api-key", help="API key for the model (else from the environment). Never stored.",
                       envvar="VLMCHECK_API_KEY", show_envvar=False)
PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show a progress bar.")


def _setup_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_log_redaction()


def _spec_with_key(spec: str, api_key: str | None) -> ModelSpec:
    parsed = ModelSpec.parse(spec)
    if api_key:
        register_secret(api_key)
        parsed._secrets["api_key"] = api_key
    return parsed


def _options(resume, overwrite, limit, max_concurrency, seed, progress) -> RunOptions:
    return RunOptions(resume=resume, overwrite=overwrite, limit=limit, max_concurrency=max_concurrency, seed=seed,
                      progress=progress and sys.stderr.isatty())


def _execute(task, out: Path, options: RunOptions) -> dict:
    try:
        result = run_task(task, out, options)
    except RunFolderExists as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    counts = result.results["counts"]
    session = result.results.get("session", {})
    console.print(f"[green]done[/green] {counts['done']}/{counts['samples']} samples, {counts['failed']} failed; "
                  f"{session.get('model_calls', 0)} model calls, {session.get('cache_hits', 0)} cache hits. "
                  f"Results: {out / 'results.json'}")
    return result.results


@app.command()
def version() -> None:
    """Print the vlmcheck version."""
    typer.echo(__version__)


@app.command("models")
def list_models() -> None:
    """List model providers and the roles they serve."""
    table = Table("provider", "roles", "description")
    for name, entry in providers().items():
        table.add_row(name, ", ".join(entry.roles), entry.description)
    Console().print(table)


@app.command()
def describe(
    vlm: str = typer.Option(..., "--vlm", help="VLM spec, e.g. openai:gpt-4o-mini or ref:photo"),
    data: Path = typer.Option(..., "--data", help="Image folder or JSONL manifest"),
    out: Path = typer.Option(..., "--out", help="Run folder"),
    prompt: str = typer.Option("Describe this image in detail.", "--prompt"),
    max_tokens: int = typer.Option(512, "--max-tokens"),
    api_key: Optional[str] = API_KEY,
    resume: bool = RESUME, overwrite: bool = OVERWRITE, limit: Optional[int] = LIMIT,
    max_concurrency: int = CONCURRENCY, seed: int = SEED, progress: bool = PROGRESS,
) -> None:
    """Ask a VLM one prompt per image; keep every answer (and keyword recall where expected words are given)."""
    from .methods.describe import DescribeSpec, DescribeTask

    _setup_logging()
    try:
        spec = _spec_with_key(vlm, api_key)
        task = DescribeTask(DescribeSpec(vlm=spec.canonical(), data=str(data), prompt=prompt, max_tokens=max_tokens),
                            vlm=load_model(spec, "vlm"))
    except (SpecError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    _execute(task, out, _options(resume, overwrite, limit, max_concurrency, seed, progress))


def _task_of(run: Path):
    from .methods import task_from_spec
    from .store.db import DB_NAME, RunStore

    if not (run / DB_NAME).exists():
        console.print(f"[red]error:[/red] {run} is not a run folder (no {DB_NAME})")
        raise typer.Exit(2)
    with RunStore(run) as store:
        spec = store.get_meta("spec")
    return task_from_spec(spec["task"], spec["task_spec"]), spec


@app.command()
def resume(run: Path = typer.Argument(..., help="Run folder"), max_concurrency: int = CONCURRENCY,
           progress: bool = PROGRESS) -> None:
    """Continue an interrupted run with its recorded spec (API keys from the environment)."""
    _setup_logging()
    task, spec = _task_of(run)
    _execute(task, run, _options(True, False, spec.get("limit"), max_concurrency, spec.get("seed", 0), progress))


@app.command("retry-failed")
def retry_failed_cmd(run: Path = typer.Argument(..., help="Run folder"), max_concurrency: int = CONCURRENCY,
                     progress: bool = PROGRESS) -> None:
    """Run again only the samples that failed; finished ones are kept."""
    _setup_logging()
    task, spec = _task_of(run)
    options = _options(True, False, spec.get("limit"), max_concurrency, spec.get("seed", 0), progress)
    result = retry_failed(task, run, options)
    counts = result.results["counts"]
    console.print(f"[green]done[/green] {counts['done']}/{counts['samples']} samples, {counts['failed']} failed")


@app.command()
def demo(out: Path = typer.Option(Path("demo-run"), "--out", help="Folder for the demo's data and runs")) -> None:
    """Offline demo: real photos, a reference describer, a full resumable run."""
    from .methods.describe import DescribeSpec, DescribeTask
    from .world.photos import make_photo_dataset

    _setup_logging()
    manifest = make_photo_dataset(out / "data", include_broken=True)
    console.print(f"[bold]vlmcheck demo[/bold]: {manifest} (scikit-image photos + 2 broken files)")
    task = DescribeTask(DescribeSpec(vlm="ref:photo", data=str(manifest)))
    results = _execute(task, out / "describe", RunOptions(overwrite=True, progress=sys.stderr.isatty()))
    console.print_json(json.dumps(results["metrics"]))
    for rec in (out / "describe" / "samples.jsonl").read_text().splitlines():
        r = json.loads(rec)
        if r["status"] == "done":
            console.print(f"  {r['sample_id']:<11} recall={r['result'].get('keyword_recall', 0):.2f}  "
                          f"{r['result']['answer']}")
        else:
            console.print(f"  {r['sample_id']:<11} [yellow]error[/yellow] {r['error']['type']}: "
                          f"{r['error']['message']}")
    console.print(f"Run folder: {out / 'describe'} (results.json, samples.jsonl, store.sqlite)")


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
