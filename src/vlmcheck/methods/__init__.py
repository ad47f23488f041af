"""Evaluation methods.  Each is a :class:`vlmcheck.run.runner.Task` rebuilt from its spec.

Methods are imported when first named, not with this package: a describe run must not pay for
VHExpansion's image corruptions (scipy, OpenCV) or CAST's text models at start-up.
"""

from __future__ import annotations

import importlib
from typing import Any

#: task name -> (module in this package, class)
_TASK_CLASSES = {
    "describe": ("describe", "DescribeTask"),
    "genception": ("genception", "GenCeptionTask"),
    "cast": ("cast", "CastTask"),
    "chef": ("chef", "ChefTask"),
    "vhexpansion": ("vhexpansion", "VHExpansionTask"),
}
TASK_NAMES = tuple(_TASK_CLASSES)


def task_class(task_name: str) -> Any:
    """The Task class of ``task_name`` (imported now)."""
    if task_name not in _TASK_CLASSES:
        raise ValueError(f"unknown task {task_name!r}; known: {', '.join(TASK_NAMES)}")
    module, cls = _TASK_CLASSES[task_name]
    return getattr(importlib.import_module(f".{module}", __name__), cls)


def task_from_spec(task_name: str, task_spec: dict[str, Any]):
    return task_class(task_name).from_spec(task_spec)


def __getattr__(name: str) -> Any:
    # `from vlmcheck.methods import DescribeTask` and the TASKS table keep working, imported on first use
    if name == "TASKS":
        return {t: task_class(t) for t in TASK_NAMES}
    for task_name, (_module, cls) in _TASK_CLASSES.items():
        if cls == name:
            return task_class(task_name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
