"""Malformed inputs to the CLI: every one ends in exit 2 and one sentence that names the cause, never a
traceback (issue 18).  One test per case, each calling the console script's ``main`` in this process (what a
subprocess would run, without its start-up); one case also runs through a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

GOOD_IMG = "img/0.png"


def _write(path: Path, text: str | bytes, write: bool = True) -> Path:
    if not write:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _jsonl(rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    (d / "img").mkdir()
    for i in range(2):
        Image.new("RGB", (16, 16), (80 * i, 40, 200)).save(d / "img" / f"{i}.png")
    (d / "empty-folder").mkdir()
    _write(d / "good.jsonl", _jsonl([{"id": "a", "image": GOOD_IMG}]))
    _write(d / "a-file.txt", "not a folder\n")
    pair = {"a": {"id": "a", "image": GOOD_IMG, "description": "one"},
            "b": {"id": "b", "image": "img/1.png", "description": "two"}}
    _write(d / "pairs-ok.jsonl", _jsonl([pair]))
    # a finished describe run, for the commands that take a run folder
    from vlmcheck.cli import main

    argv = sys.argv
    sys.argv = ["vlmcheck", "describe", "--vlm", "ref:photo", "--data", str(d / "good.jsonl"), "--out",
                str(d / "describe-run"), "--no-progress"]
    try:
        with pytest.raises(SystemExit) as stop:
            main()
        assert stop.value.code in (0, None)
    finally:
        sys.argv = argv
    return d


def _cases(d: Path, write: bool = True) -> dict[str, list[str]]:
    """The cases, by name; ``write=False`` only names them (for parametrize) and writes nothing."""
    w = lambda name, text: str(_write(d / "cases" / name, text, write))  # noqa: E731
    desc = ["describe", "--vlm", "ref:photo", "--out", str(d / "out" / "x"), "--no-progress", "--data"]
    vhx = ["vhx", "run", "--vlm", "ref:describer", "--out", str(d / "out" / "v"), "--no-progress", "--cases"]
    cast = ["cast", "run", "--vlm", "ref:describer", "--out", str(d / "out" / "c"), "--no-progress", "--pairs"]
    chef = ["chef", "run", "--vlm", "ref:describer", "--out", str(d / "out" / "h"), "--no-progress", "--recipe"]
    good = str(d / "good.jsonl")
    mk = lambda *rows: _jsonl(rows)  # noqa: E731
    side = {"id": "a", "image": GOOD_IMG, "description": "x"}
    c: dict[str, list[str]] = {}
    # ---- manifests
    c["manifest missing"] = desc + [str(d / "nope.jsonl")]
    c["manifest empty"] = desc + [w("empty.jsonl", "")]
    c["manifest blank lines"] = desc + [w("blank.jsonl", "\n\n  \n")]
    c["manifest invalid json"] = desc + [w("bad.jsonl", '{"image": "img/0.png"\n')]
    c["manifest line is a list"] = desc + [w("list.jsonl", "[1, 2]\n")]
    c["manifest line is a string"] = desc + [w("str.jsonl", '"img/0.png"\n')]
    c["manifest line is a number"] = desc + [w("num.jsonl", "42\n")]
    c["manifest line is null"] = desc + [w("null.jsonl", "null\n")]
    c["manifest no image"] = desc + [w("noimg.jsonl", mk({"id": "a"}))]
    c["manifest image is a number"] = desc + [w("imgnum.jsonl", mk({"image": 3}))]
    c["manifest duplicate ids"] = desc + [w("dup.jsonl", mk({"id": "a", "image": GOOD_IMG}, {"id": "a", "image": GOOD_IMG}))]
    c["manifest category is a list"] = desc + [w("cat.jsonl", mk({"image": GOOD_IMG, "category": ["x"]}))]
    c["manifest binary garbage"] = desc + [w("garbage.jsonl", bytes(range(256)) * 4)]
    c["manifest utf-16"] = desc + [w("u16.jsonl", '{"image": "img/0.png"}\n'.encode("utf-16"))]
    c["manifest is a text file"] = desc + [str(d / "a-file.txt")]
    c["manifest folder without images"] = desc + [str(d / "empty-folder")]
    c["manifest huge line"] = desc + [w("huge.jsonl", '{"image": "' + "x" * 200_000)]
    # ---- VHExpansion cases
    c["cases missing"] = vhx + [str(d / "nope-cases.jsonl")]
    c["cases empty"] = vhx + [w("c-empty.jsonl", "")]
    c["cases invalid json"] = vhx + [w("c-bad.jsonl", "{nope\n")]
    c["cases line is a list"] = vhx + [w("c-list.jsonl", "[]\n")]
    c["cases no question"] = vhx + [w("c-noq.jsonl", mk({"image": GOOD_IMG, "answer": "yes"}))]
    c["cases answer maybe"] = vhx + [w("c-maybe.jsonl", mk({"image": GOOD_IMG, "question": "Is it?", "answer": "maybe"}))]
    c["cases answer is a list"] = vhx + [w("c-ans.jsonl", mk({"image": GOOD_IMG, "question": "Is it?", "answer": []}))]
    c["cases question is a number"] = vhx + [w("c-qnum.jsonl", mk({"image": GOOD_IMG, "question": 7, "answer": "yes"}))]
    c["cases csv missing columns"] = vhx + [w("c.csv", "foo,bar\n1,2\n")]
    c["cases csv empty"] = vhx + [w("c-empty.csv", "")]
    c["cases binary garbage"] = vhx + [w("c-garbage.jsonl", bytes(range(256)) * 4)]
    c["cases world folder without manifest"] = vhx + [str(d / "empty-folder")]
    # ---- CAST pairs
    c["pairs missing"] = cast + [str(d / "nope-pairs.jsonl")]
    c["pairs empty"] = cast + [w("p-empty.jsonl", "")]
    c["pairs invalid json"] = cast + [w("p-bad.jsonl", "{\n")]
    c["pairs line is a list"] = cast + [w("p-list.jsonl", "[1]\n")]
    c["pairs no b"] = cast + [w("p-nob.jsonl", mk({"a": side}))]
    c["pairs side is a string"] = cast + [w("p-str.jsonl", mk({"a": "img/0.png", "b": side}))]
    c["pairs no description"] = cast + [w("p-nodesc.jsonl", mk({"a": {"image": GOOD_IMG}, "b": side}))]
    c["pairs image is a number"] = cast + [w("p-imgnum.jsonl", mk({"a": {**side, "image": 5}, "b": side}))]
    c["pairs binary garbage"] = cast + [w("p-garbage.jsonl", bytes(range(256)) * 4)]
    # ---- ChEF recipes
    c["recipe unknown name"] = chef + ["no-such-recipe"]
    c["recipe yaml syntax"] = chef + [w("r1.yaml", "name: x\nscenario: {type: mc\n")]
    c["recipe yaml is a list"] = chef + [w("r2.yaml", "- a\n- b\n")]
    c["recipe yaml empty"] = chef + [w("r3.yaml", "")]
    c["recipe bad desideratum"] = chef + [w("r4.yaml", "name: x\ndesideratum: speed\nscenario: {type: mc}\n")]
    c["recipe scenario missing"] = chef + [w("r5.yaml", "name: x\n")]
    c["recipe wrong field type"] = chef + [w("r6.yaml", "name: x\nscenario: {type: mc}\nmetric: {n_bins: lots}\n")]
    c["recipe unknown scenario"] = chef + [w("r7.yaml", f"name: x\nscenario: {{type: nope, path: {good}}}\n")]
    c["recipe binary garbage"] = chef + [w("r8.yaml", bytes(range(256)) * 4)]
    c["recipe data missing"] = chef + ["mmbench", "--data", str(d / "nope.tsv")]
    c["chef unknown scenario option"] = chef + ["world-accuracy", "--scenario", "nope"]
    # ---- model specs
    gspec = lambda spec: ["describe", "--vlm", spec, "--data", good, "--out", str(d / "out" / "s"),  # noqa: E731
                          "--no-progress"]
    c["spec without provider"] = gspec("gpt-4o")
    c["spec unknown provider"] = gspec("nosuch:model")
    c["spec empty name"] = gspec("openai:")
    c["spec bad float"] = gspec("ref:describer?level=abc")
    c["spec bad bool"] = gspec("openai:m@http://127.0.0.1:9/v1?logprobs=maybe")
    c["spec not http"] = gspec("openai:m@ftp://127.0.0.1/v1")
    c["spec bad url"] = gspec("openai:m@http://[::1/v1")
    c["spec wrong role"] = ["genception", "--vlm", "ref:describer", "--generator", "ref:effnet", "--encoder",
                            "ref:effnet", "--data", good, "--out", str(d / "out" / "g"), "--no-progress"]
    c["spec encoder as vlm"] = gspec("ref:effnet")
    c["spec empty"] = gspec("")
    c["spec only colon"] = gspec(":")
    # ---- options
    c["limit zero"] = desc + [good, "--limit", "0"]
    c["limit negative"] = desc + [good, "--limit", "-3"]
    c["concurrency zero"] = desc + [good, "--max-concurrency", "0"]
    c["concurrency text"] = desc + [good, "--max-concurrency", "many"]
    c["out is a file"] = ["describe", "--vlm", "ref:photo", "--data", good, "--out", str(d / "a-file.txt")]
    c["out exists without resume"] = ["describe", "--vlm", "ref:photo", "--data", good, "--out",
                                      str(d / "describe-run")]
    c["T zero"] = ["genception", "--vlm", "ref:describer", "--generator", "ref:renderer", "--encoder", "ref:effnet",
                   "--data", good, "--out", str(d / "out" / "g0"), "-T", "0", "--no-progress"]
    c["per-category zero"] = ["genception", "--vlm", "ref:describer", "--generator", "ref:renderer", "--encoder",
                              "ref:effnet", "--data", good, "--out", str(d / "out" / "g1"), "--per-category", "0"]
    c["max-image-mb zero"] = desc + [good, "--max-image-mb", "0"]
    c["unknown option"] = desc + [good, "--frobnicate"]
    c["resume not a run"] = ["resume", str(d / "empty-folder")]
    c["resume missing folder"] = ["resume", str(d / "nope-run")]
    c["resume a file"] = ["resume", str(d / "a-file.txt")]
    c["retry-failed not a run"] = ["retry-failed", str(d / "empty-folder")]
    c["report missing folder"] = ["report", str(d / "nope-run"), "-o", str(d / "out" / "r.html")]
    c["vhx export a describe run"] = ["vhx", "export", str(d / "describe-run"), "--out", str(d / "out" / "e")]
    c["vhx export missing run"] = ["vhx", "export", str(d / "nope-run"), "--out", str(d / "out" / "e2")]
    c["vhx dataset a describe run"] = ["vhx", "dataset", str(d / "describe-run"), "--out", str(d / "out" / "ds")]
    c["vhx dataset train fraction 1"] = ["vhx", "dataset", str(d / "describe-run"), "--out", str(d / "out" / "ds2"),
                                         "--train-fraction", "1"]
    c["vhx finetune an API model"] = ["vhx", "finetune", "--model", "openai:gpt-4o", "--data", str(d / "good.jsonl"),
                                      "--out", str(d / "out" / "ft")]
    c["vhx finetune no data"] = ["vhx", "finetune", "--model", "hf:nope", "--data", str(d / "empty-folder"),
                                 "--out", str(d / "out" / "ft2")]
    c["vhx compare describe runs"] = ["vhx", "compare", str(d / "describe-run"), str(d / "describe-run")]
    c["vhx compare general not a pair"] = ["vhx", "compare", str(d / "describe-run"), str(d / "describe-run"),
                                           "--general", "only-one"]
    c["hf adapter not a folder"] = ["describe", "--vlm", f"hf:{d / 'empty-folder'}?adapter={d / 'empty-folder'}",
                                    "--data", good, "--out", str(d / "out" / "ad")]
    c["world make n zero"] = ["world", "make", str(d / "out" / "w"), "--n", "0"]
    c["perturb unknown corruption"] = ["perturb", str(d / "img"), "-c", "nope", "--out", str(d / "out" / "p")]
    c["perturb severity 9"] = ["perturb", str(d / "img"), "-c", "gaussian_noise", "-s", "9", "--out",
                               str(d / "out" / "p2")]
    # issue 32: empty paths (item 1), values accepted silently before (item 7), odd output folders (item 8)
    c["out empty"] = desc[:3] + ["--out", "", "--data", good]
    c["out= empty"] = desc[:3] + ["--out=", "--data", good]
    c["export run empty"] = ["export", "", "--out", str(d / "out" / "e")]
    c["merge out empty"] = ["merge", "", str(d / "describe-run")]
    c["report output empty"] = ["report", str(d / "describe-run"), "-o", ""]
    c["concurrency negative"] = ["describe", "--vlm", "openai:m@http://127.0.0.1:9/v1?concurrency=-5", "--data",
                                 good, "--out", str(d / "out" / "cn")]
    c["timeout negative"] = ["describe", "--vlm", "openai:m@http://127.0.0.1:9/v1?timeout=-1", "--data", good,
                             "--out", str(d / "out" / "tn")]
    c["unknown param"] = ["describe", "--vlm", "openai:m@http://127.0.0.1:9/v1?temprature=0", "--data", good,
                          "--out", str(d / "out" / "up")]
    c["max tokens negative"] = desc + [good, "--max-tokens", "-5"]
    c["max tokens zero"] = desc + [good, "--max-tokens", "0"]
    c["keywords numbers"] = desc + [w("kw.jsonl", mk({"image": GOOD_IMG, "keywords": [1, 2]}))]
    c["id object"] = desc + [w("idobj.jsonl", mk({"image": GOOD_IMG, "id": {"a": 1}}))]
    if write and not (d / "dangling").is_symlink():
        (d / "dangling").symlink_to(d / "nowhere" / "x")
        (d / "loop").symlink_to(d / "loop")
    c["out dangling symlink"] = desc[:3] + ["--out", str(d / "dangling"), "--data", good]
    c["out looping symlink"] = desc[:3] + ["--out", str(d / "loop"), "--data", good]
    c["export out looping symlink"] = ["export", str(d / "describe-run"), "--out", str(d / "loop")]
    c["merge out dangling symlink"] = ["merge", str(d / "dangling"), str(d / "describe-run")]
    return c


def _error_lines(stderr: str) -> list[str]:
    """Our errors are one 'error:' line, the last one; Click's usage errors one line inside its Error panel."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.lower().startswith("error:")]
    if ours and lines[-1] != ours[-1]:
        return ours + lines[lines.index(ours[-1]) + 1:]  # a continuation: not one sentence
    panel = [ln for ln in lines if ln.startswith("│") and ln.strip("│ ")]
    return ours + panel


