"""Local Hugging Face adapters on tiny random models loaded with from_pretrained."""

import asyncio

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_tiny import build_tiny_clip, build_tiny_llava, build_tiny_vit  # noqa: E402

from vlmcheck import GenerationConfig, Message, load_model  # noqa: E402


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    folder = build_tiny_llava(tmp_path_factory.mktemp("llava"))
    return load_model(f"hf:{folder}?device=cpu&batch_size=4")


def _img(seed):
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (40, 36, 3), dtype=np.uint8))


def test_generate_batched_equals_single(llava):
    cfg = GenerationConfig(max_tokens=6)
    convs = [[Message.user(_img(i), "describe this image")] for i in range(5)]

    async def many():
        return await asyncio.gather(*(llava.generate(c, cfg) for c in convs))

    batched = asyncio.run(many())
    single = [asyncio.run(llava.generate(c, cfg)) for c in convs]
    assert [g.text for g in batched] == [g.text for g in single]
    assert all(g.usage.output_tokens <= 6 for g in batched)
    assert all(g.finish_reason in ("stop", "length") for g in batched)


def test_loglikelihood_matches_direct_logits(llava):
    msgs = [Message.user(_img(1), "is there a cat ?")]
    conts = ["yes", "no it is a dog"]
    got = asyncio.run(llava.loglikelihood(msgs, conts))
    proc, model = llava.processor, llava.model
    text = proc.apply_chat_template([{"role": "user", "content": [{"type": "image"},
                                                                 {"type": "text", "text": "is there a cat ?"}]}],
                                    add_generation_prompt=True, tokenize=False)
    for cont, ll in zip(conts, got):
        inputs = proc(text=[text], images=[_img(1)], return_tensors="pt")
        cont_ids = proc.tokenizer(cont, add_special_tokens=False, return_tensors="pt")["input_ids"]
        ids = torch.cat([inputs["input_ids"], cont_ids], 1)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids),
                           pixel_values=inputs["pixel_values"]).logits[0]
        start = inputs["input_ids"].shape[1]
        direct = sum(torch.log_softmax(logits[p - 1], -1)[ids[0, p]].item() for p in range(start, ids.shape[1]))
        assert ll.n_tokens == cont_ids.shape[1]
        assert ll.sum == pytest.approx(direct, abs=1e-4)
        assert ll.mean == pytest.approx(direct / cont_ids.shape[1], abs=1e-4)


def test_vision_embedding_has_gradients(llava):
    assert llava.capabilities.vision_embedding and llava.capabilities.loglikelihood
    assert llava.vision_input_size() == (32, 32)
    pixels = torch.rand(2, 3, 32, 32, requires_grad=True)
    emb = llava.vision_embedding(pixels)
    assert emb.shape == (2, 16, 32)  # 16 patch tokens (CLS dropped), projector width 32
    emb.sum().backward()
    assert pixels.grad is not None and pixels.grad.abs().sum() > 0


def test_vit_encoder_cls_token(tmp_path):
    from transformers import ViTModel

    folder = build_tiny_vit(tmp_path / "vit")
    enc = load_model(f"hf-encoder:{folder}", "encoder")
    imgs = [_img(3), _img(4)]
    mat = asyncio.run(enc.encode(imgs))
    assert mat.shape == (2, 32) and mat.dtype == np.float32
    model = ViTModel.from_pretrained(folder).eval()
    arr = np.stack([np.asarray(im.resize((32, 32), Image.BILINEAR), np.float32) / 255 for im in imgs])
    x = (torch.from_numpy(arr).permute(0, 3, 1, 2) - 0.5) / 0.5
    with torch.no_grad():
        cls = model(pixel_values=x).last_hidden_state[:, 0].numpy()
    np.testing.assert_allclose(mat, cls, atol=2e-2)  # resize filters differ slightly
    assert np.allclose(mat[0], asyncio.run(enc.encode([imgs[0]]))[0], atol=1e-6)


def test_clip_encoder_uses_image_features(tmp_path):
    folder = build_tiny_clip(tmp_path / "clip")
    enc = load_model(f"hf-encoder:{folder}", "encoder")
    assert enc.pool == "image_features"
    assert asyncio.run(enc.encode([_img(5)])).shape == (1, 16)
    pixels = torch.rand(1, 3, 40, 40, requires_grad=True)
    enc.embed_tensor(pixels).sum().backward()
    assert pixels.grad.abs().sum() > 0


def test_timm_encoder_or_documented_skip():
    try:
        import timm  # noqa: F401
    except Exception as exc:  # timm imports torchvision, which has no CPU build here
        pytest.skip(f"timm cannot be imported here ({type(exc).__name__}: {exc}); "
                    "the timm adapter needs torchvision")
    enc = load_model("timm:resnet18?pretrained=0", "encoder")
    assert asyncio.run(enc.encode([_img(0)])).shape == (1, 512)


def test_torch_module_encoder():
    from vlmcheck.models.encoders import TorchEncoder

    module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 5))

    def prep(images):
        arr = np.stack([np.asarray(im.resize((8, 8)), np.float32) / 255 for im in images])
        return torch.from_numpy(arr).permute(0, 3, 1, 2)

    enc = TorchEncoder(module, prep, model_id="custom")
    assert asyncio.run(enc.encode([_img(0), _img(1), _img(2)])).shape == (3, 5)
