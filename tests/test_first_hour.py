"""A new user's first hour (issue 17): failures look like failures, preflight, reasoning models, results into
pandas."""

from __future__ import annotations

import json
import os
import socket
import subprocess

import numpy as np
import pytest
from conftest import CLI, run_cli
from PIL import Image

from vlmcheck.core.answers import split_reasoning


def _cli(*args, env=None, timeout=300):
    env = {**(env or os.environ), "COLUMNS": "500"}
    return run_cli(*args, env=env)


def _last_error(proc) -> str:
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert lines and lines[-1].startswith("error:"), proc.stderr
    return lines[-1]


def _images(folder, n=3, prompts=None):
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        Image.new("RGB", (12, 12), (70 * i, 20, 200)).save(folder / f"{i}.png")
        row = {"id": f"s{i}", "image": f"{i}.png"}
        if prompts:
            row["prompt"] = prompts[i]
        rows.append(row)
    (folder / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder / "m.jsonl"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- failure looks like failure

@pytest.mark.slow
def test_a_dead_port_stops_at_preflight_saying_refused(tmp_path):
    port = _free_port()
    p = _cli("describe", "--vlm", f"openai:m@http://127.0.0.1:{port}/v1", "--data", _images(tmp_path / "d"),
             "--out", tmp_path / "run", "--no-progress")
    assert p.returncode == 2
    err = _last_error(p)
    assert "connection refused" in err and f"127.0.0.1:{port}" in err and "timed out" not in err


@pytest.mark.slow
def test_without_preflight_every_sample_fails_refused_and_the_run_exits_1(tmp_path):
    port = _free_port()
    p = _cli("describe", "--vlm", f"openai:m@http://127.0.0.1:{port}/v1?timeout=5", "--data",
             _images(tmp_path / "d"), "--out", tmp_path / "run", "--no-progress", "--no-preflight")
    assert p.returncode == 1
    assert "3 of 3 samples failed" in _last_error(p) and "retry-failed" in _last_error(p)
    rows = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert all("connection refused" in r["error"]["message"] and r["error"]["type"] == "model_call:connection"
               for r in rows)


@pytest.mark.slow
def test_preflight_names_a_model_the_server_does_not_serve(tmp_path):
    from conftest import FakeServer

    server = FakeServer(0.0, tmp_path, "--models", "llava-7b,qwen2-vl")
    try:
        p = _cli("describe", "--vlm", f"openai:gpt-4o@{server.base_url}", "--data", _images(tmp_path / "d"),
                 "--out", tmp_path / "run", "--no-progress")
        assert p.returncode == 2
        assert "does not serve model 'gpt-4o'; it serves: llava-7b, qwen2-vl" in _last_error(p)
        assert not server.requests()  # no sample was sent
        ok = _cli("describe", "--vlm", f"openai:qwen2-vl@{server.base_url}", "--data", tmp_path / "d" / "m.jsonl",
                  "--out", tmp_path / "run2", "--no-progress")
        assert ok.returncode == 0, ok.stderr
    finally:
        server.stop()


@pytest.mark.slow
def test_preflight_says_the_key_was_rejected(tmp_path):
    from conftest import FakeServer

    server = FakeServer(0.0, tmp_path, "--models", "m", "--require-key", "right-key-123")
    try:
        env = {**os.environ, "OPENAI_API_KEY": "wrong-key-456"}
        p = _cli("describe", "--vlm", f"openai:m@{server.base_url}", "--data", _images(tmp_path / "d"),
                 "--out", tmp_path / "run", "--no-progress", env=env)
        assert p.returncode == 2 and "rejected the API key (HTTP 401)" in _last_error(p)
        assert "wrong-key-456" not in p.stderr + p.stdout
    finally:
        server.stop()


@pytest.mark.slow
def test_some_failed_samples_exit_1_unless_allowed_by_max_failures(fake_server, tmp_path):
    manifest = _images(tmp_path / "d", prompts=["Describe.", "[fault=400] Describe.", "Describe."])
    p = _cli("describe", "--vlm", f"openai:m@{fake_server.base_url}", "--data", manifest, "--out", tmp_path / "a",
             "--no-progress")
    assert p.returncode == 1 and "1 of 3 samples failed" in _last_error(p)
    assert (tmp_path / "a" / "results.json").exists()  # finished samples are kept
    p = _cli("describe", "--vlm", f"openai:m@{fake_server.base_url}", "--data", manifest, "--out", tmp_path / "b",
             "--no-progress", "--max-failures", "0.34")
    assert p.returncode == 0, p.stderr
    p = _cli("resume", tmp_path / "a", "--no-progress", "--max-failures", "0.3")
    assert p.returncode == 1  # 1/3 > 0.3


@pytest.mark.slow
def test_hf_device_cuda_without_cuda_and_a_model_not_in_the_cache(tmp_path):
    import torch

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    p = _cli("describe", "--vlm", "hf:someone/not-here", "--data", _images(tmp_path / "d"), "--out",
             tmp_path / "run", env=env, timeout=60)
    assert p.returncode == 2 and "not in the Hugging Face cache" in _last_error(p)
    if not torch.cuda.is_available():
        from vlmcheck.core.spec import SpecError
        from vlmcheck.models.hf import resolve_device

        with pytest.raises(SpecError, match="sees no CUDA GPU"):
            resolve_device("cuda")


# ----------------------------------------------------------------------------- reasoning models

@pytest.mark.parametrize("text, answer, reasoning", [
    ("<think>It has no cat, so no.</think>\n\nYes", "Yes", "It has no cat, so no."),
    ("It has no cat, so no.</think> Yes.", "Yes.", "It has no cat, so no."),  # <think> was in the prompt
    ("<think>Counting the cats: one, two", "", "Counting the cats: one, two"),  # cut off mid-thought
    ("<thinking>hmm</thinking>No", "No", "hmm"),
    ("<reasoning>a</reasoning>B<reasoning>c</reasoning> C", "B C", "a\n\nc"),
    ("<|begin_of_thought|>x<|end_of_thought|>\n<|begin_of_solution|>Yes<|end_of_solution|>", "Yes", "x"),
    ("\u25c1think\u25b7k\u25c1/think\u25b7No", "No", "k"),
    ("A plain <b>answer</b>.", "A plain <b>answer</b>.", None),
])
def test_split_reasoning(text, answer, reasoning):
    assert split_reasoning(text) == (answer, reasoning)


@pytest.mark.parametrize("fault", ["think", "reasoning"])
def test_a_reasoning_models_answer_is_scored_on_its_final_answer(fake_server, tmp_path, fault):
    # VHExpansion through a server whose model thinks "no" and answers "Yes": the POPE rule reads "yes".
    from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec
    from vlmcheck.run.runner import RunOptions, run_task

    Image.new("RGB", (12, 12), (0, 0, 0)).save(tmp_path / "a.png")
    (tmp_path / "cases.jsonl").write_text(json.dumps(
        {"id": "c", "image": "a.png", "question": f"[fault={fault}] Is there a cat?", "answer": "yes"}) + "\n")
    task = VHExpansionTask(VHXSpec(vlm=f"openai:m@{fake_server.base_url}", cases=str(tmp_path / "cases.jsonl"),
                                   negator=None, perturb=[]))
    res = run_task(task, tmp_path / "run", RunOptions(progress=False))
    rec = json.loads((tmp_path / "run" / "samples.jsonl").read_text())["result"]
    original = rec["variants"]["original"]
    assert original["answer"] == "Yes" and original["parsed"] == "yes" and original["correct"] is True
    assert "no" in rec["reasoning_trace"][0]["reasoning"]  # the thinking is kept beside the answer
    assert res.results["metrics"]["variants"]["original"]["accuracy"] == 1.0


def test_reasoning_spec_parameters_reach_the_request_body():
    from vlmcheck.core.spec import ModelSpec
    from vlmcheck.models.openai_compat import _body_extras

    spec = ModelSpec.parse('openai:qwen3@http://h/v1?enable_thinking=0&reasoning_effort=low'
                           '&extra_body={"top_k": 20}')
    assert _body_extras(spec) == {"top_k": 20, "reasoning_effort": "low",
                                  "chat_template_kwargs": {"enable_thinking": False}}


# ----------------------------------------------------------------------------- results into pandas

@pytest.mark.slow
def test_export_round_trips_a_genception_run_and_recomputes_its_headline(tmp_path):
    import pandas as pd

    import vlmcheck

    world = tmp_path / "w"
    assert _cli("world", "make", world, "--n", "8", "--size", "96").returncode == 0
    run = tmp_path / "gc"
    p = _cli("genception", "--vlm", "ref:describer?level=0.3", "--generator", "ref:renderer", "--encoder",
             "ref:pixels", "--data", world, "--out", run, "-T", "2", "--no-progress")
    assert p.returncode == 0, p.stderr
    p = _cli("export", run, "--out", tmp_path / "tables", "--format", "parquet")
    assert p.returncode == 0, p.stderr
    table = pd.read_parquet(tmp_path / "tables" / "genception-describer.parquet")  # <method>-<label>, stable per run
    results = json.loads((run / "results.json").read_text())["metrics"]
    assert len(table) == 8 * 2 and set(table["t"]) == {1, 2}
    # GC@1 by its definition from the exported rows: s at t=1, averaged per category, then over categories
    s1 = table[table["t"] == 1].groupby("category")["s"].mean()
    assert np.isclose(s1.mean(), results["GC@1"]["score"], atol=1e-9)
    # GC@2 = (1 s1 + 2 s2) / 3 per chain
    wide = table.pivot(index="sample_id", columns="t", values="s")
    cats = table[table["t"] == 1].set_index("sample_id")["category"]
    gc2 = ((wide[1] + 2 * wide[2]) / 3).groupby(cats).mean().mean()
    assert np.isclose(gc2, results["GC@2"]["score"], atol=1e-9)
    samples, metrics = vlmcheck.load_runs([run])
    key = ["sample_id", "t"]
    assert np.allclose(samples.sort_values(key)["s"].to_numpy(), table.sort_values(key)["s"].to_numpy())
    # the long metrics table: one row per metric with its interval, n and resampling unit (issue 34)
    assert list(metrics.columns) == ["run", "model", "task", "metric", "value", "ci_low", "ci_high", "n", "unit",
                                     "headline", "not_measured"]
    gc2 = metrics[(metrics.metric == "GC@2") & ~metrics.headline].iloc[0]
    assert np.isclose(gc2["value"], results["GC@2"]["score"]) and [gc2.ci_low, gc2.ci_high] == results["GC@2"]["ci95"]
    assert gc2["n"] == results["GC@2"]["n"] and gc2["unit"] == "image (stratified by category)"
    head = metrics[metrics.headline]
    assert len(head) == 1 and head.iloc[0]["metric"] == f"GC@{results['T']}"
    assert metrics[~metrics.headline]["metric"].is_unique
    for fmt in ("csv", "jsonl"):
        assert _cli("export", run, "--out", tmp_path / fmt, "--format", fmt).returncode == 0
    back = pd.read_csv(tmp_path / "csv" / "genception-describer.csv")
    assert np.allclose(back.sort_values(["sample_id", "t"])["s"], table.sort_values(["sample_id", "t"])["s"])


# ----------------------------------------------------------------------------- progress everywhere

@pytest.mark.slow
def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path):
    env = {**os.environ, "VLMCHECK_PROGRESS_EVERY": "0"}
    p = _cli("describe", "--vlm", "ref:photo", "--data", _images(tmp_path / "d"), "--out", tmp_path / "run",
             env=env)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("[describe] ")]
    assert [ln.split()[1] for ln in lines[:3]] == ["1/3", "2/3", "3/3"]
    assert "failed 0" in lines[-1] and "ETA" in lines[-1] and "/s" in lines[-1]
    quiet = _cli("describe", "--vlm", "ref:photo", "--data", tmp_path / "d" / "m.jsonl", "--out", tmp_path / "r2",
                 "--no-progress", env=env)
    assert "[describe]" not in quiet.stderr
    p = _cli("perturb", tmp_path / "d", "-c", "gaussian_noise", "--out", tmp_path / "p", env=env)
    assert p.returncode == 0 and "[perturb] 3/3 (100%)" in p.stderr


