"""Evaluation methods.  Each is a :class:`vlmcheck.run.task.Task` rebuilt from its spec.

Importing this package registers the built-in tasks with the runner's registry (``run/registry.py``) by import
path: a method's module is imported when the method is first used, so a describe run does not pay for
VHExpansion's image corruptions (scipy, OpenCV) or CAST's text models at start-up.
"""

from __future__ import annotations

from typing import Any

from ..run.registry import register_task, task_class, task_from_spec, task_names  # noqa: F401

#: task name -> class, in this package
_BUILT_IN = {
    "describe": "describe:DescribeTask",
    "genception": "genception:GenCeptionTask",
    "cast": "cast:CastTask",
    "chef": "chef:ChefTask",
    "vhexpansion": "vhexpansion:VHExpansionTask",
}
for _name, _target in _BUILT_IN.items():
    register_task(_name, f"{__name__}.{_target}")
TASK_NAMES = tuple(_BUILT_IN)


def __getattr__(name: str) -> Any:
    # `from vlmcheck.methods import DescribeTask` and the TASKS table keep working, imported on first use
    if name == "TASKS":
        return {t: task_class(t) for t in TASK_NAMES}
    for task_name, target in _BUILT_IN.items():
        if target.split(":")[1] == name:
            return task_class(task_name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
