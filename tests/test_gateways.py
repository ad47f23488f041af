"""Gateways and proxies in front of a server (a LiteLLM proxy, OpenRouter-style routers, nginx in front of vLLM):
a key the gateway does not know stops the run before it starts, in one sentence quoting the gateway; a field the
backend refused is named with the option that sent it, whatever words the gateway wraps the refusal in; a
failure example keeps its end (the advice)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from conftest import FakeServer, run_cli
from vlmcheck.core.errors import ModelCallError, shorten_middle
from vlmcheck.core.messages import Message
from vlmcheck.core.spec import load_model
from vlmcheck.models._http_errors import name_sent_fields, status_error, unknown_fields_sentence
from vlmcheck.models.openai_preflight import PreflightError


@pytest.fixture
def litellm(tmp_path):
    """The fake server speaking as a LiteLLM proxy without a database, in front of transformers serve."""
    s = FakeServer(0.0, tmp_path, "--dialect", "litellm", "--models", "tiny-qwen", "--require-key", "sk-right")
    yield s
    s.stop()


def _preflight(spec: str) -> None:
    asyncio.run(load_model(spec, "vlm").preflight())


@pytest.mark.parametrize("http", ["", "&http=sdk"], ids=["aiohttp", "sdk"])
def test_a_gateways_400_for_an_unknown_key_refuses_the_run_quoting_it(litellm, http, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for key in ("sk-wrong", None):  # a wrong key, and none (vlmcheck then sends a placeholder)
        spec = f"openai:tiny-qwen@{litellm.base_url}?timeout=30{http}" + (f"&api_key={key}" if key else "")
        with pytest.raises(PreflightError) as refused:
            _preflight(spec)
        said = str(refused.value)
        assert "HTTP 400" in said and '"No connected db."' in said and "--api-key" in said and "\n" not in said
        assert "sk-wrong" not in said
    _preflight(f"openai:tiny-qwen@{litellm.base_url}?api_key=sk-right{http}")  # the right key passes


@pytest.mark.parametrize("http", ["", "&http=sdk"], ids=["aiohttp", "sdk"])
def test_a_404_naming_the_model_refuses_and_a_bare_404_passes(fake_server, http):
    from vlmcheck.models.openai_preflight import _refused

    _preflight(f"openai:m@{fake_server.base_url}?timeout=30{http}")  # the fake server's GET /models: 404 "not found"
    for bare in ("", "Not Found", "404 page not found", "<html><body><h1>404 Not Found</h1>nginx</body></html>"):
        _refused(404, bare, "here")
    with pytest.raises(PreflightError, match=r"HTTP 404 \(\"The model `m` does not exist.\"\); check the base URL"):
        _refused(404, "The model `m` does not exist.", "here")
    _refused(429, "slow down", "here")


def test_a_wrapped_422_names_the_option_that_sent_the_field(litellm):
    """LiteLLM passes its backend's 422 on in its own words, without the field's name."""
    ppl = load_model(f"openai:tiny-qwen@{litellm.base_url}?prompt_logprobs=1&api_key=sk-right", "vlm")
    with pytest.raises(ModelCallError) as bad:
        asyncio.run(ppl.loglikelihood([Message.user("Describe.")], ["yes"]))
    said = str(bad.value)
    assert bad.value.status == 422 and "?prompt_logprobs=1" in said and "litellm.BadRequestError" in said
    # a model the gateway does not route keeps the gateway's own words
    with pytest.raises(ModelCallError) as other:
        asyncio.run(load_model(f"openai:other@{litellm.base_url}?api_key=sk-right", "vlm").loglikelihood(
            [Message.user("Describe.")], ["yes"]))
    assert other.value.status == 400 and "Invalid model name passed in model=other" in str(other.value)


@pytest.mark.parametrize("message", [
    "litellm.BadRequestError: OpenrouterException - {\"error\":\"prompt_logprobs is not a valid parameter\"}",
    "Upstream said: invalid body (field `prompt_logprobs`)",
])
def test_a_4xx_mentioning_a_non_standard_field_names_its_option_in_any_words(message):
    body = {"model": "m", "messages": [], "prompt_logprobs": 0, "continue_final_message": True}
    named = name_sent_fields(status_error(400, {}, message), body)
    assert "?prompt_logprobs=1" in str(named) and named.status == 400 and named.kind == "bad_request"
    assert "'continue_final_message'" not in str(named)  # only what the answer is about
    # a 400 about something else, or a request without such fields, keeps its words
    other = status_error(400, {}, "image too large")
    assert name_sent_fields(other, body) is other
    wrapped = status_error(422, {}, "Error code: 422")
    assert name_sent_fields(wrapped, {"model": "m", "messages": []}) is wrapped


def test_a_failure_example_is_shortened_in_its_middle_keeping_its_advice():
    sentence = unknown_fields_sentence(422, "Unexpected fields in the request: {'prompt_logprobs', "
                                            "'continue_final_message', 'add_generation_prompt'}")
    assert len(sentence) > 400
    short = shorten_middle(sentence, 300)
    assert len(short) <= 300 and " [...] " in short
    assert short.startswith("the server does not accept the request fields")
    assert short.endswith("drop that option from the model spec or use a server that offers it")
    words = set(sentence.split())
    assert all(w in words for w in short.replace(" [...] ", " ").split())  # cut between words
    assert shorten_middle("short", 300) == "short"


def test_the_failure_example_in_results_keeps_its_end(tmp_path):
    from vlmcheck.run.outputs import EXAMPLE_CHARS, write_outputs
    from vlmcheck.run.task import Sample
    from vlmcheck.store.db import RunStore

    class T:
        name = "t"

        @staticmethod
        def summarize(records, failed=()):
            return {}

    long = "the server refused it " + "because " * 80 + "; do this to fix it"
    store = RunStore(tmp_path)
    store.put_sample_error("t", "s0", 0, "model_call:bad_request", long, None)
    results = write_outputs(store, T(), [Sample("s0", {}, 0)])
    example = results["counts"]["failure_kinds"]["model_call:bad_request"]["example"]
    assert len(example) <= EXAMPLE_CHARS and example.endswith("; do this to fix it")
    assert example.startswith("the server refused it")


def test_a_gateway_refusal_leaves_no_run_folder(litellm, tmp_path, image_folder):
    out = tmp_path / "d"
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    run = run_cli("describe", "--vlm", f"openai:tiny-qwen@{litellm.base_url}", "--api-key", "sk-wrong", "--data",
                  image_folder, "--out", out, "--limit", "2", "--no-progress", cwd=tmp_path, env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    lines = [x for x in run.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and '"No connected db."' in lines[0] and "sk-wrong" not in run.stderr
    assert not out.exists()
    assert not [r for r in litellm.requests() if r["path"] == "/v1/chat/completions"]
    json.dumps(lines)


def test_a_new_runs_first_requests_refused_for_the_runs_reason_refuse_it():
    from vlmcheck.run.first_calls import FirstCalls, run_reason

    auth = {"status": "error", "error_type": "model_call:auth",
            "message": "auth (HTTP 401): Incorrect API key provided: Bearer [REDACTED] (after 1 attempt)"}
    gone = {"status": "error", "error_type": "model_call:bad_request",
            "message": "bad_request (HTTP 404): The model `m` does not exist. (after 1 attempt)"}
    own = {"status": "error", "error_type": "model_call:bad_request", "message": "bad_request (HTTP 400): too big"}
    assert "--api-key" in run_reason(auth) and "base URL" in run_reason(gone) and run_reason(own) is None
    gate = FirstCalls(todo=10)
    assert [gate.observe(auth) for _ in range(4)] == [False, False, False, True]
    assert "first 4 requests" in gate.refusal and "Incorrect API key provided" in gate.refusal
    assert "--no-preflight" in gate.refusal and "\n" not in gate.refusal
    mixed = FirstCalls(todo=10)  # one sample that failed for its own reason, or one done: the run goes on
    assert not any(mixed.observe(o) for o in (auth, own, auth, auth, auth, auth))
    done = FirstCalls(todo=10)
    assert not any(done.observe(o) for o in (auth, {"status": "done"}, auth, auth, auth))
    one = FirstCalls(todo=1)
    assert one.observe(gone) and "first request (" in one.refusal


def test_a_key_refused_on_the_first_requests_leaves_no_run_folder(fake_server, tmp_path, image_folder):
    """nginx in front of a server: no GET /models (a bare 404, the preflight passes), every chat request 401."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    args = ["describe", "--vlm", f"openai:m@{fake_server.base_url}", "--data",
            str(image_folder), "--limit", "5", "--no-progress", "--prompt", "[fault=401echo] Describe.",
            "--api-key", "sk-SECRET-77", "--max-concurrency", "1"]
    out = tmp_path / "d"
    run = run_cli(*args, "--out", out, env=env)
    lines = [x for x in run.stderr.splitlines() if x.strip()]
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert "Incorrect API key provided" in lines[0] and "--api-key" in lines[0] and "sk-SECRET-77" not in run.stderr
    assert not out.exists()
    chats = [r for r in fake_server.requests() if r["path"] == "/v1/chat/completions"]
    assert len(chats) == 4  # stopped after the first four, not every sample
    made = tmp_path / "made"  # a folder the user made stays, empty
    made.mkdir()
    again = run_cli(*args, "--out", made, env=env)
    assert again.returncode == 2 and made.is_dir() and not any(made.iterdir())
    kept = run_cli(*args, "--out", out, "--no-preflight", env=env)
    assert kept.returncode == 1 and json.loads((out / "results.json").read_text())["counts"]["failed"] == 5
