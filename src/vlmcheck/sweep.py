"""One config for a sweep: models x methods into one folder, one report (docs/usage.md, "Sweeps").

Every run goes to ``OUT/<method>[-<name>]/<model>`` and is resumed; then ``OUT/report.html``, ``OUT/summary.json``
and, for a method with a leaderboard and two or more models, ``OUT/<method>[-<name>]/leaderboard.json``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, create_model

from .api import run_task
from .core import remote
from .core.files import InputFileError, read_yaml_mapping, write_text_atomic
from .core.spec import public_spec
from .datasets import parse_source
from .run.labels import run_labels
from .run.options import SWEEP, taken_by
from .run.runner import RunOptions

_METHODS = """\
methods:
  - method: genception          # describe, regenerate, repeat T times
    data: world/                # `vlmcheck world make world --n 24`, or an image folder / manifest
    generator: ref:renderer     # e.g. openai-image:dall-e-3 or diffusers:stabilityai/sd-turbo?steps=1
    encoder: ref:effnet         # e.g. hf-encoder:google/vit-base-patch16-224-in21k
    T: 3
  - method: vhexpansion         # negation and perturbations of yes/no cases
    cases: world/
    negator: ref:negator        # any TextModel spec
  - method: cast                # cross-modal self-consistency on scene pairs
    pairs: pairs/pairs.jsonl    # `vlmcheck world pairs pairs`
  - method: chef                # a ChEF recipe (`name` tells two ChEF entries apart)
    name: world
    recipe: world-accuracy
    data: world/
"""

EXAMPLE = """\
# vlmcheck sweep: every method below runs on every model; `vlmcheck run sweep.yaml`.
# Runs go to OUT/<method>[-<name>]/<model>; running the file again skips what is finished.
out: runs/sweep

models:
  # an OpenAI-compatible server: vLLM (`vllm serve Qwen/Qwen2-VL-7B-Instruct`), SGLang, LM Studio, llama.cpp
  - openai:Qwen/Qwen2-VL-7B-Instruct@http://localhost:8000/v1?concurrency=32
  # Ollama's OpenAI-compatible endpoint; `name` is the folder name (default: the spec, made file-safe);
  # `label` the name tables and reports show (default: the model's id, here llava:7b)
  - name: llava-ollama
    label: LLaVA 7B (Ollama)
    spec: openai:llava:7b@http://localhost:11434/v1
  # the OpenAI API (key from OPENAI_API_KEY) and Anthropic (ANTHROPIC_API_KEY)
  - openai:gpt-4o-mini
  - anthropic:claude-sonnet-4-5
  # a local transformers model
  - hf:HuggingFaceTB/SmolVLM-256M-Instruct?device=cuda&dtype=bfloat16
  # offline reference models (docs/world.md): try the whole file with only these two
  - ref:describer?level=0.1
  - ref:describer?level=0.3

""" + _METHODS + """
# track: [mlflow]               # log every run to MLflow, W&B (wandb) or TensorBoard, grouped by sweep

options:                        # for every run (the CLI's run options)
  max_concurrency: 16
  limit: null                   # only the first N samples of each run
  seed: 0
  max_failures: 0.0             # share of failed samples a run may have and still count as passed
"""

OFFLINE_EXAMPLE = """\
# vlmcheck sweep that runs offline, with the reference models (docs/world.md).  Make its data first:
#   vlmcheck world make world --n 24 && vlmcheck world pairs pairs --n 8
# then `vlmcheck run sweep.yaml`.  Runs go to OUT/<method>[-<name>]/<model>; running it again skips what is
# finished.  `vlmcheck run --example` shows API servers, hosted APIs and local checkpoints as models.
out: runs/sweep

models:
  - ref:describer?level=0.1     # a describer with 10 % of its scene readings wrong
  - name: noisy                 # `name` is the folder name (default: the spec, made file-safe)
    spec: ref:describer?level=0.3
  # - openai:Qwen/Qwen2-VL-7B-Instruct@http://localhost:8000/v1   # a vLLM / SGLang / llama.cpp server

""" + _METHODS + """
options:
  max_concurrency: 16
