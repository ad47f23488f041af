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


@pytest.mark.parametrize("name", [r"openai:a$\frac$b", r"openai:$x^$@http://h/v1", "openai:$$", r"openai:\$"])
def test_a_latex_like_model_name_is_drawn_as_it_is(name):
    """Before: a `$\\frac$` in a model name stopped the GenCeption report (mathtext could not parse it)."""
    from vlmcheck.report import charts

    runs = [{"samples": [{"status": "done", "result": {"s": [0.5, 0.4]}}],
             "results": {"spec": {"task_spec": {"vlm": name}}}}]
    svg = charts._s_curve(runs)
    from html import escape

    assert escape(name, quote=False) in svg  # the name itself, not a formula


def _main(monkeypatch, capsys, *args):
    """The console script in this process: (exit status, stderr)."""
    from vlmcheck.cli import main

    monkeypatch.setattr(sys, "argv", ["vlmcheck", *map(str, args)])
    with pytest.raises(SystemExit) as exit_:
        main()
    return exit_.value.code, capsys.readouterr().err


@pytest.fixture(scope="module")
def _two_runs(tmp_path_factory):
    from conftest import distinct_images
    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask

    base = tmp_path_factory.mktemp("runs")
    data = distinct_images(base / "imgs", 4)
    for name, vlm in (("a", "ref:photo"), ("b", "ref:describer?level=0.1")):
        run_task(DescribeTask(DescribeSpec(vlm=vlm, data=str(data))), base / name,
                 RunOptions(progress=False, report=False))
    return base


@pytest.fixture
def finished_run(tmp_path, _two_runs):
    import shutil

    for name in ("a", "b", "imgs"):
        shutil.copytree(_two_runs / name, tmp_path / name, symlinks=True)
    return tmp_path / "a", tmp_path / "b"


@pytest.mark.parametrize("kind", ["dangling", "loop"])
@pytest.mark.parametrize("command", ["report", "export", "describe"])
def test_an_output_under_a_broken_link_is_one_sentence(tmp_path, finished_run, monkeypatch, capsys, kind, command):
    """Before: a traceback (NotADirectoryError, FileExistsError, ELOOP) for an output path under a dangling or
    looping link."""
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere" if kind == "dangling" else link)
    a, _ = finished_run
    args = {"report": ["report", a, "-o", link / "sub" / "r.html"],
            "export": ["export", a, "--out", link / "sub", "--format", "csv"],
            "describe": ["describe", "--vlm", "ref:photo", "--data", tmp_path / "imgs", "--out", link / "run",
                         "--no-progress"]}[command]
    code, err = _main(monkeypatch, capsys, *args)
    assert code == 2 and "Traceback" not in err and "symbolic link" in err, err
    assert len(err.strip().splitlines()) == 1, err


def _damage(folder, kind):
    res, samples = folder / "results.json", folder / "samples.jsonl"
    info = json.loads(res.read_text())
    recs = [json.loads(line) for line in samples.read_text().splitlines()]
    if kind == "results: not JSON":
        res.write_text("{")
    elif kind == "results: a list":
        res.write_text("[]")
    elif kind == "results: spec is text":
        res.write_text(json.dumps({**info, "spec": "x"}))
    elif kind == "results: metrics is a list":
        res.write_text(json.dumps({**info, "metrics": [1]}))
    elif kind == "results: counts is text":
        res.write_text(json.dumps({**info, "counts": "x"}))
    elif kind == "results: task is a number":
        res.write_text(json.dumps({**info, "task": 3}))
    elif kind == "results: not UTF-8":
        res.write_bytes(b"\xff\xfe")
    elif kind == "samples: not JSON":
        samples.write_text("{\n")
    elif kind == "samples: a list":
        samples.write_text("[1]\n")
    elif kind == "samples: result is text":
        samples.write_text(json.dumps({**recs[0], "result": "x"}) + "\n")
    elif kind == "samples: no status":
        samples.write_text(json.dumps({k: v for k, v in recs[0].items() if k != "status"}) + "\n")
    elif kind == "samples: not UTF-8":
        samples.write_bytes(b"\xff\n")


@pytest.mark.parametrize("kind", ["results: not JSON", "results: a list", "results: spec is text",
                                  "results: metrics is a list", "results: counts is text",
                                  "results: task is a number", "results: not UTF-8", "samples: not JSON",
                                  "samples: a list", "samples: result is text", "samples: no status",
                                  "samples: not UTF-8"])
def test_damaged_run_outputs_are_one_sentence_in_every_command(tmp_path, finished_run, monkeypatch, capsys, kind):
    """Before: 24 tracebacks over these 12 damages x compare, plan, report, export (AttributeError, KeyError,
    TypeError, JSONDecodeError, UnicodeDecodeError).  Now each is exit 2 and one sentence naming the file."""
    a, b = finished_run
    _damage(a, kind)
    commands = [["compare", a, b, "-o", tmp_path / "lb.json"], ["plan", "--pilot", a, "--delta", "0.1"],
                ["report", a, "-o", tmp_path / "rep" / "r.html"],
                ["export", a, "--out", tmp_path / "exp", "--format", "csv"]]
    for args in commands:
        code, err = _main(monkeypatch, capsys, *args)
        assert code == 2 and "Traceback" not in err, (args[0], err)
        assert len(err.strip().splitlines()) == 1 and ("results.json" in err or "samples.jsonl" in err), (args, err)
