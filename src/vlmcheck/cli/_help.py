"""Conventional metavars in ``--help``: typer 0.2x prints an option's Python type (``<list[Path]>``) and a
required argument as ``{runs}...``; click's convention, and most CLIs', is ``PATH``, ``INTEGER``, ``RUNS...``.
Only how help is printed changes; a typer without these methods is left as it is.
"""

from __future__ import annotations

from typing import Any

_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN", "Path": "PATH"}  # click's words


def _conventional(param: Any) -> str | None:
    if getattr(param, "is_flag", False):
        return None
    desc = param.type_descriptor
    if desc.is_path:
        return "PATH"
    if desc.is_choice:
        return "|".join(str(c) for c in desc.choices or ())
    bare = param.bare_type()
    if bare.startswith("list["):
        bare = bare[5:-1]
    return _NAMES.get(bare, bare.upper())


def install() -> None:
    from typer import core

    param_cls = getattr(core, "_TyperParameter", None)
    if param_cls is None or not hasattr(param_cls, "display_type"):
        return

    param_cls.display_type = lambda self, ctx: _conventional(self)  # the metavar named, else click's words
    arg_cls = core.TyperArgument
    if hasattr(arg_cls, "display_type_rich"):
        arg_cls.display_type_rich = lambda self, ctx: None  # an argument's metavar says it all

    def usage_name(self) -> str:
        name = self.metavar or self.name.upper()
        dots = "..." if self.nargs != 1 and not name.endswith("...") else ""
        return (name if self.required else f"[{name}]") + dots

    if hasattr(arg_cls, "_usage_display_name"):
        arg_cls._usage_display_name = usage_name
