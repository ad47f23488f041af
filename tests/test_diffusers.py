"""The diffusers adapter on a tiny random pipeline loaded with from_pretrained."""

import asyncio

import numpy as np
import pytest

pytest.importorskip("diffusers")

from hf_tiny import build_tiny_sd  # noqa: E402

from vlmcheck import load_model  # noqa: E402

pytestmark = pytest.mark.slow  # a tiny diffusers pipeline built and run


def test_diffusers_generator_is_seeded(tmp_path):
    folder = build_tiny_sd(tmp_path)
    gen = load_model(f"diffusers:{folder}?steps=2&guidance=1.0&width=32&height=32&device=cpu", "generator")
    a = asyncio.run(gen.generate_image("a red cat", seed=1))
    b = asyncio.run(gen.generate_image("a red cat", seed=1))
    c = asyncio.run(gen.generate_image("a red cat", seed=2))
    assert a.size == (32, 32) and a.mode == "RGB"
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(c))
