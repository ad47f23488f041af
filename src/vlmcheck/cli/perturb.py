"""``vlmcheck perturb``: corrupted copies of images (perturb/files.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from . import _common as C


def perturb(
    source: Path = typer.Argument(..., metavar="SOURCE", help="An image or a folder of images"),
    corruption: list[str] = typer.Option(..., "--corruption", "-c", metavar="NAME",
                                         help="Corruption name or VHExpansion preset (vhx_*); repeat; 'all' for "
                                              "every one"),
    severity: list[int] = typer.Option([3], "--severity", "-s", metavar="1-5", help="1-5; repeat for several"),
    out: Path = typer.Option(..., "--out", metavar="DIR", help="Output folder"),
    seed: int = C.SEED,
) -> None:
    """Write corrupted copies: OUT/<corruption>/s<severity>/<relative path>.png (lossless)."""
    from ..perturb.files import perturb_files

    with C.user_errors():
        done = perturb_files(source, corruption, severity, out, seed=seed)
    for path, why in done.skipped:
        C.console.print(f"[yellow]skipped[/yellow] {path}: {why}", highlight=False)
    C.console.print(f"[green]wrote[/green] {done.written} images under {out}"
                    + (f"; {len(done.skipped)} unreadable" if done.skipped else ""), highlight=False)
