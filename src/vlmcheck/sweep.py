"""One config for a sweep: models x methods into one folder, one report.

``vlmcheck run sweep.yaml`` runs every method of the config on every model,
each into ``OUT/<method>[-<name>]/<model>``, resuming each run (what is
finished is skipped without a model call), then writes ``OUT/report.html``
over all runs, ``OUT/summary.json`` (the headline metric of every run) and,
for GenCeption with two or more models, ``OUT/genception[-<name>]/leaderboard.json``.

Relative paths in a method's options (``data``, ``cases``, ``pairs``, a
recipe file) are relative to the config file.  Unknown options are an error,
not silently ignored.  ``vlmcheck run --example`` prints an annotated example.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .core.files import InputFileError, read_yaml_mapping
from .run.runner import RunOptions

EXAMPLE = """\
# vlmcheck sweep: every method below runs on every model; `vlmcheck run sweep.yaml`.
# Runs go to OUT/<method>[-<name>]/<model>; running the file again skips what is finished.
out: runs/sweep

models:
  # an OpenAI-compatible server: vLLM (`vllm serve Qwen/Qwen2-VL-7B-Instruct`), SGLang, LM Studio, llama.cpp
  - openai:Qwen/Qwen2-VL-7B-Instruct@http://localhost:8000/v1?concurrency=32
  # Ollama's OpenAI-compatible endpoint; `name` is the folder name (default: the spec, made file-safe)
  - name: llava-ollama
    spec: openai:llava:7b@http://localhost:11434/v1
  # the OpenAI API (key from OPENAI_API_KEY) and Anthropic (ANTHROPIC_API_KEY)
  - openai:gpt-4o-mini
  - anthropic:claude-sonnet-4-5
  # a local transformers model
  - hf:HuggingFaceTB/SmolVLM-256M-Instruct?device=cuda&dtype=bfloat16
  # offline reference models (docs/world.md): try the whole file with only these two
  - ref:describer?level=0.1
  - ref:describer?level=0.3

methods:
  - method: genception          # describe, regenerate, repeat T times
    data: world/                # `vlmcheck world make world --n 24`, or an image folder / manifest
    generator: ref:renderer     # e.g. openai-image:dall-e-3 or diffusers:stabilityai/sd-turbo?steps=1
    encoder: ref:effnet         # e.g. hf-encoder:google/vit-base-patch16-224-in21k
    T: 3
  - method: vhexpansion         # negation and perturbations of yes/no cases
    cases: world/
    negator: ref:negator        # any TextModel spec, e.g. openai:gpt-4o-mini
  - method: cast                # cross-modal self-consistency on scene pairs
    pairs: pairs/pairs.jsonl    # `vlmcheck world pairs pairs`
  - method: chef                # a ChEF recipe (`name` tells two ChEF entries apart)
    name: world
    recipe: world-accuracy
    data: world/

options:                        # for every run (the CLI's run options)
  max_concurrency: 16
  limit: null                   # only the first N samples of each run
  seed: 0
  max_failures: 0.0             # share of failed samples a run may have and still count as passed
"""

PATH_OPTIONS = ("data", "cases", "pairs")


class SweepModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    spec: str
    name: str | None = None


class SweepOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_concurrency: int = Field(16, ge=1)
    limit: int | None = Field(None, ge=1)
    seed: int = 0
    max_failures: float = Field(0.0, ge=0.0, le=1.0)
    allow_outside: bool = False
    preflight: bool = True


class Sweep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    out: str
    models: list[str | SweepModel] = Field(min_length=1)
    methods: list[dict[str, Any]] = Field(min_length=1)
    options: SweepOptions = Field(default_factory=SweepOptions)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "model"


def load_sweep(path: str | Path) -> Sweep:
    data = read_yaml_mapping(path, "sweep config", "out, models and methods")
    return Sweep.model_validate(data)


def plan(sweep: Sweep, base: Path) -> list[tuple[Path, str, dict[str, Any]]]:
    """(run folder, task name, task spec) of every run, in config order (methods outer, models inner)."""
    from .methods import TASK_NAMES, task_class
    from .methods.chef import resolve_recipe

    out = Path(sweep.out) if Path(sweep.out).is_absolute() else base / sweep.out
    models = [m if isinstance(m, SweepModel) else SweepModel(spec=m) for m in sweep.models]
    names = [m.name or _slug(m.spec) for m in models]
    if len(set(names)) != len(names):
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
            if isinstance(opts.get(key), str) and not opts[key].startswith("hfds:") and \
                    not Path(opts[key]).is_absolute():
                opts[key] = str(base / opts[key])
        if method == "chef":
            recipe = opts.get("recipe")
            if isinstance(recipe, str):
                local = base / recipe
                opts["recipe"] = resolve_recipe(str(local) if local.is_file() else recipe).model_dump()
        if "seed" in fields and "seed" not in opts:
            opts["seed"] = sweep.options.seed
        group = method if not label else f"{method}-{_slug(label)}"
        if group in seen:
            raise InputFileError(f"methods[{i}]: a second {method} entry needs its own `name`")
        seen.add(group)
        for model, name in zip(models, names):
            spec = {**opts, "vlm": model.spec}
            task_class(method).spec_model.model_validate(spec)  # every mistake before the first run starts
            runs.append((out / group / name, method, spec))
    return runs


def options_of(sweep: Sweep, progress: bool = True) -> RunOptions:
    o = sweep.options
    return RunOptions(resume=True, max_concurrency=o.max_concurrency, limit=o.limit, seed=o.seed, progress=progress,
                      allow_outside=o.allow_outside, preflight=o.preflight)
