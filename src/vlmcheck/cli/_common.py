"""What every command shares: the run options, one-sentence errors, and running a task into a folder.

A failure the user can act on (a bad spec, bad data, a folder in use) ends in one sentence on stderr and exit
2; a run with more failed samples than ``--max-failures`` allows ends in exit 1.  Never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import inspect
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import typer

from ..core.secrets import install_log_redaction, register_secret
from ..core.spec import ModelSpec, SpecError
from ._lazy import lazy_module

api = lazy_module("vlmcheck.api")
runner = lazy_module("vlmcheck.run.runner")
terminal = lazy_module("vlmcheck.report.terminal")



def __getattr__(name: str) -> Any:
    if name == "console":  # ``C.console``: the terminal's console, loaded when first printed to
        return terminal.console
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

RESUME = typer.Option(False, "--resume", help="Continue the run in OUT, skipping finished samples.")
OVERWRITE = typer.Option(False, "--overwrite", help="Delete an existing run in OUT first.")
LIMIT = typer.Option(None, "--limit", min=1, metavar="N", help="Only the first N samples.")
SHARD = typer.Option(None, "--shard", metavar="I/N", help="Run only shard i of N (by a hash of the sample id); "
                                                          "`vlmcheck merge` joins the shard folders.")
CONCURRENCY = typer.Option(16, "--max-concurrency", min=1, max=100_000, metavar="N",
                           help="Samples and model calls in flight at once.")
ALLOW_OUTSIDE = typer.Option(False, "--allow-outside",
                             help="Read dataset images that resolve outside the dataset's folder.")
MAX_IMAGE_MB = typer.Option(256.0, "--max-image-mb", min=0.001, metavar="MB",
                            help="Refuse image files larger than this, unread.")
PIXEL_BUDGET_MB = typer.Option(2000.0, "--pixel-budget-mb", min=1.0, metavar="MB",
                               help="Decoded image pixels held by samples in flight at once (MB).")
PREFLIGHT = typer.Option(True, "--preflight/--no-preflight",
                         help="Check each API model (reachable, key accepted, model served) before the first sample.")
MAX_FAILURES = typer.Option(0.0, "--max-failures", min=0.0, max=1.0, metavar="RATE",
                            help="Share of failed samples the run may have and still exit 0.")
BENCHMARK = typer.Option(None, "--benchmark", metavar="NAME",
                         help="The benchmark the data is (mme, pope, scienceqa, mmbench, ...) where its form is "
                              "ambiguous; the same as NAME:PATH (vlmcheck data inspect says what is read)")
DATA_HELP = ("; or any form `vlmcheck data inspect` reads: hfds:ORG/NAME (local HF cache), a Hub snapshot or "
             "save_to_disk folder, a VLMEvalKit TSV, a benchmark's release (NAME:PATH)")


def with_benchmark(source: str | None, benchmark: str | None) -> str | None:
    """``--benchmark NAME`` folded into the source as ``NAME:SOURCE`` (methods/records.py)."""
    if source is None or not benchmark:
        return source
    from ..methods.records import with_benchmark as fold

    with user_errors():
        return fold(str(source), benchmark)


SEED = typer.Option(0, "--seed", help="Seed for every random choice of the run.")
REPEATS = typer.Option(1, "--repeats", min=1, metavar="N",
                       help="Run every sample N times (seeds seed..seed+N-1): the headline's spread over repeats "
                            "beside its interval.")
TEMPERATURE = typer.Option(0.0, "--temperature", min=0.0, metavar="T", help="Decoding temperature (with --repeats).")
BLIND = typer.Option(False, "--blind", help="Also ask every question with the image withheld (the blind control): "
                                            "blind accuracy and the vision gain beside each headline.")
REPORT = typer.Option(True, "--report/--no-report",
                      help="Write report.html at the end (`vlmcheck report RUN` makes it later).")
DRY_RUN = typer.Option(False, "--dry-run", help="Make no model call: print the calls still to make per role, their "
                                                  "estimated tokens and cost.")
JSON_OUT = typer.Option(False, "--json", help="Print the results (with --dry-run: the estimate) as one JSON object "
                                                "on stdout instead of tables.")
MAX_COST = typer.Option(None, "--max-cost", metavar="USD",
                        help="Start no new sample once the cost spent plus the samples in flight would pass USD; "
                             "exit 1, finished samples kept.")
API_KEY = typer.Option(None, "--api-key", metavar="KEY",
                       help="API key for the model (else from the environment). Never stored.",
                       envvar="VLMCHECK_API_KEY", show_envvar=False)
PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show a progress bar.")
EXECUTOR = typer.Option("local", "--executor", metavar="local|ray",
                        help="local (this process) or ray (Ray actors; pip install 'vlmcheck[ray]').")
RAY_ADDRESS = typer.Option(None, "--address", metavar="ADDRESS",
                           help="Ray cluster to join (auto, or HOST:PORT); default: a local one.")
WORKERS = typer.Option(None, "--workers", min=1, metavar="N",
                       help="Ray actors (default: one per CPU of the cluster, at most 8).")
GPUS = typer.Option(0.0, "--gpus-per-worker", min=0.0, metavar="G", help="GPUs each Ray actor reserves.")


#: the options every run command takes, in the order --help lists them (after the command's own)
_RUN_OPTIONS = (("api_key", Optional[str], API_KEY), ("resume", bool, RESUME), ("overwrite", bool, OVERWRITE),
                ("limit", Optional[int], LIMIT), ("shard", Optional[str], SHARD),
                ("max_concurrency", int, CONCURRENCY), ("seed", int, SEED), ("progress", bool, PROGRESS),
                ("allow_outside", bool, ALLOW_OUTSIDE), ("max_image_mb", float, MAX_IMAGE_MB),
                ("pixel_budget_mb", float, PIXEL_BUDGET_MB), ("preflight", bool, PREFLIGHT),
                ("max_failures", float, MAX_FAILURES), ("executor", str, EXECUTOR),
                ("ray_address", Optional[str], RAY_ADDRESS), ("workers", Optional[int], WORKERS),
                ("gpus_per_worker", float, GPUS), ("max_cost", Optional[float], MAX_COST),
                ("dry_run", bool, DRY_RUN), ("json_output", bool, JSON_OUT), ("report", bool, REPORT))


class RunArgs(SimpleNamespace):
    """The run options of a command (``run_command``): ``.options()`` is the runner's RunOptions."""

    def options(self) -> "runner.RunOptions":
        return options(self.resume, self.overwrite, self.limit, self.max_concurrency, self.seed, self.progress,
                       self.allow_outside, self.max_image_mb, self.pixel_budget_mb, self.preflight, self.shard,
                       executor=self.executor, ray_address=self.ray_address, workers=self.workers,
                       gpus_per_worker=self.gpus_per_worker, max_cost=self.max_cost,
                       report=self.report)


