"""Evaluation methods.  Each is a :class:`vlmcheck.run.runner.Task` rebuilt from its spec."""

from __future__ import annotations

from typing import Any

from .cast import CastTask
from .chef import ChefTask
from .describe import DescribeTask
from .genception import GenCeptionTask
from .vhexpansion import VHExpansionTask

TASKS: dict[str, Any] = {t.name: t for t in (DescribeTask, GenCeptionTask, CastTask, ChefTask, VHExpansionTask)}


def task_from_spec(task_name: str, task_spec: dict[str, Any]):
    cls = TASKS.get(task_name)
    if cls is None:
        raise ValueError(f"unknown task {task_name!r}; known: {', '.join(TASKS)}")
    return cls.from_spec(task_spec)
