"""The neutral JSON-over-HTTP client (``models/http.py``) and the dialects built on it, in-process: each request goes
to an ``httpx.MockTransport`` handler instead of a socket, so the adapter's own code builds the request and reads the
answer.  The request shapes are the providers' documented ones (OpenAI's chat completions, Anthropic's Messages API,
Gemini's generateContent REST reference)."""

import asyncio
import base64
import json

import httpx
import pytest
from PIL import Image

from vlmcheck import GenerationConfig, Message, load_model
from vlmcheck._version import __version__
from vlmcheck.core.errors import ModelCallError
from vlmcheck.core.spec import ModelSpec
from vlmcheck.models.http import JSONHTTP, in_process


def _answer(payload: dict, status: int = 200, **headers: str):
    return lambda request: httpx.Response(status, json=payload, headers=headers)


def _run(coro):
    return asyncio.run(coro)


class Plain(JSONHTTP):
    """A new dialect that declares nothing but its server."""

    default_base_url = "https://plain.example/api"


class Keyed(JSONHTTP):
    default_base_url = "https://keyed.example"
    key_header = "X-Plain-Key"


def test_a_new_dialect_sends_no_key_header_without_a_key_and_vlmcheck_s_user_agent(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://openai-env.example/v1")  # not this dialect's variable
    with in_process(_answer({"ok": True})) as seen:
        out = _run(Plain(ModelSpec.parse("x:m")).post_json("/go", {"a": 1}))
    assert out == {"ok": True}
    (req,) = seen
    assert str(req.url) == "https://plain.example/api/go" and req.method == "POST"
    assert "authorization" not in req.headers
    assert req.headers["user-agent"] == f"vlmcheck/{__version__}"
    assert json.loads(req.content) == {"a": 1}


def test_a_new_dialect_sends_the_key_in_its_declared_header_only(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://openai-env.example/v1")
    with in_process(_answer({})) as seen:
        _run(Keyed(ModelSpec.parse("x:m"), "k-123").request("GET", "/models"))
    (req,) = seen
    assert req.url.host == "keyed.example"
    assert req.headers["x-plain-key"] == "k-123" and "authorization" not in req.headers


def test_a_dialect_without_a_default_server_needs_a_base_url():
    from vlmcheck.core.errors import SpecError

    class Local(JSONHTTP):
        pass

    with pytest.raises(SpecError, match="give its URL"):
        Local(ModelSpec.parse("x:m"))
    assert Local(ModelSpec.parse("x:m@http://localhost:9/v1")).base_url == "http://localhost:9/v1"


def test_error_statuses_timeouts_and_refused_connections_read_as_model_call_errors():
    spec = ModelSpec.parse("x:m")
    with in_process(_answer({"error": {"message": "slow down"}}, 429, **{"retry-after": "3"})):
        with pytest.raises(ModelCallError) as limited:
            _run(Plain(spec).post_json("/go", {}))
    assert (limited.value.kind, limited.value.status, limited.value.retry_after) == ("rate_limit", 429, 3.0)
    assert limited.value.args[0] == "slow down"

    def refuse(request):
        raise httpx.ConnectError("[Errno 111] Connection refused")

    with in_process(refuse):
        with pytest.raises(ModelCallError) as refused:
            _run(Plain(spec).post_json("/go", {}))
    assert refused.value.kind == "connection" and "connection refused" in str(refused.value)

    def late(request):
        raise httpx.ReadTimeout("timed out")

    with in_process(late):
        with pytest.raises(ModelCallError) as slow:
            _run(Plain(spec, timeout=2).post_json("/go", {}))
    assert slow.value.kind == "timeout" and "2 s" in str(slow.value)
    with in_process(lambda r: httpx.Response(200, content=b"x" * 2000)):
        with pytest.raises(ModelCallError) as big:
            _run(Plain(spec, max_bytes=1000).request("GET", "/big"))
    assert big.value.kind == "too_large"


def test_preflight_is_an_optional_method_declared_by_the_roles():
    from vlmcheck.core.errors import PreflightError, SpecError
    from vlmcheck.core.roles import SupportsPreflight
    from vlmcheck.run.runner import preflight

    assert issubclass(PreflightError, SpecError)
    assert "preflight" in SupportsPreflight.__dict__ and "PreflightError" in SupportsPreflight.preflight.__doc__
    calls = []

    class Checked:
        model_id = "checked"

        async def preflight(self) -> None:
            calls.append(self.model_id)
            raise PreflightError("unreachable")

    class Unchecked:
        model_id = "unchecked"

    assert isinstance(Checked(), SupportsPreflight) and not isinstance(Unchecked(), SupportsPreflight)

    class Task:
        def __init__(self):
            self.vlm, self.judge, self.again = Unchecked(), Checked(), Checked()

    with pytest.raises(PreflightError, match="unreachable"):
        _run(preflight(Task()))
    assert calls == ["checked"]


IMAGE = Image.new("RGB", (4, 4), (200, 10, 10))
MESSAGES = [Message.system("Be brief."), Message.user(IMAGE, "What colour?")]


def _image_b64() -> str:
    """The image as the message carries it (the bytes vlmcheck encoded), in base64."""
    (part,) = [p for p in MESSAGES[1].content if hasattr(p, "mime_type")]
    return base64.b64encode(part.data).decode()


def test_openai_sends_the_documented_chat_completions_request(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0123456789")
    reply = {"choices": [{"message": {"role": "assistant", "content": "Red."}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 7, "completion_tokens": 2}}
    with in_process(_answer(reply)) as seen:
        gen = _run(load_model("openai:gpt-4o-mini").generate(MESSAGES, GenerationConfig(max_tokens=9)))
    (req,) = seen
    assert (req.method, str(req.url)) == ("POST", "https://api.openai.com/v1/chat/completions")
    assert req.headers["authorization"] == "Bearer sk-test-openai-0123456789"
    body = json.loads(req.content)
    assert body["model"] == "gpt-4o-mini" and body["max_completion_tokens"] == 9 and body["temperature"] == 0.0
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][1]["content"] == [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_image_b64()}"}},
        {"type": "text", "text": "What colour?"}]
    assert (gen.text, gen.finish_reason, gen.usage.input_tokens, gen.usage.output_tokens) == ("Red.", "stop", 7, 2)


def test_openai_follows_openai_base_url_and_the_organisation_header(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gateway.example/v1")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-123")
    monkeypatch.setenv("MY_KEY", "tk-Q7xZ9-unique-4242")
    reply = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
    with in_process(_answer(reply)) as seen:
        _run(load_model("openai:m?key_env=MY_KEY").generate([Message.user("Hi.")], GenerationConfig()))
    (req,) = seen
    assert str(req.url) == "https://gateway.example/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer tk-Q7xZ9-unique-4242"
    assert req.headers["openai-organization"] == "org-123"


def test_openai_asks_for_token_logprobs_and_reads_them():
    reply = {"choices": [{"message": {"content": "Answer yes"}, "finish_reason": "stop", "logprobs": {"content": [
        {"token": "Answer", "logprob": -0.1, "top_logprobs": [{"token": "Answer", "logprob": -0.1}]},
        {"token": " yes", "logprob": -0.5, "top_logprobs": []}]}}], "usage": {"prompt_tokens": 10,
                                                                             "completion_tokens": 2}}
    with in_process(_answer(reply)) as seen:
        gen = _run(load_model("openai:fake@http://localhost:9/v1").generate(
            [Message.user(IMAGE, "hi")], GenerationConfig(logprobs=True, top_logprobs=2)))
    body = json.loads(seen[0].content)
    assert (body["logprobs"], body["top_logprobs"], body["max_tokens"]) == (True, 2, 512)
    assert gen.text == "Answer yes" and gen.usage.input_tokens == 10
    assert [t.logprob for t in gen.logprobs] == [-0.1, -0.5] and gen.logprobs[0].top == [("Answer", -0.1)]


@pytest.mark.parametrize("params", ["", "?prefill=1"])
def test_prefilled_assistant_turn_is_continued_only_where_declared(params):
    reply = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
    vlm_spec = f"openai:fake@http://localhost:9/v1{params}"
    with in_process(_answer(reply)) as seen:
        vlm = load_model(vlm_spec)
        assert vlm.capabilities.prefill is bool(params)
        _run(vlm.generate([Message.user("Is it red?"), Message.assistant("Answer:")], GenerationConfig(max_tokens=4)))
    body = json.loads(seen[-1].content)
    assert body["messages"][-1]["role"] == "assistant"
    # vLLM / SGLang continue the pre-filled turn when asked (continue_final_message); others are not asked
    assert body.get("continue_final_message") is (True if params else None)
    assert seen[-1].headers["authorization"] == "Bearer EMPTY"  # a local server takes any key, as the SDK sends


def test_anthropic_sends_the_documented_messages_request(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
    reply = {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "Red."}],
             "stop_reason": "end_turn", "usage": {"input_tokens": 11, "output_tokens": 3}}
    with in_process(_answer(reply)) as seen:
        gen = _run(load_model("anthropic:claude-x").generate(MESSAGES, GenerationConfig(max_tokens=20, stop=["."])))
    (req,) = seen
    assert (req.method, str(req.url)) == ("POST", "https://api.anthropic.com/v1/messages")
    assert req.headers["x-api-key"] == "sk-ant-test-0123456789abcdef" and "authorization" not in req.headers
    assert req.headers["anthropic-version"] == "2023-06-01" and req.headers["content-type"] == "application/json"
    body = json.loads(req.content)
    assert body == {"model": "claude-x", "max_tokens": 20, "system": "Be brief.", "stop_sequences": ["."],
                    "messages": [{"role": "user", "content": [
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                     "data": _image_b64()}},
                        {"type": "text", "text": "What colour?"}]}]}
    assert "temperature" not in body  # sent only with ?send_temperature=1
    assert (gen.text, gen.finish_reason, gen.usage.input_tokens, gen.usage.output_tokens) == ("Red.", "stop", 11, 3)


