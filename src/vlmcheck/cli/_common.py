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
from typing import Any

import typer

from ..core.secrets import install_log_redaction, register_secret
from ..core.spec import ModelSpec, SpecError
from .._lazy import lazy_module
from ..run.options import BY_NAME, CLI_ONLY, METHOD, RUN_OPTIONS, defaults, taken_by

api = lazy_module("vlmcheck.api")
runner = lazy_module("vlmcheck.run.runner")
terminal = lazy_module("vlmcheck.report.terminal")


def __getattr__(name: str) -> Any:
    if name == "console":  # ``C.console``: the terminal's console, loaded when first printed to
        return terminal.console
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_FROZEN: set[str] = set()


def freeze(stage: str) -> None:
    """Hand what exists now to the collector's permanent generation (:func:`gc.freeze`), once a process per
    ``stage`` ("start-up", "run"): it lives to the end, and walking it at every full collection frees nothing."""
    if stage not in _FROZEN:
        import gc

        _FROZEN.add(stage)
        gc.freeze()
        young, *older = gc.get_threshold()
        if 0 < young < CLI_GC_YOUNG:
            gc.set_threshold(CLI_GC_YOUNG, *older)


#: the young generation's threshold from the CLI's start-up on (Python's: 700): each collection walks the requests
#: in flight (docs/benchmarks.md, "Start-up"); a threshold the user set higher, or 0, is kept.
CLI_GC_YOUNG = 7000


