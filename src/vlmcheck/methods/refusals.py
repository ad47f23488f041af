"""Is a description a refusal?  One structural rule, no word count (GenCeption's ``refusal_rate``).

A text is a refusal when nothing descriptive is left once its clauses that open with a refusal phrase ("I'm
sorry", "I can't help ...", "As an AI" ...) or ask a question are removed (docs/methods.md); an answer with no
text at all is ``empty``.
"""

from __future__ import annotations

import re
from typing import Literal

from ..core.roles import Generation

RefusalKind = Literal["refusal", "empty"]

_OPENING = re.compile(
    r"^(?:i(?:'| a)m (?:so |very |really )?sorry|sorry\b|i apologi[sz]e|my apologies|unfortunately,? i|"
    r"i (?:can(?:no|')t|am unable to|'m unable to|am not able to|'m not able to|won'?t be able to|"
    r"am afraid i can(?:no|')t|'m afraid i can(?:no|')t|do not feel comfortable|don'?t feel comfortable)|"
    r"as an ai\b|i must decline|i will not|i won'?t)",
    re.IGNORECASE,
)
_CLAUSES = re.compile(r"(?<=[.!?;])\s+|;\s*|,?\s+but\s+|,\s*however,?\s+", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{2,}")


def descriptive_clauses(text: str) -> list[str]:
    """The clauses of ``text`` that are neither refusal phrases nor questions."""
    out = []
    for clause in _CLAUSES.split(text.strip()):
        clause = clause.strip(" \t\n\"'*-,.")
        if not clause or clause.endswith("?") or _OPENING.match(clause) or not _WORD.search(clause):
            continue
        out.append(clause)
    return out


def refusal_kind(g: Generation) -> RefusalKind | None:
    """``"empty"`` (no text), ``"refusal"`` (nothing descriptive once refusal clauses are removed) or None."""
    if not g.text.strip():
        return "empty"
    return None if descriptive_clauses(g.text) else "refusal"