def run_command(fn):
    """Give a command every run option (``--resume``, ``--limit``, ``--executor`` ...) without listing them in its
    signature: typer reads the signature this sets; the command gets them as ``run``, a :class:`RunArgs`."""
    import typing

    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)  # the command module's own annotations, resolved where they were written
    own = [p.replace(annotation=hints.get(name, p.annotation)) for name, p in sig.parameters.items()
           if name != "run"]
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
             for name, kind, default in _RUN_OPTIONS]

    @functools.wraps(fn)
    def command(*args, **kwargs):
        run = RunArgs(**{name: kwargs.pop(name) for name, _, _ in _RUN_OPTIONS}, estimates=[], results=[])
        quiet = terminal.tables.quiet
        terminal.tables.quiet = quiet or (run.json_output and not run.dry_run)  # --json: JSON, not tables
        try:
            out = fn(*args, **kwargs, run=run)
        except typer.Exit:
            print_results(run)  # --json: a run that exits 1 (failed samples, budget) still prints its results
            raise
        finally:
            terminal.tables.quiet = quiet
        if run.dry_run:  # every task the command would run was estimated by execute(); print them as one
            print_estimate(run.estimates, run.json_output)
        print_results(run)
        return out

    command.__signature__ = sig.replace(parameters=own + extra, return_annotation=None)
    command.__annotations__ = {p.name: p.annotation for p in own + extra}
    del command.__wrapped__  # typer reads __signature__, not the wrapped function's
    return command


def print_results(run: "RunArgs") -> None:
    """``--json``: the results.json of every run the command made, as one JSON object (a list for several)."""
    if not run.json_output or run.dry_run or not run.results:
        return
    from ..core.files import json_text
    from ..core.secrets import redact_obj

    done = [{k: v for k, v in r.items() if k != "_folder"} | {"folder": r.get("_folder")} for r in run.results]
    typer.echo(json_text(redact_obj(done[0] if len(done) == 1 else done), indent=2))
    run.results = []


def fraction(text: str) -> float:
    """A number as a user writes it on the command line: a decimal (0.0314) or a fraction (8/255)."""
    num, slash, den = str(text).partition("/")
    try:
        return float(num) / float(den) if slash else float(num)
    except (ValueError, ZeroDivisionError):
        raise typer.BadParameter(f"{text!r} is not a number or a fraction such as 8/255") from None


def setup_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_log_redaction()


def spec_with_key(spec: str, api_key: str | None) -> ModelSpec:
    parsed = ModelSpec.parse(spec)
    if api_key:
        register_secret(api_key)
        parsed._secrets["api_key"] = api_key
    return parsed


@contextlib.contextmanager
def user_errors(*kinds: type[BaseException]):
    """Print a user error (bad spec, bad data, missing capability...) and exit with status 2."""
    try:
        yield
    except IsADirectoryError as exc:  # a folder given where a file was expected (a cases file, a scenario file)
        fail(f"{exc.filename}: a folder, where a file was expected")
    except (SpecError, ValueError, *kinds) as exc:
        fail(one_line(exc))


