"""``ref:rewriter``: a rule-based stand-in for the LLM that ChEF's sentence-level text corruptions need.

ChEF Table 2's five sentence-level methods (passive, active, casual, formal,
back-translation) rewrite a question through a language model.  Offline there
is none, so this ``TextModel`` applies rules that keep the question's meaning
and its answer, for the question shapes vlmcheck's own data use and common
VQA phrasing:

* passive: "What colour is the X?" -> "What colour is shown for the X?",
  "Is there a X ...?" -> "Is a X shown ...?", "Which X is Y?" -> "Which X is
  seen to be Y?";
* active: the passive forms back, "Is X shown?" -> "Does the image show X?";
* casual: "Hey, quick one: " + the question with a lower-case opening;
* formal: "Could you please tell me: " + the question;
* back-translation: word swaps a round trip through another language makes
  (colour/color, picture/image, how many/what number of, located/placed ...).

When no rule applies, the question comes back unchanged and the corruption
chain records that the method changed nothing (it is never silent).
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


# (pattern over the question without its "?", the rewrite) - the first rule that matches applies
_PASSIVE = [
    (re.compile(r"(?i)^(is|are) there (a|an|any|some|\d+)\s+(.+?)(\s+(?:in|on) the (?:image|picture|photo))?$"),
     lambda m: f"{m.group(1).capitalize()} {m.group(2)} {m.group(3)} shown{m.group(4) or ''}?"),
    (re.compile(r"(?i)^what (colou?r|shape|size) (is|are) (the .+)$"),
     lambda m: f"What {m.group(1)} {m.group(2)} shown for {m.group(3)}?"),
    (re.compile(r"(?i)^does the (image|picture|photo) (show|contain) (.+)$"),
     lambda m: f"Is {m.group(3)} shown in the {m.group(1)}?"),
    (re.compile(r"(?i)^which (.+?) (is|are) (.+)$"),
     lambda m: f"Which {m.group(1)} {m.group(2)} seen to be {m.group(3)}?"),
]
_ACTIVE = [
    (re.compile(r"(?i)^(is|are) (a|an|any|some|\d+)\s+(.+?) shown(.*)$"),
     lambda m: f"Does the image show {m.group(2)} {m.group(3)}{m.group(4)}?"),
    (re.compile(r"(?i)^(is|are) there (.+?)(?:\s+(?:in|on) the (?:image|picture|photo))?$"),
     lambda m: f"Does the image contain {m.group(2)}?"),
    (re.compile(r"(?i)^what (colou?r|shape|size) (is|are) (the .+)$"),
     lambda m: f"What {m.group(1)} does {m.group(3)} have?"),
]


def _rewrite(q: str, rules: list) -> str:
    body = q.rstrip("?").rstrip()
    for pattern, build in rules:
        m = pattern.match(body)
        if m:
            return build(m)
    return q


def passive(q: str) -> str:
    return _rewrite(q, _PASSIVE)


def active(q: str) -> str:
    return _rewrite(q, _ACTIVE)


def casual(q: str) -> str:
    return f"Hey, quick one: {_lower_first(q.strip())}"


def formal(q: str) -> str:
    return f"Could you please tell me: {_lower_first(q.strip())}"


def back_translation(q: str) -> str:
    """Every listed word swapped once, in one pass (a swap's output is never swapped again)."""
    table = [(re.compile(p, re.IGNORECASE), r) for p, r in _BACK]
    combined = re.compile("|".join(f"(?:{p})" for p, _ in _BACK), re.IGNORECASE)

    def swap(m: re.Match) -> str:
        word = m.group(0)
        rep = next(r for pat, r in table if pat.fullmatch(word))
        return rep.capitalize() if word[:1].isupper() else rep

    return combined.sub(swap, q)


RULES = {"passive": passive, "active": active, "casual": casual, "formal": formal,
         "back_translation": back_translation}
# The instruction each rule answers (perturb.text.SENTENCE_PROMPTS), recognised by a key phrase.
_INSTRUCTION = [("passive voice", "passive"), ("active voice", "active"), ("casual", "casual"),
                ("formal style", "formal"), ("translate", "back_translation")]


class RefRewriter(RuleTextModel):
    """A ``TextModel`` answering ChEF's sentence-level rewriting prompts by rule."""

    name = "rewriter"

    def respond(self, prompt: str) -> str:
        m = re.search(r"question\s*:\s*(.+)$", prompt.strip(), re.I | re.S)
        question = (m.group(1) if m else prompt).strip()
        low = prompt.lower()
        for key, name in _INSTRUCTION:
            if key in low:
                return RULES[name](question)
        return question
