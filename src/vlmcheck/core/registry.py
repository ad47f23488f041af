"""One registry for every kind of thing a user adds (model providers, tasks, benchmarks, dataset forms, image
corruptions...): a :class:`Registry` maps names to entries and is read as a mapping.  An entry given as
``"module:attr"`` is imported when first looked up, so registering costs no import.  Each entry remembers where it
came from (:meth:`Registry.origins`); a name already taken is an error naming both registrations unless the second
asks ``replace=True``; a name not found is an error that lists the known ones.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def resolve(target: str) -> Any:
    """``"module:attr"`` -> the attribute, its module imported now."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def plugins(group: str, make: Callable[[Any], tuple[str, Any]]) -> Callable[[Registry], None]:
    """A registry's ``load``: the entry points of ``group``, each ``make(ep) -> (name, entry)``; a plugin never
    replaces a built-in."""

    def load(registry: Registry) -> None:
        from importlib.metadata import entry_points  # a scan of every installed package: only when needed

        for ep in entry_points(group=group):
            name, entry = make(ep)
            if name not in registry._entries:
                dist = getattr(getattr(ep, "dist", None), "name", None)
                registry.add(name, entry, origin=f"plugin {dist or ep.value}")

    return load


class Registry(Mapping[str, T]):
    """Names -> entries of one kind.  ``error``: the class of the error for a name not found (made a ``KeyError``
    too, so that ``.get`` answers None); ``load(registry)``: what registers the rest (the modules of a package, the
    plugins), run once, on the first name not found or the first listing."""

    def __init__(self, kind: str, *, error: type[Exception] = KeyError,
                 load: Callable[[Registry], None] | None = None) -> None:
        self.kind, self._load, self._loaded = kind, load, load is None
        self._entries: dict[str, T | str] = {}
        self._origins: dict[str, str] = {}
        bases = (error,) if issubclass(error, KeyError) else (error, KeyError)
        self._missing = type(f"Unknown{error.__name__}", bases, {"__str__": BaseException.__str__})

    def add(self, name: str, entry: T | str, *, replace: bool = False, origin: str | None = None,
            stacklevel: int = 1) -> T | str:
        """Register ``entry`` (or ``"module:attr"``) as ``name``; ``origin`` defaults to the module of the caller
        ``stacklevel`` frames up (a wrapper that registers for its caller passes 2)."""
        origin = origin or sys._getframe(stacklevel).f_globals.get("__name__", "?")
        if name in self._entries and not replace and not _same(self._entries[name], entry):
            raise ValueError(f"{self.kind} {name!r} is already registered by {self._origins[name]}; {origin} "
                             "registers it again (pass replace=True to replace it)")
        self._entries[name], self._origins[name] = entry, origin
        return entry

    def _complete(self) -> None:
        if not self._loaded:
            self._loaded = True
            try:
                self._load(self)
            except BaseException:
                self._loaded = False  # tried again on the next lookup
                raise

    def __getitem__(self, name: str) -> T:
        if name not in self:
            raise self._missing(f"unknown {self.kind} {name!r}; known: {', '.join(sorted(self)) or 'none'}")
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = self._entries[name] = resolve(entry)
        return entry

    def __contains__(self, name: object) -> bool:
        if name not in self._entries:
            self._complete()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self._complete()
        return iter(list(self._entries))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def origins(self) -> dict[str, str]:
        """Name -> where it was registered (a module, or ``plugin <distribution>``)."""
        self._complete()
        return dict(self._origins)


def _same(old: Any, new: Any) -> bool:
    if isinstance(old, str) != isinstance(new, str):  # an object and its own "module:attr" path
        path, obj = (old, new) if isinstance(old, str) else (new, old)
        return path == f"{getattr(obj, '__module__', '')}:{getattr(obj, '__qualname__', '')}"
    return old is new or old == new