CASES = list(_cases(Path("/names-only"), write=False))
#: cases that import torch and transformers before they refuse (tens of seconds on a loaded 2-core machine)
SLOW = {"vhx finetune an API model"}


@pytest.fixture(scope="module")
def cases(ws):
    return _cases(ws)


def _args(ws: Path, name: str, args: list[str]) -> list[str]:
    """Every case writes under its own folder, so no case fails because another one ran first."""
    own = str(ws / "out" / name.replace(" ", "-"))
    return [a.replace(str(ws / "out"), own, 1) if a.startswith(str(ws / "out")) else a for a in args]


def _check(name: str, rc, out: str, err: str) -> None:
    errors = _error_lines(err)
    assert rc == 2 and "Traceback" not in err + out and len(errors) == 1, \
        f"{name}: rc={rc} stderr={err.strip()[-600:]!r}"


def test_there_are_enough_cases():
    assert len(CASES) >= 60


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CASES])
def test_malformed_input_ends_in_one_sentence_and_exit_2(name, ws, cases, monkeypatch, capfd):
    from vlmcheck.cli import main

    monkeypatch.setenv("COLUMNS", "500")
    monkeypatch.setattr(sys, "argv", ["vlmcheck", *_args(ws, name, cases[name])])
    with pytest.raises(SystemExit) as stop:
        main()
    out, err = capfd.readouterr()
    _check(name, stop.value.code, out, err)


