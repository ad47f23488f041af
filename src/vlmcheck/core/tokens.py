"""Token counts of a request as providers bill them, for cost estimates (run/estimate.py) and the fake server's
usage (testing/fake_openai.py --usage openai)."""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 4  # OpenAI's rule of thumb for English text


def image_tokens(width: int, height: int, rule: str = "openai") -> int:
    """Input tokens of one image by the provider's documented rule (docs/usage.md, "Tokens"): ``openai`` (high
    detail: fit in 2048 px, the short side down to 768, 170 per 512-px tile plus 85), ``anthropic`` (w x h / 750,
    the long edge fitted in 1568 px), ``gemini`` (258 up to 384 px each way, else 258 per 768-px tile)."""
    w, h = float(width), float(height)
    if rule == "anthropic":
        s = min(1.0, 1568 / max(w, h))
        return int(round(w * s * h * s / 750))
    if rule == "gemini":
        if w <= 384 and h <= 384:
            return 258
        return 258 * math.ceil(w / 768) * math.ceil(h / 768)
    s = min(1.0, 2048 / max(w, h))
    w, h = w * s, h * s
    s = min(1.0, 768 / min(w, h))
    w, h = w * s, h * s
    return 170 * math.ceil(w / 512) * math.ceil(h / 512) + 85


def text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0
