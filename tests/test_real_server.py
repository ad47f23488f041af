"""vlmcheck against a real OpenAI-compatible server that no one here wrote (issue 47 item 8).

``transformers serve`` (the ``transformers[serving]`` extra) on 127.0.0.1 serves a tiny randomly initialised
LLaVA built from a config in tests/hf_tiny.py and saved to a temp folder: no download (HF_HUB_OFFLINE=1).  Its
answers are word salad from the tiny vocabulary, which is the point: every method must run on it, and every
number that means nothing must say so (the unread share, the ignored temperature, the empty CAST matrix).

What this server does that our fake server (vlmcheck/testing/fake_openai.py) did not, measured here and taught to
the fake server since (``--dialect transformers``): it answers 422 ``{"detail": "Unexpected fields in the request:
{...}"}`` to a field it does not know (vLLM's ``prompt_logprobs``); it ignores the temperature and the seed unless
the model's generation config samples; it accepts ``logprobs`` and returns none; it answers 400 ("Server is
pinned to ...") for a model other than the one it serves.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import run_cli

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _serve(model: Path, root: Path, *options: str):
    """``transformers serve MODEL [OPTIONS]`` on 127.0.0.1 until the block ends: its base URL.  Remote code a
    checkpoint ships is copied under ``root``, not the user's cache."""
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_MODULES_CACHE": str(root / "hf_modules")}
    exe = Path(sys.executable).with_name("transformers")
    log_path = root / f"serve-{model.name}.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([str(exe), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                             "--device", "cpu", "--log-level", "warning", *options], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{base}/v1/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail(f"transformers serve did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.5)
        yield f"{base}/v1"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``transformers serve FOLDER`` on 127.0.0.1: (base URL, model id, the world folder, its work folder)."""
    root = tmp_path_factory.mktemp("real_server")
    sys.path.insert(0, str(HERE))
    from hf_tiny import build_tiny_llava

    model = build_tiny_llava(root / "llava")
    with _serve(model, root) as url:
        world = root / "world"
        _vlmcheck(["world", "make", str(world), "--n", "3", "--size", "64"], root)
        yield {"url": url, "model": str(model), "world": world, "root": root}


def _vlmcheck(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """The CLI in this process (conftest's run_cli) against the served checkpoint: the server is the real process."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200", "NO_COLOR": "1"}
    out = run_cli(*args, cwd=cwd, env=env)
    if check:
        assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    return out


def _spec(server, query: str = "") -> str:
    return f"openai:{server['model']}@{server['url']}{query}"


def _results(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text())


def _answers(folder: Path) -> list[str]:
    rows = [json.loads(x) for x in (folder / "samples.jsonl").read_text().splitlines()]
    return [r["result"]["answer"] for r in rows]


def test_describe_on_every_transport_gives_the_same_answers(server, tmp_path):
    """aiohttp (the default), the OpenAI SDK and httpx: the same greedy answers; results on stdout with --json."""
    answers = {}
    for http in ("", "?http=sdk", "?http=httpx"):
        out = tmp_path / f"d{http[6:] or 'aiohttp'}"
        run = _vlmcheck(["describe", "--vlm", _spec(server, http), "--data", str(server["world"]), "--out", str(out),
                         "--max-tokens", "6", "--no-progress", "--limit", "2", "--json"], tmp_path)
        printed = json.loads(run.stdout)  # stdout holds the results and nothing else
        assert printed["counts"] == _results(out)["counts"] and printed["counts"]["done"] == 2
        answers[http] = _answers(out)
        assert all(a.strip() for a in answers[http])
        # transformers serve reports usage: no warning that it is missing
        assert "usage" not in run.stderr
    assert answers[""] == answers["?http=sdk"] == answers["?http=httpx"]


def test_vhx_blind_repeats_say_the_unread_share_and_the_ignored_temperature(server, tmp_path):
    out = tmp_path / "vhx"
    run = _vlmcheck(["vhx", "run", "--vlm", _spec(server), "--cases", str(server["world"]), "--out", str(out),
                     "--perturb", "", "--blind", "--repeats", "2", "--temperature", "0.7", "--limit", "2",
                     "--no-progress"], tmp_path)
    m = _results(out)["metrics"]
    orig = m["variants"]["original"]
    # the unread share, counted here from the stored answers by POPE's first-sentence rule
    rows = [json.loads(x)["result"]["variants"]["original"] for x in (out / "samples.jsonl").read_text().splitlines()]
    texts = [t for v in rows for t in (v["answer"], v.get("neg_answer")) if t is not None]
    import re

    unread = sum(not set(re.findall(r"[a-z]+", re.split(r"(?<=[.!?])\s|\n", t.strip(), maxsplit=1)[0].lower()))
                 & {"yes", "no", "not"} for t in texts)
    assert orig["unread"] == unread and orig["unread_share"] == pytest.approx(unread / len(texts))
    assert "unread" in run.stdout  # the table's column, on stdout
    if unread / len(texts) > 0.10:
        assert "held no yes/no word" in run.stderr and m["unread_warning"]
    # the server ignores the temperature: every prompt got the same answer for both seeds, measured and said
    checks = _results(out)["server_checks"]
    assert checks["sampling"]["ignored"] is True
    assert checks["sampling"]["identical_across_seeds"] == checks["sampling"]["requests_compared"] >= 2
    assert "ignore the temperature" in run.stderr
    assert "± 0.000" in run.stdout  # the spread it would otherwise show without comment
    assert "blind" in m["variants"]


def test_dry_run_makes_no_call_and_leaves_no_folder(server, tmp_path):
    out = tmp_path / "dry"
    run = _vlmcheck(["vhx", "run", "--vlm", _spec(server), "--cases", str(server["world"]), "--out", str(out),
                     "--perturb", "", "--limit", "2", "--dry-run", "--json"], tmp_path)
    est = json.loads(run.stdout)
    assert est["totals"]["calls"] > 0 and est["samples"]["to_run"] == 2
    assert not (out / "store.sqlite").exists()


def test_a_mistyped_model_is_refused_leaves_nothing_and_the_corrected_command_runs(server, tmp_path):
    out = tmp_path / "typo"
    bad = f"openai:{server['model']}-typo@{server['url']}"
    run = _vlmcheck(["describe", "--vlm", bad, "--data", str(server["world"]), "--out", str(out), "--limit", "1",
                     "--max-tokens", "4", "--no-progress"], tmp_path, check=False)
    assert run.returncode == 2 and "--no-preflight" in run.stderr
    assert not out.exists()  # nothing left behind
    _vlmcheck(["describe", "--vlm", _spec(server), "--data", str(server["world"]), "--out", str(out), "--limit", "1",
               "--max-tokens", "4", "--no-progress"], tmp_path)
    assert _results(out)["counts"]["done"] == 1


def test_failed_samples_say_why_on_the_terminal_and_in_the_report(server, tmp_path):
    """Past the preflight, the server refuses another model with HTTP 400: the kinds, counts and an example."""
    out = tmp_path / "fail"
    bad = f"openai:other-model@{server['url']}"
    run = _vlmcheck(["describe", "--vlm", bad, "--data", str(server["world"]), "--out", str(out), "--limit", "2",
                     "--max-tokens", "4", "--no-progress", "--no-preflight"], tmp_path, check=False)
    assert run.returncode == 1
    kinds = _results(out)["counts"]["failure_kinds"]
    assert list(kinds) == ["model_call:bad_request"] and kinds["model_call:bad_request"]["count"] == 2
    assert "Server is pinned" in kinds["model_call:bad_request"]["example"]
    assert "2 x model_call:bad_request" in run.stderr and "Server is pinned" in run.stderr
    html = (out / "report.html").read_text()
    assert "failure kind" in html and "Server is pinned" in html


def test_kill_and_resume(server, tmp_path):
    out = tmp_path / "killed"
    args = ["describe", "--vlm", _spec(server), "--data", str(server["world"]), "--out", str(out), "--max-tokens",
            "24", "--no-progress", "--max-concurrency", "1"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "vlmcheck.cli", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import sqlite3

    deadline = time.time() + 120
    done = 0
    while time.time() < deadline and proc.poll() is None:
        try:
            with sqlite3.connect(f"file:{out / 'store.sqlite'}?mode=ro", uri=True, timeout=1) as db:
                done = db.execute("select count(*) from calls").fetchone()[0]
        except sqlite3.Error:
            done = 0
        if done >= 1:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert done >= 1
    resumed = _vlmcheck([*args, "--resume"], tmp_path)
    r = _results(out)
    assert r["counts"]["done"] == r["counts"]["samples"] == 3
    assert r["session"]["model_calls"] < 3  # what the killed run finished was not asked again
    assert "done 3/3" in resumed.stderr


def test_cast_says_why_its_matrix_is_empty(server, tmp_path):
    pairs = tmp_path / "pairs"
    _vlmcheck(["world", "pairs", str(pairs), "--n", "1"], tmp_path)
    out = tmp_path / "cast"
    run = _vlmcheck(["cast", "run", "--vlm", _spec(server), "--pairs", str(pairs / "pairs.jsonl"), "--out", str(out),
                     "--no-progress"], tmp_path)
    m = _results(out)["metrics"]
    rows = [json.loads(x)["result"] for x in (out / "samples.jsonl").read_text().splitlines()]
    written = sum(len(g.get("statements", [])) for r in rows for g in r["generation"].values())
    assert m["statements_written"] == written
    if written == 0:
        assert "wrote no statements" in run.stderr and m["empty_reason"]


def test_genception_runs(server, tmp_path):
    out = tmp_path / "gc"
    run = _vlmcheck(["genception", "--vlm", _spec(server), "--generator", "ref:renderer", "--encoder", "ref:effnet",
                     "--data", str(server["world"]), "-T", "1", "--limit", "1", "--out", str(out), "--no-progress"],
                    tmp_path)
    r = _results(out)
    assert r["counts"]["done"] == 1
    assert "GC@1" in run.stdout


def test_python_api_logprobs_and_prompt_logprobs_are_never_silent(server, caplog):
    """Token logprobs asked for and not returned: the capability is withdrawn and said; vLLM's prompt_logprobs
    on a server that does not know it: one sentence naming ?prompt_logprobs=1."""
    import asyncio

    from vlmcheck.core.errors import ModelCallError
    from vlmcheck.core.messages import Message
    from vlmcheck.core.roles import GenerationConfig
    from vlmcheck.core.spec import load_model

    vlm = load_model(_spec(server), "vlm")
    assert vlm.capabilities.logprobs
    with caplog.at_level("WARNING", logger="vlmcheck"):
        gen = asyncio.run(vlm.generate([Message.user("is there a cat")], GenerationConfig(max_tokens=3,
                                                                                          logprobs=True)))
    assert gen.logprobs is None and not vlm.capabilities.logprobs
    assert "token log-probabilities" in caplog.text
    ppl = load_model(_spec(server, "?prompt_logprobs=1"), "vlm")
    with pytest.raises(ModelCallError) as bad:
        asyncio.run(ppl.loglikelihood([Message.user("is there a cat")], ["yes"]))
    assert bad.value.status == 422 and "?prompt_logprobs=1" in str(bad.value)


@pytest.mark.parametrize(("name", "options"), [
    ("idefics3", ()),
    # Qwen2.5-VL's own processor demands a video processor, which needs torchvision (no CPU build here):
    # the checkpoint ships it without its video slot as remote code (tests/hf_tiny.py says how it fails).
    ("qwen2_5_vl", ("--trust-remote-code",)),
])
def test_a_checkpoint_served_by_transformers_answers_and_is_shown_by_its_name(server, tmp_path, name, options):
    """Other architectures through the same server, each a tiny checkpoint built from configs with its processor:
    Idefics3 (SmolVLM's) and Qwen2.5-VL (windowed vision tower, M-RoPE).  The run is shown by the checkpoint
    folder's name, never its path, URL or port."""
    import hf_tiny

    model = getattr(hf_tiny, f"build_tiny_{name}")(tmp_path / name)
    with _serve(model, tmp_path, *options) as url:
        out = tmp_path / "d"
        run = _vlmcheck(["describe", "--vlm", f"openai:{model}@{url}", "--data", str(server["world"]), "--out",
                         str(out), "--max-tokens", "6", "--no-progress", "--limit", "2"], tmp_path)
    assert _results(out)["counts"]["done"] == 2
    assert all(a.strip() for a in _answers(out))
    assert run.stdout.startswith(f"{name}: ") and url.split(":")[-1].split("/")[0] not in run.stdout
    assert str(model) == _results(out)["spec"]["task_spec"]["vlm"].split("@")[0].removeprefix("openai:")