# ----------------------------------------------------------------------------- one config for a sweep

@pytest.mark.slow
def test_a_sweep_runs_models_x_methods_and_resumes_without_a_call(tmp_path):
    assert _cli("world", "make", tmp_path / "world", "--n", "6", "--size", "96").returncode == 0
    (tmp_path / "sweep.yaml").write_text(
        "out: runs\n"
        "models:\n  - ref:describer?level=0.1\n  - name: noisy\n    spec: ref:describer?level=0.3\n"
        "methods:\n"
        "  - method: genception\n    data: world/\n    generator: ref:renderer\n    encoder: ref:pixels\n    T: 2\n"
        "  - method: vhexpansion\n    cases: world/\n    perturb: [vhx_jpeg]\n"
        "options:\n  max_concurrency: 4\n")
    first = _cli("run", tmp_path / "sweep.yaml", "--no-progress")
    assert first.returncode == 0, first.stderr
    runs = tmp_path / "runs"
    folders = sorted(p.parent.relative_to(runs).as_posix() for p in runs.glob("*/*/results.json"))
    assert folders == ["genception/noisy", "genception/ref_describer_level_0.1", "vhexpansion/noisy",
                       "vhexpansion/ref_describer_level_0.1"]
    summary = json.loads((runs / "summary.json").read_text())
    gc = {r["model"]: r["value"] for r in summary if r["method"] == "genception"}
    assert gc["describer (level=0.1)"] > gc["describer (level=0.3)"]  # the noisier describer drifts more
    assert {r["model"] for r in summary if r["method"] == "vhexpansion"} == set(gc)  # labels per method
    assert {r["spec"] for r in summary} == {"ref:describer?level=0.1", "ref:describer?level=0.3"}
    assert json.loads((runs / "genception" / "leaderboard.json").read_text())
    assert (runs / "report.html").stat().st_size > 1000
    again = _cli("run", tmp_path / "sweep.yaml", "--no-progress")
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("0 model calls") == 4 and json.loads((runs / "summary.json").read_text()) == summary


