"""English yes/no questions: the word lists and inflections shared by the rule-based negator (world/negator.py)
and VHExpansion's negation check (methods/vhx_negation.py), and the split of a question with a context."""

from __future__ import annotations

import re

DETS = {"the", "this", "that", "these", "those", "a", "an", "its", "their", "his", "her", "each", "every"}
FUNCTION_WORDS = DETS | {"of", "and", "or", "with", "for", "by", "as", "than", "there", "you", "it", "in", "on",
                          "at", "to", "from", "into", "onto", "over", "under", "above", "below", "near",
                          "next", "inside", "outside", "behind", "beside", "within", "between"}
ARTICLE_RE = re.compile(r"\b(a|an|any)\b", re.IGNORECASE)


def split_context(question: str) -> tuple[str, str]:
    """``(context, last question)``: an MMVP-style case asks its own question, then the yes/no one ("Are the
    wings open or closed? Is the answer 'Open'?"); the context is everything up to the last question's start
    (with its trailing space), "" for a one-sentence question."""
    q = question.strip()
    cut = max(q.rstrip("?").rstrip().rfind(mark) for mark in ("? ", ". "))
    return (q[:cut + 2], q[cut + 2:]) if cut >= 0 else ("", q)


def third_person(verb: str) -> str:
    v = verb.lower()
    if v == "have":
        return "has"
    if re.search(r"(s|sh|ch|x|z|o)$", v):
        return verb + "es"
    if re.search(r"[^aeiou]y$", v):
        return verb[:-1] + "ies"
    return verb + "s"


def past(verb: str) -> str:
    irregular = {"have": "had", "say": "said", "read": "read", "make": "made", "give": "gave", "hold": "held"}
    v = verb.lower()
    if v in irregular:
        return irregular[v]
    return verb + ("d" if v.endswith("e") else "ed")
