"""vlmcheck behind a real LiteLLM proxy, as teams run a gateway in front of their servers.

The proxy (``litellm[proxy]``, pinned in the Makefile's ``litellm-venv`` target) lives in a virtual environment of
its own, ``.venv-litellm`` at the repository's root, because its dependencies would clash with the project's; the
test skips, saying so, where that environment is absent.  It is started on 127.0.0.1 in front of the fake server
speaking as ``transformers serve`` (``--dialect transformers``), with a master key and no database, the way a
team tries it first.  What it does is what the fake server's ``--dialect litellm`` answers, and the first test
checks that the two agree, answer for answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import FakeServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
LITELLM = ROOT / ".venv-litellm" / "bin" / "litellm"
KEY = "sk-gateway-master"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    if not LITELLM.exists():
        pytest.skip(f"no LiteLLM proxy at {LITELLM}: `make litellm-venv` installs it in its own environment")
    root = tmp_path_factory.mktemp("gateway")
    backend = FakeServer(0.0, root, "--dialect", "transformers", "--models", "tiny-qwen")
    port = _free_port()
    (root / "config.yaml").write_text(
        "model_list:\n  - model_name: tiny-qwen\n    litellm_params:\n      model: openai/tiny-qwen\n"
        f"      api_base: {backend.base_url}\n      api_key: none\n"
        f"general_settings:\n  master_key: {KEY}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "LITELLM", "DATABASE"))}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", NO_DOCS="True", HF_HUB_OFFLINE="1")
    log = open(root / "litellm.log", "w")
    proc = subprocess.Popen([str(LITELLM), "--config", str(root / "config.yaml"), "--host", "127.0.0.1", "--port",
                             str(port)], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 180
        while _get(f"{base}/models", KEY)[0] != 200:
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail(f"the LiteLLM proxy did not start: {(root / 'litellm.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield {"url": base, "backend": backend, "root": root}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        backend.stop()


def _get(url: str, key: str | None, body: dict | None = None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body else None, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def _message(text: str) -> str:
    try:
        return json.loads(text)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return text


def test_the_fake_servers_litellm_dialect_answers_as_the_proxy_does(gateway, tmp_path):
    fake = FakeServer(0.0, tmp_path, "--dialect", "litellm", "--models", "tiny-qwen", "--require-key", KEY)
    try:
        chat = {"model": "tiny-qwen", "messages": [{"role": "user", "content": "Describe."}], "max_tokens": 4}
        asks = [("/models", "sk-wrong", None), ("/chat/completions", "sk-wrong", chat),
                ("/chat/completions", KEY, {**chat, "prompt_logprobs": 0, "continue_final_message": True}),
                ("/chat/completions", KEY, {**chat, "model": "other"}), ("/models", None, None)]
        for path, key, body in asks:
            real = _get(gateway["url"] + path, key, body)
            mine = _get(fake.base_url + path, key, body)
            assert real[0] == mine[0], (path, key, real, mine)
            assert _message(real[1]) == _message(mine[1]), (path, key)
    finally:
        fake.stop()


def test_an_unknown_key_is_refused_before_the_run_quoting_the_proxy(gateway, tmp_path):
    from conftest import distinct_images

    images = distinct_images(tmp_path / "imgs", 2)
    out = tmp_path / "run"
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("OPENAI_API_KEY", None)
    for key in (["--api-key", "sk-wrong"], []):
        run = subprocess.run([sys.executable, "-m", "vlmcheck.cli", "describe", "--vlm",
                              f"openai:tiny-qwen@{gateway['url']}", *key, "--data", str(images), "--out", str(out),
                              "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
        lines = [x for x in run.stderr.splitlines() if x.strip()]
        assert run.returncode == 2 and len(lines) == 1, run.stderr
        assert '"No connected db."' in lines[0] and "--api-key" in lines[0] and "sk-wrong" not in run.stderr
        assert not out.exists()
    ok = subprocess.run([sys.executable, "-m", "vlmcheck.cli", "describe", "--vlm",
                         f"openai:tiny-qwen@{gateway['url']}?key_env=GATEWAY_KEY", "--data", str(images), "--out",
                         str(out), "--no-progress", "--max-tokens", "4"],
                        capture_output=True, text=True, env={**env, "GATEWAY_KEY": KEY}, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert json.loads((out / "results.json").read_text())["counts"]["done"] == 2


def test_a_field_the_backend_refused_is_named_through_the_proxys_words(gateway):
    from vlmcheck.core.errors import ModelCallError
    from vlmcheck.core.messages import Message
    from vlmcheck.core.spec import load_model

    ppl = load_model(f"openai:tiny-qwen@{gateway['url']}?prompt_logprobs=1&api_key={KEY}", "vlm")
    with pytest.raises(ModelCallError) as bad:
        asyncio.run(ppl.loglikelihood([Message.user("Describe.")], ["yes"]))
    said = str(bad.value)
    assert bad.value.status == 422 and "litellm" in said.lower() and "?prompt_logprobs=1" in said