@pytest.mark.slow
def test_the_console_script_in_a_subprocess_says_the_same(ws, cases):
    name = "manifest invalid json"
    env = {**os.environ, "COLUMNS": "500", "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-m", "vlmcheck.cli", *_args(ws, name, cases[name])], capture_output=True,
                       text=True, env=env, timeout=300)
    _check(name, p.returncode, p.stdout, p.stderr)


# ---- issue 49: malformed inputs that were accepted silently (exit 0, content lost or wrong, no message), or ended
# in a traceback.  Each is now refused in one sentence naming the cause (exit 2), or runs with a one-line warning.

def _silent_cases(d: Path, write: bool = True) -> dict[str, tuple[list[str], str]]:
    """(arguments, a phrase the sentence must hold), by name: the phrase proves the refusal is for this cause,
    not for another one an old version would also have met."""
    w = lambda name, text: str(_write(d / "silent" / name, text, write))  # noqa: E731
    mk = lambda *rows: _jsonl(rows)  # noqa: E731
    if write and not (d / "silent" / "img").exists():
        (d / "silent" / "img").mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (16, 16), (80 * i, 40, 200)).save(d / "silent" / "img" / f"{i}.png")
    if write and not (d / "world" / "manifest.jsonl").exists():
        from vlmcheck.world.make import make_world

        make_world(d / "world", n=2, size=32)
    out = lambda name: str(d / "out" / "silent" / name)  # noqa: E731
    desc = lambda name, data: ["describe", "--vlm", "ref:photo", "--data", data, "--out", out(name),  # noqa: E731
                               "--no-progress"]
    chef = lambda name, recipe: ["chef", "run", "--vlm", "ref:describer", "--recipe", recipe, "--data",  # noqa: E731
                                 str(d / "world"), "--out", out(name), "--no-progress"]
    side = {"id": "a", "image": GOOD_IMG, "description": "a red circle"}
    good = str(d / "good.jsonl")
    c: dict[str, tuple[list[str], str]] = {}
    # before: a sample named "" (or "  ") in samples.jsonl and every report
    c["id empty"] = desc("ie", w("id-empty.jsonl", mk({"id": "", "image": GOOD_IMG}))), "'id' is empty"
    c["id blank"] = desc("ib", w("id-blank.jsonl", mk({"id": "  ", "image": GOOD_IMG}))), "'id' is empty"
    # before: "" fell back to the default prompt, silently; a number failed every sample with a TypeError
    c["prompt empty"] = desc("pe", w("p-empty.jsonl", mk({"image": GOOD_IMG, "prompt": ""}))), "'prompt'"
    c["prompt a number"] = desc("pn", w("p-num.jsonl", mk({"image": GOOD_IMG, "prompt": 5}))), "'prompt'"
    # before: a category named ""
    c["category empty"] = desc("ce", w("c-empty.jsonl", mk({"image": GOOD_IMG, "category": ""}))), "'category'"
    # before: the last of the two won silently
    c["spec parameter twice"] = (["describe", "--vlm", "ref:describer?level=0.1&level=0.9", "--data", good, "--out",
                                  out("sp"), "--no-progress"], "level is given twice")
    # before: one sentence, but "could not convert string to float: ''", naming no parameter
    c["spec parameter without value"] = (["describe", "--vlm", "ref:describer?level=", "--data", good, "--out",
                                          out("sv"), "--no-progress"], "level=")
    # before: a key ChEF's recipe does not know was dropped, and the run used the defaults (exit 0)
    c["recipe unknown key"] = chef("r1", w("r1.yaml", "name: x\nscenario: {type: world}\nmetrc: {n_bins: 5}\n")), \
        "metrc"
    c["recipe unknown metric key"] = chef("r2", w("r2.yaml", "name: x\nscenario: {type: world}\n"
                                                             "metric: {n_bin: 5}\n")), "n_bin"
    c["recipe unknown scenario key"] = chef("r3", w("r3.yaml", "name: x\nscenario: {type: world, limt: 3}\n")), \
        "limt"
    c["recipe key twice"] = chef("r4", w("r4.yaml", "name: x\nname: y\nscenario: {type: world}\n")), "given twice"
    # before: tracebacks (an empty image; a negative size), or a world of 1-pixel images with objects "in" them
    c["world make size 0"] = ["world", "make", out("w0"), "--n", "1", "--size", "0"], "--size"
    c["world make size 1"] = ["world", "make", out("w1"), "--n", "1", "--size", "1"], "--size"
    c["world make size negative"] = ["world", "make", out("w2"), "--n", "1", "--size", "-5"], "--size"
    # before: "wrote 0 pairs", exit 0, an empty pairs file
    c["world pairs n 0"] = ["world", "pairs", out("p0"), "--n", "0"], "--n"
    # before: a traceback (OverflowError converting MB to bytes)
    c["max-image-mb inf"] = desc("mi", good) + ["--max-image-mb", "inf"], "not a finite number"
    # before: a pair "a~a" whose outputs cannot tell its sides apart
    c["pair sides share an id"] = (["cast", "run", "--vlm", "ref:describer", "--pairs",
                                    w("pairs-same-id.jsonl", mk({"a": side, "b": {**side, "image": "img/1.png"}})),
                                    "--out", out("ps"), "--no-progress"], "both sides have the id")
    return c


