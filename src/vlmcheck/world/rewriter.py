"""``ref:rewriter``: a rule-based stand-in for the LLM that ChEF's sentence-level text corruptions need.

ChEF Table 2's five sentence-level methods (passive, active, casual, formal, back-translation) rewrite a question
through a language model. Offline there is none, so this ``TextModel`` applies rules that keep the question's
meaning and its answer, for the question shapes vlmcheck's own data use and common VQA phrasing (the rules
below; back-translation: the word swaps a round trip through another language makes). When no rule applies,
the question comes back unchanged and the corruption chain records that the method changed nothing.
"""

from __future__ import annotations

import re

from .negator import RuleTextModel

_BACK = [(r"\bcolou?r\b", "hue"), (r"\bimage\b", "picture"), (r"\bpicture\b", "photo"),
         (r"\bhow many\b", "what number of"), (r"\blocated\b", "placed"), (r"\bshown\b", "displayed"),
         (r"\bobject\b", "item"), (r"\bshape\b", "form"), (r"\bwritten\b", "printed"), (r"\bbig\b", "large"),
         (r"\bsmall\b", "little")]


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


# (pattern over the question without its "?", case ignored; the rewrite, its first word capitalised) - the
# first rule that matches applies
_PASSIVE = [
    (r"^(is|are) there (a|an|any|some|\d+)\s+(.+?)(\s+(?:in|on) the (?:image|picture|photo))?$", r"\1 \2 \3 shown\4?"),
    (r"^what (colou?r|shape|size) (is|are) (the .+)$", r"What \1 \2 shown for \3?"),
    (r"^does the (image|picture|photo) (show|contain) (.+)$", r"Is \3 shown in the \1?"),
    (r"^which (.+?) (is|are) (.+)$", r"Which \1 \2 seen to be \3?"),
]
_ACTIVE = [
    (r"^(is|are) (a|an|any|some|\d+)\s+(.+?) shown(.*)$", r"Does the image show \2 \3\4?"),
    (r"^(is|are) there (.+?)(?:\s+(?:in|on) the (?:image|picture|photo))?$", r"Does the image contain \2?"),
    (r"^what (colou?r|shape|size) (is|are) (the .+)$", r"What \1 does \3 have?"),
]


def _rewrite(q: str, rules: list[tuple[str, str]]) -> str:
    for pattern, template in rules:
        if m := re.match(pattern, q.rstrip("?").rstrip(), re.IGNORECASE):
            first, _, rest = m.expand(template).partition(" ")
            return f"{first.capitalize()} {rest}"
    return q


_BACK_RE = re.compile("|".join(f"({p})" for p, _ in _BACK), re.IGNORECASE)  # group i + 1: swap i


def back_translation(q: str) -> str:
    """Every listed word swapped once, in one pass (a swap's output is never swapped again)."""
    def swap(m: re.Match) -> str:
        rep = _BACK[m.lastindex - 1][1]
        return rep.capitalize() if m.group(0)[:1].isupper() else rep

    return _BACK_RE.sub(swap, q)


#: each rule by the instruction that asks for it (perturb.text.SENTENCE_PROMPTS), recognised by a key phrase
_RULES = {
    "passive voice": lambda q: _rewrite(q, _PASSIVE),
    "active voice": lambda q: _rewrite(q, _ACTIVE),
    "casual": lambda q: f"Hey, quick one: {_lower_first(q.strip())}",
    "formal style": lambda q: f"Could you please tell me: {_lower_first(q.strip())}",
    "translate": back_translation,
}


class RefRewriter(RuleTextModel):
    """A ``TextModel`` answering ChEF's sentence-level rewriting prompts by rule."""

    name = "rewriter"

    def respond(self, prompt: str) -> str:
        m = re.search(r"question\s*:\s*(.+)$", prompt.strip(), re.I | re.S)
        question = (m.group(1) if m else prompt).strip()
        return next((rule(question) for key, rule in _RULES.items() if key in prompt.lower()), question)
