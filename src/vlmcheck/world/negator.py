"""``ref:negator``: rule-based negation of yes/no questions, and the negation check.

It follows the rules of the VHExpansion negation prompt (paper Fig. 3):
"change all occurrences of a/an to no for simple cases", otherwise "add the
prefix 'Is it false' before the original question in a declarative
sentence", and change nothing else.  Questions it cannot turn around (not a
yes/no question, no recognisable subject) get an answer saying so, never a
guess.

:func:`check_negation` is used for every negated question, whoever negated
it (this model or an LLM): the result must be one well-formed question, carry
exactly one added negation, and keep every content word of the original.
"""

from __future__ import annotations

import asyncio
import re

from ..core.messages import Message
from ..core.roles import Capabilities, Generation, GenerationConfig, Usage
from ..core.spec import ModelSpec

NEGATION_PROMPT = (
    "Rephrase the following question to be a negated question for the original question. The rephrase method "
    "is to add prefix \u2018Is it false\u2019 before the original question in a declarative sentence or change "
    "all occurrences of the \u201ca/an\u201d to \u201cno\u201d for simple cases. Below are the rules must be "
    "followed when rephrasing the question: DO NOT CHANGE OR ADD ANY INFORMATION to the sentence, such as the "
    "case of any letters except the first letter of the sentence, tenses, the order of clauses, pronouns, etc.. "
    "You should only return the rephrased question. The question is: {question}."
)

_BE = {"is", "are", "was", "were"}
_DO = {"does", "do", "did"}
_MODAL = {"can", "could", "will", "would", "should", "has", "have", "had", "may", "might", "must"}
_DETS = {"the", "this", "that", "these", "those", "a", "an", "its", "their", "his", "her", "each", "every"}
_BOUNDARY = {
    "in", "on", "at", "under", "above", "below", "near", "next", "inside", "outside", "behind", "beside",
    "to", "from", "within", "between", "over", "into", "onto", "left", "right", "larger", "smaller", "bigger",
    "same", "different", "more", "less", "equal", "visible", "present", "shown", "written", "located",
    "placed", "drawn", "colored", "coloured", "large", "small", "big", "empty", "there", "both", "all",
    "part", "closer", "further", "facing", "open", "closed", "true", "correct",
}
_FUNCTION_WORDS = _DETS | {"of", "and", "or", "with", "for", "by", "as", "than", "there", "you", "it", "in", "on",
                            "at", "to", "from", "into", "onto", "over", "under", "above", "below", "near",
                            "next", "inside", "outside", "behind", "beside", "within", "between"}
_ARTICLE_RE = re.compile(r"\b(a|an|any)\b", re.IGNORECASE)


def split_context(question: str) -> tuple[str, str]:
    """``(context, last question)``: an MMVP-style case asks its own question, then the yes/no one ("Are the
    wings open or closed? Is the answer 'Open'?"); the context is everything up to the last question's start
    (with its trailing space), "" for a one-sentence question."""
    q = question.strip()
    cut = max(q.rstrip("?").rstrip().rfind(mark) for mark in ("? ", ". "))
    return (q[:cut + 2], q[cut + 2:]) if cut >= 0 else ("", q)


def negate_question(question: str) -> str | None:
    """The negated question by the paper's rules, or None if the rules do not apply.  Of a question with a
    context (:func:`split_context`) only the last, yes/no question is negated; the context is kept as it is."""
    context, last = split_context(question.strip().strip('"').strip())
    if context:
        neg = negate_question(last)
        return context + neg if neg else None
    q = last
    body = q.rstrip("?").rstrip().rstrip(".")
    words = body.split()
    if len(words) < 2:
        return None
    first = words[0].lower()
    # simple case: "Is there a/an/any X ...?" -> "Is there no X ...?"; every a/an becomes no, as the paper's
    # prompt says ("change all occurrences of a/an to no"), e.g. "a cat and a dog" -> "no cat and no dog"
    if first in _BE and words[1].lower() == "there" and len(words) > 2 and words[2].lower() in ("a", "an", "any"):
        rest = " ".join(words[2:])
        return f"{words[0]} there {_ARTICLE_RE.sub('no', rest)}?"
    if first in _BE and words[1].lower() == "there":
        return f"Is it false that there {first} {' '.join(words[2:])}?"
    if first in _BE:
        subj, pred = _split_subject(words[1:])
        if not subj or not pred:
            return None
        return f"Is it false that {_lower_first(' '.join(subj))} {first} {' '.join(pred)}?"
    if first in _DO:
        subj, pred = _split_subject(words[1:], verb_follows=True)
        if not subj or not pred:
            return None
        verb = pred[0]
        if first == "does":
            verb = _third_person(verb)
        elif first == "did":
            verb = _past(verb)
        return f"Is it false that {_lower_first(' '.join(subj))} {' '.join([verb] + pred[1:])}?"
    if first in _MODAL:
        subj, pred = _split_subject(words[1:], verb_follows=True)
        if not subj or not pred:
            return None
        return f"Is it false that {_lower_first(' '.join(subj))} {first} {' '.join(pred)}?"
    return None


def _lower_first(s: str) -> str:
    # keep proper nouns and acronyms; only lower a leading determiner
    head, _, tail = s.partition(" ")
    return (head.lower() if head.lower() in _DETS else head) + (" " + tail if tail else "")