def _finite(value: Any) -> Any:
    """A float option's value, refused where it is not a finite number (``inf`` passes a minimum)."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


#: a typer option for each run option of the table (run/options.py), by name
OPTION = {o.name: typer.Option(o.default, *o.flag_names, help=o.help, **o.cli,
                               **({"callback": _finite} if o.kind is float else {})) for o in RUN_OPTIONS}
SEED, PROGRESS, MAX_FAILURES, DRY_RUN = OPTION["seed"], OPTION["progress"], OPTION["max_failures"], OPTION["dry_run"]
JSON_OUT, API_KEY, REPORT = OPTION["json_output"], OPTION["api_key"], OPTION["report"]
VLM = typer.Option(..., "--vlm", metavar="SPEC", help="VLM spec, e.g. openai:gpt-4o-mini or ref:photo")
RUN_FOLDER = typer.Option(..., "--out", metavar="OUT", help="Run folder")
BENCHMARK = typer.Option(None, "--benchmark", metavar="NAME",
                         help="The benchmark the data is (mme, pope, scienceqa, mmbench, ...) where its form is "
                              "ambiguous; the same as NAME:PATH (vlmcheck data inspect says what is read)")


def source(flag: str, help: str, default: Any = ...) -> Any:
    """A dataset option (``--data``, ``--cases``, ``--pairs``): ``help``, then the forms every such option reads."""
    return typer.Option(default, flag, metavar="SOURCE", help=help + (
        "; or any form `vlmcheck data inspect` reads: hfds:ORG/NAME (local HF cache), a Hub snapshot or save_to_disk "
        "folder, a VLMEvalKit TSV, a benchmark's release (NAME:PATH)"))


def with_benchmark(source: str | None, benchmark: str | None) -> str | None:
    """``--benchmark NAME`` folded into the source as ``NAME:SOURCE`` (methods/records.py)."""
    if source is None or not benchmark:
        return source
    from ..methods.records import with_benchmark as fold

    with user_errors():
        return fold(str(source), benchmark)


REPEATS = typer.Option(1, "--repeats", min=1, metavar="N",
                       help="Run every sample N times (seeds seed..seed+N-1): the headline's spread over repeats "
                            "beside its interval.")
TEMPERATURE = typer.Option(0.0, "--temperature", min=0.0, metavar="T", help="Decoding temperature (with --repeats).")
BLIND = typer.Option(False, "--blind", help="Also ask every question with the image withheld (the blind control): "
                                            "blind accuracy and the vision gain beside each headline.")


class RunArgs(SimpleNamespace):
    """The run options of a command (``run_command``): ``.options(**recorded)`` is the runner's RunOptions
    (``recorded``: what a resumed run keeps, e.g. its limit)."""

    def options(self, **recorded: Any) -> "runner.RunOptions":
        values = {name: getattr(self, name) for name in BY_NAME if name not in CLI_ONLY}
        with user_errors():
            return runner.run_options(**{**values, **recorded})


def run_command(fn=None, *, entry: str = METHOD):
    """Give a command the run options its entry point takes (run/options.py: ``--resume``, ``--limit``,
    ``--executor`` ...) without listing them in its signature: typer reads the signature this sets; the command
    gets them as ``run``, a :class:`RunArgs`."""
    if fn is None:
        return functools.partial(run_command, entry=entry)
    import typing

    taken = taken_by(entry)
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)  # the command module's own annotations, resolved where they were written
    own = [p.replace(annotation=hints.get(name, p.annotation)) for name, p in sig.parameters.items()
           if name != "run"]
    extra = [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=OPTION[o.name], annotation=o.kind)
             for o in taken]

    @functools.wraps(fn)
    def command(*args, **kwargs):
        run = RunArgs(**{**defaults(), **{o.name: kwargs.pop(o.name) for o in taken}}, estimates=[], results=[])
        with quiet_tables(run.json_output and not run.dry_run):  # --json: JSON, not tables
            try:
                out = fn(*args, **kwargs, run=run)
            except typer.Exit:
                print_results(run)  # --json: a run that exits 1 (failed samples, budget) still prints its results
                raise
        if run.dry_run:  # every task the command would run was estimated by execute(); print them as one
            print_estimate(run.estimates, run.json_output)
        print_results(run)
        return out

    command.__signature__ = sig.replace(parameters=own + extra, return_annotation=None)
    command.__annotations__ = {p.name: p.annotation for p in own + extra}
    command.run_entry = entry  # tests/test_run_options.py finds the entry points by it
    del command.__wrapped__  # typer reads __signature__, not the wrapped function's
    return command


@contextlib.contextmanager
def quiet_tables(quiet: bool):
    """No result tables on stdout while ``quiet`` (``--json``: one JSON object instead)."""
    before = terminal.tables.quiet
    terminal.tables.quiet = before or quiet
    try:
        yield
    finally:
        terminal.tables.quiet = before


def print_results(run: "RunArgs") -> None:
    """``--json``: the results.json of every run the command made, as one JSON object (a list for several)."""
    if not run.json_output or run.dry_run or not run.results:
        return
    from ..core.printable import json_text
    from ..core.printable import json_inert
    from ..core.secrets import redact_obj

    done = [{k: v for k, v in r.items() if k != "_folder"} | {"folder": r.get("_folder")} for r in run.results]
    typer.echo(json_inert(json_text(redact_obj(done[0] if len(done) == 1 else done), indent=2)))
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


class Stopped(KeyboardInterrupt):
    """SIGTERM (SLURM's cancel, ``kill``) or SIGHUP (the terminal closed) during a run: raised as Ctrl-C's
    KeyboardInterrupt is, so the run ends the same way (the store closed, what finished kept)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: the signals that end a run like Ctrl-C, besides SIGINT itself (also where SIGINT is ignored: a background job)
STOP_SIGNALS = ("SIGTERM", "SIGHUP")


@contextlib.contextmanager
def interrupted(again: str, *args: Any):
    """Ctrl-C, SIGTERM or SIGHUP during a run: one sentence that says what is kept and the command that goes on
    (``vlmcheck again args...``), exit 128 + the signal's number."""
    import signal
    import threading

    def stop(signum: int, _frame: Any) -> None:
        raise Stopped(signum)

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():  # signal handlers belong to the main thread
        for name in STOP_SIGNALS:
            signum = getattr(signal, name, None)
            if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:  # nohup's SIGHUP stays ignored
                previous[signum] = signal.signal(signum, stop)
    try:
        yield
    except KeyboardInterrupt as exc:
        import shlex

        signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
        what = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
        command = " ".join(["vlmcheck", again, *(shlex.quote(str(a)) for a in args)])
        say_error(f"{what}; the samples that finished are kept: `{command}` goes on from there")
        raise typer.Exit(128 + int(signum)) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def say_error(message: str) -> None:
    """One sentence on one line (never read as rich markup: messages hold '[Errno 2]', '[REDACTED]'), with any
    registered key masked (a spec echoed in an error)."""
    from ..core.secrets import redact

    terminal.say(redact(message), "error:", "red")


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
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:  # not "[Errno 2] No such ...: 'x'"
        where = f"{exc.filename} -> {exc.filename2}" if exc.filename2 is not None else f"{exc.filename}"
        return f"{where}: {exc.strerror[:1].lower()}{exc.strerror[1:]}"
    return " ".join(str(exc).split())


@contextlib.contextmanager
def refused():
    """The errors that stop a run before its first sample: one sentence each."""
    try:
        yield
    except Exception as exc:
        from ..run.ray_executor import ExecutorError
        from ..store.db import StoreError

        if not isinstance(exc, (runner.RunFolderExists, StoreError, SpecError, ExecutorError)):
            raise
        fail(one_line(exc))


def execute(task, out: Path, opts: "runner.RunOptions | RunArgs", again: tuple[str, ...] = (),
            retry: bool = False) -> dict[str, Any] | None:
    """Run ``task`` into ``out`` (``retry``: only its failed samples again; and write its report) and print one
    line of counts.  Under ``--dry-run`` (``opts`` the command's :class:`RunArgs`): estimate the run instead, for
    the command to print, and return None.  Interrupted: the command that goes on is ``again`` (a sweep's), else
    ``vlmcheck resume OUT`` (``retry-failed OUT``)."""
    args = opts if isinstance(opts, RunArgs) else None
    opts = args.options() if args is not None else opts
    if args is not None and args.dry_run:
        from ..run.estimate import dry_run

        with refused():
            args.estimates.append(dry_run(task, out, opts))
        return None
    freeze("run")
    with refused(), interrupted(*(again or ("retry-failed" if retry else "resume", out))):
        result = (api.retry_failed if retry else api.run_task)(task, out, opts)
    terminal.run_done(out, result.results)
    result.results["_folder"] = str(out)
    if args is not None:
        args.results.append(result.results)
    budget = result.results.get("budget") or {}
    if budget.get("stopped"):  # --max-cost stopped the run: exit 1
        from ..run.budget import budget_message

        say_error(budget_message(budget))
        raise typer.Exit(1)
    return result.results


def method_task(task_cls: Any, vlm: str, run: RunArgs, *errors: type[BaseException], **fields: Any) -> Any:
    """A method command's task on one VLM: ``task_cls.spec_model`` from ``fields`` (``seed`` from --seed where
    the spec has one), the VLM spec with --api-key; a bad spec, data or file, or one of ``errors``: one sentence.
    A method whose first samples follow its data's rows reads only --limit rows."""
    from ..core.dataset_files import first_rows
    from ..core.spec import load_model

    setup_logging()
    if "seed" in task_cls.spec_model.model_fields:
        fields.setdefault("seed", run.seed)
    follows = task_cls.samples_follow_rows(fields)
    with user_errors(FileNotFoundError, *errors), first_rows(run.limit if follows else None):
        spec = spec_with_key(vlm, run.api_key)
        return task_cls(task_cls.spec_model(vlm=spec.canonical(), **fields), vlm=load_model(spec, "vlm"))


def run_method(task: Any, out: Path, run: RunArgs, check: bool = True, retry: bool = False,
               **recorded: Any) -> dict[str, Any] | None:
    """A command's run of ``task`` into ``out`` (``recorded``: what a resumed run keeps; ``retry``: its failed
    samples only): its results printed and, with ``check``, exit 1 past --max-failures; None under --dry-run."""
    results = execute(task, out, run.options(**recorded) if recorded else run, retry=retry)
    if results is not None:
        terminal.results(results)
        if check:
            check_failures([results], run.max_failures)
    return results


def print_estimate(estimates: list[dict[str, Any]], as_json: bool) -> None:
    from ..run.estimate import merge_estimates

    est = estimates[0] if len(estimates) == 1 and "runs" in estimates[0] else merge_estimates(estimates)
    if as_json:
        typer.echo(json.dumps(est))
    else:
        terminal.estimate(est)


def check_failures(runs: list[dict], max_failures: float) -> None:
    """Exit 1 when a run has a larger share of failed samples than ``max_failures`` (finished ones are kept)."""
    bad = [f"{c['failed']} of {c['samples']} samples failed in {r.get('_folder', 'the run')}"
           for r in runs if (c := r["counts"])["failed"] and c["failed"] > max_failures * c["samples"]]
    if bad:
        first = runs[0].get("_folder", "RUN")
        say_error("; ".join(bad) + f" (finished samples are kept; see samples.jsonl, then `vlmcheck retry-failed "
                                   f"{first}`, or allow some with --max-failures RATE)")
        raise typer.Exit(1)


def task_of(run: Path):
    """The task recorded in a run folder, rebuilt from its spec, and the spec."""
    from ..core.dataset_files import first_rows
    from ..run.data_pin import resolve_recorded
    from ..run.task import task_class, task_from_spec
    from ..store.db import RunStore, StoreError

    try:
        with RunStore(run, existing=True) as store:
            spec = store.get_meta("spec")
    except StoreError as exc:
        fail(one_line(exc))
    # the data at its recorded real path (run/data_pin.py); under the recorded --limit, the rows it read
    task_spec = resolve_recorded(spec["task_spec"], spec.get("data"))
    follows = getattr(task_class(spec["task"]), "samples_follow_rows", lambda _: False)(task_spec)
    with user_errors(FileNotFoundError), first_rows(spec.get("limit") if follows else None):
        return task_from_spec(spec["task"], task_spec), spec
