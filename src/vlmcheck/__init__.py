"""vlmcheck: annotation-free evaluation of vision-language models.

Public API::

    from vlmcheck import load_model, Message, GenerationConfig, run_task, RunOptions

The public names are imported on first use (PEP 562), so ``import vlmcheck`` and ``vlmcheck --help`` do not pay
for the runner, images or numpy; importing the package still registers the built-in tasks and adapters (both by
import path, cheap).
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__
from . import methods as _methods  # noqa: F401  (registers the built-in tasks)
from . import models as _models  # noqa: F401  (registers the built-in adapters)

#: public name -> the module (relative to this package) that defines it
_PUBLIC = {
    "BadImageError": ".core.images", "load_image": ".core.images",
    "ImagePart": ".core.messages", "Message": ".core.messages", "TextPart": ".core.messages",
    "VLM": ".core.roles", "Capabilities": ".core.roles", "Generation": ".core.roles",
    "GenerationConfig": ".core.roles", "ImageEncoder": ".core.roles", "ImageGenerator": ".core.roles",
    "Loglikelihood": ".core.roles", "TextModel": ".core.roles",
    "ModelSpec": ".core.spec", "load_model": ".core.spec", "register": ".core.spec",
    "export_runs": ".export", "load_runs": ".export", "load_tables": ".export",
    "run_task": ".api", "run_task_async": ".api",
    "RunOptions": ".run.runner",
}

__all__ = ["__version__", *sorted(_PUBLIC)]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
