"""``vlmcheck describe``: one prompt per image (methods/describe.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..core.spec import load_model
from . import _common as C


def register(app: typer.Typer) -> None:
    app.command()(describe)


def describe(
    vlm: str = typer.Option(..., "--vlm", metavar="SPEC", help="VLM spec, e.g. openai:gpt-4o-mini or ref:photo"),
    data: Path = typer.Option(..., "--data", metavar="PATH", help="Image folder or JSONL manifest"),
    out: Path = typer.Option(..., "--out", metavar="OUT", help="Run folder"),
    prompt: str = typer.Option("Describe this image in detail.", "--prompt", metavar="TEXT"),
    max_tokens: int = typer.Option(512, "--max-tokens", min=1, metavar="N"),
    api_key: Optional[str] = C.API_KEY,
    resume: bool = C.RESUME, overwrite: bool = C.OVERWRITE, limit: Optional[int] = C.LIMIT,
    shard: Optional[str] = C.SHARD, max_concurrency: int = C.CONCURRENCY, seed: int = C.SEED,
    progress: bool = C.PROGRESS, allow_outside: bool = C.ALLOW_OUTSIDE, max_image_mb: float = C.MAX_IMAGE_MB,
    pixel_budget_mb: float = C.PIXEL_BUDGET_MB, preflight: bool = C.PREFLIGHT, max_failures: float = C.MAX_FAILURES,
    executor: str = C.EXECUTOR, ray_address: Optional[str] = C.RAY_ADDRESS, workers: Optional[int] = C.WORKERS,
    gpus_per_worker: float = C.GPUS,
) -> None:
    """Ask a VLM one prompt per image; keep every answer (and keyword recall where expected words are given)."""
    from ..methods.describe import DescribeSpec, DescribeTask

    C.setup_logging()
    with C.user_errors():
        spec = C.spec_with_key(vlm, api_key)
        task = DescribeTask(DescribeSpec(vlm=spec.canonical(), data=str(data), prompt=prompt, max_tokens=max_tokens),
                            vlm=load_model(spec, "vlm"))
    results = C.execute(task, out, C.options(
        resume, overwrite, limit, max_concurrency, seed, progress, allow_outside, max_image_mb, pixel_budget_mb,
        preflight, shard, executor=executor, ray_address=ray_address, workers=workers, gpus_per_worker=gpus_per_worker))
    C.check_failures([results], max_failures)
