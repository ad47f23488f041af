"""Chat requests with aiohttp directly (``models/http.py``): what the SDK would send and how its errors
read, against the local fake server, and the SDK path one parameter away (``?http=sdk``) giving the same."""

import asyncio
import base64
import json
import subprocess
import sys

import pytest

from vlmcheck import GenerationConfig, Message, load_model
from vlmcheck.core.errors import ModelCallError
from vlmcheck.models.http import env_proxy

TRANSPORTS = ["", "?http=sdk", "?http=httpx"]


def _ask(vlm, prompt: str, **config):
    return asyncio.run(vlm.generate([Message.user(prompt)], GenerationConfig(**config)))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_transport_sends_the_same_request_and_reads_the_same_answer(fake_server, transport):
    gen = _ask(load_model(f"openai:fake@{fake_server.base_url}{transport}"), "Describe.")
    # the fake server answers with a hash of the messages it received: the same body gives the same answer
    direct = _ask(load_model(f"openai:fake@{fake_server.base_url}"), "Describe.")
    assert gen.text == direct.text and gen.text.startswith("Answer ")
    assert fake_server.requests()[-1]["authorization"] == "Bearer EMPTY"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_server_refusing_logprobs_is_asked_again_without_them(fake_server, transport):
    vlm = load_model(f"openai:fake@{fake_server.base_url}{transport}")
    gen = _ask(vlm, "[fault=nologprobs] Describe.", logprobs=True)
    assert gen.text.startswith("Answer ") and gen.logprobs is None
    assert not vlm.capabilities.logprobs  # and never asked for again
    assert [r["fault"] for r in fake_server.requests()] == ["nologprobs", None]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_error_statuses_read_the_same_on_every_transport(fake_server, transport):
    vlm = load_model(f"openai:fake@{fake_server.base_url}{transport}")
    with pytest.raises(ModelCallError) as bad:
        _ask(vlm, "[fault=400] Describe.")
    assert (bad.value.kind, bad.value.status, bad.value.args[0]) == ("bad_request", 400, "injected bad request")
    with pytest.raises(ModelCallError) as limited:
        _ask(vlm, "[fault=429x1] Describe.")
    assert (limited.value.kind, limited.value.status, limited.value.retry_after) == ("rate_limit", 429, 0.2)


def test_a_refused_connection_and_a_timeout_are_named(fake_server):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ModelCallError) as refused:
        _ask(load_model(f"openai:fake@http://127.0.0.1:{port}/v1"), "Describe.")
    assert refused.value.kind == "connection" and "connection refused" in str(refused.value)
    with pytest.raises(ModelCallError) as slow:
        _ask(load_model(f"openai:fake@{fake_server.base_url}?timeout=0.5"), "[fault=slowx1] Describe.")
    assert slow.value.kind == "timeout" and slow.value.status is None


def test_the_proxy_is_read_from_the_environment_once_with_its_credentials_as_a_header(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                 "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https://api.example.com/v1") == (None, None)
    monkeypatch.setenv("HTTPS_PROXY", "http://user:p%40ss@proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,.internal")
    token = base64.b64encode(b"user:p@ss").decode()  # the password unquoted, as it is sent
    assert env_proxy("https://api.example.com/v1") == ("http://proxy.corp:3128",
                                                       {"Proxy-Authorization": f"Basic {token}"})
    assert env_proxy("https://models.internal/v1") == (None, None)  # NO_PROXY
    assert env_proxy("http://api.example.com/v1") == (None, None)  # no HTTP_PROXY for plain http


def test_building_and_calling_the_default_transport_never_imports_the_sdk(fake_server):
    code = (
        "import asyncio, sys\n"
        "from vlmcheck import GenerationConfig, Message, load_model\n"
        f"vlm = load_model('openai:fake@{fake_server.base_url}')\n"
        "asyncio.run(vlm.preflight())\n"
        "print(asyncio.run(vlm.generate([Message.user('Hi.')], GenerationConfig())).text)\n"
        "print('openai' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "Answer" and out[-1] == "False"


def test_rerunning_a_run_through_the_sdk_makes_no_calls(fake_server, tmp_path):
    """The transport is not part of the model's identity: a run made one way resumes the other with 0 calls."""
    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask
    from PIL import Image

    (tmp_path / "img").mkdir()
    rows = []
    for i in range(3):
        Image.new("RGB", (16, 16), (40 * i, 90, 200)).save(tmp_path / "img" / f"{i}.png")
        rows.append({"id": f"s{i}", "image": f"img/{i}.png"})
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def run(transport: str, resume: bool):
        task = DescribeTask(DescribeSpec(vlm=f"openai:fake@{fake_server.base_url}{transport}",
                                         data=str(tmp_path / "m.jsonl")))
        return run_task(task, tmp_path / "run", RunOptions(progress=False, resume=resume, preflight=False))

    first = run("", False)
    n = len(fake_server.requests())
    again = run("?http=sdk", True)
    assert len(fake_server.requests()) == n == 3 and again.results["session"]["model_calls"] == 0
    answers = [json.loads(x)["result"]["answer"] for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert first.results["counts"]["done"] == 3 and len(answers) == 3 and all(a.startswith("Answer ") for a in answers)