SILENT = list(_silent_cases(Path("/names-only"), write=False))


@pytest.fixture(scope="module")
def silent_cases(ws):
    return _silent_cases(ws)


@pytest.mark.parametrize("name", SILENT)
def test_a_malformed_input_once_accepted_silently_is_refused_in_one_sentence(name, ws, silent_cases, monkeypatch,
                                                                             capfd):
    from vlmcheck.cli import main

    args, phrase = silent_cases[name]
    monkeypatch.setenv("COLUMNS", "500")
    monkeypatch.setattr(sys, "argv", ["vlmcheck", *args])
    with pytest.raises(SystemExit) as stop:
        main()
    out, err = capfd.readouterr()
    _check(name, stop.value.code, out, err)
    assert phrase in _error_lines(err)[0], (name, err)


@pytest.mark.parametrize("row, warning", [
    ({"image": GOOD_IMG, "promt": "Say hi."}, "field 'promt' is not one vlmcheck reads (did you mean 'prompt'?)"),
    ({"image": GOOD_IMG, "catgory": "x"}, "(did you mean 'category'?)"),
    ({"image": GOOD_IMG, "keyword": ["cat"]}, "(did you mean 'keywords'?)"),
    ({"image": GOOD_IMG, "path": "img/1.png"}, "both 'image' and 'path' are given"),
])
def test_a_field_that_would_be_ignored_is_warned_about_once(tmp_path, row, warning, caplog):
    """Before: a misspelt field (``promt``) was kept as metadata and never read - the run used the default prompt,
    exit 0, no message; ``image`` and ``path`` together read ``image`` and said nothing of ``path``.  Now the run
    goes on (the field may be the user's own metadata) with one warning per field and manifest."""
    from vlmcheck.core.data import load_image_dataset

    (tmp_path / "img").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / GOOD_IMG)
    manifest = _write(tmp_path / "m.jsonl", _jsonl([{**row, "id": "a"}, {**row, "id": "b"}]))
    with caplog.at_level("WARNING", logger="vlmcheck"):
        items = load_image_dataset(manifest)
    assert [i.id for i in items] == ["a", "b"] and items[0].path.endswith(GOOD_IMG)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and warning in warned[0] and "m.jsonl:1" in warned[0], warned


def test_other_datasets_fields_are_not_taken_for_misspellings(tmp_path, caplog):
    """question, answer, options...: another dataset's usual fields, kept as metadata without a warning."""
    from vlmcheck.core.data import load_image_dataset

    (tmp_path / "img").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / GOOD_IMG)
    row = {"image": GOOD_IMG, "question": "q", "answer": "a", "options": ["x"], "hint": "", "label": 1, "idx": 3,
           "source": "s", "width": 8}
    with caplog.at_level("WARNING", logger="vlmcheck"):
        load_image_dataset(_write(tmp_path / "m.jsonl", _jsonl([row])))
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == []
