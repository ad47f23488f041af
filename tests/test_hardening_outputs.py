"""Issue 49 items 7 and 9: a sweep follows the CLI's rules for outputs; damaged run outputs, read-only folders,
output paths under broken links and LaTeX-like model names each give one sentence, never a traceback."""

import json
import os
import subprocess
import sys

import pytest

from vlmcheck.core.files import InputFileError
from vlmcheck.sweep import run_sweep

SWEEP = ("models:\n  - ref:describer?level=0.1\n"
         "methods:\n  - method: vhexpansion\n    cases: cases.jsonl\n    perturb: []\n")


def _never(*a, **k):  # no run may start
    raise AssertionError("a run started")


@pytest.mark.parametrize("out", ["''", '" "'])
def test_a_sweep_with_an_empty_out_is_refused(tmp_path, out):
    """Before: `out: ''` wrote into the config's folder and replaced the user's report.html and summary.json."""
    (tmp_path / "report.html").write_text("mine")
    (tmp_path / "summary.json").write_text('{"mine": 1}')
    (tmp_path / "sweep.yaml").write_text(f"out: {out}\n" + SWEEP)
    with pytest.raises(InputFileError, match="out: empty"):
        run_sweep(tmp_path / "sweep.yaml", progress=False, execute=_never)
    assert (tmp_path / "report.html").read_text() == "mine" and (tmp_path / "summary.json").read_text() == '{"mine": 1}'


def test_a_sweep_never_replaces_the_users_files(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "report.html").write_text("mine")
    (tmp_path / "sweep.yaml").write_text("out: mine\n" + SWEEP)
    with pytest.raises(InputFileError, match="did not write"):
        run_sweep(tmp_path / "sweep.yaml", progress=False, execute=_never)
    assert (tmp_path / "mine" / "report.html").read_text() == "mine"


@pytest.mark.parametrize("kind", ["dangling", "loop"])
def test_a_sweep_out_under_a_broken_link_is_refused(tmp_path, kind):
    if kind == "dangling":
        (tmp_path / "out").symlink_to(tmp_path / "nowhere")
    else:
        (tmp_path / "out").symlink_to(tmp_path / "out")
    (tmp_path / "sweep.yaml").write_text("out: out/sub\n" + SWEEP)
    with pytest.raises(InputFileError, match="symbolic link"):
        run_sweep(tmp_path / "sweep.yaml", progress=False, execute=_never)
