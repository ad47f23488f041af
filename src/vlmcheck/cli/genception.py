"""``vlmcheck genception``: describe, regenerate, repeat (methods/genception.py), one run per VLM and their
leaderboard (methods/leaderboard.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..core.spec import load_model
from ._lazy import lazy_module
from . import _common as C

terminal = lazy_module("vlmcheck.report.terminal")


@C.run_command
def genception(
    vlm: list[str] = typer.Option(..., "--vlm", metavar="SPEC", help="VLM spec; repeat for a leaderboard"),
    generator: str = typer.Option(..., "--generator", metavar="SPEC",
                                  help="Image generator spec, e.g. openai-image:dall-e-3"),
    encoder: str = typer.Option(..., "--encoder", metavar="SPEC",
                                help="Image encoder spec, e.g. hf-encoder:google/vit-base-patch16-224-in21k"),
    data: str = typer.Option(..., "--data", metavar="SOURCE",
                             help="Image folder (categories = sub-folders) or JSONL manifest: a path or a URL"
                                  + C.DATA_HELP),
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
    from ..core.dataset_files import first_rows
    from ..methods.genception import GenCeptionSpec, GenCeptionTask
    from ..methods.leaderboard import write_leaderboard

    C.setup_logging()
    data = C.with_benchmark(data, benchmark)
    folders, all_results = [], []
    for one in vlm:
        # --limit N: a streamed dataset's first N rows, where the method's samples follow its rows
        follows = GenCeptionTask.samples_follow_rows({"per_category": per_category})
        with C.user_errors(FileNotFoundError), first_rows(run.limit if follows else None):
            spec = C.spec_with_key(one, run.api_key)
            task = GenCeptionTask(GenCeptionSpec(vlm=spec.canonical(), generator=generator, encoder=encoder,
                                                 data=str(data), T=T, seed=run.seed, per_category=per_category,
                                                 repeats=repeats, temperature=temperature),
                                  vlm=load_model(spec, "vlm"))
        folder = out if len(vlm) == 1 else out / C.slug(spec.canonical())
        results = C.execute(task, folder, run)
        if results is None:  # --dry-run: every model's estimate is printed together by run_command
            continue
        terminal.results(results)  # by its label (run/labels.py), never its URL or key parameter
        folders.append(folder)
        all_results.append(results)
    if run.dry_run:
        return
    if len(folders) > 1 or external:
        board = write_leaderboard(folders, out / "leaderboard.json", external)
        terminal.leaderboard(board)
        C.console.print(f"Leaderboard: {out / 'leaderboard.json'}", highlight=False)
    C.check_failures(all_results, run.max_failures)
