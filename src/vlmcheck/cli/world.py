"""``vlmcheck world make|pairs`` (world/make.py) and ``vlmcheck meta`` (meta/evaluate.py)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from . import _common as C

world_app = typer.Typer(no_args_is_help=True, help="The offline reference world.")


@world_app.command("pairs")
def world_pairs(
    out: Path = typer.Argument(..., metavar="OUT", help="Output folder"),
    n: int = typer.Option(20, "--n", min=1, metavar="N", help="Number of scene pairs to write"),
    seed: int = typer.Option(0, "--seed", help="Seed of the scenes (the same seed writes the same pairs)"),
) -> None:
    """Write scene pairs that share objects (pairs.jsonl + images) for CAST."""
    from ..world.make import make_world_pairs

    C.console.print(f"[green]wrote[/green] {n} pairs: {make_world_pairs(out, n=n, seed=seed)}", highlight=False)


@world_app.command("make")
def world_make(
    out: Path = typer.Argument(..., metavar="OUT", help="Output folder"),
    n: int = typer.Option(200, "--n", min=1, metavar="N", help="Number of scenes"),
    seed: int = typer.Option(0, "--seed", help="Seed of the scenes (the same seed writes the same world)"),
    size: int = typer.Option(384, "--size", min=32, max=8192, metavar="PX",
                             help="Side of each image in pixels (32 or more: a 3x3 grid of objects)"),
) -> None:
    """Write seeded scenes: images/<category>/*.png, scene graphs, descriptions, questions (manifest.jsonl)."""
    from ..world.make import make_world

    manifest = make_world(out, n=n, seed=seed, size=size)
    C.console.print(f"[green]wrote[/green] {n} scenes: {manifest}", highlight=False)


def meta(
    out: Path = typer.Option(Path("meta-run"), "--out", metavar="DIR",
                             help="Folder for the world, the runs and the table"),
    n: int = typer.Option(50, "--n", metavar="N",
                          help="Scenes of the reference world (and half as many pairs for CAST)"),
    seed: int = C.SEED,
    as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON object"),
) -> None:
    """Meta-evaluation on the reference world: Kendall tau between true error and each metric."""
    from ..meta import meta_evaluate

    C.setup_logging()
    res = meta_evaluate(out, n=n, seed=seed, progress=True)
    if as_json:
        typer.echo(json.dumps(res, default=str))
    else:
        C.terminal.meta(res)