def _split_subject(words: list[str], verb_follows: bool = False) -> tuple[list[str], list[str]]:
    """Split 'the red circle in the top left' into subject and predicate."""
    if not words:
        return [], []
    if verb_follows:
        # subject: everything before the first known verb; else determiner + up to three words
        for n in range(1, len(words)):
            if _looks_like_verb(words[n]):
                return words[:n], words[n:]
        if words[0].lower() in _DETS:
            for n in range(2, min(5, len(words))):
                if words[n].lower() in _BOUNDARY or _looks_like_verb(words[n]):
                    return words[:n], words[n:]
            return words[:2], words[2:]
        return words[:1], words[1:]
    for i, w in enumerate(words):
        lw = w.lower().strip(",")
        if i > 0 and (lw in _BOUNDARY or w[:1] in "'\"\u2018\u201c" or (lw.endswith("ed") and len(lw) > 4) or (i > 1 and lw in _DETS and words[i - 1].lower() not in _FUNCTION_WORDS)):
            return words[:i], words[i:]
    return [], []


_VERBS = {"show", "contain", "have", "depict", "say", "read", "print", "output", "return", "appear", "look",
          "include", "display", "mention", "equal", "hold", "feature", "seem", "exist", "make", "give"}


def _looks_like_verb(w: str) -> bool:
    return w.lower() in _VERBS


def _third_person(verb: str) -> str:
    v = verb.lower()
    if v == "have":
        return "has"
    if re.search(r"(s|sh|ch|x|z|o)$", v):
        return verb + "es"
    if re.search(r"[^aeiou]y$", v):
        return verb[:-1] + "ies"
    return verb + "s"


def _past(verb: str) -> str:
    irregular = {"have": "had", "say": "said", "read": "read", "make": "made", "give": "gave", "hold": "held"}
    v = verb.lower()
    if v in irregular:
        return irregular[v]
    return verb + ("d" if v.endswith("e") else "ed")


def _content(text: str) -> list[str]:
    stop = {"a", "an", "any", "no", "is", "are", "was", "were", "it", "false", "that", "does", "do", "did", "not"}
    toks = re.findall(r"[A-Za-z0-9']+", text)
    return [t.lower() for t in toks if t.lower() not in stop]


def check_negation(original: str, negated: str | None) -> dict:
    """Check a negated question; returns {'ok': bool, 'problems': [...]} (empty when ok).  A question with a
    context (:func:`split_context`, MMVP's rewritten cases) must keep its context word for word; only its last,
    yes/no question is checked as a negation."""
    problems: list[str] = []
    if not negated or not negated.strip():
        return {"ok": False, "problems": ["no negated question"]}
    n = negated.strip()
    context, last = split_context(original)
    if context:
        if not n.startswith(context.strip()):
            return {"ok": False, "problems": ["the question before the yes/no question was changed"]}
        original, n = last, n[len(context.strip()):].strip()
    if not n.endswith("?"):
        problems.append("does not end with '?'")
    if not n[:1].isupper():
        problems.append("does not start with a capital letter")
    if n.count("?") > 1 or "\n" in n:
        problems.append("more than one sentence")
    orig_neg = len(re.findall(r"\b(no|not|false|never|none)\b", original, re.I))
    new_neg = len(re.findall(r"\b(no|not|false|never|none)\b", n, re.I))
    # one added negation, or - the paper's simple case - one "no" for each a/an it replaced
    replaced = len(_ARTICLE_RE.findall(original)) - len(_ARTICLE_RE.findall(n))
    if new_neg - orig_neg != 1 and not (replaced >= 1 and new_neg - orig_neg == replaced):
        problems.append(f"expected exactly one added negation (or one per replaced a/an), found "
                        f"{new_neg - orig_neg}")
    before, after = _content(original), _content(n)
    after_set = set(after)
    inflected = {f(w) for w in before if w not in _FUNCTION_WORDS for f in (_third_person, _past)}
    missing = [w for w in before if w not in after_set
               and (w in _FUNCTION_WORDS or not ({_past(w), _third_person(w)} & after_set))]
    if missing:
        problems.append("content words lost: " + ", ".join(sorted(set(missing))))
    added = [w for w in after if w not in set(before) and w not in inflected]
    if added:
        problems.append("words added: " + ", ".join(sorted(set(added))))
    return {"ok": not problems, "problems": problems}


class RuleTextModel:
    """A rule-based reference ``TextModel``: ``respond(prompt) -> text`` on the user turns, in a worker thread."""

    name = "rule"

    def __init__(self, spec: ModelSpec | None = None) -> None:
        self.model_id = spec.canonical() if spec else f"ref:{self.name}"
        self.capabilities = Capabilities(multi_image=False, seeded=True)
        self.concurrency_key = f"ref:{self.name}"
        self.max_concurrency = 4

    def respond(self, prompt: str) -> str:
        raise NotImplementedError

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        prompt = " ".join(m.text for m in messages if m.role == "user")
        text = await asyncio.to_thread(self.respond, prompt)
        return Generation(text=text, finish_reason="stop",
                          usage=Usage(input_tokens=len(prompt.split()), output_tokens=len(text.split())))


class RefNegator(RuleTextModel):
    """A ``TextModel`` that negates the question in a VHExpansion negation prompt."""

    name = "negator"

    def respond(self, prompt: str) -> str:
        m = re.search(r"the question is\s*:\s*(.+)$", prompt.strip(), re.I | re.S)
        question = (m.group(1) if m else prompt).strip()
        if question.endswith("?.") or question.endswith("."):
            question = question[:-1]
        neg = negate_question(question)
        return neg if neg else "I cannot negate this question: it is not a yes/no question I can rephrase."


def make_negator(spec: ModelSpec, role: str) -> RefNegator:
    return RefNegator(spec)
