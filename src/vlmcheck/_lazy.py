"""Modules imported on first use (issue 51: start-up).  ``np = lazy_module("numpy")`` returns the module object at
once; its code runs when one of its attributes is first read (the standard library's
:class:`importlib.util.LazyLoader`), so a one-image run that never computes with numpy never loads it (about 0.1 s
of CPU).  Use the result as a module (``np.mean(...)``), never ``from ... import name`` (that loads it at once);
a default argument or a module-level constant that reads an attribute loads it at import time too."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:  # pragma: no cover - a programming error, not a user's
        raise ImportError(f"no module named {name!r}")
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
