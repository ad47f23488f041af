"""``vlmcheck track RUN... --to mlflow|wandb|tensorboard``: finished runs logged to experiment trackers."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from . import _common as C


def track(
    runs: List[Path] = typer.Argument(..., metavar="RUN...", help="Run folders (each with its results.json)"),
    to: List[str] = typer.Option(..., "--to", metavar="TRACKER", help="mlflow, wandb or tensorboard (repeatable)"),
    group: Optional[str] = typer.Option(None, "--group", metavar="NAME", help="The group the runs join"),
) -> None:
    """Log finished runs to experiment trackers (MLflow, W&B, TensorBoard); idempotent."""
    from ..core.files import read_results
    from ..track import track_runs

    C.setup_logging()
    with C.user_errors(FileNotFoundError):
        for folder in runs:
            if not folder.is_dir():
                C.fail(f"{folder}: no such folder")
            read_results(folder)  # a folder without results.json: one sentence before any tracker is touched
        done = track_runs(runs, to, group)
    for d in done:
        where = f": {d['where']}" if d["where"] else ""
        C.console.print(f"{d['tracker']}: {d['run']} {d['status']}{where}", highlight=False, markup=False,
                        soft_wrap=True)
