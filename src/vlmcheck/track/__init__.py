"""Finished runs logged to experiment trackers (MLflow, Weights & Biases, TensorBoard; docs/usage.md).

The run folder stays the source of truth: a tracker gets a copy of what ``results.json`` says once the run's
outputs are written, so a tracker that fails never loses a result.  Logging is idempotent: each run has a stable
key (:func:`run_key`) and a tracker that holds it logs nothing again.  What a tracked run holds is
:class:`TrackedRun`, the same for every tracker; a figure named ``X@t`` is metric ``X`` at step ``t`` and a list
of numbers a series at steps 1, 2, ...
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Protocol

#: name -> "module:Class", imported only when used (each an optional extra: ``vlmcheck[mlflow]``...)
TRACKERS: dict[str, str] = {
    "mlflow": "vlmcheck.track.mlflow_tracker:MLflowTracker",
    "wandb": "vlmcheck.track.wandb_tracker:WandbTracker",
    "tensorboard": "vlmcheck.track.tensorboard_tracker:TensorBoardTracker",
}


class TrackerError(ValueError):
    """A tracker that cannot be used (not installed, unreachable, misconfigured): one sentence."""


@dataclass
class TrackedRun:
    key: str
    name: str
    group: str | None
    folder: Path
    params: dict[str, str] = field(default_factory=dict)
    #: (name, value, step): step None for a figure without steps
    metrics: list[tuple[str, float, int | None]] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)


class Tracker(Protocol):
    name: str

    def check(self) -> None:
        """Raise :class:`TrackerError` (one sentence) where runs could not be logged: called before a run starts."""

    def logged(self, run: TrackedRun) -> bool:
        """Whether the tracker already holds ``run`` (its key)."""

    def log(self, run: TrackedRun) -> str:
        """Log ``run``; where it is kept (a run id, a folder)."""


def check_trackers(names: Iterable[str]) -> list[Tracker]:
    """Every tracker in ``names`` made and checked before a run starts: the first that is unknown, not installed
    or cannot log raises :class:`TrackerError`."""
    from pkgutil import resolve_name

    made = []
    for name in dict.fromkeys(names):
        if name not in TRACKERS:
            raise TrackerError(f"{name!r} is not a tracker; choose from {', '.join(TRACKERS)}")
        try:
            made.append(resolve_name(TRACKERS[name])())
        except ModuleNotFoundError as exc:
            raise TrackerError(f"tracker {name}: {exc.name} is not installed; pip install 'vlmcheck[{name}]'") from None
        try:
            made[-1].check()
        except TrackerError:
            raise
        except Exception as exc:  # the tracker's own error (a refused connection, a bad URI): one sentence
            raise TrackerError(f"tracker {name}: {_sentence(exc)}") from None
    return made


def _sentence(exc: BaseException) -> str:
    """A tracker's own error as one redacted line, shortened in its middle (its advice, at the end, kept)."""
    from ..core.errors import shorten_middle
    from ..core.secrets import redact

    return redact(shorten_middle(" ".join(str(exc).split()) or type(exc).__name__, 300))


_STEP = re.compile(r"^(?P<pre>.*?)@(?P<t>\d+)(?P<post>.*)$")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_\-. /]")


def metric_name(name: str) -> tuple[str, int | None]:
    """A figure's name as trackers take it (MLflow's characters) and its step: ``GC@2`` -> (``GC``, 2),
    ``s@2_unweighted`` -> (``s_unweighted``, 2), ``accuracy`` -> (``accuracy``, None)."""
    m = _STEP.match(name)
    step = None
    if m:
        name, step = m["pre"] + m["post"], int(m["t"])
    return _UNSAFE_NAME.sub("_", name) or "value", step


def run_key(info: dict[str, Any], folder: Path) -> str:
    """A run's stable key (task, spec, data, samples, folder): the same run tracked twice has the same key."""
    spec = info.get("spec") or {}
    ident = {"task": info.get("task"), "task_spec": spec.get("task_spec"), "data": spec.get("data"),
             "samples": spec.get("sample_ids_fingerprint"), "seed": spec.get("seed"), "shard": spec.get("shard"),
             "limit": spec.get("limit"), "folder": str(Path(folder).resolve())}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _flat(obj: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif obj is not None:
        text = obj if isinstance(obj, str) else json.dumps(obj, default=str)
        out[prefix] = text if len(text) <= 500 else text[:497] + "..."


def tracked_run(folder: str | Path, group: str | None = None, label: str | None = None,
                results: dict[str, Any] | None = None) -> TrackedRun:
    """What the trackers log of the finished run in ``folder`` (``results``: its results.json already read)."""
    from ..core.files import read_results
    from ..core.secrets import redact_obj
    from ..export import metric_rows
    from ..run.labels import run_label

    folder = Path(folder)
    info = redact_obj(results if results is not None else read_results(folder))
    name = label or run_label(info, folder) or str(info.get("task"))  # as every other surface shows it
    params: dict[str, str] = {"method": str(info.get("task")), "model": name}
    _flat(info.get("spec") or {}, "spec", params)
    _flat(info.get("counts") or {}, "counts", params)
    run = TrackedRun(key=run_key(info, folder), name=name, group=group, folder=folder, params=params)
    run.tags = {"vlmcheck.run_key": run.key, "vlmcheck.method": str(info.get("task")),
                "vlmcheck.folder": str(folder.resolve())}
    if group:
        run.tags["vlmcheck.group"] = group
    headline = (info.get("metrics") or {}).get("headline") or {}
    if headline.get("value") is None and headline.get("reason"):
        run.tags["vlmcheck.headline_not_measured"] = str(headline["reason"])
    for row in metric_rows(folder, info):
        name, step = ("headline", None) if row["headline"] else metric_name(row["metric"])
        if row["headline"]:
            run.params["headline_name"] = row["metric"]
        run.metrics.append((name, row["value"], step))
        for extra in ("ci_low", "ci_high", "n"):
            if isinstance(row.get(extra), (int, float)) and not isinstance(row.get(extra), bool):
                run.metrics.append((f"{name}.{extra}", float(row[extra]), step))
    for key, value in (info.get("metrics") or {}).items():  # a series: s(t) for t = 1..T
        if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
            name, _ = metric_name(key)
            run.metrics.extend((name, float(v), t) for t, v in enumerate(value, start=1))
    cost = sum(u.get("cost_usd") or 0.0 for u in (info.get("usage") or {}).values() if isinstance(u, dict))
    if cost:
        run.metrics.append(("cost_usd", float(cost), None))
    run.artifacts = [p for p in (folder / "report.html", folder / "results.json") if p.is_file()]
    return run


def track_runs(folders: Iterable[str | Path], to: Iterable[str], group: str | None = None,
               trackers: list[Tracker] | None = None) -> list[dict[str, str]]:
    """Log the finished runs in ``folders`` to each tracker in ``to``, each once: [{"run", "tracker", "where",
    "status"}]."""
    from ..core.files import read_results
    from ..run.labels import run_labels

    made = trackers if trackers is not None else check_trackers(to)
    folders = list(folders)
    infos = [read_results(f) for f in folders]  # each read once: for the labels and for the run
    labels = run_labels(zip(infos, folders))  # runs logged together are told apart
    done = []
    for folder, info, label in zip(folders, infos, labels):
        run = tracked_run(folder, group, label, info)
        for t in made:
            if t.logged(run):
                done.append({"run": str(folder), "tracker": t.name, "where": "", "status": "already logged"})
                continue
            done.append({"run": str(folder), "tracker": t.name, "where": t.log(run), "status": "logged"})
    return done
