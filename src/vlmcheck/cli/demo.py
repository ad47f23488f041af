"""``vlmcheck demo``: the offline demo (demo.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from . import _common as C


def demo(out: Path = typer.Option(Path("demo-run"), "--out", metavar="DIR",
                                  help="Folder for the demo's data and runs (a second demo resumes there)"),
         n: int = typer.Option(24, "--n", min=1, metavar="N", help="World scenes for GenCeption"),
         screenshots: bool = typer.Option(True, "--screenshots/--no-screenshots",
                                          help="Also a screenshot of each report section (headless Chromium)")
         ) -> None:
    """Offline demo: real photos described by a reference model, then every method on the reference world
    with describers of known error, their leaderboards and one report."""
    from ..demo import run_demo

    C.setup_logging()
    with C.user_errors(FileNotFoundError):
        run_demo(out, n=n, screenshots=screenshots)
