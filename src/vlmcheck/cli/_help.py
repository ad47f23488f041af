"""Conventional metavars in ``--help``.

typer 0.2x prints every option's Python type (``<str>``, ``<list[Path]>``, ``<int range>``) and a required
argument as ``{runs}...``; click's convention, which typer followed before, and most CLIs, is ``TEXT``,
``PATH``, ``INTEGER`` and ``RUNS...``.  Options here name their metavar (``--vlm SPEC``); this fills in the
rest in that convention.  It changes how help is printed and nothing else, and does nothing on a typer without
these methods.
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

    def display_type(self, ctx):  # options: the metavar they name, else the type in click's words
        return _conventional(self)

    param_cls.display_type = display_type
    arg_cls = core.TyperArgument
    if hasattr(arg_cls, "display_type_rich"):
        arg_cls.display_type_rich = lambda self, ctx: None  # an argument's metavar says it all

    def usage_name(self) -> str:
        name = self.metavar or self.name.upper()
        if name.endswith("..."):
            return name if self.required else f"[{name}]"
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    if hasattr(arg_cls, "_usage_display_name"):
        arg_cls._usage_display_name = usage_name