def say_error(message: str) -> None:
    """One sentence on one line (never read as rich markup: messages hold '[Errno 2]', '[REDACTED]')."""
    from rich.markup import escape

    terminal.console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)


def fail(message: str) -> None:
    say_error(message)
    raise typer.Exit(2)


def one_line(exc: BaseException) -> str:
    """An exception as one sentence: pydantic's multi-line validation report is folded into one line."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        parts = [f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()[:3]]
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        return f"invalid {exc.title}: " + "; ".join(parts) + more
    return " ".join(str(exc).split())


def options(resume, overwrite, limit, max_concurrency, seed, progress, allow_outside=False, max_image_mb=256.0,
            pixel_budget_mb=2000.0, preflight=True, shard=None, executor="local", ray_address=None, workers=None,
            gpus_per_worker=0.0, max_cost=None, report=True) -> "runner.RunOptions":
    if executor not in ("local", "ray"):
        fail(f"--executor {executor!r}: use local or ray")
    with user_errors():
        parsed = runner.parse_shard(shard) if isinstance(shard, str) or shard is None else tuple(shard)
        from ..run.budget import check_max_cost

        max_cost = check_max_cost(max_cost)  # 0, NaN, infinity: one sentence, not a traceback
    return runner.RunOptions(resume=resume, overwrite=overwrite, limit=limit, max_concurrency=max_concurrency,
                             seed=seed, progress=progress, allow_outside=allow_outside,
                             max_image_bytes=int(max_image_mb * 1e6), pixel_budget=int(pixel_budget_mb * 1e6),
                             preflight=preflight, shard=parsed, executor=executor, ray_address=ray_address,
                             workers=workers, gpus_per_worker=gpus_per_worker, max_cost=max_cost, report=report)


def refusals() -> tuple[type[BaseException], ...]:
    """The errors that stop a run before its first sample: one sentence each."""
    from ..run.ray_executor import ExecutorError
    from ..store.db import StoreError

    return runner.RunFolderExists, StoreError, SpecError, ExecutorError


def execute(task, out: Path, opts: "runner.RunOptions | RunArgs", run=None) -> dict[str, Any] | None:
    """Run ``task`` into ``out`` (and write its report) and print one line of counts.  Given the command's
    :class:`RunArgs` with ``--dry-run``: estimate the run instead (kept for the command to print) and return
    None; with ``--max-cost``: exit 1 with one sentence when the budget stopped the run."""
    run = run or api.run_task
    args = opts if isinstance(opts, RunArgs) else None
    opts = args.options() if args is not None else opts
    if args is not None and args.dry_run:
        from ..run.estimate import dry_run

        try:
            args.estimates.append(dry_run(task, out, opts))
        except refusals() as exc:
            fail(one_line(exc))
        return None
    try:
        result = run(task, out, opts)
    except refusals() as exc:
        fail(one_line(exc))
    terminal.run_done(out, result.results)
    result.results["_folder"] = str(out)
    if args is not None:
        args.results.append(result.results)
    budget = result.results.get("budget") or {}
    if budget.get("stopped"):
        from ..run.budget import budget_message

        say_error(budget_message(budget))
        raise typer.Exit(1)
    return result.results


def print_estimate(estimates: list[dict[str, Any]], as_json: bool) -> None:
    from ..run.estimate import merge_estimates

    est = estimates[0] if len(estimates) == 1 and "runs" in estimates[0] else merge_estimates(estimates)
    if as_json:
        typer.echo(json.dumps(est))
    else:
        terminal.estimate(est)


def check_failures(runs: list[dict], max_failures: float) -> None:
    """Exit 1 when a run has a larger share of failed samples than ``max_failures`` (finished ones are kept)."""
    bad = []
    for r in runs:
        c = r["counts"]
        if c["failed"] and c["failed"] > max_failures * c["samples"]:
            bad.append(f"{c['failed']} of {c['samples']} samples failed in {r.get('_folder', 'the run')}")
    if bad:
        first = runs[0].get("_folder", "RUN")
        say_error("; ".join(bad) + f" (finished samples are kept; see samples.jsonl, then `vlmcheck retry-failed "
                                   f"{first}`, or allow some with --max-failures RATE)")
        raise typer.Exit(1)


def task_of(run: Path):
    """The task recorded in a run folder, rebuilt from its spec, and the spec."""
    from ..run.task import task_from_spec
    from ..store.db import RunStore, StoreError

    try:
        with RunStore(run, existing=True) as store:
            spec = store.get_meta("spec")
    except StoreError as exc:
        fail(one_line(exc))
    from ..run.data_pin import resolve_recorded

    with user_errors(FileNotFoundError):
        # the data at its recorded real path: the same data from any folder (run/data_pin.py)
        return task_from_spec(spec["task"], resolve_recorded(spec["task_spec"], spec.get("data"))), spec


def slug(text: str) -> str:
    """A model spec as a folder name."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80]
