"""A model's identity (what it is) keys the call cache and the resume check; its placement (endpoint,
concurrency, timeout, device, batch size, transport, prices) may change between sessions of one run."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from conftest import FakeServer
from vlmcheck.core import spec as spec_module
from vlmcheck.core.spec import IDENTITY, PLACEMENT, ModelSpec, SpecError, load_model, register
from vlmcheck.methods.describe import DescribeSpec, DescribeTask
from vlmcheck.run import calls, runner
from vlmcheck.run.runner import RunFolderExists, RunOptions, run_task


def test_identity_drops_the_endpoint_and_placement_parameters_only():
    spec = ModelSpec.parse("openai:gpt-4o@http://h:8000/v1?concurrency=8&logprobs=1&timeout=30&http=httpx"
                           "&price_in=2.5&price_out=10&max_tokens_param=max_completion_tokens")
    assert spec.identity() == "openai:gpt-4o?logprobs=1"
    assert ModelSpec.parse("hf:org/m?device=cuda&dtype=bfloat16&batch_size=4&adapter=a").identity() == \
        "hf:org/m?adapter=a&dtype=bfloat16"
    # an unknown parameter may change outputs: it stays in the identity
    assert ModelSpec.parse("openai:m@http://x/v1?revision=3").identity() == "openai:m?revision=3"
    # credentials never reach it
    assert "sk-" not in ModelSpec.parse("openai:m@http://x/v1?api_key=sk-secret123456").identity()


READS = re.compile(r"""(?:get_(?:str|int|float|bool)\(|params\.get\(|params\[)\s*["']([a-z_]+)["']""")


def unclassified(entry) -> list[str]:
    """The ?parameters the provider's adapter module reads that its registration does not declare as identity or
    placement (a parameter read but undeclared would be refused by check_params, or, unchecked, join the identity
    without anyone deciding it)."""
    if entry.params is None:
        return []
    module = importlib.import_module(entry.target.partition(":")[0])
    reads = set(READS.findall(inspect.getsource(module)))
    declared = {k for k, kind in entry.params.items() if kind in (IDENTITY, PLACEMENT)}
    return sorted(reads - declared - set(spec_module.COMMON_PARAMS))


def test_every_declared_provider_parameter_is_classified_and_every_read_one_declared():
    checked = {name: e for name, e in spec_module.PROVIDERS.items() if e.params is not None}
    assert {"openai", "anthropic", "gemini", "hf", "diffusers", "openai-image", "hf-encoder", "timm"} <= set(checked)
    for name, entry in checked.items():
        assert not unclassified(entry), (name, unclassified(entry))
        assert entry.billing is not None, name
    # the registration decides what is placement: hf's device is, its dtype is not
    assert spec_module.placement_params("hf") >= {"device", "batch_size", "price_in"}
    assert "dtype" not in spec_module.placement_params("hf")


def test_a_planted_omission_is_caught(tmp_path, monkeypatch):
    """An Ollama-like adapter reading keep_alive: undeclared, or declared without a kind, fails; declared as
    placement, it leaves the model's identity."""
    (tmp_path / "toy_ollama.py").write_text("def make(spec, role):\n    return spec.get_str('keep_alive', '5m')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from conftest import isolate_registry

    isolate_registry(monkeypatch, spec_module.PROVIDERS)
    register("toy", "toy_ollama:make", ("vlm",), params={"timeout": PLACEMENT}, billing="local")
    assert unclassified(spec_module.registration("toy")) == ["keep_alive"]
    with pytest.raises(SpecError, match="keep_alive"):
        register("toy", "toy_ollama:make", ("vlm",), params={"timeout": PLACEMENT, "keep_alive": None}, replace=True)
    register("toy", "toy_ollama:make", ("vlm",), params={"timeout": PLACEMENT, "keep_alive": PLACEMENT},
             replace=True)
    assert unclassified(spec_module.registration("toy")) == []
    assert ModelSpec.parse("toy:m?keep_alive=1h&seed=2").identity() == "toy:m?seed=2"


def test_billing_and_image_token_rule_come_from_the_registration():
    from vlmcheck.run.prices import image_rule, prices_for

    assert prices_for("hf:org/m")["source"] == "local model"
    assert prices_for("ref:describer") == prices_for("hf:org/m")
    assert prices_for("openai:gpt-4o")["in"] > 0
    assert image_rule("anthropic:claude-x") == "anthropic" and image_rule("gemini:g") == "gemini"
    assert image_rule("openai:gpt-4o") == "openai"
    assert image_rule("anthropic:claude-x?image_tokens=openai") == "openai"


def _task(server: FakeServer, folder, params: str = "") -> DescribeTask:
    vlm = load_model(f"openai:fake@{server.base_url}{params}")
    return DescribeTask(DescribeSpec(vlm=vlm.model_id, data=str(folder)), vlm=vlm)


def _samples(run):
    return (run / "samples.jsonl").read_text()


def test_moving_the_server_and_changing_concurrency_keeps_the_cache(tmp_path, image_folder):
    (tmp_path / "a").mkdir()
    a = FakeServer(0.0, tmp_path / "a")
    try:
        first = run_task(_task(a, image_folder, "?concurrency=2"), tmp_path / "run", RunOptions(progress=False))
        assert first.results["session"]["model_calls"] == 6
    finally:
        a.stop()
    before = _samples(tmp_path / "run")
    # a run killed after its calls were cached and before its samples were journaled: every sample is redone
    # from the cache
    import sqlite3

    with sqlite3.connect(tmp_path / "run" / "store.sqlite") as db:
        db.execute("DELETE FROM samples")
    (tmp_path / "b").mkdir()
    b = FakeServer(0.0, tmp_path / "b")
    try:
        again = run_task(_task(b, image_folder, "?concurrency=5&timeout=30"), tmp_path / "run",
                         RunOptions(progress=False, resume=True, max_concurrency=3))
        assert again.results["session"]["model_calls"] == 0 and again.results["session"]["cache_hits"] == 6
        assert b.requests() == []  # the new server was never asked
        assert _samples(tmp_path / "run") == before
        # the run records each session's placement
        store = runner.RunStore(tmp_path / "run", existing=True)
        sessions, key_version = store.get_meta("sessions"), store.get_meta("key_version")
        store.close()
        assert key_version == 3
        assert [s["models"] for s in sessions] == [[f"openai:fake@{a.base_url}?concurrency=2"],
                                                  [f"openai:fake@{b.base_url}?concurrency=5&timeout=30"]]
        # a parameter that changes answers is another model: the resume is refused
        with pytest.raises(RunFolderExists, match="different task spec"):
            run_task(_task(b, image_folder, "?logprobs=1"), tmp_path / "run", RunOptions(progress=False, resume=True))
    finally:
        b.stop()


def test_a_store_from_before_identity_keys_keeps_resuming(tmp_path, image_folder, monkeypatch):
    server = FakeServer(0.0, tmp_path)
    try:
        # a run made with version-1 keys (the whole model id), as every store before this change
        monkeypatch.setattr(calls, "KEY_VERSION", 1)
        monkeypatch.setattr(runner, "KEY_VERSION", 1)
        run_task(_task(server, image_folder), tmp_path / "run", RunOptions(progress=False))
        monkeypatch.undo()
        store = runner.RunStore(tmp_path / "run", existing=True)
        assert store.get_meta("key_version") == 1
        store.close()
        again = run_task(_task(server, image_folder), tmp_path / "run", RunOptions(progress=False, resume=True))
        assert again.results["session"]["model_calls"] == 0
        # its keys hold the endpoint, so a moved endpoint is still another task spec for it
        with pytest.raises(RunFolderExists):
            run_task(_task(server, image_folder, "?timeout=30"), tmp_path / "run",
                     RunOptions(progress=False, resume=True))
    finally:
        server.stop()
