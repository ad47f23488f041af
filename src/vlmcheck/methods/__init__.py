"""Evaluation methods, each a :class:`vlmcheck.run.task.Task` rebuilt from its spec.  Importing this package
registers the built-in tasks with the runner's registry (``run/registry.py``) by import path, so a method's
module (and its heavy imports) loads only when the method is first used.
"""

from __future__ import annotations

from ..run.registry import register_task, task_class, task_from_spec, task_names  # noqa: F401

for _name, _target in {"describe": "describe:DescribeTask", "genception": "genception:GenCeptionTask",
                       "cast": "cast:CastTask", "chef": "chef:ChefTask",
                       "vhexpansion": "vhexpansion:VHExpansionTask"}.items():
    register_task(_name, f"{__name__}.{_target}")
#: the built-in tasks
TASK_NAMES = task_names()
