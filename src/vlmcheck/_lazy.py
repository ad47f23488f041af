"""Modules imported on first use (to keep start-up short): ``np = lazy_module("numpy")`` returns a stand-in at
once, and the module is imported when one of its attributes is first read. Use the result as a module, never
``from ... import name``, a default argument or a module-level constant that reads an attribute (each loads it
at once).

Not :class:`importlib.util.LazyLoader`: on Python 3.11 its first attribute read is not thread-safe (a second
thread sees the module half executed), and images are read in threads. The stand-in is never put in
``sys.modules``: the real module is imported by :func:`importlib.import_module`, under the import system's own
lock, and every read, write and deletion of an attribute goes to it."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType


class _Deferred(ModuleType):
    """Stands for the module of its ``__name__`` until it is first used; then forwards to it."""

    def __getattr__(self, attr: str):  # only names the stand-in itself lacks: every name of the module
        return getattr(_real(self), attr)

    def __setattr__(self, attr: str, value) -> None:
        setattr(_real(self), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(_real(self), attr)

    def __dir__(self):
        return dir(_real(self))

    def __repr__(self) -> str:
        return f"<module {ModuleType.__getattribute__(self, '__name__')!r}, imported on first use>"


def _real(stand_in: _Deferred) -> ModuleType:
    found = stand_in.__dict__.get("_deferred_module")
    if found is None:
        found = importlib.import_module(ModuleType.__getattribute__(stand_in, "__name__"))
        object.__setattr__(stand_in, "_deferred_module", found)
    return found


def lazy_module(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    if importlib.util.find_spec(name.partition(".")[0]) is None:  # pragma: no cover - a programming error
        raise ImportError(f"no module named {name!r}")
    return _Deferred(name)
