"""``vlmcheck describe``: one prompt per image (methods/describe.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional
import typer

from ..core.spec import load_model
from . import _common as C
from ._lazy import lazy_module

terminal = lazy_module("vlmcheck.report.terminal")


@C.run_command
def describe(
    vlm: str = typer.Option(..., "--vlm", metavar="SPEC", help="VLM spec, e.g. openai:gpt-4o-mini or ref:photo"),
    data: str = typer.Option(..., "--data", metavar="SOURCE",
                             help="Image folder or JSONL manifest: a path or a URL (s3://, gs://, https://)"
                                  + C.DATA_HELP),
    benchmark: Optional[str] = C.BENCHMARK,
    out: Path = typer.Option(..., "--out", metavar="OUT", help="Run folder"),
    prompt: str = typer.Option("Describe this image in detail.", "--prompt", metavar="TEXT",
                               help="What the model is asked about each image"),
    max_tokens: int = typer.Option(512, "--max-tokens", min=1, metavar="N",
                                   help="Most tokens of each answer (the model's max_tokens)"),
    run: C.RunArgs = None,
) -> None:
    """Ask a VLM one prompt per image; keep every answer (and keyword recall where expected words are given)."""
    from ..methods.describe import DescribeSpec, DescribeTask

    C.setup_logging()
    data = C.with_benchmark(data, benchmark)
    from ..core.dataset_files import first_rows

    # --limit N: a streamed dataset's first N rows, not all of them, where the method's samples follow its rows
    with C.user_errors(), first_rows(run.limit if DescribeTask.samples_follow_rows({}) else None):
        spec = C.spec_with_key(vlm, run.api_key)
        task = DescribeTask(DescribeSpec(vlm=spec.canonical(), data=str(data), prompt=prompt, max_tokens=max_tokens),
                            vlm=load_model(spec, "vlm"))
    results = C.execute(task, out, run)
    if results is None:  # --dry-run: the estimate is printed by run_command
        return
    terminal.results(results)  # its headline on stdout, as every method command prints its results
    C.check_failures([results], run.max_failures)
