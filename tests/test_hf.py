"""Local Hugging Face adapters on tiny random models loaded with from_pretrained."""

import asyncio

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_tiny import (build_tiny_clip, build_tiny_idefics3, build_tiny_llava, build_tiny_qwen2_vl,  # noqa: E402
                     build_tiny_siglip, build_tiny_vit)

from vlmcheck import GenerationConfig, Message, load_model  # noqa: E402

pytestmark = pytest.mark.slow  # tiny transformers models built and run (seconds each, torch on CPU)


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


def test_prefetched_batches_answer_as_unprefetched_in_order(llava):
    """The batcher prepares the next batch while one generates (issue 51): the same answers, in order, as one
    batch at a time prepared and generated in one step."""
    from vlmcheck.run.batching import Batcher

    cfg = GenerationConfig(max_tokens=5)
    convs = [[Message.user(_img(10 + i), "describe this image")] for i in range(9)]
    key = cfg.model_dump_json()
    plain = Batcher(lambda k, cs: llava._generate_prepared(k, llava._prepare_batch(k, cs)), 4)

    async def many(submit):
        return await asyncio.gather(*(submit(c) for c in convs))

    prefetched = asyncio.run(many(lambda c: llava.generate(c, cfg)))
    unprefetched = asyncio.run(many(lambda c: plain.submit(key, c)))
    assert [g.text for g in prefetched] == [g.text for g in unprefetched]
    assert [g.usage for g in prefetched] == [g.usage for g in unprefetched]


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


def test_prefilled_assistant_turn_is_continued(llava):
    msgs = [Message.user(_img(2), "is there a cat ?"), Message.assistant("Answer:")]
    inputs = llava._inputs([msgs])
    # the tiny template by hand: the user turn, then the assistant turn cut right after its pre-filled text
    expected = "user: <image> is there a cat ? </s> assistant: Answer:"
    ref = llava.processor(text=[expected], images=[_img(2)], return_tensors="pt")
    assert inputs["input_ids"].tolist() == ref["input_ids"].tolist()
    assert llava.capabilities.prefill
    gen = asyncio.run(llava.generate(msgs, GenerationConfig(max_tokens=3)))
    assert gen.finish_reason in ("stop", "length")


def test_vision_embedding_has_gradients(llava):
    assert llava.capabilities.vision_embedding and llava.capabilities.loglikelihood
    assert llava.vision_input_size() == (32, 32)
    pixels = torch.rand(2, 3, 32, 32, requires_grad=True)
    emb = llava.vision_embedding(pixels)
    assert emb.shape == (2, 16, 32)  # 16 patch tokens (CLS dropped), projector width 32
    emb.sum().backward()
    assert pixels.grad is not None and pixels.grad.abs().sum() > 0


def _pixels_of(arr):
    return torch.tensor(arr / 255.0, dtype=torch.float32).permute(2, 0, 1)[None].requires_grad_()


def test_qwen2_vl_vision_embedding_equals_processor_path(tmp_path):
    """Our differentiable packing gives the image processor's own patches and grid, hence the
    same connector output as get_image_features on the processor's output, and gradients."""
    from transformers import AutoImageProcessor, AutoModelForImageTextToText

    from vlmcheck.models import _vision

    folder = build_tiny_qwen2_vl(tmp_path / "qwen")
    model = AutoModelForImageTextToText.from_pretrained(folder).eval()
    ip = AutoImageProcessor.from_pretrained(folder)
    assert _vision.packing_of(model) == "grid"
    # 50x90 is not a multiple of 28: Qwen2-VL's smart_resize rounds it to 56x84 (within the tiny
    # processor's 4..16 merged-patch budget); a default request (448x448) is scaled down into it.
    assert _vision.input_size("grid", ip, model.config, (50, 90)) == (56, 84)
    h, w = _vision.input_size("grid", ip, model.config)
    assert h % 28 == 0 and w % 28 == 0 and 28 * 28 * 4 <= h * w <= 28 * 28 * 16
    arr = np.random.RandomState(0).randint(0, 256, (56, 84, 3), dtype=np.uint8)
    ref = ip(images=[Image.fromarray(arr)], return_tensors="pt")
    pixels = _pixels_of(arr)
    flat, grid = _vision.grid_patches(_vision.normalise(pixels, ip), ip.patch_size, ip.merge_size,
                                      ip.temporal_patch_size)
    assert grid.tolist() == ref["image_grid_thw"].tolist() == [[1, 4, 6]]
    torch.testing.assert_close(flat, ref["pixel_values"], atol=1e-5, rtol=0)
    emb = _vision.embed(model, ip, pixels, "grid")
    expected = model.get_image_features(ref["pixel_values"], ref["image_grid_thw"]).pooler_output[0]
    assert emb.shape == (1, 6, 32)  # 24 patches merged 2x2
    torch.testing.assert_close(emb[0], expected, atol=1e-4, rtol=1e-4)
    emb.sum().backward()
    assert pixels.grad is not None and pixels.grad.abs().sum() > 0


