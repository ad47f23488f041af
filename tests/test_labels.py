"""Labels people read (run/labels.py): a run is shown by its model's id, never its URL, port or parameters; runs
that would read the same are told apart by what differs; ``--label`` (a sweep's ``label:``) names a run; the full
spec stays in the run's details; secrets are never shown."""

from __future__ import annotations

import json
import os

import pytest

from conftest import FakeServer, run_cli
from vlmcheck.run.labels import model_label, run_label, run_labels


def _res(spec: str, label: str | None = None) -> dict:
    out = {"task": "describe", "spec": {"task_spec": {"vlm": spec}}}
    if label is not None:
        out["label"] = label
    return out


@pytest.mark.parametrize("spec,label", [
    ("openai:tiny-qwen@http://127.0.0.1:18531/v1?key_env=LITELLM_KEY", "tiny-qwen"),
    ("openai:/tmp/pytest-3/real_server0/qwen25vl@http://127.0.0.1:18531/v1", "qwen25vl"),
    ("openai:/tmp/models/idefics3/@http://a:1/v1,http://b:2/v1?concurrency=4", "idefics3"),
    ("hf:HuggingFaceTB/SmolVLM-256M-Instruct?dtype=bfloat16&device=cuda", "HuggingFaceTB/SmolVLM-256M-Instruct"),
    ("openai:llava:7b@http://localhost:11434/v1", "llava:7b"),
    ("ref:describer?omit=0.2", "describer"),
    ("", ""),
])
def test_a_models_label_is_its_id(spec, label):
    assert model_label(spec) == label


def test_runs_are_told_apart_only_where_they_would_collide():
    runs = [(_res("openai:qwen@http://a:1/v1?concurrency=8"), "r/a"),  # placement differs from the next only
            (_res("openai:qwen@http://b:2/v1"), "r/b"),
            (_res("hf:qwen"), "r/c"),  # another provider
            (_res("openai:gpt-4o-mini?temperature=0.7"), "r/d"),
            (_res("openai:gpt-4o-mini?temperature=0"), "r/e"),
            (_res("anthropic:claude-sonnet-4-5"), "r/f"),
            (_res("openai:x@http://h:1/v1", label="Mine"), "r/g")]
    assert run_labels(runs) == ["qwen (openai) (a)", "qwen (openai) (b)", "qwen (hf)",
                                "gpt-4o-mini (temperature=0.7)", "gpt-4o-mini (temperature=0)",
                                "claude-sonnet-4-5", "Mine"]
    same = [(_res("openai:m@http://a:1/v1"), "x/run"), (_res("openai:m@http://a:1/v1"), "y/run")]
    assert run_labels(same) == ["m", "m #2"]
    other_method = {**_res("openai:m@http://a:1/v1"), "task": "genception"}  # never compared with a describe run
    assert run_labels([(_res("openai:m"), "d/m"), (other_method, "g/m")]) == ["m", "m"]
    assert run_label(_res("openai:m@http://h/v1", label="  ")) == "m"


def _cli(*args, cwd, env=None):
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    out = run_cli(*args, cwd=cwd, env=env)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    return out


def test_every_surface_shows_labels_and_the_details_keep_the_spec(tmp_path, image_folder):
    server = FakeServer(0.0, tmp_path, "--require-key", "sk-SECRET-9")
    try:
        url = server.base_url
        a, b = tmp_path / "a", tmp_path / "b"
        run_a = _cli("describe", "--vlm", f"openai:tiny-qwen@{url}?key_env=GW_KEY", "--data", image_folder,
                     "--out", a, "--limit", "4", "--no-progress", cwd=tmp_path, env={"GW_KEY": "sk-SECRET-9"})
        assert run_a.returncode == 0, run_a.stderr
        run_b = _cli("describe", "--vlm", f"openai:tiny-qwen@{url}?key_env=GW_KEY&concurrency=2", "--data",
                     image_folder, "--out", b, "--limit", "4", "--no-progress", "--label", "Qwen via gateway",
                     cwd=tmp_path, env={"GW_KEY": "sk-SECRET-9"})
        assert run_b.returncode == 0, run_b.stderr
    finally:
        server.stop()
    port = str(server.port)
    assert "tiny-qwen" in run_a.stdout and port not in run_a.stdout and "key_env" not in run_a.stdout
    assert "Qwen via gateway" in run_b.stdout
    res_b = json.loads((b / "results.json").read_text())
    assert res_b["label"] == "Qwen via gateway" and port in res_b["spec"]["task_spec"]["vlm"]  # the details keep it
    report = _cli("report", a, b, "-o", tmp_path / "both.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "both.html").read_text()
    first = html[:html.index("<details")] if "<details" in html else html
    assert "Qwen via gateway" in first and ">tiny-qwen<" in first.replace(" ", "")
    assert f":{port}" not in first and "key_env" not in first
    assert "sk-SECRET-9" not in html
    export = _cli("export", a, b, "--out", tmp_path / "x", "--format", "csv", cwd=tmp_path)
    assert export.returncode == 0, export.stderr
    names = sorted(p.name for p in (tmp_path / "x").iterdir())
    assert "describe-tiny-qwen.csv" in names and "describe-Qwen_via_gateway.csv" in names
    alone = _cli("export", b, "--out", tmp_path / "y", "--format", "csv", cwd=tmp_path)
    assert alone.returncode == 0 and (tmp_path / "y" / "describe-Qwen_via_gateway.csv").exists()
    assert not any("sk-SECRET-9" in p.read_text() for p in (tmp_path / "x").iterdir())


def test_a_sweeps_label_names_its_runs_and_its_summary(tmp_path):
    from vlmcheck.sweep import run_sweep

    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    (tmp_path / "cases.jsonl").write_text(json.dumps({"image": "a.png", "question": "Is there a cat?",
                                                      "answer": "no"}) + "\n")
    (tmp_path / "sweep.yaml").write_text(
        "out: out\nmodels:\n  - spec: openai:tiny-qwen@http://127.0.0.1:18531/v1?key_env=K\n    label: Qwen (gateway)\n"
        "  - openai:gpt-4o-mini@http://127.0.0.1:18532/v1\n"
        "methods:\n  - method: vhexpansion\n    cases: cases.jsonl\n    perturb: []\n")
    given = {}

    def execute(task, folder, options):
        given[folder.name] = options.label
        res = {"task": "vhexpansion", "spec": {"task_spec": task.spec()}, "counts": {"samples": 0, "failed": 0},
               "metrics": {}}
        if options.label:
            res["label"] = options.label
        return {**res, "_folder": str(folder)}

    result = run_sweep(tmp_path / "sweep.yaml", progress=False, execute=execute, report=False)
    assert sorted(given.values(), key=str) == [None, "Qwen (gateway)"]
    assert [r["model"] for r in result.summary] == ["Qwen (gateway)", "gpt-4o-mini"]
    assert result.summary[1]["spec"] == "openai:gpt-4o-mini@http://127.0.0.1:18532/v1"
