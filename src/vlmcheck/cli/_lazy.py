"""Modules the commands import on first use, so that ``vlmcheck --help`` and ``vlmcheck version`` do not load
the runner, the store, images or numpy (so a command pays only for what it uses).

``lazy_module("vlmcheck.report.terminal")`` returns the module object at once; the module is imported when one of
its attributes is first read (``vlmcheck/_lazy.py``). Use it as a module
(``terminal.run_done(...)``), never ``from ... import name`` (that would load it at once).
"""

from __future__ import annotations

from .._lazy import lazy_module  # noqa: F401 (the helper lives on the lowest floor: core and metrics use it)
