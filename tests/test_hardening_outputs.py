"""Issue 49 items 7 and 9: a sweep follows the CLI's rules for outputs; damaged run outputs, read-only folders,
output paths under broken links and LaTeX-like model names each give one sentence, never a traceback."""

import json
import os
import subprocess
import sys

import pytest
from conftest import HalfThenFull

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

    from vlmcheck.run.labels import model_label

    assert escape(model_label(name), quote=False) in svg  # the name itself (its label), not a formula


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


# ---- `world make` writes whole files only, and a new world whole or not at all (issue 49 item 11)

def _fail_the_nth_write(monkeypatch, root, nth: int):
    """The ``nth`` file opened for writing under ``root`` (by name, or by descriptor: a temp file's) gets half its
    bytes, then the disk is full: a write interrupted mid-way, whatever way the file is written."""
    import io

    real_open, seen = io.open, [0]

    def fake_open(file, mode="r", *args, **kwargs):
        fh = real_open(file, mode, *args, **kwargs)
        if any(c in mode for c in "wax") and (isinstance(file, int) or str(file).startswith(str(root))):
            seen[0] += 1
            if seen[0] == nth:
                return HalfThenFull(fh)
        return fh

    monkeypatch.setattr(io, "open", fake_open)


def _every_file_is_whole(folder):
    from PIL import Image

    files = [p for p in folder.rglob("*") if p.is_file()]
    for p in files:
        if p.suffix == ".png":
            with Image.open(p) as im:
                im.load()
        elif p.suffix == ".json":
            json.loads(p.read_text())
        elif p.suffix == ".jsonl":
            [json.loads(line) for line in p.read_text().splitlines()]
    return files


@pytest.mark.parametrize("nth", [3, 12])  # an image; the manifest-side files (objects.jsonl and after)
def test_an_interrupted_world_make_leaves_no_world(tmp_path, monkeypatch, nth):
    """Before: `world make` wrote every file in place, so a run cut short left half a PNG (or half a manifest)
    under its final name, in a folder a later run reads as a dataset.  Now a new world is built under a hidden
    name and renamed at the end: interrupted, there is no folder at all and nothing left beside it."""
    from vlmcheck.world.make import make_world

    _fail_the_nth_write(monkeypatch, tmp_path, nth)
    with pytest.raises(OSError, match="No space left"):
        make_world(tmp_path / "w", n=4, size=32)
    assert not (tmp_path / "w").exists() and list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    manifest = make_world(tmp_path / "w", n=4, size=32)  # and a later one writes the whole world
    assert len(manifest.read_text().splitlines()) == 4 and [p.name for p in tmp_path.iterdir()] == ["w"]
    assert len(_every_file_is_whole(tmp_path / "w")) > 12


def test_a_world_made_again_in_place_keeps_every_file_whole(tmp_path, monkeypatch):
    """A world written again into its folder (which holds files of its own: the demo's POPE cases): each file goes
    by temp file and rename, so one interrupted write leaves the old file, never half a new one."""
    from vlmcheck.world.make import make_world

    make_world(tmp_path / "w", n=4, size=32)
    (tmp_path / "w" / "pope.jsonl").write_text('{"mine": 1}\n')
    before = (tmp_path / "w" / "manifest.jsonl").read_text()
    for nth in (3, 5):
        _fail_the_nth_write(monkeypatch, tmp_path, nth)
        with pytest.raises(OSError, match="No space left"):
            make_world(tmp_path / "w", n=4, seed=7, size=32)
        monkeypatch.undo()
        _every_file_is_whole(tmp_path / "w")
        assert not [p for p in (tmp_path / "w").rglob("*") if p.name.endswith(".tmp")]
    assert (tmp_path / "w" / "manifest.jsonl").read_text() == before  # the manifest is written last
    assert (tmp_path / "w" / "pope.jsonl").read_text() == '{"mine": 1}\n'


@pytest.mark.slow
def test_a_killed_world_make_leaves_nothing_a_run_would_read(tmp_path):
    """kill -9 in the middle of `vlmcheck world make`: no folder under its name (before: dozens of images and
    scene files, no manifest, and `describe --data` on it ran as an image folder)."""
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "vlmcheck.cli", "world", "make", str(tmp_path / "w"), "--n", "400",
                             "--size", "64"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(tmp_path.rglob("*.png"))) < 20:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(list(tmp_path.rglob("*.png"))) >= 20  # it was killed mid-way
    assert not (tmp_path / "w").exists()
    assert all(p.name.startswith(".w.") and p.name.endswith(".partial") for p in tmp_path.iterdir())