def test_idefics3_vision_embedding_generation_and_loglikelihood(tmp_path):
    """The SmolVLM architecture through hf: from_pretrained: generation, loglikelihood, and a
    vision embedding equal to the processor's single-view path, with gradients."""
    folder = build_tiny_idefics3(tmp_path / "idefics3")
    vlm = load_model(f"hf:{folder}", "vlm")
    assert vlm.capabilities.vision_embedding and vlm.vision_input_size() == (32, 32)
    arr = np.random.RandomState(1).randint(0, 256, (32, 32, 3), dtype=np.uint8)
    ip = vlm.processor.image_processor
    ref = ip(images=[Image.fromarray(arr)], do_image_splitting=False, size={"longest_edge": 32},
             return_tensors="pt")
    pixels = _pixels_of(arr)
    emb = vlm.vision_embedding(pixels)
    expected = vlm.model.get_image_features(ref["pixel_values"], ref["pixel_attention_mask"]).pooler_output[0]
    assert emb.shape == (1, 4, 32)  # 4x4 patches, pixel-shuffled by 2
    torch.testing.assert_close(emb[0], expected, atol=1e-4, rtol=1e-4)
    emb.sum().backward()
    assert pixels.grad.abs().sum() > 0
    msg = [Message.user(Image.fromarray(arr), "describe this image")]
    gen = asyncio.run(vlm.generate(msg, GenerationConfig(max_tokens=3)))
    assert gen.text.strip() and gen.finish_reason in ("length", "stop")
    scores = asyncio.run(vlm.loglikelihood(msg, ["yes", "no"]))
    assert all(s.n_tokens == 1 and s.sum < 0 for s in scores)


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


def test_siglip_encoder_equals_get_image_features_on_processor_output(tmp_path):
    from transformers import AutoImageProcessor, SiglipModel

    folder = build_tiny_siglip(tmp_path / "siglip")
    enc = load_model(f"hf-encoder:{folder}", "encoder")
    assert enc.pool == "image_features"
    imgs = [_img(6), _img(7)]
    mat = asyncio.run(enc.encode(imgs))
    model = SiglipModel.from_pretrained(folder).eval()
    inputs = AutoImageProcessor.from_pretrained(folder)(images=imgs, return_tensors="pt")
    with torch.no_grad():
        out = model.get_image_features(**inputs)
    expected = getattr(out, "pooler_output", out).numpy()
    assert mat.shape == expected.shape == (2, 32)
    np.testing.assert_allclose(mat, expected, atol=1e-5)
    pixels = torch.rand(1, 3, 48, 48, requires_grad=True)
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


def test_cast_keeps_statement_1_of_a_real_hf_continuation(llava, tmp_path):
    """The hf: adapter strips its continuation; glued to the pre-filled "Similarities:\\n\\n1." it reads
    "1.word word"; the authors' ^\\d+\\.\\s* keeps it as statement 1 (the old parse needed a space and lost it)."""
    import json

    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.cast import CastSpec, CastTask
    from vlmcheck.world.make import make_world_pairs

    pairs = make_world_pairs(tmp_path / "pairs", n=3, seed=0)
    task = CastTask(CastSpec(vlm=llava.model_id, pairs=str(pairs), gen_max_tokens=6, val_max_tokens=2), vlm=llava)
    run_task(task, tmp_path / "run", RunOptions(progress=False, report=False))
    kept = checked = 0
    for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines():
        rec = json.loads(line)["result"]
        assert rec["prefill"] is True
        for entry in rec["generation"].values():
            raw = entry["raw"]
            assert raw == raw.strip()  # what the adapter gives: no leading space to lean on
            first = raw.splitlines()[0].strip() if raw.strip() else ""
            if first:
                checked += 1
                kept += bool(entry["statements"]) and entry["statements"][0]["text"] == first
    assert checked >= 3 and kept == checked, (kept, checked)


def test_a_batch_renders_each_distinct_prompt_once_and_feeds_the_same_ids(llava, monkeypatch):
    """The chat template is rendered once per distinct conversation in a batch (issue 51: no per-sample work that
    can be per batch); every row's token ids are those of the conversation prepared alone."""
    same = [[Message.user(_img(20 + i), "describe this image")] for i in range(3)]
    other = [Message.user(_img(30), "what colour is it?")]
    prefilled = [Message.user(_img(31), "describe this image"), Message.assistant("It is")]
    batch = [same[0], other, same[1], prefilled, same[2]]
    real = llava.processor.apply_chat_template
    calls = []
    monkeypatch.setattr(llava.processor, "apply_chat_template", lambda *a, **k: calls.append(1) or real(*a, **k))
    ids = llava._inputs(batch)["input_ids"]
    assert len(calls) == 3  # the shared prompt, the other one, the pre-filled one
    pad = llava.tokenizer.pad_token_id
    for row, conv in zip(ids, batch):
        alone = llava._inputs([conv])["input_ids"][0]
        assert row[row.shape[0] - alone.shape[0]:].tolist() == alone.tolist()
        assert set(row[:row.shape[0] - alone.shape[0]].tolist()) <= {pad}

