"""The ``vlmcheck`` command line."""

from __future__ import annotations

import contextlib
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
from .core.files import write_text_atomic
from .run.runner import RunFolderExists, RunOptions, retry_failed, run_task

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Annotation-free evaluation of vision-language models.")
console = Console(stderr=True)

RESUME = typer.Option(False, "--resume", help="Continue the run in OUT, skipping finished samples.")
OVERWRITE = typer.Option(False, "--overwrite", help="Delete an existing run in OUT first.")
LIMIT = typer.Option(None, "--limit", min=1, help="Only the first N samples.")
SHARD = typer.Option(None, "--shard", help="Run only shard i of N (i/N, by a hash of the sample id); "
                                           "`vlmcheck merge` joins the shard folders.")
CONCURRENCY = typer.Option(16, "--max-concurrency", min=1, max=100_000,
                           help="Samples and model calls in flight at once.")
ALLOW_OUTSIDE = typer.Option(False, "--allow-outside",
                             help="Read dataset images that resolve outside the dataset's folder.")
MAX_IMAGE_MB = typer.Option(256.0, "--max-image-mb", min=0.001, help="Refuse image files larger than this, unread.")
PIXEL_BUDGET_MB = typer.Option(2000.0, "--pixel-budget-mb", min=1.0,
                               help="Decoded image pixels held by samples in flight at once (MB).")
PREFLIGHT = typer.Option(True, "--preflight/--no-preflight",
                         help="Check each API model (reachable, key accepted, model served) before the first sample.")
MAX_FAILURES = typer.Option(0.0, "--max-failures", min=0.0, max=1.0,
                            help="Share of failed samples the run may have and still exit 0.")
SEED = typer.Option(0, "--seed", help="Seed for every random choice of the run.")
API_KEY = typer.Option(None, "--api-key", help="API key for the model (else from the environment). Never stored.",
                       envvar="VLMCHECK_API_KEY", show_envvar=False)
PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show a progress bar.")
EXECUTOR = typer.Option("local", "--executor",
                        help="local (this process) or ray (Ray actors; pip install 'vlmcheck[ray]').")
RAY_ADDRESS = typer.Option(None, "--address", help="Ray cluster to join (auto, or HOST:PORT); default: a local one.")
WORKERS = typer.Option(None, "--workers", min=1, help="Ray actors (default: one per CPU of the cluster, at most 8).")
GPUS = typer.Option(0.0, "--gpus-per-worker", min=0.0, help="GPUs each Ray actor reserves.")


def _setup_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_log_redaction()


def _spec_with_key(spec: str, api_key: str | None) -> ModelSpec:
    parsed = ModelSpec.parse(spec)
    if api_key:
        register_secret(api_key)
        parsed._secrets["api_key"] = api_key
    return parsed


@contextlib.contextmanager
def _user_errors(*kinds: type[BaseException]):
    """Print a user error (bad spec, bad data, missing capability...) and exit with status 2."""
    try:
        yield
    except (SpecError, ValueError, *kinds) as exc:
        _fail(_one_line(exc))


def _say_error(message: str) -> None:
    """One sentence on one line (never read as rich markup: messages hold '[Errno 2]', '[REDACTED]')."""
    from rich.markup import escape

    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)


def _fail(message: str) -> None:
    _say_error(message)
    raise typer.Exit(2)


