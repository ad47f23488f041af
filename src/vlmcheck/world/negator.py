"""``ref:negator``: rule-based negation of yes/no questions.

It follows the rules of the VHExpansion negation prompt (paper Fig. 3):
"change all occurrences of a/an to no for simple cases", otherwise "add the
prefix 'Is it false' before the original question in a declarative
sentence", and change nothing else.  Questions it cannot turn around (not a
yes/no question, no recognisable subject) get an answer saying so, never a
guess.

The paper's prompt and the check every negation passes, whoever negated it
(this model or an LLM), are VHExpansion's: methods/vhx_negation.py.
"""

from __future__ import annotations

import asyncio
import re

from ..core.messages import Message
from ..core.questions import ARTICLE_RE, DETS, FUNCTION_WORDS, past, split_context, third_person
from ..core.roles import Capabilities, Generation, GenerationConfig
from .ref_models import RefModel, generation

_BE = {"is", "are", "was", "were"}
_DO = {"does", "do", "did"}
_MODAL = {"can", "could", "will", "would", "should", "has", "have", "had", "may", "might", "must"}
_BOUNDARY = {
    "in", "on", "at", "under", "above", "below", "near", "next", "inside", "outside", "behind", "beside",
    "to", "from", "within", "between", "over", "into", "onto", "left", "right", "larger", "smaller", "bigger",
    "same", "different", "more", "less", "equal", "visible", "present", "shown", "written", "located",
    "placed", "drawn", "colored", "coloured", "large", "small", "big", "empty", "there", "both", "all",
    "part", "closer", "further", "facing", "open", "closed", "true", "correct",
}
_VERBS = {"show", "contain", "have", "depict", "say", "read", "print", "output", "return", "appear", "look",
          "include", "display", "mention", "equal", "hold", "feature", "seem", "exist", "make", "give"}


def negate_question(question: str) -> str | None:
    """The negated question by the paper's rules, or None if the rules do not apply.  Of a question with a
    context (:func:`split_context`) only the last, yes/no question is negated; the context is kept as it is."""
    context, last = split_context(question.strip().strip('"').strip())
    if context:
        neg = negate_question(last)
        return context + neg if neg else None
    words = last.rstrip("?").rstrip().rstrip(".").split()
    if len(words) < 2:
        return None
    first = words[0].lower()
    # simple case: "Is there a/an/any X ...?" -> "Is there no X ...?"; every a/an becomes no, as the paper's
    # prompt says ("change all occurrences of a/an to no"), e.g. "a cat and a dog" -> "no cat and no dog"
    if first in _BE and words[1].lower() == "there" and len(words) > 2 and words[2].lower() in ("a", "an", "any"):
        return f"{words[0]} there {ARTICLE_RE.sub('no', ' '.join(words[2:]))}?"
    if first in _BE and words[1].lower() == "there":
        return f"Is it false that there {first} {' '.join(words[2:])}?"
    if first not in _BE | _DO | _MODAL:
        return None
    subj, pred = _split_subject(words[1:], verb_follows=first not in _BE)
    if not subj or not pred:
        return None
    if first in _DO:  # "does X show" -> "X shows", "did X show" -> "X showed", "do X show" -> "X show"
        pred = [{"does": third_person, "did": past}.get(first, str)(pred[0])] + pred[1:]
    else:
        pred = [first] + pred
    return f"Is it false that {_lower_first(' '.join(subj))} {' '.join(pred)}?"


def _lower_first(s: str) -> str:
    # keep proper nouns and acronyms; only lower a leading determiner
    head, _, tail = s.partition(" ")
    return (head.lower() if head.lower() in DETS else head) + (" " + tail if tail else "")


def _split_subject(words: list[str], verb_follows: bool = False) -> tuple[list[str], list[str]]:
    """Split 'the red circle in the top left' into subject and predicate."""
    if not words:
        return [], []
    if verb_follows:
        # subject: everything before the first known verb; else determiner + up to three words
        for n in range(1, len(words)):
            if words[n].lower() in _VERBS:
                return words[:n], words[n:]
        if words[0].lower() in DETS:
            for n in range(2, min(5, len(words))):
                if words[n].lower() in _BOUNDARY | _VERBS:
                    return words[:n], words[n:]
            return words[:2], words[2:]
        return words[:1], words[1:]
    for i, w in enumerate(words):
        lw = w.lower().strip(",")
        # the predicate starts at a boundary word, a quote, a participle, or a determiner after a content word
        if i > 0 and (lw in _BOUNDARY or w[:1] in "'\"\u2018\u201c" or (lw.endswith("ed") and len(lw) > 4)
                      or (i > 1 and lw in DETS and words[i - 1].lower() not in FUNCTION_WORDS)):
            return words[:i], words[i:]
    return [], []


class RuleTextModel(RefModel):
    """A rule-based reference ``TextModel``: ``respond(prompt) -> text`` on the user turns, in a worker thread."""

    name, capabilities, max_concurrency = "rule", Capabilities(multi_image=False, seeded=True), 4

    def respond(self, prompt: str) -> str:
        raise NotImplementedError

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        prompt = " ".join(m.text for m in messages if m.role == "user")
        text = await asyncio.to_thread(self.respond, prompt)
        return generation(text, None, len(prompt.split()))


class RefNegator(RuleTextModel):
    """A ``TextModel`` that negates the question in a VHExpansion negation prompt."""

    name = "negator"

    def respond(self, prompt: str) -> str:
        m = re.search(r"the question is\s*:\s*(.+)$", prompt.strip(), re.I | re.S)
        question = (m.group(1) if m else prompt).strip()
        if question.endswith("."):  # after a "?" too
            question = question[:-1]
        neg = negate_question(question)
        return neg if neg else "I cannot negate this question: it is not a yes/no question I can rephrase."
