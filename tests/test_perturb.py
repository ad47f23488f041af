"""Image and text corruptions: determinism, modes and sizes, severity order, composition, answer keys."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from PIL import Image

from vlmcheck.perturb.compose import apply_chain, composite_chain
from vlmcheck.perturb.image import CORRUPTIONS, PRESETS, corrupt, disk_kernel
from vlmcheck.perturb.text import TEXT_METHODS, corrupt_question, reverse_options, circular_options


def _photos(n=3, size=(96, 128)):
    from skimage import data

    out = []
    for name in ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "immunohistochemistry")[:n]:
        out.append(Image.fromarray(data.__getattribute__(name)()).resize(size))
    return out


def _psnr(a: Image.Image, b: Image.Image) -> float:
    x = np.asarray(a.convert("RGB"), dtype=np.float64)
    y = np.asarray(b.convert("RGB").resize(a.size), dtype=np.float64)
    return 10 * np.log10(255 ** 2 / max(((x - y) ** 2).mean(), 1e-10))


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_deterministic_and_shape_preserving(name):
    img = _photos(1, size=(97, 61))[0]  # odd sizes, portrait aspect
    a = corrupt(img, name, 3, seed=7)
    b = corrupt(img, name, 3, seed=7)
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert a.mode == "RGB"
    if CORRUPTIONS[name].keeps_size:
        assert a.size == img.size
    else:
        w, h = a.size
        assert w <= img.width and h <= img.height
        if name == "center_crop":
            assert w * h >= 0.9 ** 2 * img.width * img.height * 0.99  # keeps >= 90% of each side


@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "LA", "CMYK"])
def test_modes_are_preserved(mode):
    img = _photos(1)[0].convert(mode)
    for name in ("gaussian_noise", "jpeg_compression", "fog", "pixelate"):
        out = corrupt(img, name, 2, seed=1)
        assert out.mode == mode and out.size == img.size
    if mode in ("RGBA", "LA"):
        assert np.array_equal(np.asarray(out.getchannel("A")), np.asarray(img.getchannel("A")))


#: Where ImageNet-C's own parameter tables are not monotone we keep the tables and check the pairs that are.
#: The reference code is not monotone there either (bench/corruptions.py, reference PSNR in dB, severities 1-5):
#: * saturate desaturates at severities 1-2 and oversaturates at 3-5: 30.8 / 28.8 / 32.6 / 17.2 / 15.3;
#: * glass_blur does 2 passes at severity 1 but 1 at 2, and 3 at 3 but 2 at 4: 25.9 / 26.2 / 22.3 / 23.0 / 22.4;
#: * frost at severity 4 keeps less of the image than at 3 (0.65 vs 0.7) with the same frost weight: 9.9 -> 10.1;
#: * fog has the same intensity (2.5) at severities 3 and 4, which differ only in fractal roughness (flat within
#:   noise: ours 11.9 / 11.9 at 3-4, the reference 11.4 / 11.4 at 4-5).
NON_MONOTONE = {"saturate": [(1, 2), (3, 4), (4, 5)], "glass_blur": [(1, 3), (2, 3), (3, 5), (4, 5)],
                "fog": [(1, 2), (2, 3), (3, 5), (4, 5)], "frost": [(1, 2), (2, 3), (3, 5), (4, 5)]}


def test_glass_blur_steps_equal_the_reference_loop():
    """ImageNet-C's glass blur visits pixels bottom-right to top-left and runs
    ``x[h, w], x[h', w'] = x[h', w'], x[h, w]`` on an RGB array (views: a copy, not a swap).
    Our wavefront version gives exactly that loop's result for the same offsets."""
    from vlmcheck.perturb.image import glass_offsets, glass_shuffle

    def reference(x, delta, dy, dx):
        x = x.copy()
        h, w = x.shape[:2]
        for r in range(h - delta, delta, -1):
            for c in range(w - delta, delta, -1):
                a, b = dy[r - delta - 1, c - delta - 1], dx[r - delta - 1, c - delta - 1]
                x[r, c], x[r + a, c + b] = x[r + a, c + b], x[r, c]
        return x

    rng = np.random.default_rng(0)
    for delta in (1, 2, 3, 4):
        for h, w in ((20, 17), (9, 31), (40, 40), (8, 8)):
            x = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            dy, dx = glass_offsets(h, w, delta, rng)
            order = glass_shuffle(np.arange(h * w), h, w, delta, dy, dx)
            assert np.array_equal(x.reshape(-1, 3)[order].reshape(x.shape), reference(x, delta, dy, dx))
            assert not np.array_equal(order, np.arange(h * w)) or h <= 2 * delta


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_psnr_falls_with_severity(name):
    imgs = _photos(6)
    mean = [np.mean([_psnr(im, corrupt(im, name, s, seed=i)) for i, im in enumerate(imgs)]) for s in range(1, 6)]
    pairs = NON_MONOTONE.get(name, [(s, s + 1) for s in range(1, 5)])
    for lo, hi in pairs:
        assert mean[hi - 1] < mean[lo - 1] + 0.05, (name, [round(m, 2) for m in mean])