def _one_line(exc: BaseException) -> str:
    """An exception as one sentence: pydantic's multi-line validation report is folded into one line."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        parts = [f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()[:3]]
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        return f"invalid {exc.title}: " + "; ".join(parts) + more
    return " ".join(str(exc).split())


def _options(resume, overwrite, limit, max_concurrency, seed, progress, allow_outside=False, max_image_mb=256.0,
             pixel_budget_mb=2000.0, preflight=True, shard=None, executor="local", ray_address=None, workers=None,
             gpus_per_worker=0.0) -> RunOptions:
    from .run.runner import parse_shard

    if executor not in ("local", "ray"):
        _fail(f"--executor {executor!r}: use local or ray")
    with _user_errors():
        parsed = parse_shard(shard) if isinstance(shard, str) or shard is None else tuple(shard)
    return RunOptions(resume=resume, overwrite=overwrite, limit=limit, max_concurrency=max_concurrency, seed=seed,
                      progress=progress, allow_outside=allow_outside,
                      max_image_bytes=int(max_image_mb * 1e6), pixel_budget=int(pixel_budget_mb * 1e6),
                      preflight=preflight, shard=parsed, executor=executor, ray_address=ray_address,
                      workers=workers, gpus_per_worker=gpus_per_worker)


def _execute(task, out: Path, options: RunOptions) -> dict:
    """Run ``task`` into ``out`` and print one line of counts; refusals to start end in one sentence, exit 2."""
    from .run.ray_executor import ExecutorError
    from .store.db import StoreError

    try:
        result = run_task(task, out, options)
    except (RunFolderExists, StoreError, SpecError, ExecutorError) as exc:
        _fail(_one_line(exc))
    counts = result.results["counts"]
    session = result.results.get("session", {})
    console.print(f"[green]done[/green] {counts['done']}/{counts['samples']} samples, {counts['failed']} failed; "
                  f"{session.get('model_calls', 0)} model calls, {session.get('cache_hits', 0)} cache hits. "
                  f"Results: {out / 'results.json'}")
    result.results["_folder"] = str(out)
    return result.results


def _check_failures(runs: list[dict], max_failures: float) -> None:
    """Exit 1 when a run has a larger share of failed samples than ``max_failures`` (finished ones are kept)."""
    bad = []
    for r in runs:
        c = r["counts"]
        if c["failed"] and c["failed"] > max_failures * c["samples"]:
            bad.append(f"{c['failed']} of {c['samples']} samples failed in {r.get('_folder', 'the run')}")
    if bad:
        first = runs[0].get("_folder", "RUN")
        _say_error("; ".join(bad) + f" (finished samples are kept; see samples.jsonl, then `vlmcheck retry-failed "
                                    f"{first}`, or allow some with --max-failures RATE)")
        raise typer.Exit(1)


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
    resume: bool = RESUME, overwrite: bool = OVERWRITE, limit: Optional[int] = LIMIT, shard: Optional[str] = SHARD,
    max_concurrency: int = CONCURRENCY, seed: int = SEED, progress: bool = PROGRESS,
    allow_outside: bool = ALLOW_OUTSIDE, max_image_mb: float = MAX_IMAGE_MB,
    pixel_budget_mb: float = PIXEL_BUDGET_MB, preflight: bool = PREFLIGHT, max_failures: float = MAX_FAILURES,
    executor: str = EXECUTOR, ray_address: Optional[str] = RAY_ADDRESS, workers: Optional[int] = WORKERS,
    gpus_per_worker: float = GPUS,
) -> None:
    """Ask a VLM one prompt per image; keep every answer (and keyword recall where expected words are given)."""
    from .methods.describe import DescribeSpec, DescribeTask

    _setup_logging()
    with _user_errors():
        spec = _spec_with_key(vlm, api_key)
        task = DescribeTask(DescribeSpec(vlm=spec.canonical(), data=str(data), prompt=prompt, max_tokens=max_tokens),
                            vlm=load_model(spec, "vlm"))
    results = _execute(task, out, _options(
        resume, overwrite, limit, max_concurrency, seed, progress, allow_outside, max_image_mb, pixel_budget_mb,
        preflight, shard, executor=executor, ray_address=ray_address, workers=workers, gpus_per_worker=gpus_per_worker))
    _check_failures([results], max_failures)


def _task_of(run: Path):
    from .methods import task_from_spec
    from .store.db import RunStore, StoreError

    try:
        with RunStore(run, existing=True) as store:
            spec = store.get_meta("spec")
    except StoreError as exc:
        _fail(_one_line(exc))
    with _user_errors(FileNotFoundError):
        return task_from_spec(spec["task"], spec["task_spec"]), spec


@app.command()
def resume(run: Path = typer.Argument(..., help="Run folder"), max_concurrency: int = CONCURRENCY,
           progress: bool = PROGRESS, allow_outside: bool = ALLOW_OUTSIDE,
           max_image_mb: float = MAX_IMAGE_MB, pixel_budget_mb: float = PIXEL_BUDGET_MB,
           preflight: bool = PREFLIGHT, max_failures: float = MAX_FAILURES,
    executor: str = EXECUTOR, ray_address: Optional[str] = RAY_ADDRESS, workers: Optional[int] = WORKERS,
    gpus_per_worker: float = GPUS) -> None:
    """Continue an interrupted run with its recorded spec (API keys from the environment)."""
    _setup_logging()
    task, spec = _task_of(run)
    results = _execute(task, run, _options(True, False, spec.get("limit"), max_concurrency, spec.get("seed", 0),
                                           progress, allow_outside, max_image_mb, pixel_budget_mb, preflight,
                                           spec.get("shard"), executor=executor, ray_address=ray_address, workers=workers, gpus_per_worker=gpus_per_worker))
    _check_failures([results], max_failures)


@app.command("retry-failed")
def retry_failed_cmd(run: Path = typer.Argument(..., help="Run folder"), max_concurrency: int = CONCURRENCY,
                     progress: bool = PROGRESS, allow_outside: bool = ALLOW_OUTSIDE,
                     max_image_mb: float = MAX_IMAGE_MB, pixel_budget_mb: float = PIXEL_BUDGET_MB,
                     preflight: bool = PREFLIGHT, max_failures: float = MAX_FAILURES,
    executor: str = EXECUTOR, ray_address: Optional[str] = RAY_ADDRESS, workers: Optional[int] = WORKERS,
    gpus_per_worker: float = GPUS) -> None:
    """Run again only the samples that failed; finished ones are kept."""
    _setup_logging()
    task, spec = _task_of(run)
    options = _options(True, False, spec.get("limit"), max_concurrency, spec.get("seed", 0), progress,
                       allow_outside, max_image_mb, pixel_budget_mb, preflight, spec.get("shard"),
                       executor=executor, ray_address=ray_address, workers=workers, gpus_per_worker=gpus_per_worker)
    from .run.ray_executor import ExecutorError
    from .store.db import StoreError

    try:
        result = retry_failed(task, run, options)
    except (RunFolderExists, StoreError, SpecError, ExecutorError) as exc:
        _fail(_one_line(exc))
    counts = result.results["counts"]
    console.print(f"[green]done[/green] {counts['done']}/{counts['samples']} samples, {counts['failed']} failed")
    _check_failures([{**result.results, "_folder": str(run)}], max_failures)


@app.command()
def merge(out: Path = typer.Argument(..., help="Folder for the merged run"),
          shards: list[Path] = typer.Argument(..., help="The shard run folders (--shard i/N)"),
          max_failures: float = MAX_FAILURES) -> None:
    """Join the folders of a run split with --shard i/N into one run folder (idempotent, any N)."""
    from .run.merge import merge_runs
    from .store.db import StoreError

    _setup_logging()
    try:
        with _user_errors(FileNotFoundError):
            results = merge_runs(shards, out)
    except (RunFolderExists, StoreError) as exc:
        _fail(_one_line(exc))
    c = results["counts"]
    console.print(f"[green]merged[/green] {len(shards)} shards: {c['done']}/{c['samples']} samples done, "
                  f"{c['failed']} failed, {c['pending']} pending. Results: {out / 'results.json'}")
    if c["pending"]:
        console.print(f"[yellow]note:[/yellow] {c['pending']} samples are in no finished shard yet; merge again "
                      "when the other shards finish")
    _check_failures([{**results, "_folder": str(out)}], max_failures)


world_app = typer.Typer(no_args_is_help=True, help="The offline reference world.")
app.add_typer(world_app, name="world")


@world_app.command("pairs")
def world_pairs(out: Path = typer.Argument(..., help="Output folder"), n: int = typer.Option(20, "--n"),
                seed: int = typer.Option(0, "--seed")) -> None:
    """Write scene pairs that share objects (pairs.jsonl + images) for CAST."""
    from .world.make import make_world_pairs

    console.print(f"[green]wrote[/green] {n} pairs: {make_world_pairs(out, n=n, seed=seed)}")


@world_app.command("make")
def world_make(out: Path = typer.Argument(..., help="Output folder"),
               n: int = typer.Option(200, "--n", min=1, help="Number of scenes"),
               seed: int = typer.Option(0, "--seed"), size: int = typer.Option(384, "--size", help="Pixels")) -> None:
    """Write seeded scenes: images/<category>/*.png, scene graphs, descriptions, questions (manifest.jsonl)."""
    from .world.make import make_world

    manifest = make_world(out, n=n, seed=seed, size=size)
    console.print(f"[green]wrote[/green] {n} scenes: {manifest}")


@app.command()
def genception(
    vlm: list[str] = typer.Option(..., "--vlm", help="VLM spec; repeat for a leaderboard"),
    generator: str = typer.Option(..., "--generator", help="Image generator spec, e.g. openai-image:dall-e-3"),
    encoder: str = typer.Option(..., "--encoder", help="Image encoder spec, e.g. hf-encoder:google/vit-base-patch16-224-in21k"),
    data: Path = typer.Option(..., "--data", help="Image folder (categories = sub-folders) or JSONL manifest"),
    out: Path = typer.Option(..., "--out", help="Run folder (one sub-folder per VLM when several)"),
    T: int = typer.Option(3, "-T", "--iterations", help="Iterations T"),
    per_category: Optional[int] = typer.Option(
        None, "--per-category", min=1,
        help="Only K seeded random images per category (the human-baseline protocol: 5)"),
    external: Optional[Path] = typer.Option(None, "--external", help="CSV model,benchmark,score to correlate with"),
    api_key: Optional[str] = API_KEY,
    resume: bool = RESUME, overwrite: bool = OVERWRITE, limit: Optional[int] = LIMIT, shard: Optional[str] = SHARD,
    max_concurrency: int = CONCURRENCY, seed: int = SEED, progress: bool = PROGRESS,
    allow_outside: bool = ALLOW_OUTSIDE, max_image_mb: float = MAX_IMAGE_MB,
    pixel_budget_mb: float = PIXEL_BUDGET_MB, preflight: bool = PREFLIGHT, max_failures: float = MAX_FAILURES,
    executor: str = EXECUTOR, ray_address: Optional[str] = RAY_ADDRESS, workers: Optional[int] = WORKERS,
    gpus_per_worker: float = GPUS,
) -> None:
    """GenCeption: describe, regenerate, repeat T times; GC@1..T, GC_FID@t, categories, leaderboard."""
    from .methods.genception import GenCeptionSpec, GenCeptionTask
    from .methods.leaderboard import leaderboard

    _setup_logging()
    folders, all_results = [], []
    for one in vlm:
        with _user_errors(FileNotFoundError):
            spec = _spec_with_key(one, api_key)
            task = GenCeptionTask(GenCeptionSpec(vlm=spec.canonical(), generator=generator, encoder=encoder,
                                                 data=str(data), T=T, seed=seed, per_category=per_category),
                                 vlm=load_model(spec, "vlm"))
        folder = out if len(vlm) == 1 else out / _slug(spec.canonical())
        results = _execute(task, folder, _options(
            resume, overwrite, limit, max_concurrency, seed, progress, allow_outside, max_image_mb, pixel_budget_mb,
            preflight, shard, executor=executor, ray_address=ray_address, workers=workers, gpus_per_worker=gpus_per_worker))
        _print_gc(spec.canonical(), results["metrics"])
        folders.append(folder)
        all_results.append(results)
    if len(folders) > 1 or external:
        board = leaderboard(folders, external)
        write_text_atomic(out / "leaderboard.json", json.dumps(board, indent=2))
        _print_board(board)
        console.print(f"Leaderboard: {out / 'leaderboard.json'}")
    _check_failures(all_results, max_failures)


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80]


def _print_gc(model: str, m: dict) -> None:
    T = m["T"]
    if f"GC@{T}" not in m:
        console.print(f"{model}: no scored chains")
        return
    g, c = m[f"GC@{T}"], m["chains"]
    fid = m.get(f"GC_FID@{T}")
    console.print(f"{model}: GC@{T} = {g['score']:.4f} [{g['ci95'][0]:.4f}, {g['ci95'][1]:.4f}] "
                  f"(mean of {g['categories']} category means; over images {g['image_mean']:.4f}); "
                  + (f"GC_FID@{T} = {fid:.4g}; " if fid is not None else "")
                  + f"{c['scored']} chains scored, refusal rate {m['refusal_rate']:.1%}, {c['failed']} failed")


def _print_board(board: dict) -> None:
    key = board["metric"]
    table = Table("rank", "model", key, "95% CI", "GC rank")
    for model, r in board["models"].items():
        ci = r.get("ci95") or [float("nan")] * 2
        table.add_row(f"{r['rank']:.1f}", model, f"{r[key]:.4f}", f"[{ci[0]:.4f}, {ci[1]:.4f}]",
                      f"{r['gc_rank']:.2f}" if "gc_rank" in r else "-")
    Console(stderr=True).print(table)


@app.command()
def compare(runs: list[Path] = typer.Argument(..., help="GenCeption run folders"),
            external: Optional[Path] = typer.Option(None, "--external", help="CSV model,benchmark,score"),
            output: Path = typer.Option(Path("leaderboard.json"), "-o", "--output")) -> None:
    """Leaderboard of GenCeption runs made with the same generator, encoder and T."""
    from .methods.leaderboard import leaderboard

    with _user_errors(FileNotFoundError):
        board = leaderboard(runs, external)
    write_text_atomic(output, json.dumps(board, indent=2))
    _print_board(board)
    console.print(f"Leaderboard: {output}")


@app.command()
def meta(out: Path = typer.Option(Path("meta-run"), "--out"), n: int = typer.Option(50, "--n"),
         seed: int = SEED) -> None:
    """Meta-evaluation on the reference world: Kendall tau between true error and each metric."""
    from .world.meta import meta_evaluate

    _setup_logging()
    res = meta_evaluate(out, n=n, seed=seed, progress=True)
    metrics = list(res["kendall_tau"])
    table = Table("error level", *metrics)
    for lv, row in res["table"].items():
        table.add_row(lv, *[f"{row[m]:.4f}" for m in metrics])
    table.add_row("Kendall tau", *[f"{res['kendall_tau'][m]:.3f}" for m in metrics])
    Console().print(table)


@app.command("run")
def run_cmd(config: Optional[Path] = typer.Argument(None, help="Sweep config (YAML): models x methods"),
            example: bool = typer.Option(False, "--example", help="Print an annotated example config and exit."),
            progress: bool = PROGRESS) -> None:
    """Run a sweep: every method of the config on every model, into one folder, with one report."""
    from .methods import task_from_spec
    from .methods.leaderboard import leaderboard
    from .report.html import build_report, headline
    from .sweep import EXAMPLE, load_sweep, options_of, plan

    if example:
        typer.echo(EXAMPLE, nl=False)
        return
    if config is None:
        _fail("give a sweep config (vlmcheck run sweep.yaml); `vlmcheck run --example` prints one")
    _setup_logging()
    with _user_errors():
        sweep = load_sweep(config)
        runs = plan(sweep, config.parent)
    out = runs[0][0].parent.parent
    results, summary = [], []
    for folder, method, spec in runs:
        console.rule(f"[bold]{method}[/bold]: {spec['vlm']}")
        with _user_errors(FileNotFoundError):
            task = task_from_spec(method, spec)
        res = _execute(task, folder, options_of(sweep, progress))
        results.append(res)
        name, value = headline(res)
        summary.append({"method": folder.parent.name, "model": spec["vlm"], "folder": str(folder),
                        "metric": name, "value": value, "samples": res["counts"]["samples"],
                        "failed": res["counts"]["failed"]})
    table = Table("method", "model", "metric", "value", "failed", title=f"sweep {config}")
    for row in summary:
        value = "-" if row["value"] is None else f"{row['value']:.4f}"
        table.add_row(row["method"], row["model"], row["metric"], value, f"{row['failed']}/{row['samples']}")
    console.print(table)
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=2))
    for group in sorted({Path(r["folder"]).parent for r in summary if r["method"].startswith("genception")}):
        folders = [Path(r["folder"]) for r in summary if Path(r["folder"]).parent == group]
        if len(folders) > 1:
            write_text_atomic(group / "leaderboard.json", json.dumps(leaderboard(folders), indent=2))
    page = build_report([Path(r["folder"]) for r in summary], out / "report.html", title=f"vlmcheck sweep {config.name}")
    console.print(f"Summary: {out / 'summary.json'}  Report: {page}")
    _check_failures(results, sweep.options.max_failures)


@app.command("export")
def export_cmd(runs: list[Path] = typer.Argument(..., help="Finished run folders"),
               out: Path = typer.Option(..., "--out", help="Folder for the tables"),
               fmt: str = typer.Option("parquet", "--format", help="parquet, csv or jsonl")) -> None:
    """Tidy tables: one row per sample and step/variant/setting, one file per run, plus runs.<format>."""
    from .export import export_runs

    with _user_errors():
        files = export_runs(runs, out, fmt)
    console.print(f"[green]wrote[/green] {len(files)} tables to {out}: " + ", ".join(f.name for f in files))


@app.command()
def report(runs: list[Path] = typer.Argument(..., help="Run folders"),
           output: Path = typer.Option(Path("report.html"), "-o", "--output"),
           external: Optional[Path] = typer.Option(None, "--external", help="CSV model,benchmark,score"),
           title: str = typer.Option("vlmcheck report", "--title"),
           gallery: Optional[Path] = typer.Option(None, "--gallery",
                                                  help="Add a corruption gallery of this image")) -> None:
    """One static HTML report for any run or set of runs (thumbnails in <output>_files/)."""
    from .report.html import build_report

    missing = [r for r in runs if not (r / "results.json").exists()]
    if missing:
        _fail(f"not finished run folders (no results.json): {', '.join(map(str, missing))}")
    page = build_report(runs, output, external, title, gallery_image=gallery, progress=True)
    console.print(f"[green]wrote[/green] {page}")


@app.command()
def perturb(
    source: Path = typer.Argument(..., help="An image or a folder of images"),
    corruption: list[str] = typer.Option(..., "--corruption", "-c",
                                         help="Corruption name or VHExpansion preset (vhx_*); repeat; 'all' for every one"),
    severity: list[int] = typer.Option([3], "--severity", "-s", help="1-5; repeat for several"),
    out: Path = typer.Option(..., "--out", help="Output folder"),
    seed: int = SEED,
) -> None:
    """Write corrupted copies: OUT/<corruption>/s<severity>/<relative path>.png (lossless)."""
    from .core.images import BadImageError, iter_image_files, load_image
    from .perturb.image import CORRUPTIONS, PRESETS, corrupt

    names = sorted(CORRUPTIONS) if corruption == ["all"] else corruption
    unknown = [n for n in names if n not in CORRUPTIONS and n not in PRESETS]
    if unknown:
        _fail(f"unknown corruption(s) {unknown}; known: " + ", ".join(sorted(CORRUPTIONS) + sorted(PRESETS)))
    if any(not 1 <= s <= 5 for s in severity):
        _fail("severities are 1..5")
    files = [source] if source.is_file() else iter_image_files(source)
    base = source.parent if source.is_file() else source
    from .run.progress import track

    written = failed = 0
    for path in track(files, "perturb"):
        rel = path.relative_to(base).with_suffix(".png")
        try:
            img = load_image(path)
        except BadImageError as exc:
            console.print(f"[yellow]skipped[/yellow] {path}: {exc}")
            failed += 1
            continue
        for name in names:
            for sev in ([1] if name in PRESETS else severity):
                target = out / name / f"s{sev}" / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                corrupt(img, name, sev, seed=seed).save(target)
                written += 1
    console.print(f"[green]wrote[/green] {written} images under {out}" + (f"; {failed} unreadable" if failed else ""))


vhx_app = typer.Typer(no_args_is_help=True, help="VHExpansion: expand yes/no hallucination test cases.")
app.add_typer(vhx_app, name="vhx")


@vhx_app.command("run")
def vhx_run(
    vlm: str = typer.Option(..., "--vlm", help="VLM spec"),
    cases: Path = typer.Option(..., "--cases", help="JSONL/CSV (image, question, answer) or a world folder"),
    out: Path = typer.Option(..., "--out", help="Run folder"),
    negator: str = typer.Option("ref:negator", "--negator", help="TextModel spec for negation (paper prompt)"),
    perturb: str = typer.Option("vhx_gaussian_noise,vhx_brightness,vhx_defocus_blur,vhx_jpeg", "--perturb",
                                help="Comma-separated corruptions (name or name:severity); '' for none"),
    attack: Optional[str] = typer.Option(None, "--attack", help="ifgsm or pgd"),
    attack_target: Optional[str] = typer.Option(None, "--attack-target",
                                                help="Encoder spec to attack instead of the VLM (transfer)"),
    epsilon: float = typer.Option(8 / 255, "--epsilon"),
    steps_clean: int = typer.Option(500, "--steps-clean"),
    steps_hallucinated: int = typer.Option(100, "--steps-hallucinated"),
    repeats: int = typer.Option(1, "--repeats", min=1, help="Ask every question N times (Table 6e): mean and std"),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, help="Decoding temperature (Table 6f)"),
    api_key: Optional[str] = API_KEY,
    resume: bool = RESUME, overwrite: bool = OVERWRITE, limit: Optional[int] = LIMIT, shard: Optional[str] = SHARD,
    max_concurrency: int = CONCURRENCY, seed: int = SEED, progress: bool = PROGRESS,
    allow_outside: bool = ALLOW_OUTSIDE, max_image_mb: float = MAX_IMAGE_MB,
    pixel_budget_mb: float = PIXEL_BUDGET_MB, preflight: bool = PREFLIGHT, max_failures: float = MAX_FAILURES,
    executor: str = EXECUTOR, ray_address: Optional[str] = RAY_ADDRESS, workers: Optional[int] = WORKERS,
    gpus_per_worker: float = GPUS,
) -> None:
    """Negation, common and adversarial perturbations; accuracy and symmetric accuracy per variant."""
    from .methods.vhexpansion import VHExpansionTask, VHXSpec
    from .perturb.adversarial import AttackConfig

    _setup_logging()
    with _user_errors(FileNotFoundError):
        spec = _spec_with_key(vlm, api_key)
        task = VHExpansionTask(VHXSpec(
            vlm=spec.canonical(), cases=str(cases), negator=negator or None,
            perturb=[p.strip() for p in perturb.split(",") if p.strip()], attack=attack, attack_target=attack_target,
            attack_config=AttackConfig(epsilon=epsilon, steps_clean=steps_clean,
                                       steps_hallucinated=steps_hallucinated, seed=seed), seed=seed,
            repeats=repeats, temperature=temperature),
            vlm=load_model(spec, "vlm"))
    results = _execute(task, out, _options(
        resume, overwrite, limit, max_concurrency, seed, progress, allow_outside, max_image_mb, pixel_budget_mb,
        preflight, shard, executor=executor, ray_address=ray_address, workers=workers, gpus_per_worker=gpus_per_worker))
    _print_vhx(spec.canonical(), results["metrics"])
    _check_failures([results], max_failures)


def _print_vhx(model: str, m: dict) -> None:
    table = Table("variant", "accuracy", "symmetric acc.", "yes ratio", "new VH cases", title=model)
    for name, v in m.get("variants", {}).items():
        sym = v["symmetric_accuracy"]
        acc_s, sym_s = f"{v['accuracy']:.3f}", "-" if sym is None else f"{sym:.3f}"
        if "repeats" in v:  # Table 6e/6f: mean +- std over the repetitions
            ra, rs = v["repeats"]["accuracy"], v["repeats"]["symmetric_accuracy"]
            acc_s = f"{ra['mean']:.3f} ± {ra['std']:.3f}"
            sym_s = f"{rs['mean']:.3f} ± {rs['std']:.3f}"
        table.add_row(name, acc_s, sym_s, f"{v['yes_ratio']:.2f}", str(v["new_vh_cases"]))
    Console(stderr=True).print(table)
    if m.get("negation"):
        console.print(f"negations: {m['negation']['ok']} passed the check, {m['negation']['failed']} failed "
                      "(failed ones are left out of symmetric accuracy)")


@vhx_app.command("pope")
def vhx_pope(annotations: Path = typer.Option(..., "--annotations", help="COCO instances JSON or JSONL image,objects"),
             split: str = typer.Option("random", "--split", help="random, popular or adversarial"),
             n_images: int = typer.Option(500, "--n-images", min=1), seed: int = SEED,
             images: Optional[Path] = typer.Option(None, "--images",
                                                   help="Folder of the images (COCO: val2014/); default: beside "
                                                        "the annotations"),
             out: Path = typer.Option(..., "--out", help="Output JSONL of cases")) -> None:
    """Build a POPE split (3 positives + 3 negatives per image) as VHExpansion cases."""
    import os

    from .methods.pope import build_pope, load_annotations

    with _user_errors(KeyError):
        cases = build_pope(load_annotations(annotations), split, n_images=n_images, seed=seed)
    folder = images or annotations.parent
    missing = [c["image"] for c in cases if not (folder / c["image"]).is_file()]
    if missing:
        _fail(f"{len(set(missing))} images of the split are not in {folder} (e.g. {missing[0]}); pass --images "
              "with the folder that holds them (COCO: val2014/)")
    out.parent.mkdir(parents=True, exist_ok=True)
    outside = 0
    for c in cases:  # paths relative to the cases file, the way `vhx run` resolves them
        rel = os.path.relpath(os.path.realpath(folder / c["image"]), os.path.realpath(out.parent))
        outside += rel.startswith("..")
        c["image"] = rel
    write_text_atomic(out, "".join(json.dumps(c) + "\n" for c in cases))
    console.print(f"[green]wrote[/green] {len(cases)} cases ({split}) to {out}")
    if outside:
        console.print(f"[yellow]note:[/yellow] the images lie outside {out.parent}; `vhx run` reads them only with "
                      "--allow-outside (or write the cases inside the dataset's folder)")


@vhx_app.command("export")
def vhx_export(run: Path = typer.Argument(..., help="A finished vhx run folder"),
               out: Path = typer.Option(..., "--out", help="Folder for expanded.jsonl, images/, negations.csv")) -> None:
    """Export the expanded dataset with provenance, and the negations for human review."""
    from .methods.vhexpansion import export_expanded

    with _user_errors():
        manifest = export_expanded(run, out)
    console.print(f"[green]wrote[/green] {manifest} and {out / 'negations.csv'}")


@vhx_app.command("dataset")
def vhx_dataset(runs: list[Path] = typer.Argument(..., help="Finished vhx run folders"),
                out: Path = typer.Option(..., "--out", help="Folder for the training data"),
                rephraser: str = typer.Option("ref:paraphraser", "--rephraser",
                                              help="TextModel spec that rephrases each question k times"),
                k: int = typer.Option(4, "--k", min=0, help="Rephrasings per question (paper: 4); 0 for none"),
                train_fraction: float = typer.Option(0.5, "--train-fraction",
                                                     help="Share of source images trained on; the rest is held out"),
                vqa: Optional[Path] = typer.Option(None, "--vqa",
                                                   help="General VQA data in LLaVA's JSON format to mix in"),
                vqa_n: int = typer.Option(4000, "--vqa-n", min=1, help="Records sampled from --vqa (paper: 4,000)"),
                api_key: Optional[str] = API_KEY, seed: int = SEED) -> None:
    """Training data from expanded cases, split by image (held-out cases for `vhx run` before and after)."""
    from .finetune.data import build_dataset

    _setup_logging()
    with _user_errors(FileNotFoundError):
        model = load_model(_spec_with_key(rephraser, api_key), "text") if k else None
        build = build_dataset(runs, out, rephraser=model, k=k, train_fraction=train_fraction, seed=seed, vqa=vqa,
                              vqa_n=vqa_n)
    c = build["counts"]
    left = c["rephrasings_left_out"]
    console.print(f"[green]wrote[/green] {c['train_rows']} training rows ({c['expanded_rows']} expanded cases + "
                  f"{c['rephrased_rows']} rephrasings) from {c['train_images']} images, {c['vqa_rows']} VQA "
                  f"records, and {c['heldout_cases']} held-out cases on {c['heldout_images']} other images to "
                  f"{out}")
    if left["failed"] or left["unchanged_or_repeated"]:
        console.print(f"[yellow]note:[/yellow] rephrasings left out: {left['failed']} failed (first: {left['first_error']}), "
                      f"{left['unchanged_or_repeated']} unchanged or repeated")
    console.print(f"next: vlmcheck vhx finetune --model hf:MODEL --data {out} --out ADAPTER; evaluate with "
                  f"vlmcheck vhx run --cases {out / 'heldout.jsonl'}")


@vhx_app.command("finetune")
def vhx_finetune(model: str = typer.Option(..., "--model", help="hf:REPO_OR_PATH of the base model"),
                 data: Path = typer.Option(..., "--data", help="A `vhx dataset` folder (or a LLaVA JSON file)"),
                 out: Path = typer.Option(..., "--out", help="Folder for the LoRA adapter; re-run to resume"),
                 learning_rate: float = typer.Option(1.8e-6, "--learning-rate", help="Paper: 1.8e-6"),
                 epochs: float = typer.Option(1.0, "--epochs"),
                 max_steps: Optional[int] = typer.Option(None, "--max-steps", min=1),
                 lora_r: int = typer.Option(128, "--lora-r", min=1, help="LLaVA-1.5 LoRA recipe: 128"),
                 lora_alpha: int = typer.Option(256, "--lora-alpha", min=1, help="LLaVA-1.5 LoRA recipe: 256"),
                 batch_size: int = typer.Option(16, "--batch-size", min=1),
                 grad_accum: int = typer.Option(1, "--grad-accum", min=1),
                 save_steps: int = typer.Option(50, "--save-steps", min=1),
                 gradient_checkpointing: bool = typer.Option(True, "--gradient-checkpointing/--no-gradient-checkpointing"),
                 seed: int = SEED, progress: bool = PROGRESS) -> None:
    """LoRA fine-tuning (peft + transformers Trainer), loss on the answers only; resumes from checkpoints."""
    from .finetune.train import FinetuneConfig, finetune

    _setup_logging()
    with _user_errors(FileNotFoundError):
        cfg = FinetuneConfig(model=model, data=str(data), out=str(out), learning_rate=learning_rate, epochs=epochs,
                             max_steps=max_steps, lora_r=lora_r, lora_alpha=lora_alpha, batch_size=batch_size,
                             grad_accum=grad_accum, save_steps=save_steps,
                             gradient_checkpointing=gradient_checkpointing, seed=seed)
        rec = finetune(cfg, progress=progress)
    probe = ""
    if rec.get("probe_loss_before") is not None:
        probe = f"; answer loss on {min(cfg.probe_rows, rec['train_rows'])} training rows {rec['probe_loss_before']:.4f} -> " \
                f"{rec['probe_loss_after']:.4f}"
    resumed = f" (resumed from {rec['resumed_from']})" if rec.get("resumed_from") else ""
    console.print(f"[green]done[/green] {rec['global_step']} steps{resumed} on {rec['device']} ({rec['dtype']}), "
                  f"{rec['seconds_per_step']} s/step{probe}. Adapter: {out}; use hf:MODEL?adapter={out}")


@vhx_app.command("compare")
def vhx_compare(before: Path = typer.Argument(..., help="VHExpansion run of the base model"),
                after: Path = typer.Argument(..., help="VHExpansion run of the fine-tuned model, same cases"),
                general: Optional[list[str]] = typer.Option(None, "--general",
                                                            help="BEFORE_RUN,AFTER_RUN of a general-ability run "
                                                                 "(e.g. a ChEF MMBench recipe); repeat"),
                out: Optional[Path] = typer.Option(None, "--out",
                                                   help="Folder for compare.json and report.html")) -> None:
    """Accuracy and symmetric accuracy before and after fine-tuning, per dataset and variant (Tables 7, 8)."""
    from .finetune.compare import compare_vhx

    pairs = []
    for g in general or []:
        parts = [x.strip() for x in g.split(",")]
        if len(parts) != 2 or not all(parts):
            _fail(f"--general {g!r}: give two run folders as BEFORE_RUN,AFTER_RUN")
        pairs.append((Path(parts[0]), Path(parts[1])))
    with _user_errors():
        cmp = compare_vhx(before, after, pairs)
    table = Table("dataset", "variant", "n", "acc. before", "after", "Δ", "sym. before", "after", "Δ",
                  title=f"{cmp['before']['model']} -> {cmp['after']['model']}")
    f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    d = lambda x: "-" if x is None else f"{x:+.3f}"  # noqa: E731
    one_dataset = len({r["dataset"] for r in cmp["rows"]}) <= 2  # one dataset and "all": "all" repeats it
    for r in cmp["rows"]:
        if one_dataset and r["dataset"] == "all":
            continue
        a, s_ = r["accuracy"], r["symmetric_accuracy"]
        table.add_row(r["dataset"], r["variant"], str(r["n"]), f(a["before"]), f(a["after"]), d(a["delta"]),
                      f(s_["before"]), f(s_["after"]), d(s_["delta"]))
    Console(stderr=True).print(table)
    for g in cmp["general"]:
        console.print(f"general ability: {g['task']} {g['metric']} {f(g['before'])} -> {f(g['after'])} "
                      f"({d(g['delta'])})")
    console.print(f"{cmp['cases']['compared']} cases compared; {cmp['cases']['only_before']} only before, "
                  f"{cmp['cases']['only_after']} only after (left out)")
    if out is not None:
        from .report.html import build_report

        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out / "compare.json", json.dumps(cmp, indent=2) + "\n")
        runs = [before, after] + [p for pair in pairs for p in pair]
        build_report(runs, out / "report.html", title="vlmcheck: before and after fine-tuning", before_after=cmp)
        console.print(f"[green]wrote[/green] {out / 'compare.json'} and {out / 'report.html'}")


cast_app = typer.Typer(no_args_is_help=True, help="CAST: cross-modal self-consistency.")
app.add_typer(cast_app, name="cast")


@cast_app.command("pairs")
def cast_pairs(
    data: str = typer.Option(..., "--data", help="JSONL of scenes (image, description[, id]), a world folder, "
                                                 "or hfds:NAME?split=...&description_column=..."),
    encoder: str = typer.Option(..., "--encoder", help="Image encoder spec (CLIP image features where available)"),
    out: Path = typer.Option(..., "--out", help="Output pairs JSONL"),
    per_bin: int = typer.Option(25, "--per-bin"), min_chars: int = typer.Option(500, "--min-chars"),
    seed: int = SEED,
) -> None:
    """Sample scene pairs: image cosine in four bins of [0.75, 0.95), long descriptions, disjoint images."""
    import asyncio

    from .core.images import load_image
    from .methods.cast import corpus_from, sample_pairs, sentence_embeddings

    items = corpus_from(data)
    enc = load_model(encoder, "encoder")
    from .run.progress import track

    emb = asyncio.run(enc.encode([load_image(i["image"]) for i in track(items, "cast pairs: read images")]))
    pairs, report = sample_pairs(items, emb, per_bin=per_bin, min_chars=min_chars, seed=seed,
                                 text_emb=sentence_embeddings([i["description"] for i in items]))
    import os

    outside = 0
    for p in pairs:
        p["encoder"] = enc.model_id
        for side in ("a", "b"):  # relative to the pairs file where possible: `cast run` reads only inside its folder
            rel = os.path.relpath(os.path.realpath(p[side]["image"]), os.path.realpath(out.parent))
            if rel.startswith(".."):
                outside += 1
            else:
                p[side]["image"] = rel
    if outside:
        console.print(f"[yellow]note:[/yellow] {outside} images lie outside {out.parent}; `cast run` reads them "
                      "only with --allow-outside (or write the pairs file inside the corpus folder)")
    write_text_atomic(out, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))
    write_text_atomic(out.with_suffix(".report.json"), json.dumps(report, indent=2))
    console.print(f"[green]wrote[/green] {len(pairs)} pairs to {out}; per bin: "
                  + ", ".join(f"{b}: {v['sampled']}/{v['candidates']}" for b, v in report["bins"].items()))


@cast_app.command("run")
def cast_run(
    vlm: str = typer.Option(..., "--vlm", help="VLM spec"),
    pairs: Path = typer.Option(..., "--pairs", help="Pairs JSONL (cast pairs, or world pairs)"),
    out: Path = typer.Option(..., "--out", help="Run folder"),
    two_images: bool = typer.Option(False, "--two-images", help="Send two images instead of one side-by-side"),
    image_size: int = typer.Option(512, "--image-size"),
    api_key: Optional[str] = API_KEY,
    resume: bool = RESUME, overwrite: bool = OVERWRITE, limit: Optional[int] = LIMIT, shard: Optional[str] = SHARD,
    max_concurrency: int = CONCURRENCY, seed: int = SEED, progress: bool = PROGRESS,
    allow_outside: bool = ALLOW_OUTSIDE, max_image_mb: float = MAX_IMAGE_MB,
    pixel_budget_mb: float = PIXEL_BUDGET_MB, preflight: bool = PREFLIGHT, max_failures: float = MAX_FAILURES,
    executor: str = EXECUTOR, ray_address: Optional[str] = RAY_ADDRESS, workers: Optional[int] = WORKERS,
    gpus_per_worker: float = GPUS,
) -> None:
    """Generate similarities in 3 modalities, validate each in 3 modalities x 3 formats, score consistency."""
    from .methods.cast import CastSpec, CastTask

    _setup_logging()
    with _user_errors(FileNotFoundError):
        spec = _spec_with_key(vlm, api_key)
        task = CastTask(CastSpec(vlm=spec.canonical(), pairs=str(pairs), two_images=two_images,
                                 image_size=image_size, seed=seed), vlm=load_model(spec, "vlm"))
    results = _execute(task, out, _options(
        resume, overwrite, limit, max_concurrency, seed, progress, allow_outside, max_image_mb, pixel_budget_mb,
        preflight, shard, executor=executor, ray_address=ray_address, workers=workers, gpus_per_worker=gpus_per_worker))
    _print_cast(spec.canonical(), results["metrics"])
    _check_failures([results], max_failures)


def _print_cast(model: str, m: dict) -> None:
    top = m.get("topk", {}).get("top3", {}).get("mean")  # Top-3: the paper's headline
    if not top:
        return
    table = Table("generated in \\ validated in", "text", "image", "both",
                  title=f"{model}: CAST Top-3 self-consistency, mean of the three prompt formats")
    for g, row in top.items():
        table.add_row(g, *["-" if row[v]["score"] is None else f"{row[v]['score']:.3f}" for v in ("text", "image",
                                                                                                   "both")])
    Console(stderr=True).print(table)


chef_app = typer.Typer(no_args_is_help=True, help="ChEF: recipes and desiderata.")
app.add_typer(chef_app, name="chef")


@chef_app.command("list")
def chef_list() -> None:
    """Shipped recipes (ChEF Tables 5 and 7, and world recipes)."""
    from .methods.chef import Recipe, shipped_recipes

    table = Table("recipe", "desideratum", "scenario", "inferencer", "description")
    for name, path in shipped_recipes().items():
        r = Recipe.from_yaml(path)
        table.add_row(name, r.desideratum, r.scenario.type, r.inferencer.type, r.description)
    Console().print(table)


@chef_app.command("run")
def chef_run(
    recipe: str = typer.Option(..., "--recipe", help="Recipe YAML file or shipped recipe name (chef list)"),
    vlm: str = typer.Option(..., "--vlm", help="VLM spec"),
    out: Path = typer.Option(..., "--out", help="Run folder"),
    data: Optional[Path] = typer.Option(None, "--data", help="Scenario data (overrides the recipe's path)"),
    scenario: Optional[str] = typer.Option(None, "--scenario", help="Scenario loader (overrides the recipe's)"),
    judge: Optional[str] = typer.Option(None, "--judge", help="TextModel spec for language performance"),
    rewriter: Optional[str] = typer.Option(None, "--rewriter",
                                           help="TextModel spec for sentence-level text corruptions (robustness)"),
    extractor: Optional[str] = typer.Option(None, "--extractor",
                                            help="TextModel spec: second-step answer extraction (MMBench style)"),
    api_key: Optional[str] = API_KEY,
    resume: bool = RESUME, overwrite: bool = OVERWRITE, limit: Optional[int] = LIMIT, shard: Optional[str] = SHARD,
    max_concurrency: int = CONCURRENCY, seed: int = SEED, progress: bool = PROGRESS,
    allow_outside: bool = ALLOW_OUTSIDE, max_image_mb: float = MAX_IMAGE_MB,
    pixel_budget_mb: float = PIXEL_BUDGET_MB, preflight: bool = PREFLIGHT, max_failures: float = MAX_FAILURES,
    executor: str = EXECUTOR, ray_address: Optional[str] = RAY_ADDRESS, workers: Optional[int] = WORKERS,
    gpus_per_worker: float = GPUS,
) -> None:
    """Run a ChEF recipe; the metric follows its desideratum."""
    from .core.roles import CapabilityError
    from .methods.chef import ChefSpec, ChefTask, resolve_recipe

    _setup_logging()
    with _user_errors(FileNotFoundError, CapabilityError):
        r = resolve_recipe(recipe)
        if scenario:
            r.scenario.type = scenario
        if judge:
            r.metric.judge = judge
        if rewriter:
            r.metric.rewriter = rewriter
        if extractor:
            r.metric.extractor = extractor
        spec = _spec_with_key(vlm, api_key)
        task = ChefTask(ChefSpec(vlm=spec.canonical(), recipe=r, data=str(data) if data else None, seed=seed),
                        vlm=load_model(spec, "vlm"))
    results = _execute(task, out, _options(
        resume, overwrite, limit, max_concurrency, seed, progress, allow_outside, max_image_mb, pixel_budget_mb,
        preflight, shard, executor=executor, ray_address=ray_address, workers=workers, gpus_per_worker=gpus_per_worker))
    _print_chef(spec.canonical(), results["metrics"])
    _check_failures([results], max_failures)


@chef_app.command("aggregate")
def chef_aggregate(runs: list[Path] = typer.Argument(..., help="ChEF run folders of one desideratum"),
                   out: Optional[Path] = typer.Option(None, "--out", help="Write the table as JSON here")) -> None:
    """Cross-scenario Avg. (weighted by items, Tables 9 and 10), Table 8's overall calibration, seed deviations."""
    from .methods.chef.aggregate import aggregate

    with _user_errors():
        agg = aggregate(runs)
    cols = agg["columns"]
    table = Table("scenario", "recipe", "seed", "n", *cols, title=f"ChEF {agg['desideratum']}: {agg['model']}")
    f = lambda x: "-" if x is None else f"{x:.4f}"  # noqa: E731
    for r in agg["rows"]:
        table.add_row(r["scenario"], str(r["recipe"]), str(r["seed"]), str(r["n"]), *(f(r[c]) for c in cols))
    table.add_row("Avg. (weighted by n)", "", "", str(agg["avg"]["n"]), *(f(agg["avg"][c]) for c in cols))
    Console(stderr=True).print(table)
    if "overall" in agg:
        console.print(f"overall calibration (1 - weighted ECE, Table 8): {agg['overall']:.4f}")
    for sv in agg.get("seed_variance", []):
        devs = ", ".join(f"seed {s}: {d:.4f}" for s, d in sv["deviation"].items())
        console.print(f"seeds on {sv['scenario']} ({sv['recipe']}): mean {sv['column']} {sv['mean']:.4f}; |deviation| "
                      f"{devs}")
    if out is not None:
        write_text_atomic(out, json.dumps(agg, indent=2) + "\n")
        console.print(f"[green]wrote[/green] {out}")


def _print_chef(model: str, m: dict) -> None:
    """The recipe's headline metrics and the accuracy of each setting, as a table (4 decimals)."""
    keys = ("accuracy", "ece", "overall", "riam", "mr_weighted", "acc_vm", "rrm", "pope", "language",
            "circular_accuracy", "vanilla_accuracy", "weighted_accuracy", "grounding_accuracy", "detection",
            "turn_accuracy")

    def fmt(v) -> str:
        if isinstance(v, float):
            return f"{v:.4f}"
        if isinstance(v, dict):
            return ", ".join(f"{k} {fmt(x)}" for k, x in v.items() if isinstance(x, (int, float, str)))
        return str(v)

    table = Table("metric", "value", title=f"{model}: ChEF {m.get('recipe')} ({m.get('desideratum')})")
    for k in keys:
        if k in m:
            table.add_row(k, fmt(m[k]))
    for name, v in m.get("settings", {}).items():
        table.add_row(f"accuracy, {name}", fmt(v.get("accuracy")))
    console.print(table)


DEMO_LEVELS = (0.0, 0.1, 0.3)


@app.command()
def demo(out: Path = typer.Option(Path("demo-run"), "--out", help="Folder for the demo's data and runs"),
         n: int = typer.Option(24, "--n", help="World scenes for GenCeption")) -> None:
    """Offline demo: real photos described by a reference model, then GenCeption on the reference world
    with three describers of known error, and their leaderboard."""
    import time

    from .methods.describe import DescribeSpec, DescribeTask
    from .methods.genception import GenCeptionSpec, GenCeptionTask
    from .methods.leaderboard import leaderboard
    from .world.make import make_world
    from .world.photos import make_photo_dataset

    _setup_logging()
    started = time.perf_counter()
    progress = True  # a bar on a terminal, plain lines in a log
    # 1. describe real photographs (two broken files show per-sample errors)
    manifest = make_photo_dataset(out / "data", include_broken=True)
    console.rule("[bold]1. describe: scikit-image photos with ref:photo (EfficientNet-Lite0)")
    from .world.perceive import ocr_backend

    console.print(f"reference OCR: {ocr_backend()}")
    _execute(DescribeTask(DescribeSpec(vlm="ref:photo", data=str(manifest))), out / "describe",
             RunOptions(overwrite=True, progress=progress))
    from .core.files import read_jsonl

    for r in read_jsonl(out / "describe" / "samples.jsonl"):
        if r["status"] == "done":
            console.print(f"  {r['sample_id']:<11} recall={r['result'].get('keyword_recall', 0):.2f}  "
                          f"{r['result']['answer']}")
        else:
            console.print(f"  {r['sample_id']:<11} [yellow]error[/yellow] {r['error']['type']}: "
                          f"{r['error']['message']}")
    # 2. GenCeption on the reference world, three describers of increasing error
    console.rule(f"[bold]2. GenCeption (T=3) on {n} world scenes: ref:describer at error levels {DEMO_LEVELS}")
    world = out / "world"
    make_world(world, n=n, seed=0)
    folders = []
    for lv in DEMO_LEVELS:
        spec = f"ref:describer?level={lv}"
        task = GenCeptionTask(GenCeptionSpec(vlm=spec, generator="ref:renderer", encoder="ref:effnet",
                                             data=str(world), T=3))
        res = _execute(task, out / "genception" / f"level-{lv}", RunOptions(overwrite=True, progress=progress))
        _print_gc(spec, res["metrics"])
        folders.append(out / "genception" / f"level-{lv}")
    board = leaderboard(folders)
    write_text_atomic(out / "genception" / "leaderboard.json", json.dumps(board, indent=2))
    _print_board(board)
    # 3. CAST on world scene pairs that share objects
    from .methods.cast import CastSpec, CastTask
    from .world.make import make_world_pairs

    console.rule("[bold]3. CAST: similarities in 3 modalities, each validated in 3 modalities x 3 prompt formats")
    pairs = make_world_pairs(out / "world-pairs", n=8, seed=0)
    for lv in DEMO_LEVELS:
        spec = f"ref:describer?level={lv}"
        res = _execute(CastTask(CastSpec(vlm=spec, pairs=str(pairs))), out / "cast" / f"level-{lv}",
                       RunOptions(overwrite=True, progress=progress))
        _print_cast(spec, res["metrics"])
    # 4. ChEF desiderata on the world
    from .methods.chef import ChefSpec, ChefTask, resolve_recipe
    from .methods.pope import build_pope, load_annotations

    console.rule("[bold]4. ChEF on the world: calibration, robustness, hallucination (POPE), and FSC147 counting, "
                 "VOC2012 detection and Omnibenchmark chains by multi-turn PPL")
    pope = build_pope(load_annotations(world / "objects.jsonl"), "adversarial", n_images=n, per_image=2)
    # robustness: RRM is a ratio of accuracies over one question per scene; 24 scenes leave it to chance,
    # so its recipe gets a world of its own with 80 scenes
    robust_world = out / "world-robustness"
    make_world(robust_world, n=max(n, 80), seed=1)
    write_text_atomic(world / "pope-adversarial.jsonl", "".join(json.dumps(c) + "\n" for c in pope))
    for lv in (DEMO_LEVELS[0], DEMO_LEVELS[2]):
        spec = f"ref:describer?level={lv}"
        for name in ("calibration", "robustness", "hallucination"):
            # robustness: a describer that also reads corrupted scenes (robust=1), so that RRM measures how its
            # answers degrade rather than how often it gives up
            r = resolve_recipe(name)
            data = (world / "pope-adversarial.jsonl" if name == "hallucination" else
                    robust_world if name == "robustness" else world)
            if name != "hallucination":
                r.scenario.type = "world"
            vlm = f"{spec}&robust=1" if name == "robustness" else spec
            res = _execute(ChefTask(ChefSpec(vlm=vlm, recipe=r, data=str(data))), out / "chef" / f"{name}-{lv}",
                           RunOptions(overwrite=True, progress=progress))
            _print_chef(vlm, res["metrics"])
        # Table 5's turn scenarios on the world's counting, detection and category-chain data
        for name, data in (("fsc147", world / "counting.jsonl"), ("voc2012", world / "detection.jsonl"),
                           ("omnibenchmark", world / "hierarchy")):
            res = _execute(ChefTask(ChefSpec(vlm=spec, recipe=resolve_recipe(name), data=str(data))),
                           out / "chef" / f"{name}-{lv}", RunOptions(overwrite=True, progress=progress))
            _print_chef(spec, res["metrics"])
    # 5. VHExpansion on the world's yes/no questions
    from .methods.vhexpansion import VHExpansionTask, VHXSpec
    from .perturb.adversarial import AttackConfig

    console.rule("[bold]5. VHExpansion: negation (ref:negator), 4 common perturbations, I-FGSM transfer attack "
                 "from ref:effnet")
    for lv in DEMO_LEVELS:
        spec = f"ref:describer?level={lv}"
        attack = lv == DEMO_LEVELS[1]  # the attack is the slow part: one model shows it
        task = VHExpansionTask(VHXSpec(vlm=spec, cases=str(world), attack="ifgsm" if attack else None,
                                       attack_target="ref:effnet" if attack else None,
                                       attack_config=AttackConfig(steps_clean=10, steps_hallucinated=5)))
        res = _execute(task, out / "vhexpansion" / f"level-{lv}", RunOptions(overwrite=True, progress=progress))
        _print_vhx(spec, res["metrics"])
    from .report.html import build_report

    runs = sorted(p.parent for p in out.glob("*/*/results.json")) + [out / "describe"]
    page = build_report(runs, out / "report.html", title="vlmcheck offline demo",
                        gallery_image=out / "data" / "images" / "astronaut.png")
    console.print(f"Report: {page}")
    from .report.screens import screenshot_sections

    shots, why = screenshot_sections(page, out / "screenshots")
    if shots:
        console.print(f"Screenshots of the report, one per section: {out / 'screenshots'} ({len(shots)} files)")
    else:
        console.print(f"[yellow]note:[/yellow] no screenshots of the report: {why}")
    console.print(f"[green]demo finished[/green] in {time.perf_counter() - started:.0f} s. Run folders under {out}: "
                  "describe/, genception/level-*/, cast/level-*/, chef/*/, vhexpansion/level-*/ (each with results.json, samples.jsonl, "
                  "store.sqlite, artifacts/), genception/leaderboard.json")


def main() -> None:  # pragma: no cover - exercised through subprocesses in tests
    """The console script: a failure the user can act on ends in one sentence and exit 2, never a traceback."""
    import errno

    from .store.db import StoreError

    try:
        app()
    except StoreError as exc:
        _say_error(str(exc))
        sys.exit(2)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)):
            _say_error(f"no space left to write {exc.filename or 'the outputs'}; free some space and resume the "
                       "run (finished samples are kept)")
        elif isinstance(exc, PermissionError):
            _say_error(f"permission denied: {exc.filename or exc}; fix the permissions or choose another folder")
        else:
            raise
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
