"""``ref:paraphraser``: a rule-based stand-in for the LLM that rephrases VH questions for fine-tuning.

VHExpansion section 5.4 has GPT-4o "rephrase the questions four times for each VH test case, generating four
additional versions of each". Offline there is no LLM, so this ``TextModel`` answers :data:`PARAPHRASE_PROMPT`
with version ``i`` of ``k`` of the question, built by rules that keep its meaning and its yes/no answer
(:func:`paraphrase`). A version that would repeat an earlier one comes back unchanged; the dataset builder
records and skips it (never silent).
"""

from __future__ import annotations

import re

from .negator import RuleTextModel
from .rewriter import _lower_first

PARAPHRASE_PROMPT = (
    "Rephrase the following yes/no question in different words, without changing its meaning or its answer. "
    "This is version {version} of {k}: make it differ from the other versions. You should only return the "
    "rephrased question. The question is: {question}"
)

_SWAPS = [(r"\bimage\b", "picture"), (r"\bcolou?r\b", "hue"), (r"\bshown\b", "displayed"), (r"\bobject\b", "item"),
          (r"\bshape\b", "form"), (r"\bwritten\b", "printed"), (r"\bbig\b", "large"), (r"\bsmall\b", "little"),
          (r"\bphoto\b", "picture")]


def _swap(question: str) -> str:
    out = question
    for pattern, word in _SWAPS:
        out = re.sub(pattern, word, out, flags=re.IGNORECASE)
    return out


def paraphrase(question: str, version: int) -> str:
    """Version ``version`` (1-based) of ``question``: "Looking at the image, ", "Based on what you can see, ",
    the word swaps of a round trip through another language (else "In this picture, "), "Please answer yes or
    no. " + the question; from version 5 on the same four with the swaps applied."""
    q = question.strip()
    base = _swap(q) if version > 4 else q
    shape = (version - 1) % 4
    if shape == 0:
        return f"Looking at the image, {_lower_first(base)}"
    if shape == 1:
        return f"Based on what you can see, {_lower_first(base)}"
    if shape == 2:
        swapped = _swap(q)
        return swapped if swapped != q and version <= 4 else f"In this picture, {_lower_first(base)}"
    return f"Please answer yes or no. {base}"


class RefParaphraser(RuleTextModel):
    """A ``TextModel`` that answers :data:`PARAPHRASE_PROMPT`."""

    name = "paraphraser"

    def respond(self, prompt: str) -> str:
        m = re.search(r"version\s+(\d+)\s+of\s+(\d+).*?the question is\s*:\s*(.+)$", prompt.strip(), re.I | re.S)
        if not m:
            return "I can only rephrase a question given in the VHExpansion rephrasing prompt."
        return paraphrase(m.group(3).strip(), int(m.group(1)))