"""

PATH_OPTIONS = ("data", "cases", "pairs")


class SweepModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    spec: str
    name: str | None = None  # the folder's name
    label: str | None = None  # the name tables and reports show (run/labels.py; default: the model's id)


#: the run options a sweep's ``options:`` takes, with the CLI's defaults and bounds (run/options.py says why it
#: takes no other, and which are flags of ``vlmcheck run`` instead: ``shown``)
SweepOptions = create_model("SweepOptions", __config__=ConfigDict(extra="forbid"), **{
    o.name: (o.kind, Field(o.default, ge=o.cli.get("min"), le=o.cli.get("max"))) for o in taken_by(SWEEP)
    if not o.shown})


class Sweep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    out: str
    models: list[str | SweepModel] = Field(min_length=1)
    methods: list[dict[str, Any]] = Field(min_length=1)
    options: SweepOptions = Field(default_factory=SweepOptions)
    #: experiment trackers every run is logged to, grouped under the sweep (vlmcheck/track)
    track: list[str] = Field(default_factory=list)


def folder_name(text: str) -> str:
    """A model spec or an entry's name as a folder name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "model"


def _models(sweep: Sweep) -> list[tuple[SweepModel, str]]:
    """Each model of the sweep and its folder's name (a credential never names a folder)."""
    models = [m if isinstance(m, SweepModel) else SweepModel(spec=m) for m in sweep.models]
    return [(m, m.name or folder_name(public_spec(m.spec))) for m in models]


SWEEP_MARKER = ".vlmcheck-sweep"  # written into a sweep's folder: its summary.json and report.html are the sweep's
_SWEEP_FILES = ("summary.json", "report.html")


