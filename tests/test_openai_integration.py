"""The OpenAI-compatible adapter against a local server, faults included."""

import json
from pathlib import Path

import pytest
from PIL import Image

from vlmcheck import GenerationConfig, Message, RunOptions, load_model, run_task
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.run.scheduler import RetryPolicy

FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05)


def _manifest(tmp_path: Path, prompts: list[str]) -> Path:
    (tmp_path / "img").mkdir(exist_ok=True)
    rows = []
    for i, prompt in enumerate(prompts):
        Image.new("RGB", (12, 12), (20 * i % 255, 7 * i % 255, 200)).save(tmp_path / "img" / f"{i}.png")
        rows.append({"id": f"s{i}", "image": f"img/{i}.png", "prompt": prompt})
    path = tmp_path / "manifest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(server, tmp_path, prompts, spec_params="", **opts):
    spec = f"openai:fake-vlm@{server.base_url}{spec_params}"
    task = DescribeTask(DescribeSpec(vlm=spec, data=str(_manifest(tmp_path, prompts))))
    return run_task(task, tmp_path / "run", RunOptions(progress=False, retry=FAST, **opts))


def _samples(run_dir: Path) -> dict[str, dict]:
    return {json.loads(l)["sample_id"]: json.loads(l) for l in (run_dir / "samples.jsonl").read_text().splitlines()}


# the default is aiohttp directly; the SDK with its aiohttp or httpx transport on request
@pytest.mark.parametrize("transport", ["", "&http=sdk", "&http=httpx"])
@pytest.mark.parametrize("fault", ["429x2", "500x2", "503x1", "malformedx1", "emptyx2", "resetx1", "slowx1"])
def test_transient_faults_are_retried(fake_server, tmp_path, fault, transport):
    res = _run(fake_server, tmp_path, [f"[fault={fault}] Describe."] * 3, "?timeout=1" + transport)
    assert res.results["counts"]["done"] == 3, _samples(tmp_path / "run")
    seen = fake_server.requests()
    n_faults = int(fault.split("x")[1])
    assert len(seen) == 3 * (n_faults + 1)
    (usage,) = res.results["usage"].values()
    assert usage["attempts"] == 3 * (n_faults + 1)


def test_unknown_transport_is_a_spec_error(fake_server):
    from vlmcheck.core.spec import SpecError

    with pytest.raises(SpecError, match="http="):
        load_model(f"openai:fake@{fake_server.base_url}?http=curl")


def test_bad_request_fails_the_sample_once_and_run_goes_on(fake_server, tmp_path):
    res = _run(fake_server, tmp_path, ["[fault=400] Describe.", "Describe.", "Describe."])
    counts = res.results["counts"]
    assert counts["done"] == 2 and counts["failed"] == 1
    assert counts["errors_by_type"] == {"model_call:bad_request": 1}
    samples = _samples(tmp_path / "run")
    assert samples["s0"]["status"] == "error" and "answer" not in json.dumps(samples["s0"])
    assert "injected bad request" in samples["s0"]["error"]["message"]
    assert len(fake_server.requests()) == 3  # the 400 was not retried


def test_rerun_makes_no_model_calls_and_retry_failed_reruns_only_failures(fake_server, tmp_path):
    from vlmcheck.run.runner import retry_failed

    prompts = ["[fault=500x9] Describe.", "Describe.", "Describe."]
    res = _run(fake_server, tmp_path, prompts)
    assert res.results["counts"]["failed"] == 1  # 4 attempts, all 500
    before = len(fake_server.requests())
    again = _run(fake_server, tmp_path, prompts, resume=True)
    assert again.results["session"]["model_calls"] == 0 and len(fake_server.requests()) == before
    task = DescribeTask(DescribeSpec(vlm=f"openai:fake-vlm@{fake_server.base_url}",
                                     data=str(tmp_path / "manifest.jsonl")))
    fixed = retry_failed(task, tmp_path / "run", RunOptions(progress=False, retry=FAST))
    # attempts 5..8 of the failed request: 5 more 500s would be needed, so after 4 tries it still fails;
    # the two finished samples made no call at all
    new = fake_server.requests()[before:]
    failing = {r["digest"] for r in fake_server.requests()[:before] if r["fault"] == "500"}
    assert len(failing) == 1 and {r["digest"] for r in new} == failing
    assert fixed.results["counts"]["done"] == 2 and fixed.results["session"]["cache_hits"] == 0


