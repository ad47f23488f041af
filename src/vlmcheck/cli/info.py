"""``vlmcheck version``, ``vlmcheck models`` and ``vlmcheck list``."""

from __future__ import annotations

import json

import typer

from .._version import __version__
from ..core.spec import PROVIDERS
from . import _common as C


def version() -> None:
    """Print the vlmcheck version."""
    typer.echo(__version__)


def list_models() -> None:
    """List model providers and the roles they serve."""
    C.terminal.providers(dict(sorted(PROVIDERS.items())))


def list_all(as_json: bool = typer.Option(False, "--json", help="Everything as one JSON object on stdout")) -> None:
    """What runs on what: methods, ChEF recipes and scenarios, benchmarks (their forms, the methods that take them,
    their official figure)."""
    from ..methods.catalogue import catalogue

    cat = catalogue()
    if as_json:
        typer.echo(json.dumps(cat, indent=2))
        return
    show, table = C.terminal.tables.print, C.terminal.table
    show(table(["method", "reads", "reports"], [[m["method"], ", ".join(m["reads"]), m["reports"]]
                                                for m in cat["methods"]], ["method"],
               title="Methods (vlmcheck METHOD --help)"))
    show(table(["benchmark", "read from", "methods", "official figure"],
               [[b["benchmark"], ", ".join(b["forms"] + ["hfds:", "tsv"]), ", ".join(b["methods"]) or "by its columns",
                 b["official_figure"] or "-"] for b in cat["benchmarks"]], ["benchmark"],
               title="Benchmarks (vlmcheck data inspect PATH shows what a run would read)"))
    show(table(["recipe", "desideratum", "scenario", "inferencer"],
               [[r["recipe"], r["desideratum"].replace("_", " "), r["scenario"], r["inferencer"]]
                for r in cat["recipes"]], ["recipe"], title="ChEF recipes (vlmcheck chef list)"))
