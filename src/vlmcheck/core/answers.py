"""Classifying model answers: a malformed answer is recorded as such, not as an error."""

from __future__ import annotations

import re
from typing import Literal

from .roles import Generation

AnswerStatus = Literal["ok", "empty", "refusal", "truncated"]

REFUSAL_OPENING = re.compile(
    r"^\s*(i('| a)m sorry|sorry,|i can(no|')t (help|assist|provide|describe|comply)|i am unable|i'm unable|"
    r"i cannot|as an ai\b|i won'?t be able)",
    re.IGNORECASE,
)


def answer_status(gen: Generation) -> AnswerStatus:
    if gen.refusal or gen.finish_reason in ("refusal", "content_filter"):
        return "refusal"
    if not gen.text.strip():
        return "empty"
    if REFUSAL_OPENING.match(gen.text):
        return "refusal"
    if gen.finish_reason == "length":
        return "truncated"
    return "ok"