def _is_sweep_summary(path: Path) -> bool:
    """A summary.json that a sweep wrote (a list of rows with a method and a folder), from before the marker."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(rows, list) and all(isinstance(r, dict) and {"method", "folder"} <= set(r) for r in rows)


def check_out(out: Path) -> None:
    """The CLI's rules for an output folder, for a sweep's ``out``: not a dangling or looping link,
    not a file, and never a folder whose ``summary.json`` or ``report.html`` is the user's own (a folder the
    sweep made holds its marker, or a summary.json that a sweep wrote)."""
    from .core.files import broken_link

    for p in (out, *out.parents):
        why = broken_link(p)
        if why:
            raise InputFileError(f"out: {why}")
    if out.exists() and not out.is_dir():
        raise InputFileError(f"out: {out} is a file, not a folder")
    if not out.is_dir() or (out / SWEEP_MARKER).exists():
        return
    theirs = [n for n in _SWEEP_FILES if (out / n).exists() or (out / n).is_symlink()]
    if theirs and not ((out / "summary.json").is_file() and _is_sweep_summary(out / "summary.json")):
        raise InputFileError(f"out: {out} holds {' and '.join(theirs)} that a sweep did not write; a sweep never "
                             f"replaces them: choose another out")


def plan(sweep: Sweep, base: Path) -> list[tuple[Path, str, dict[str, Any]]]:
    """(run folder, task name, task spec) of every run, in config order (methods outer, models inner)."""
    from .run.task import task_class, task_names

    TASK_NAMES = task_names()
    if not sweep.out.strip():  # the CLI refuses `--out ""`: so does a sweep (else the config's own folder)
        raise InputFileError("out: empty (an unset variable?); give the sweep's folder, e.g. out: runs/sweep")
    out = Path(sweep.out) if Path(sweep.out).is_absolute() else base / sweep.out
    models = _models(sweep)
    if len({name for _, name in models}) != len(models):
        raise InputFileError("two models share a folder name; give them distinct `name`s")
    runs, seen = [], set()
    for i, entry in enumerate(sweep.methods):
        opts = dict(entry)
        method, label = opts.pop("method", None), opts.pop("name", None)
        if method not in TASK_NAMES:
            raise InputFileError(f"methods[{i}]: method must be one of {', '.join(TASK_NAMES)} (got {method!r})")
        fields = task_class(method).spec_model.model_fields
        unknown = sorted(set(opts) - set(fields) - {"vlm"})
        if unknown:
            raise InputFileError(f"methods[{i}] ({method}): unknown option(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(k for k in fields if k != 'vlm')}")
        for key in PATH_OPTIONS:
            if not isinstance(opts.get(key), str):
                continue
            _, _, rest = parse_source(opts[key])  # NAME:PATH keeps its NAME: (docs/datasets.md)
            if not rest.startswith("hfds:") and not remote.is_url(rest) and not Path(rest).is_absolute():
                opts[key] = opts[key][:len(opts[key]) - len(rest)] + str(base / rest)
        resolve = getattr(task_class(method), "sweep_options", None)  # ChEF: a recipe file beside the sweep
        if resolve is not None:
            opts = resolve(opts, base)
        if "seed" in fields and "seed" not in opts:
            opts["seed"] = sweep.options.seed
        group = method if not label else f"{method}-{folder_name(label)}"
        if group in seen:
            raise InputFileError(f"methods[{i}]: a second {method} entry needs its own `name`")
        seen.add(group)
        for model, name in models:
            spec = {**opts, "vlm": model.spec}
            task_class(method).spec_model.model_validate(spec)  # every mistake before the first run starts
            runs.append((out / group / name, method, spec))
    return runs


def load_sweep(path: str | Path) -> Sweep:
    return Sweep.model_validate(read_yaml_mapping(path, "sweep config", "out, models and methods"))


def _load(config: Path) -> tuple[Sweep, list[tuple[Path, str, dict[str, Any]]], Path]:
    """The sweep ``config`` holds, its runs (:func:`plan`) and its folder, checked (:func:`check_out`)."""
    sweep = load_sweep(config)
    runs = plan(sweep, config.parent)
    out = runs[0][0].parent.parent
    check_out(out)
    return sweep, runs, out


def options_of(sweep: Sweep, progress: bool = True) -> RunOptions:
    from .run.runner import run_options

    return run_options(resume=True, progress=progress, **sweep.options.model_dump())


@dataclass
class SweepResult:
    out: Path
    summary: list[dict[str, Any]]  # one row per run: method, model, folder, headline metric and value, counts
    results: list[dict[str, Any]]  # each run's results.json
    report: Path | None  # None: made with report=False (`vlmcheck report` makes it later)
    max_failures: float  # the config's options.max_failures


def _run(task: Any, folder: Path, options: RunOptions) -> dict[str, Any]:
    return {**run_task(task, folder, options).results, "_folder": str(folder)}


def run_sweep(config: str | Path, progress: bool = True,
              execute: Callable[[Any, Path, RunOptions], dict[str, Any]] = _run,
              announce: Callable[[str, str], None] | None = None, report: bool = True) -> SweepResult:
    """Run every method of ``config`` on every model (each run resumed where it stopped, with its report), then
    write ``summary.json``, the GenCeption leaderboards and one report over all runs.  ``execute`` runs one task
    into a folder (the CLI's prints a line per run); ``announce(method, model)`` is called before each run."""
    from .methods.headline import headline, not_measured_reason
    from .methods.views import view_for
    from .report.html import build_report
    from .core.dataset_files import first_rows
    from .run.task import task_class, task_from_spec

    config = Path(config)
    sweep, runs, out = _load(config)
    if sweep.track:
        from .track import check_trackers

        check_trackers(sweep.track)  # one sentence before the first run, not after the last
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / SWEEP_MARKER, json.dumps({"vlmcheck_sweep": config.name}) + "\n")
    results, summary = [], []
    given = {name: m.label for m, name in _models(sweep)}  # by folder name, as plan() names the folders
    for folder, method, spec in runs:
        if announce is not None:
            announce(method, public_spec(spec["vlm"]))
        tracked = {"track": sweep.track, "track_group": f"sweep {out.name}"} if sweep.track else {}
        follows = getattr(task_class(method), "samples_follow_rows", lambda _: False)(spec)
        with first_rows(sweep.options.limit if follows else None):  # --limit N: only the rows it needs
            task = task_from_spec(method, spec)
        res = execute(task, folder,
                      options_of(sweep, progress).model_copy(update={"report": report, "label": given.get(folder.name),
                                                                          **tracked}))
        results.append(res)
        name, value = headline(res)
        summary.append({"method": folder.parent.name, "model": public_spec(spec["vlm"]), "folder": str(folder),
                        "metric": name, "value": value, "samples": res["counts"]["samples"],
                        "failed": res["counts"]["failed"], "not_measured": not_measured_reason(res)})
    for row, label in zip(summary, run_labels((res, row["folder"]) for res, row in zip(results, summary))):
        row["spec"], row["model"] = row["model"], label  # the name people read; the spec beside it
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=2))
    boards = {folder.parent: view_for(method).leaderboard for folder, method, _ in runs}  # the method's view says
    for group in sorted(g for g, make in boards.items() if make is not None):
        folders = [Path(r["folder"]) for r in summary if Path(r["folder"]).parent == group]
        if len(folders) > 1:
            write_text_atomic(group / "leaderboard.json", json.dumps(boards[group](folders), indent=2))
    page = build_report([Path(r["folder"]) for r in summary], out / "report.html",
                        title=f"vlmcheck sweep {config.name}") if report else None
    return SweepResult(out, summary, results, page, sweep.options.max_failures)


def estimate_sweep(config: str | Path) -> dict[str, Any]:
    """``vlmcheck run sweep.yaml --dry-run``: every run of the sweep estimated (run/estimate.py), no model call,
    as one estimate per role and in total."""
    from .run.estimate import dry_run, merge_estimates
    from .run.task import task_from_spec

    sweep, runs, _ = _load(Path(config))
    return merge_estimates([dry_run(task_from_spec(method, spec), folder, options_of(sweep, False))
                            for folder, method, spec in runs])
