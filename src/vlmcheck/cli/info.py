"""``vlmcheck version`` and ``vlmcheck models``."""

from __future__ import annotations

import typer

from .._version import __version__
from ..core.spec import providers
from ._lazy import lazy_module

terminal = lazy_module("vlmcheck.report.terminal")


def register(app: typer.Typer) -> None:
    app.command()(version)
    app.command("models")(list_models)


def version() -> None:
    """Print the vlmcheck version."""
    typer.echo(__version__)


def list_models() -> None:
    """List model providers and the roles they serve."""
    terminal.providers(providers())
