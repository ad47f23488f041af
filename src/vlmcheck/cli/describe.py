"""``vlmcheck describe``: one prompt per image (methods/describe.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional
import typer

from . import _common as C


@C.run_command
def describe(
    vlm: str = C.VLM,
    data: str = C.source("--data", "Image folder or JSONL manifest: a path or a URL (s3://, gs://, https://)"),
    benchmark: Optional[str] = C.BENCHMARK,
    out: Path = C.RUN_FOLDER,
    prompt: str = typer.Option("Describe this image in detail.", "--prompt", metavar="TEXT",
                               help="What the model is asked about each image"),
    max_tokens: int = typer.Option(512, "--max-tokens", min=1, metavar="N",
                                   help="Most tokens of each answer (the model's max_tokens)"),
    run: C.RunArgs = None,
) -> None:
    """Ask a VLM one prompt per image; keep every answer (and keyword recall where expected words are given)."""
    from ..methods.describe import DescribeTask

    C.run_method(C.method_task(DescribeTask, vlm, run, data=str(C.with_benchmark(data, benchmark)), prompt=prompt,
                               max_tokens=max_tokens), out, run)