def test_vhexpansion_presets_match_the_paper():
    img = _photos(1)[0]
    x = np.asarray(img, dtype=np.float32) / 255
    # JPEG quality 30
    import io

    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=30)
    assert np.array_equal(np.asarray(corrupt(img, "vhx_jpeg")), np.asarray(Image.open(buf).convert("RGB")))
    # brightness: +0.5 on V of HSV, clipped
    out = np.asarray(corrupt(img, "vhx_brightness"), dtype=np.float32) / 255
    v_in, v_out = x.max(axis=2), out.max(axis=2)
    assert np.allclose(v_out, np.minimum(v_in + 0.5, 1.0), atol=2 / 255)
    # gaussian noise sigma 0.08: residual std about 0.08 where not clipped
    out = np.asarray(corrupt(img, "vhx_gaussian_noise", seed=3), dtype=np.float32) / 255
    inner = (x > 0.3) & (x < 0.7)
    assert abs((out - x)[inner].std() - 0.08) < 0.005
    # defocus: a disk of radius 5
    k = disk_kernel(5)
    assert k.sum() == pytest.approx(1.0) and (k > 0).sum() == 81
    assert set(PRESETS) == {"vhx_gaussian_noise", "vhx_brightness", "vhx_defocus_blur", "vhx_jpeg"}


def test_composite_chain_is_recorded_and_regenerates():
    chain = composite_chain(seed=5)
    cats = [s["category"] for s in chain]
    assert cats == ["noise", "blur", "weather", "digital", "other", "other", "other"]
    assert [s["name"] for s in chain[-3:]] == ["center_crop", "resize", "rotate"]  # sequential category
    assert all(1 <= s["severity"] <= 5 for s in chain)
    img = _photos(1)[0]
    a, b = apply_chain(img, chain), apply_chain(img, chain)
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert composite_chain(seed=5) == chain and composite_chain(seed=6) != chain


def test_text_corruptions_keep_the_answer_right():
    opts = ["red", "blue", "green", "yellow"]
    for seed in range(30):
        rng = np.random.default_rng(seed)
        answer = seed % 4
        new, a, _ = circular_options(opts, answer, rng)
        assert new[a] == opts[answer] and sorted(new) == sorted(opts)
        new, a, _ = reverse_options(opts, answer, rng)
        assert new[a] == opts[answer]
        out = asyncio.run(corrupt_question("What color is the large circle in the image?", opts, answer, seed))
        assert out["options"][out["answer"]] == opts[answer]
        assert [s["category"] for s in out["chain"]][:2] == ["basic", "basic"]
        sentence = next(s for s in out["chain"] if s["category"] == "sentence")
        assert "no TextModel" in sentence["skipped"]  # recorded, never silent


def test_text_methods_do_something_and_are_seeded():
    q = "What is the color of the object in the top left of the image? It is not shown twice."
    rng = lambda: np.random.default_rng(0)  # noqa: E731
    for name, m in TEXT_METHODS.items():
        if m.category in ("sentence", "choice"):
            continue
        a, b = m.fn(q, m.severities, rng()), m.fn(q, m.severities, rng())
        assert a == b and a != q, name
    assert TEXT_METHODS["contraction_expansion"].fn("It is not here", 1, rng()) == "It's not here" or \
        TEXT_METHODS["contraction_expansion"].fn("It is not here", 1, rng()) == "It isn't here"


def test_sentence_level_uses_the_text_model():
    async def rewriter(instruction, question):
        return question.upper()

    for seed in range(10):
        out = asyncio.run(corrupt_question("is the circle red?", None, None, seed, rewriter=rewriter))
        step = next(s for s in out["chain"] if s["category"] == "sentence")
        assert "skipped" not in step
        choice = next(s for s in out["chain"] if s["category"] == "choice")
        assert choice["skipped"] == "not a multiple-choice item"


def test_the_reference_rewriter_answers_every_sentence_level_method():
    from vlmcheck.core.messages import Message
    from vlmcheck.core.roles import GenerationConfig
    from vlmcheck.core.spec import load_model
    from vlmcheck.perturb.text import SENTENCE_PROMPTS

    rw = load_model("ref:rewriter", "text")
    q = "Is there a red circle in the image?"
    want = {"passive": "Is a red circle shown in the image?",
            "active": "Does the image contain a red circle?",
            "casual": "Hey, quick one: is there a red circle in the image?",
            "formal": "Could you please tell me: is there a red circle in the image?",
            "back_translation": "Is there a red circle in the picture?"}
    for name, instruction in SENTENCE_PROMPTS.items():
        g = asyncio.run(rw.generate([Message.user(f"{instruction}\nQuestion: {q}")], GenerationConfig()))
        assert g.text == want[name], name

    async def same(instruction, question):
        return question

    out = asyncio.run(corrupt_question("How many stars?", None, None, 0, rewriter=same))
    step = next(s for s in out["chain"] if s["category"] == "sentence")
    assert step["skipped"] == "the rewriter returned the question unchanged"  # never silent