def test_existing_run_folder_needs_resume(fake_server, tmp_path):
    from vlmcheck.run.runner import RunFolderExists

    _run(fake_server, tmp_path, ["Describe."])
    with pytest.raises(RunFolderExists):
        _run(fake_server, tmp_path, ["Describe."])


def test_image_generation_endpoint(fake_server):
    import asyncio

    gen = load_model(f"openai-image:dall-e-3@{fake_server.base_url}", "generator")
    img = asyncio.run(gen.generate_image("a red square"))
    assert img.size == (32, 32) and img.mode == "RGB"


def test_usage_and_cost_accounting(fake_server, tmp_path):
    res = _run(fake_server, tmp_path, ["Describe."] * 4, "?price_in=2.5&price_out=10")
    usage = next(iter(res.results["usage"].values()))
    # the fake server reports 10 prompt + 2 completion tokens per call
    assert usage["input_tokens"] == 40 and usage["output_tokens"] == 8
    assert usage["cost_usd"] == pytest.approx((40 * 2.5 + 8 * 10) / 1e6)


def test_anthropic_adapter_against_local_server(fake_server, monkeypatch):
    import asyncio

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
    base = fake_server.base_url[: -len("/v1")]
    vlm = load_model(f"anthropic:claude-fake@{base}")
    msgs = [Message.system("Be brief."), Message.user(Image.new("RGB", (4, 4)), "Describe. [fault=429x1]")]
    from vlmcheck.core.errors import ModelCallError

    # the first attempt gets a 429: the adapter reports a retryable rate_limit error with Retry-After
    with pytest.raises(ModelCallError) as info:
        asyncio.run(vlm.generate(msgs, GenerationConfig(max_tokens=20)))
    assert info.value.kind == "rate_limit" and info.value.retryable and info.value.retry_after == 0.2
    gen = asyncio.run(vlm.generate(msgs, GenerationConfig(max_tokens=20)))
    assert "images=1 system=True key=True" in gen.text
    assert gen.finish_reason == "stop" and (gen.usage.input_tokens, gen.usage.output_tokens) == (11, 3)


def test_gemini_adapter_against_local_server(fake_server, monkeypatch, tmp_path):
    import asyncio

    key = "AIza-test-0123456789abcdefGEMINI"
    monkeypatch.setenv("GEMINI_API_KEY", key)
    base = fake_server.base_url[: -len("/v1")]
    vlm = load_model(f"gemini:gemini-fake@{base}")
    msgs = [Message.system("Be brief."), Message.user(Image.new("RGB", (4, 4)), "Describe. [fault=429x1]")]
    from vlmcheck.core.errors import ModelCallError

    with pytest.raises(ModelCallError) as info:
        asyncio.run(vlm.generate(msgs, GenerationConfig(max_tokens=20)))
    assert info.value.kind == "rate_limit" and info.value.retryable
    assert key not in str(info.value)
    gen = asyncio.run(vlm.generate(msgs, GenerationConfig(max_tokens=20)))
    assert "images=1 system=1 key=1" in gen.text
    assert gen.finish_reason == "stop" and (gen.usage.input_tokens, gen.usage.output_tokens) == (11, 5)
    assert all(r["path"].endswith("/models/gemini-fake:generateContent") for r in fake_server.requests())


def test_one_model_object_serves_several_event_loops(fake_server):
    import asyncio

    vlm = load_model(f"openai:fake@{fake_server.base_url}")
    first = asyncio.run(vlm.generate([Message.user("Describe.")], GenerationConfig()))
    second = asyncio.run(vlm.generate([Message.user("Describe.")], GenerationConfig()))  # a new loop
    assert first.text == second.text


@pytest.mark.parametrize("transport", ["", "?http=sdk", "?http=httpx"])
def test_http_clients_are_closed_when_their_loop_ends(fake_server, transport):
    """Direct API use never calls a close method; the clients still close with their loop
    (an aiohttp session left open prints 'Unclosed client session' at exit)."""
    import asyncio

    vlm = load_model(f"openai:fake@{fake_server.base_url}{transport}")
    seen = []

    async def call():
        gen = await vlm.generate([Message.user("Describe.")], GenerationConfig())
        ep = vlm._endpoints[0]
        seen.append(ep.http.sessions.get() if vlm._direct else ep.clients.get())
        return gen

    asyncio.run(call())
    asyncio.run(call())
    assert len(seen) == 2 and seen[0] is not seen[1]
    assert all(c.closed if hasattr(c, "closed") else c.is_closed() for c in seen)
