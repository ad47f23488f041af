import json

import pytest
from PIL import Image

from vlmcheck import Message, ModelSpec, load_model
from vlmcheck.core.messages import canonical_messages, to_anthropic, to_gemini, to_hf, to_openai
from vlmcheck.core.spec import SpecError


@pytest.fixture
def conversation():
    img = Image.new("RGB", (5, 4), (10, 20, 30))
    return [Message.system("Be brief."), Message.user("Look:", img, "and say"), Message.assistant("ok")], img


def test_openai_format(conversation):
    msgs, _ = conversation
    out = to_openai(msgs)
    assert out[0] == {"role": "system", "content": "Be brief."}
    parts = out[1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "text"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert out[2] == {"role": "assistant", "content": "ok"}


def test_anthropic_gemini_hf_formats(conversation):
    msgs, img = conversation
    system, out = to_anthropic(msgs)
    assert system == "Be brief." and len(out) == 2
    assert out[0]["content"][1]["source"]["media_type"] == "image/png"
    system, contents = to_gemini(msgs)
    assert system == "Be brief."
    assert contents[1]["role"] == "model"
    assert contents[0]["parts"][1]["inline_data"]["mime_type"] == "image/png"
    conv, images = to_hf(msgs)
    assert conv[1]["content"][1] == {"type": "image"}
    assert len(images) == 1 and images[0].tobytes() == img.tobytes()


def test_message_json_roundtrip_and_canonical_form(conversation):
    msgs, _ = conversation
    restored = [Message.model_validate_json(m.model_dump_json()) for m in msgs]
    assert restored == msgs
    canon = json.dumps(canonical_messages(msgs))
    assert "base64" not in canon and msgs[1].images[0].sha256 in canon


@pytest.mark.parametrize("text,provider,name,base_url,params", [
    ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", None, {}),
    ("openai:Qwen/Qwen2-VL-7B-Instruct@http://localhost:8000/v1", "openai", "Qwen/Qwen2-VL-7B-Instruct",
     "http://localhost:8000/v1", {}),
    ("openai:llava:7b@http://localhost:11434/v1?concurrency=4", "openai", "llava:7b", "http://localhost:11434/v1",
     {"concurrency": "4"}),
    ("ref:describer?omit=0.2&hallucinate=0.1&seed=3", "ref", "describer", None,
     {"omit": "0.2", "hallucinate": "0.1", "seed": "3"}),
    ("hf-encoder:google/vit-base-patch16-224-in21k", "hf-encoder", "google/vit-base-patch16-224-in21k", None, {}),
])
def test_spec_parse(text, provider, name, base_url, params):
    spec = ModelSpec.parse(text)
    assert (spec.provider, spec.name, spec.base_url, spec.params) == (provider, name, base_url, params)
    assert ModelSpec.parse(spec.canonical()) == spec


def test_spec_secrets_are_not_serialised():
    spec = ModelSpec.parse("openai:m@http://x/v1?api_key=sk-verysecretkey123456&concurrency=2")
    assert spec.secret("api_key") == "sk-verysecretkey123456"
    assert "verysecret" not in spec.canonical()
    assert "verysecret" not in spec.model_dump_json()
    assert "verysecret" not in repr(spec)


def test_spec_errors():
    with pytest.raises(SpecError, match="no provider"):
        ModelSpec.parse("gpt-4o")
    with pytest.raises(SpecError, match="unknown model provider"):
        load_model("nosuch:model")
    with pytest.raises(SpecError, match="does not serve"):
        load_model("openai-image:dall-e-3", "vlm")
    with pytest.raises(SpecError, match="not a float"):
        ModelSpec.parse("ref:x?omit=lots").get_float("omit", 0.0)


def test_registry_builds_role_objects():
    from vlmcheck import ImageEncoder, VLM

    assert isinstance(load_model("ref:pixels", "encoder"), ImageEncoder)
    assert isinstance(load_model("openai:m@http://127.0.0.1:9/v1", "vlm"), VLM)
