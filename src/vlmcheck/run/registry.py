"""The registry of task names (re-exported by ``run/task.py``), kept apart from it so that registering the
built-in methods costs no import of the runner, images or numpy: ``vlmcheck --help`` stays cheap."""

from __future__ import annotations

from typing import Any, Callable

from ..core.registry import Registry

#: task name -> its Task class, given as ``"module:Class"`` (imported on first use) or the class itself:
#: ``register_task(name, target)`` makes ``name`` a task that runs, resumes and merges
TASKS: Registry[Any] = Registry("task", error=ValueError)
register_task = TASKS.add
task_class = TASKS.__getitem__


def task_names() -> tuple[str, ...]:
    return tuple(TASKS)


def declared(name: str, registry: Registry, attr: str, ok: Callable[[Any], bool]) -> Any:
    """What task ``name`` registered in ``registry``, else its class's ``attr`` where ``ok`` accepts it, else None."""
    if name in registry:
        return registry[name]
    found = getattr(TASKS[name], attr, None) if name in TASKS else None
    return found if ok(found) else None


def task_from_spec(name: str, task_spec: dict[str, Any]) -> Any:
    return task_class(name).from_spec(task_spec)
