"""The run options, in one table: what each is, its default, and which entry point that runs samples takes it, or
why it does not (``refused``; tests/test_run_options.py checks every entry point against it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

#: the entry points that run samples
METHOD, RESUME, RETRY, SWEEP, WORKER = "method", "resume", "retry-failed", "sweep", "ray-worker"
ENTRY_POINTS = (METHOD, RESUME, RETRY, SWEEP, WORKER)

_RECORDED = "recorded with the run: a resume keeps it, so that the resumed run is the same run"
_NOT_TWICE = "what this command does"
_DRIVER = "applied by the driver (run/runner.py) before a sample reaches a worker"
_KEYS = "keys are never stored: a resumed run's models read theirs from the environment"
_SWEEP_ONE_FOLDER = "a sweep runs every model x method into its own folder, here, one run after another"


@dataclass(frozen=True)
class RunOption:
    name: str  # the keyword; the CLI spells it --name-with-dashes unless ``flags`` says otherwise
    kind: Any
    default: Any
    help: str
    flags: tuple[str, ...] = ()
    cli: dict[str, Any] = field(default_factory=dict)  # typer.Option's min/max/metavar/envvar
    refused: dict[str, str] = field(default_factory=dict)  # entry point -> why it does not take this option
    worker: bool = False  # read by each Ray worker (the others are the driver's)
    # shapes what the command shows, not the run: a sweep takes it as a flag of ``vlmcheck run``, not in its file
    shown: bool = False

    @property
    def flag_names(self) -> tuple[str, ...]:
        return self.flags or ("--" + self.name.replace("_", "-"),)

    def takes(self, entry: str) -> bool:
        return self.worker if entry == WORKER else entry not in self.refused

    def why_not(self, entry: str) -> str | None:
        return None if self.takes(entry) else self.refused.get(entry) or (_DRIVER if entry == WORKER else None)


RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("api_key", Optional[str], None, "API key for the model (else from the environment). Never stored.",
              cli={"metavar": "KEY", "envvar": "VLMCHECK_API_KEY", "show_envvar": False},
              refused={RESUME: _KEYS, RETRY: _KEYS, SWEEP: "a sweep's models read their keys from the environment "
                                                          "(one key for every model would be wrong)"}),
    RunOption("resume", bool, False, "Continue the run in OUT, skipping finished samples.",
              refused={RESUME: _NOT_TWICE, RETRY: "retry-failed always continues the run",
                       SWEEP: "a sweep always continues what is finished"}),
    RunOption("overwrite", bool, False, "Delete an existing run in OUT first.",
              refused={RESUME: "a resume keeps the run", RETRY: "retry-failed keeps the finished samples",
                       SWEEP: "a sweep keeps finished runs (delete its folder to start again)"}),
    RunOption("limit", Optional[int], None, "Only the first N samples.", cli={"min": 1, "metavar": "N"},
              refused={RESUME: _RECORDED, RETRY: _RECORDED}),
    RunOption("shard", Optional[str], None, "Run only shard i of N (by a hash of the sample id); `vlmcheck merge` "
                                            "joins the shard folders.", cli={"metavar": "I/N"},
              refused={RESUME: _RECORDED, RETRY: _RECORDED,
                       SWEEP: _SWEEP_ONE_FOLDER + "; shard a method command instead"}),
    RunOption("max_concurrency", int, 16, "Samples and model calls in flight at once.",
              cli={"min": 1, "max": 100_000, "metavar": "N"}, worker=True),
    RunOption("seed", int, 0, "Seed for every random choice of the run.", refused={RESUME: _RECORDED, RETRY: _RECORDED},
              worker=True),
    RunOption("progress", bool, True, "Show a progress bar.", flags=("--progress/--no-progress",), shown=True),
    RunOption("allow_outside", bool, False, "Read dataset images that resolve outside the dataset's folder.",
              worker=True),
    RunOption("max_image_mb", float, 256.0, "Refuse image files larger than this, unread.",
              cli={"min": 0.001, "metavar": "MB"}, worker=True),
    RunOption("pixel_budget_mb", float, 2000.0, "Decoded image pixels held by samples in flight at once (MB).",
              cli={"min": 1.0, "metavar": "MB"}, worker=True),
    RunOption("preflight", bool, True, "Check each API model (reachable, key accepted, model served) before the "
                                       "first sample.", flags=("--preflight/--no-preflight",)),
    RunOption("max_failures", float, 0.0, "Share of failed samples the run may have and still exit 0.",
              cli={"min": 0.0, "max": 1.0, "metavar": "RATE"}),
    RunOption("executor", str, "local", "local (this process) or ray (Ray actors; pip install 'vlmcheck[ray]').",
              cli={"metavar": "local|ray"},
              refused={SWEEP: _SWEEP_ONE_FOLDER + "; give a method command --executor ray"}),
    RunOption("ray_address", Optional[str], None, "Ray cluster to join (auto, or HOST:PORT); default: a local one.",
              flags=("--address",), cli={"metavar": "ADDRESS"}, refused={SWEEP: _SWEEP_ONE_FOLDER}),
    RunOption("workers", Optional[int], None, "Ray actors (default: one per CPU of the cluster, at most 8).",
              cli={"min": 1, "metavar": "N"}, refused={SWEEP: _SWEEP_ONE_FOLDER}),
    RunOption("gpus_per_worker", float, 0.0, "GPUs each Ray actor reserves.", cli={"min": 0.0, "metavar": "G"},
              refused={SWEEP: _SWEEP_ONE_FOLDER}),
    RunOption("max_cost", Optional[float], None, "Start no new sample once the cost spent plus the samples in "
                                                 "flight would pass USD; exit 1, finished samples kept.",
              cli={"metavar": "USD"},
              refused={SWEEP: "a budget is per run: give each method command --max-cost (a sweep's --dry-run "
                              "estimates the whole sweep)"}),
    RunOption("dry_run", bool, False, "Make no model call: print the calls still to make per role, their "
                                      "estimated tokens and cost.",
              refused={RESUME: "estimate a resume with the method's command and --resume --dry-run",
                       RETRY: "estimate with the method's command and --resume --dry-run"}, shown=True),
    RunOption("json_output", bool, False, "Print the results (with --dry-run: the estimate) as one JSON object on "
                                          "stdout instead of tables.",
              flags=("--json",), refused={RESUME: "a resumed run's results are in its folder's results.json",
                                          RETRY: "the run's results are in its folder's results.json"}, shown=True),
    RunOption("report", bool, True, "Write report.html at the end (`vlmcheck report RUN` makes it later).",
              flags=("--report/--no-report",), shown=True),
    RunOption("track", Optional[list[str]], None, "Log the finished run to an experiment tracker: mlflow, wandb or "
                                                  "tensorboard (repeat for several; `vlmcheck track RUN` later).",
              cli={"metavar": "TRACKER"},
              refused={SWEEP: "a sweep's runs are tracked by its top-level `track:`, grouped under the sweep"}),
    RunOption("track_group", Optional[str], None, "The group a tracked run joins (a sweep's runs: the sweep).",
              cli={"metavar": "NAME"}, refused={SWEEP: "a sweep groups its tracked runs under its own name"}),
    RunOption("label", Optional[str], None, "The name tables, leaderboards, reports and exports show for this "
                                            "run (default: the model's id; the full spec stays in the run's details).",
              cli={"metavar": "NAME"},
              refused={SWEEP: "a sweep names each model's runs with `label:` beside its spec in `models:`"}),
)
BY_NAME = {o.name: o for o in RUN_OPTIONS}

#: the options read by the command line alone (they shape its output or exit status), never by the runner
CLI_ONLY = ("api_key", "max_failures", "dry_run", "json_output")


def taken_by(entry: str) -> tuple[RunOption, ...]:
    return tuple(o for o in RUN_OPTIONS if o.takes(entry))


def defaults() -> dict[str, Any]:
    return {o.name: o.default for o in RUN_OPTIONS}


#: the RunOptions fields a Ray worker's input policy is built from (sent to each worker by run/ray_executor.py)
POLICY_FIELDS = ("allow_outside", "max_image_bytes", "pixel_budget", "url_read_timeout_s", "url_total_timeout_s")


def input_policy(options: Any, **extra: Any):
    """The run's one input policy (core/inputs.py) from RunOptions (or a dict of its POLICY_FIELDS)."""
    from ..core import inputs

    get = options.get if isinstance(options, dict) else lambda k: getattr(options, k)
    return inputs.InputPolicy(allow_outside=get("allow_outside"), max_file_bytes=get("max_image_bytes"),
                              budget=inputs.PixelBudget(get("pixel_budget")),
                              url_read_timeout_s=get("url_read_timeout_s"),
                              url_total_timeout_s=get("url_total_timeout_s"), **extra)