@pytest.mark.slow
def test_the_example_sweep_is_valid_and_plans_every_model_x_method(tmp_path):
    from vlmcheck.sweep import load_sweep, plan

    p = _cli("run", "--example")
    assert p.returncode == 0
    (tmp_path / "s.yaml").write_text(p.stdout)
    runs = plan(load_sweep(tmp_path / "s.yaml"), tmp_path)
    assert len(runs) == 7 * 4
    assert {m for _, m, _ in runs} == {"genception", "vhexpansion", "cast", "chef"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("out: x\nmodels: [ref:describer]\nmethods:\n  - method: genception\n    dta: world/\n")
    p = _cli("run", bad)
    assert p.returncode == 2 and "unknown option(s) dta" in _last_error(p)
    # a relative path is the sweep file's; a URL (issue 37 item 5) stays as it is
    urls = tmp_path / "urls.yaml"
    urls.write_text("out: x\nmodels: [ref:describer]\nmethods:\n  - method: vhexpansion\n"
                    "    cases: s3://bucket/pope/cases.jsonl\n  - method: vhexpansion\n    name: local\n"
                    "    cases: pope/cases.jsonl\n")
    (_, _, remote_run), (_, _, local_run) = plan(load_sweep(urls), tmp_path)
    assert remote_run["cases"] == "s3://bucket/pope/cases.jsonl"
    assert local_run["cases"] == str(tmp_path / "pope" / "cases.jsonl")


def test_a_slow_load_says_so_and_a_fast_one_says_nothing():
    import io
    import time

    from vlmcheck.core.progress import Progress, loading

    buf = io.StringIO()
    with loading("hf:slow", after=0.05, stream=buf):
        time.sleep(0.2)
    with loading("hf:fast", after=5, stream=buf):
        pass
    lines = buf.getvalue().splitlines()
    assert lines[0] == "[load] hf:slow ..." and lines[1].startswith("[load] hf:slow ready in 0.")
    assert len(lines) == 2
    quiet = io.StringIO()
    with Progress("attack", 10, plain=True, quiet_if_fast=True, every=100, stream=quiet) as p:
        for _ in range(10):
            p.advance()
    assert quiet.getvalue() == ""  # fast work inside a run adds no line


# ----------------------------------------------------------------------------- command-line conventions (issue 52)


@pytest.mark.slow
def test_h_is_help_and_version_prints_the_version_everywhere():
    from vlmcheck import __version__

    for args in (["-h"], ["describe", "-h"], ["chef", "run", "-h"], ["vhx", "-h"]):
        proc = _cli(*args)
        assert proc.returncode == 0 and proc.stdout.startswith("Usage: vlmcheck"), (args, proc.stderr)
        assert "-h, --help" in proc.stdout
    proc = _cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == __version__


def _commands():
    """(command path, click command) for every command of the CLI, subcommands included."""
    import typer

    from vlmcheck.cli import app

    todo = [([], typer.main.get_command(app))]
    while todo:
        path, cmd = todo.pop()
        subs = getattr(cmd, "commands", None)
        if subs:
            todo += [(path + [name], sub) for name, sub in subs.items()]
        else:
            yield " ".join(path), cmd


def test_every_option_of_every_command_says_what_it_is_for():
    commands = dict(_commands())
    assert len(commands) > 25 and "vhx run" in commands and "cast run" in commands
    empty = [(name, p.opts) for name, cmd in commands.items() for p in cmd.params
             if p.param_type_name == "option" and not (p.help or "").strip()]
    assert empty == []


@pytest.mark.slow
def test_epsilon_is_shown_as_8_over_255_and_read_as_a_fraction():
    import typer

    from vlmcheck.cli import _common as C

    proc = _cli("vhx", "run", "--help")
    text = " ".join(proc.stdout.split())
    assert "[default: (8/255)]" in text and "0.0313" not in text and "0-1 scale" in text
    assert C.fraction("8/255") == 8 / 255 and C.fraction("0.5") == 0.5
    with pytest.raises(typer.BadParameter):
        C.fraction("8/0")
    # the paper's four corruptions never split mid-word at 80 columns
    narrow = run_cli("vhx", "run", "--help", env={**os.environ, "COLUMNS": "80"})
    assert "vhx_gaussian_noise," in narrow.stdout.split()


@pytest.mark.slow
def test_scenario_lists_its_names_and_a_world_folder_suggests_it(tmp_path):
    from vlmcheck.cli.chef import SCENARIO_NAMES
    from vlmcheck.methods.chef.scenarios import LOADERS

    assert tuple(LOADERS) == SCENARIO_NAMES
    text = " ".join(_cli("chef", "run", "--help").stdout.split())
    assert all(name in text for name in SCENARIO_NAMES)
    proc = _cli("world", "make", tmp_path / "world", "--n", "2")
    assert proc.returncode == 0, proc.stderr
    proc = _cli("chef", "run", "--recipe", "calibration", "--data", tmp_path / "world", "--vlm", "ref:oracle",
                "--out", tmp_path / "run")
    assert proc.returncode == 2
    assert "--scenario world" in _last_error(proc)


LONG_SPEC = "openai:Qwen/Qwen2.5-VL-72B-Instruct-AWQ@http://gpu-node-17.cluster.internal:8000/v1"


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 60])
def test_a_dry_run_table_keeps_every_number_at_80_and_60_columns(tmp_path, columns):
    data = tmp_path / "imgs"
    data.mkdir()
    for i in range(3):
        Image.new("RGB", (8 + i, 8), (40 * i, 0, 0)).save(data / f"{i}.png")
    proc = run_cli("describe", "--vlm", LONG_SPEC, "--data", str(data), "--out", str(tmp_path / "run"), "--dry-run",
                   env={**os.environ, "COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    assert max(map(len, text.splitlines())) <= columns
    joined = "".join(text.split())  # the spec may fold over lines; every character of it is there, in order
    assert LONG_SPEC in joined.replace("│", "").replace("┃", "") or LONG_SPEC in joined
    # the figures: 3 calls, 512 x 3 output tokens (max_tokens), each on one line, whole
    words = [w.strip("│┃*") for w in text.split()]
    assert "3" in words and "1,536" in words and "price" in words


@pytest.mark.parametrize("width", [80, 60])
def test_a_result_table_titled_by_a_long_spec_keeps_its_numbers(width):
    import io

    from rich.console import Console

    from vlmcheck.methods import view_lines
    from vlmcheck.report import terminal

    buf = io.StringIO()
    old, terminal.tables = terminal.tables, Console(file=buf, width=width)  # where results are printed
    try:
        terminal.show(view_lines.vhexpansion(LONG_SPEC, {"variants": {
            "original": {"accuracy": 0.8123, "symmetric_accuracy": 0.7, "yes_ratio": 0.5, "new_vh_cases": 3},
            "vhx_gaussian_noise": {"accuracy": 0.7, "symmetric_accuracy": None, "yes_ratio": 0.45,
                                   "new_vh_cases": 12}}}))
        terminal.show(view_lines.chef(LONG_SPEC, {"recipe": "calibration", "desideratum": "calibration",
                                                  "accuracy": 0.61234, "ece": 0.04321, "overall": 0.95679,
                                                  "settings": {}}))
    finally:
        terminal.tables = old
    text = buf.getvalue()
    assert max(map(len, text.splitlines())) <= width
    title_lines = [ln for ln in text.splitlines() if ln.startswith(("openai:", "gpu-node", "/v1"))]
    assert len(title_lines) <= 2 * 3  # two titles, each over at most three lines, not seven
    words = [w.strip("│┃") for w in text.split()]
    for figure in ("0.812", "0.700", "0.50", "3", "12", "0.45", "0.6123", "0.0432", "0.9568"):
        assert figure in words, figure


@pytest.mark.slow
def test_resume_prints_the_results_table_the_run_command_prints(tmp_path):
    world = tmp_path / "world"
    assert _cli("world", "make", world, "--n", "3").returncode == 0
    run = _cli("vhx", "run", "--vlm", "ref:describer?level=0.1", "--cases", world, "--out", tmp_path / "vhx",
               "--perturb", "", "--no-report")
    assert run.returncode == 0, run.stderr
    resumed = _cli("resume", tmp_path / "vhx", "--no-report")
    assert resumed.returncode == 0, resumed.stderr

    def table(proc):  # the results table: from its title (the model) to its last rule
        text = proc.stdout + proc.stderr
        lines = text.splitlines()
        start = next(i for i, ln in enumerate(lines) if ln.startswith("describer"))  # the model's label
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
        return lines[start:end + 1]

    assert table(resumed) == table(run) and any("original" in ln for ln in table(run))


def test_a_sweeps_tables_are_named_by_method_and_model(tmp_path):
    """Each table is named by its run's method and model id (never a URL or parameter, never runs or metrics),
    the same whatever else is exported; runs of one method and model add their folder's name."""
    from vlmcheck.export import table_names

    folders = []
    for method, model in (("genception", "ref:describer?level=0.3"), ("vhexpansion", "ref:describer?level=0.3"),
                          ("vhexpansion", "openai:gpt-4o-mini")):
        f = tmp_path / method / model.replace(":", "_").replace("?", "_") / "noisy"
        f.mkdir(parents=True)
        (f / "results.json").write_text(json.dumps({"task": method, "spec": {"task_spec": {"vlm": model}}}))
        folders.append(f)
    for name in ("solo", "runs"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps({"task": "cast", "spec": {"task_spec": {
            "vlm": "ref:describer"}}}))
        folders.append(tmp_path / name)
    assert table_names(folders) == ["genception-describer", "vhexpansion-describer", "vhexpansion-gpt-4o-mini",
                                    "cast-describer-solo", "cast-describer-runs"]
    assert table_names([folders[1], folders[1]]) == ["vhexpansion-describer", "vhexpansion-describer-2"]
    for i, f in enumerate(folders[:3]):  # the same run, the same name, alone or with others
        assert table_names([f]) == [table_names(folders)[i]]
    url = tmp_path / "served" / "run"
    url.mkdir(parents=True)
    (url / "results.json").write_text(json.dumps({"task": "chef", "label": None, "spec": {"task_spec": {
        "vlm": "openai:/models/tiny-qwen/@http://127.0.0.1:18531/v1?key_env=LITELLM_KEY"}}}))
    assert table_names([url]) == ["chef-tiny-qwen"]


@pytest.mark.slow
def test_each_method_has_its_own_tidy_samples_table_and_cast_verdicts_are_rows(tmp_path):
    """load_tables: a table per method with only its columns, one type per column (ChEF's ``answer`` the truth
    index as integers, VHExpansion's the model's text as strings; a seed an integer, not a float); CAST's verdicts
    one per row, their share per pair computed with a groupby."""
    import pandas as pd

    import vlmcheck
    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.cast import CastSpec, CastTask
    from vlmcheck.methods.chef import ChefSpec, ChefTask, resolve_recipe
    from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec
    from vlmcheck.world.make import make_world, make_world_pairs

    world = tmp_path / "world"
    make_world(world, n=4, seed=3)
    pairs = make_world_pairs(tmp_path / "pairs", n=2, seed=3)
    opts = RunOptions(progress=False, report=False)
    run_task(VHExpansionTask(VHXSpec(vlm="ref:describer?level=0.1", cases=str(world), perturb=["vhx_jpeg"])),
             tmp_path / "vhx", opts)
    run_task(ChefTask(ChefSpec(vlm="ref:describer?level=0.1", recipe=resolve_recipe("world-accuracy"),
                               data=str(world))), tmp_path / "chef", opts)
    run_task(CastTask(CastSpec(vlm="ref:describer?level=0.1", pairs=str(pairs), k=2)), tmp_path / "cast", opts)
    runs = [tmp_path / "vhx", tmp_path / "chef", tmp_path / "cast"]
    tables = vlmcheck.load_tables(runs)
    assert set(tables) == {"vhexpansion", "chef", "cast", "cast_verdicts", "metrics"}
    union, _ = vlmcheck.load_runs(runs)
    vhx, chef = tables["vhexpansion"], tables["chef"]
    for t in (vhx, chef, tables["cast"]):
        assert len(t.columns) < len(union.columns) and "task" not in t.columns
    assert "pred" not in vhx.columns and "variant" not in chef.columns  # no other method's columns
    assert pd.api.types.is_string_dtype(vhx["answer"]) and str(chef["truth"].dtype) == "Int64"
    # ChEF's two truths say so; the model's choice is `pred` (no `answer` column that is not an answer)
    assert {"truth", "sample.truth", "pred"} <= set(chef.columns) and "answer" not in chef.columns
    assert "sample.answer" not in chef.columns
    seeds = [c for c in vhx.columns if c.endswith("seed")]
    assert seeds and all(str(vhx[c].dtype) == "Int64" for c in seeds)
    v = tables["cast_verdicts"]
    assert list(v.columns) == ["run", "model", "sample_id", "repeat", "generation", "statement", "validation",
                               "format", "blind", "verdict", "raw", "text"]
    assert {str(v[c].dtype) for c in ("repeat", "statement", "verdict")} == {"Int64"}
    assert str(v["blind"].dtype) == "boolean" and set(v["validation"]) == {"text", "image", "both"}
    # one verdict per statement, validation modality and format: the per-pair shares by hand from the records
    rec = json.loads((tmp_path / "cast" / "samples.jsonl").read_text().splitlines()[0])
    st = rec["result"]["generation"]["text"]["statements"]
    by_hand = [x["verdict"] for s in st for k, x in s["verdicts"].items() if k.startswith("image|")]
    mine = v[(v.sample_id == rec["sample_id"]) & (v.generation == "text") & (v.validation == "image")]
    assert sorted(mine["verdict"].dropna().tolist()) == sorted(x for x in by_hand if x is not None)
    out = vlmcheck.export_runs(runs, tmp_path / "tables", "parquet")
    assert [p.name for p in out if p.name.endswith("-verdicts.parquet")] == ["cast-describer-verdicts.parquet"]


def test_a_mistyped_data_path_is_called_missing(tmp_path):
    """A data path that does not exist says so, whatever the command: a missing manifest, folder or TSV said
    "expected an image folder or a .jsonl manifest" (a .jsonl it was), and a recipe's missing data
    "[Errno 2] No such file or directory: '...'"."""
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    folder = _images(tmp_path / "imgs", 1).parent
    out = tmp_path / "out"
    describe = ("describe", "--vlm", "ref:photo", "--no-progress", "--out")
    cases = [
        ((*describe, out / "a", "--data", tmp_path / "nope.jsonl"),
         f"{tmp_path / 'nope.jsonl'}: no such file or folder"),
        ((*describe, out / "b", "--data", tmp_path / "nope"), f"{tmp_path / 'nope'}: no such file or folder"),
        (("data", "inspect", tmp_path / "nope.tsv"), f"{tmp_path / 'nope.tsv'}: no such file or folder"),
        ((*describe, out / "c", "--data", tmp_path / "dangling.jsonl"),
         f"{tmp_path / 'dangling.jsonl'}: a symbolic link to {tmp_path / 'nowhere.jsonl'}, which does not exist"),
        (("chef", "run", "--recipe", "hallucination", "--vlm", "ref:describer", "--no-progress", "--out", out / "d",
          "--data", tmp_path / "nope-cases.jsonl"), f"{tmp_path / 'nope-cases.jsonl'}: no such file or directory"),
        # a file that is there but of no kind the reader knows keeps its own sentence
        ((*describe, out / "e", "--data", folder / "0.png"), f"{folder / '0.png'}: expected an image folder or a "
                                                              ".jsonl manifest"),
    ]
    for args, said in cases:
        proc = _cli(*args)
        assert proc.returncode == 2, (args, proc.stderr[-800:])
        assert _last_error(proc) == f"error: {said}", args


def test_a_mistyped_run_folder_is_called_missing_and_nothing_is_made(tmp_path):
    """A run folder that does not exist is named missing by every command that reads one, and no folder is made:
    `resume` and `retry-failed` made the mistyped folder (empty) before refusing it, `export` and `vhx dataset`
    their output folder, and most said "not a (finished) run folder"."""
    gone = tmp_path / "run-typo"
    out = tmp_path / "out"
    commands = [("report", gone, "-o", out / "r.html"), ("export", gone, "--out", out), ("compare", gone, gone),
                ("resume", gone), ("retry-failed", gone), ("merge", out, gone), ("vhx", "export", gone, "--out", out),
                ("vhx", "dataset", gone, "--out", out, "--k", "0")]
    for args in commands:
        proc = _cli(*args)
        assert proc.returncode == 2, (args, proc.stderr[-800:])
        assert _last_error(proc) == f"error: {gone}: no such folder", args
        assert not gone.exists() and not out.exists(), args


def test_ctrl_c_says_what_is_kept_and_how_to_go_on(tmp_path):
    """Ctrl-C during a run: exit 130 and one sentence naming the command that goes on (typer made it a silent
    exit 130 after the last progress line); that command then finishes the run."""
    import signal
    import time

    from conftest import FakeServer, distinct_images

    server = FakeServer(1.0, tmp_path)
    try:
        data = distinct_images(tmp_path / "imgs", 48)
        out = tmp_path / "run"
        # 2 in flight, 1 s each: the run takes ~24 s, so the interrupt finds it running on a loaded machine too
        args = ["describe", "--vlm", f"openai:m@{server.base_url}", "--data", data, "--out", out,
                "--max-concurrency", "2"]
        # as in a terminal: Ctrl-C's signal at its default, even where the tests themselves run with it ignored (a
        # job started in the background by a non-interactive shell, as CI may be: Python then keeps it ignored)
        proc = subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "500"},
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 120
        while not any(r.get("path", "").endswith("/chat/completions") for r in server.requests()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(1.5)  # the first answers (1 s each) are in; most of the 48 are not
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err[-1500:]
        assert _last_error(subprocess.CompletedProcess(args, 130, "", err)) == (
            f"error: interrupted; the samples that finished are kept: `vlmcheck resume {out}` goes on from there")
        again = _cli("resume", out)
        assert again.returncode == 0, again.stderr[-1500:]
        counts = json.loads((out / "results.json").read_text())["counts"]
        assert counts["done"] == 48 and counts["failed"] == 0
    finally:
        server.stop()


def test_describe_prints_its_headline_on_stdout(tmp_path):
    """Like every method command (and `resume`), `describe` prints its result on stdout, nothing else there; it
    printed nothing but the `done` line on stderr."""
    data = _images(tmp_path / "imgs", 3)
    proc = _cli("describe", "--vlm", "ref:photo", "--data", data, "--out", tmp_path / "run")
    assert proc.returncode == 0, proc.stderr[-1500:]
    h = json.loads((tmp_path / "run" / "results.json").read_text())["metrics"]["headline"]
    assert proc.stdout == f"photo: {h['name']} = {h['value']:.4f} [{h['ci95'][0]:.4f}, {h['ci95'][1]:.4f}]\n"
    assert "done 3/3 samples" in proc.stderr


def test_an_os_error_is_one_sentence_naming_its_files():
    import errno

    from vlmcheck.cli._common import one_line

    assert one_line(FileNotFoundError(errno.ENOENT, "No such file or directory", "a b.jsonl")) == \
        "a b.jsonl: no such file or directory"
    assert one_line(OSError(errno.EXDEV, "Invalid cross-device link", "a", None, "b")) == \
        "a -> b: invalid cross-device link"
    assert one_line(OSError("no errno, no file")) == "no errno, no file"  # as it was
