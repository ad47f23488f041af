"""The names people read for runs (docs/usage.md, "Labels"): a model's label, made here and nowhere else."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ..core.spec import identity_of


def model_label(spec: str | None) -> str:
    """The model id of a model spec string: no provider, endpoint or parameter; a path, its last part."""
    text = str(spec or "").strip()
    provider, sep, rest = text.partition(":")
    if not sep:
        return text
    name = rest.split("?", 1)[0].split("@", 1)[0].strip() or text
    if name.startswith(("/", "./", "../", "~")) or "\\" in name:  # a checkpoint folder served by its path
        name = Path(name.replace("\\", "/").rstrip("/")).name or name
    return name


def _spec_of(results: dict[str, Any]) -> str:
    ts = (results.get("spec") or {}).get("task_spec") or {}
    return str(ts.get("vlm") or ts.get("model") or "")


def run_label(results: dict[str, Any], folder: str | Path | None = None) -> str:
    """One run's label: the ``--label`` it was given, else its model's id, else its folder's name."""
    given = results.get("label")
    if isinstance(given, str) and given.strip():
        return given.strip()
    return model_label(_spec_of(results)) or (Path(folder).name if folder is not None else "") or "run"


def run_labels(runs: Iterable[tuple[dict[str, Any], str | Path | None]]) -> list[str]:
    """The labels of runs shown together, ``(results, folder)`` each: each run's :func:`run_label`, told apart
    only where two runs of one method would read the same (runs of different methods are never in one
    comparison, and a table of several methods names the method beside each)."""
    runs = list(runs)
    labels = [run_label(r, f) for r, f in runs]
    by_task: dict[str, list[int]] = {}
    for i, (r, _) in enumerate(runs):
        by_task.setdefault(str(r.get("task")), []).append(i)
    for members in by_task.values():
        for i, label in zip(members, _apart([runs[i] for i in members], [labels[i] for i in members])):
            labels[i] = label
    return labels


def _apart(runs: list[tuple[dict[str, Any], str | Path | None]], labels: list[str]) -> list[str]:
    specs = [_spec_of(r) for r, _ in runs]
    for extra in (lambda i: specs[i].partition(":")[0],  # the provider
                  lambda i: identity_of(specs[i]).partition("?")[2],  # the parameters that change answers
                  lambda i: Path(runs[i][1]).name if runs[i][1] is not None else ""):  # the run folder
        for label in {x for x in labels if labels.count(x) > 1}:
            group = [i for i, x in enumerate(labels) if x == label]
            parts = [extra(i) for i in group]
            if len(set(parts)) > 1:  # this tells them apart (those without it keep the plain label)
                for i, part in zip(group, parts):
                    if part:
                        labels[i] = f"{label} ({part})"
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):  # still the same (the same model in the same folder name): numbered
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[i] = f"{label} #{seen[label]}"
    return labels
