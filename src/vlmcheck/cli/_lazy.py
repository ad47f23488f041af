"""Modules the commands import on first use, so that ``vlmcheck --help`` and ``vlmcheck version`` do not load
the runner, the store, images or numpy (issue 51: every command paid ~0.7 s CPU of imports before this).

``lazy_module("vlmcheck.report.terminal")`` returns the module object at once; its code runs when one of its
attributes is first read (the standard library's :class:`importlib.util.LazyLoader`). Use it as a module
(``terminal.run_done(...)``), never ``from ... import name`` (that would load it at once).
"""

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
