"""``vlmcheck cast pairs|run``: CAST's scene pairs and its self-consistency run (methods/cast.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..core.spec import load_model
from . import _common as C

cast_app = typer.Typer(no_args_is_help=True, help="CAST: cross-modal self-consistency.")


@cast_app.command("pairs")
def cast_pairs(
    data: str = C.source("--data", "JSONL of scenes (image, description[, id]), a world folder, "
                                   "or hfds:NAME?split=...&description_column=..."),
    benchmark: Optional[str] = C.BENCHMARK,
    encoder: str = typer.Option(..., "--encoder", metavar="SPEC",
                                help="Image encoder spec (CLIP image features where available)"),
    out: Path = typer.Option(..., "--out", metavar="FILE", help="Output pairs JSONL"),
    per_bin: int = typer.Option(25, "--per-bin", metavar="N",
                                help="Pairs drawn from each of the four image-similarity bins"),
    min_chars: int = typer.Option(500, "--min-chars", metavar="N",
                                  help="Leave out scenes whose description is shorter than N characters"),
    seed: int = C.SEED,
) -> None:
    """Sample scene pairs: image cosine in four bins of [0.75, 0.95), long descriptions, disjoint images."""
    from ..methods.cast import write_pairs

    data = C.with_benchmark(data, benchmark)
    with C.user_errors(FileNotFoundError):
        pairs, report, outside = write_pairs(data, load_model(encoder, "encoder"), out, per_bin=per_bin,
                                             min_chars=min_chars, seed=seed)
    if outside:
        C.console.print(f"[yellow]note:[/yellow] {outside} images lie outside {out.parent}; `cast run` reads them "
                        "only with --allow-outside (or write the pairs file inside the corpus folder)",
                        highlight=False)
    C.console.print(f"[green]wrote[/green] {len(pairs)} pairs to {out}; per bin: "
                    + ", ".join(f"{b}: {v['sampled']}/{v['candidates']}" for b, v in report["bins"].items()),
                    highlight=False)


@cast_app.command("run")
@C.run_command
def cast_run(
    vlm: str = C.VLM,
    pairs: str = C.source("--pairs", "Pairs JSONL (cast pairs, or world pairs; a path or an fsspec URL)"),
    benchmark: Optional[str] = C.BENCHMARK,
    out: Path = C.RUN_FOLDER,
    two_images: bool = typer.Option(False, "--two-images", help="Send two images instead of one side-by-side"),
    image_size: int = typer.Option(512, "--image-size", metavar="PX",
                                   help="Side of each image of a pair, in pixels, when the two are shown side by "
                                        "side in one picture (2 PX wide); not used with --two-images"),
    repeats: int = C.REPEATS,
    temperature: float = C.TEMPERATURE,
    blind: bool = C.BLIND,
    run: C.RunArgs = None,
) -> None:
    """Generate similarities in 3 modalities, validate each in 3 modalities x 3 formats, score consistency."""
    from ..methods.cast import CastTask

    C.run_method(C.method_task(CastTask, vlm, run, pairs=str(C.with_benchmark(pairs, benchmark)),
                               two_images=two_images, image_size=image_size, repeats=repeats,
                               temperature=temperature, blind=blind), out, run)
