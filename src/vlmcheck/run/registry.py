"""The registry of task names (re-exported by ``run/task.py``): name -> Task class or ``"module:Class"``.

Kept apart from ``run/task.py`` so that registering the built-in methods (``methods/__init__.py``, imported by
``import vlmcheck``) costs no import of the runner, images or numpy: ``vlmcheck --help`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any


#: task name -> "module:Class" (imported on first use) or the class itself
_TASKS: dict[str, Any] = {}


def register_task(name: str, target: str | type) -> None:
    """Make ``name`` a task that runs, resumes and merges: ``target`` is the Task class or ``"module:Class"``."""
    _TASKS[name] = target


def task_names() -> tuple[str, ...]:
    return tuple(_TASKS)


def task_class(name: str) -> Any:
    """The Task class registered as ``name`` (imported now)."""
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(_TASKS) or 'none'}")
    target = _TASKS[name]
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        target = _TASKS[name] = getattr(importlib.import_module(module), attr)
    return target


def task_from_spec(name: str, task_spec: dict[str, Any]) -> Any:
    """The task (a ``run.task.Task``) rebuilt from a stored run spec."""
    return task_class(name).from_spec(task_spec)
