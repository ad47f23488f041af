"""Classifying model answers: a malformed answer is recorded as such, not as an error."""

from __future__ import annotations

import re
from typing import Literal

from .roles import Generation

AnswerStatus = Literal["ok", "empty", "refusal", "truncated"]

REFUSAL_OPENING = re.compile(r"^\s*(i('| a)m sorry|sorry,|i can(no|')t (help|assist|provide|describe|comply)|"
                             r"i am unable|i'm unable|i cannot|as an ai\b|i won'?t be able)", re.IGNORECASE)


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


#: how a yes/no answer is read, declared by the method (ChEF's recipe: ``metric.parser``): "lenient" is POPE's rule
#: as the paper writes it (the first sentence, its words in any case); "pope" is POPE's ``evaluate.py`` exactly (the
#: text before the first '.', commas removed, split on single spaces, the words "No", "no", "not" as written)
YesNoRule = Literal["lenient", "pope"]
_FIRST_SENTENCE = re.compile(r"(?<=[.!?])\s|\n")


def read_yes_no(text: str, rule: YesNoRule = "lenient") -> Literal["yes", "no"] | None:
    """A model's yes/no answer: "no" when the part the rule reads says no or not, "yes" when it says yes (or a no
    only in a form the rule does not take: POPE's code reads "NO" and "No!" as yes), None when it holds none of
    yes, no, not (unread).  POPE scores an unread answer "yes" (``read_yes_no(t) or "yes"``); the methods count
    them besides."""
    if rule == "pope":
        part = text.split(".")[0]
        if {"No", "no", "not"} & set(part.replace(",", "").split(" ")):
            return "no"
        words = set(re.findall(r"[a-z]+", part.lower()))
    else:
        words = set(re.findall(r"[a-z]+", _FIRST_SENTENCE.split(text.strip(), maxsplit=1)[0].lower()))
        if words & {"no", "not"}:
            return "no"
    return "yes" if words & {"yes", "no", "not"} else None


# Opening and closing markers of a reasoning block, as reasoning models emit them: DeepSeek-R1 / Qwen3 / QwQ
# (<think>), Claude-style and other fine-tunes (<thinking>, <reasoning>), Open-Thoughts / Bespoke
# (<|begin_of_thought|>), Kimi-VL-Thinking (◁think▷).  Matched case-insensitively.
_REASONING_TAGS = [
    (r"<think>", r"</think>"),
    (r"<thinking>", r"</thinking>"),
    (r"<reasoning>", r"</reasoning>"),
    (r"<\|begin_of_thought\|>", r"<\|end_of_thought\|>"),
    (r"◁think▷", r"◁/think▷"),
]
_BLOCK = re.compile("|".join(f"(?:{o}(.*?){c})" for o, c in _REASONING_TAGS), re.IGNORECASE | re.DOTALL)
_CLOSE = re.compile("|".join(c for _, c in _REASONING_TAGS), re.IGNORECASE)
_OPEN = re.compile("|".join(o for o, _ in _REASONING_TAGS), re.IGNORECASE)
_SOLUTION = re.compile(r"<\|begin_of_solution\|>(.*?)(?:<\|end_of_solution\|>|$)", re.IGNORECASE | re.DOTALL)


def split_reasoning(text: str) -> tuple[str, str | None]:
    """(final answer, reasoning) of a model's text.

    Every closed reasoning block is removed from the answer.  A closing tag without an opening one (chat
    templates that put ``<think>`` into the prompt, as DeepSeek-R1's does) makes everything before it
    reasoning; an opening tag that is never closed (the budget ran out mid-thought) makes everything after
    it reasoning, and the answer is what came before it (usually nothing).
    """
    if not text or ("<" not in text and "◁" not in text):
        return text, None
    parts: list[str] = []

    def keep(m: re.Match) -> str:
        parts.append(next(g for g in m.groups() if g is not None).strip())
        return ""

    answer = _BLOCK.sub(keep, text)
    close = _CLOSE.search(answer)
    if close:  # a closing tag left: its opening was in the prompt
        parts.insert(0, answer[:close.start()].strip())
        answer = answer[close.end():]
    opened = _OPEN.search(answer)
    if opened:  # never closed: cut off while thinking
        parts.append(answer[opened.end():].strip())
        answer = answer[:opened.start()]
    solution = _SOLUTION.search(answer)
    if solution:
        answer = solution.group(1)
    if not parts and solution is None:
        return text, None
    reasoning = "\n\n".join(p for p in parts if p) or None
    return answer.strip(), reasoning