def test_anthropic_sends_temperature_only_when_asked(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
    reply = {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}
    with in_process(_answer(reply)) as seen:
        _run(load_model("anthropic:claude-x@http://localhost:9").generate(MESSAGES, GenerationConfig()))
        _run(load_model("anthropic:claude-x@http://localhost:9?send_temperature=1").generate(
            MESSAGES, GenerationConfig(temperature=0.0, top_p=0.9)))
    plain, sampled = (json.loads(r.content) for r in seen)
    assert str(seen[0].url) == "http://localhost:9/v1/messages"
    assert "temperature" not in plain and "top_p" not in plain
    assert (sampled["temperature"], sampled["top_p"]) == (0.0, 0.9)


def test_gemini_sends_the_documented_generate_content_request(monkeypatch):
    monkeypatch.delenv("GOOGLE_GEMINI_BASE_URL", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-test-0123456789abcdefGEMINI")
    reply = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Red."}]}, "finishReason": "STOP"}],
             "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 5}}
    with in_process(_answer(reply)) as seen:
        gen = _run(load_model("gemini:gemini-2.0-flash").generate(
            MESSAGES, GenerationConfig(max_tokens=20, seed=3)))
    (req,) = seen
    assert req.method == "POST"
    assert str(req.url) == "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"
    assert req.headers["x-goog-api-key"] == "AIza-test-0123456789abcdefGEMINI" and "authorization" not in req.headers
    body = json.loads(req.content)
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["generationConfig"] == {"temperature": 0.0, "maxOutputTokens": 20, "seed": 3}
    (content,) = body["contents"]
    assert content["role"] == "user"
    assert content["parts"] == [{"inline_data": {"mime_type": "image/png", "data": _image_b64()}},
                                {"text": "What colour?"}]
    assert (gen.text, gen.finish_reason, gen.usage.input_tokens, gen.usage.output_tokens) == ("Red.", "stop", 11, 5)


def test_gemini_reads_a_blocked_prompt_as_a_content_filter():
    reply = {"promptFeedback": {"blockReason": "SAFETY"}}
    with in_process(_answer(reply)):
        vlm = load_model("gemini:g@http://localhost:9?api_key=AIza-test-0123456789abcdef")
        gen = _run(vlm.generate(MESSAGES, GenerationConfig()))
    assert gen.finish_reason == "content_filter" and "SAFETY" in gen.refusal


def test_anthropic_message_batches_use_the_documented_endpoints(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
    message = {"content": [{"type": "text", "text": "Red."}], "stop_reason": "end_turn",
               "usage": {"input_tokens": 11, "output_tokens": 3}}
    rows = [{"custom_id": "a", "result": {"type": "succeeded", "message": message}},
            {"custom_id": "b", "result": {"type": "errored", "error": {"type": "error", "error": {
                "type": "invalid_request_error", "message": "bad image"}}}}]

    def handler(request):
        if request.method == "POST":
            return httpx.Response(200, json={"id": "msgbatch_1", "processing_status": "in_progress"})
        if request.url.path.endswith("/results"):
            return httpx.Response(200, content="".join(json.dumps(r) + "\n" for r in rows).encode())
        return httpx.Response(200, json={"id": "msgbatch_1", "processing_status": "ended"})

    with in_process(handler) as seen:
        vlm = load_model("anthropic:claude-x?batch=1")
        body = vlm.batch_body(MESSAGES, GenerationConfig(max_tokens=5))
        batch_id = _run(vlm.batch.submit([("a", body), ("b", body)]))
        ended = _run(vlm.batch.ended(batch_id))
        results = _run(vlm.batch.results(batch_id))
    post, get, read = seen
    assert (post.method, str(post.url)) == ("POST", "https://api.anthropic.com/v1/messages/batches")
    assert post.headers["x-api-key"] == "sk-ant-test-0123456789abcdef"
    assert post.headers["anthropic-version"] == "2023-06-01"
    assert json.loads(post.content) == {"requests": [{"custom_id": "a", "params": body},
                                                     {"custom_id": "b", "params": body}]}
    assert (get.method, str(get.url)) == ("GET", "https://api.anthropic.com/v1/messages/batches/msgbatch_1")
    assert str(read.url) == "https://api.anthropic.com/v1/messages/batches/msgbatch_1/results"
    assert batch_id == "msgbatch_1" and ended
    assert results["a"].text == "Red." and results["a"].usage.output_tokens == 3
    assert (results["b"].kind, results["b"].args[0]) == ("bad_request", "invalid_request_error: bad image")


def test_every_dialect_s_images_are_spliced_into_the_plain_json_encoding():
    """An image's base64 (Anthropic's ``source.data``, Gemini's ``inline_data.data``, OpenAI's data URL) goes into
    the body as the message's own string, and the body is byte for byte ``json.dumps``'s; a long text under the same
    key that needs escaping is encoded as usual."""
    from vlmcheck.models.http import json_body, json_pieces

    b64 = base64.b64encode(bytes(range(256)) * 12).decode()
    anthropic = {"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}}]}]}
    gemini = {"contents": [{"parts": [{"inline_data": {"mime_type": "image/png", "data": b64}}, {"text": "é"}]}]}
    openai = {"messages": [{"role": "user", "content": [{"type": "image_url",
                                                         "image_url": {"url": "data:image/png;base64," + b64}}]}]}
    text = {"data": "a line\n" * 300, "url": "a \"quoted\" word " * 100}
    for body in (anthropic, gemini, openai, text):
        assert json_body(body) == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    assert any(p is b64 for p in json_pieces(anthropic)) and any(p is b64 for p in json_pieces(gemini))
    assert len(json_pieces(openai)) == 3 and len(json_pieces(text)) == 1


def test_openai_image_generation_sends_the_documented_request(monkeypatch):
    import io

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0123456789")
    png = io.BytesIO()
    Image.new("RGB", (8, 6), (0, 200, 0)).save(png, format="PNG")
    reply = {"created": 1, "data": [{"b64_json": base64.b64encode(png.getvalue()).decode()}]}
    with in_process(_answer(reply)) as seen:
        image = _run(load_model("openai-image:dall-e-3?size=1024x1024", "generator").generate_image("a green box"))
    (req,) = seen
    assert (req.method, str(req.url)) == ("POST", "https://api.openai.com/v1/images/generations")
    assert req.headers["authorization"] == "Bearer sk-test-openai-0123456789"
    assert json.loads(req.content) == {"model": "dall-e-3", "prompt": "a green box", "n": 1, "size": "1024x1024",
                                       "quality": "standard", "response_format": "b64_json"}
    assert image.size == (8, 6) and image.getpixel((0, 0)) == (0, 200, 0)
