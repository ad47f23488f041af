"""``vlmcheck genception``: one run per VLM (methods/genception.py) and their leaderboard."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from . import _common as C


@C.run_command
def genception(
    vlm: list[str] = typer.Option(..., "--vlm", metavar="SPEC", help="VLM spec; repeat for a leaderboard"),
    generator: str = typer.Option(..., "--generator", metavar="SPEC",
                                  help="Image generator spec, e.g. openai-image:dall-e-3"),
    encoder: str = typer.Option(..., "--encoder", metavar="SPEC",
                                help="Image encoder spec, e.g. hf-encoder:google/vit-base-patch16-224-in21k"),
    data: str = C.source("--data", "Image folder (categories = sub-folders) or JSONL manifest: a path or a URL"),
    benchmark: Optional[str] = C.BENCHMARK,
    out: Path = typer.Option(..., "--out", metavar="OUT", help="Run folder (one sub-folder per VLM when several)"),
    T: int = typer.Option(3, "-T", "--iterations", metavar="T", help="Iterations T"),
    per_category: Optional[int] = typer.Option(
        None, "--per-category", min=1, metavar="K",
        help="Only K seeded random images per category (the human-baseline protocol: 5)"),
    external: Optional[Path] = typer.Option(None, "--external", metavar="CSV",
                                            help="CSV model,benchmark,score to correlate with"),
    repeats: int = C.REPEATS,
    temperature: float = C.TEMPERATURE,
    run: C.RunArgs = None,
) -> None:
    """GenCeption: describe, regenerate, repeat T times; GC@1..T, GC_FID@t, categories, leaderboard."""
    from ..methods.genception import GenCeptionTask
    from ..methods.leaderboard import write_leaderboard
    from ..sweep import folder_name

    data = str(C.with_benchmark(data, benchmark))
    folders, all_results = [], []
    for one in vlm:
        task = C.method_task(GenCeptionTask, one, run, generator=generator, encoder=encoder, data=data, T=T,
                             per_category=per_category, repeats=repeats, temperature=temperature)
        folder = out if len(vlm) == 1 else out / folder_name(task.cfg.vlm)
        results = C.run_method(task, folder, run, check=False)  # --dry-run: None, the estimates printed together
        if results is not None:
            folders.append(folder)
            all_results.append(results)
    if run.dry_run:
        return
    if len(folders) > 1 or external:
        board = write_leaderboard(folders, out / "leaderboard.json", external)
        C.terminal.leaderboard(board)
        C.console.print(f"Leaderboard: {out / 'leaderboard.json'}", highlight=False)
    C.check_failures(all_results, run.max_failures)
