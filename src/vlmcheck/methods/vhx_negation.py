"""VHExpansion's negation (paper section 3.1, Fig. 3): the prompt any ``TextModel`` is given, and the check every
negated question passes before it counts for symmetric accuracy, whoever negated it (``ref:negator`` or an LLM):
one well-formed question, exactly one added negation (or one "no" per replaced a/an, the paper's simple case),
every content word of the original kept.  A question with a context (MMVP's cases rewritten as yes/no) keeps its
context word for word; its last question is checked."""

from __future__ import annotations

import re

from ..core.questions import ARTICLE_RE, FUNCTION_WORDS, past, split_context, third_person

__all__ = ["NEGATION_PROMPT", "check_negation", "split_context"]

NEGATION_PROMPT = (
    "Rephrase the following question to be a negated question for the original question. The rephrase method "
    "is to add prefix \u2018Is it false\u2019 before the original question in a declarative sentence or change "
    "all occurrences of the \u201ca/an\u201d to \u201cno\u201d for simple cases. Below are the rules must be "
    "followed when rephrasing the question: DO NOT CHANGE OR ADD ANY INFORMATION to the sentence, such as the "
    "case of any letters except the first letter of the sentence, tenses, the order of clauses, pronouns, etc.. "
    "You should only return the rephrased question. The question is: {question}."
)


def _content(text: str) -> list[str]:
    stop = {"a", "an", "any", "no", "is", "are", "was", "were", "it", "false", "that", "does", "do", "did", "not"}
    toks = re.findall(r"[A-Za-z0-9']+", text)
    return [t.lower() for t in toks if t.lower() not in stop]


def check_negation(original: str, negated: str | None) -> dict:
    """Check a negated question (see the module docstring); returns {'ok': bool, 'problems': [...]}."""
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
    replaced = len(ARTICLE_RE.findall(original)) - len(ARTICLE_RE.findall(n))
    if new_neg - orig_neg != 1 and not (replaced >= 1 and new_neg - orig_neg == replaced):
        problems.append(f"expected exactly one added negation (or one per replaced a/an), found "
                        f"{new_neg - orig_neg}")
    before, after = _content(original), _content(n)
    after_set = set(after)
    inflected = {f(w) for w in before if w not in FUNCTION_WORDS for f in (third_person, past)}
    missing = [w for w in before if w not in after_set
               and (w in FUNCTION_WORDS or not ({past(w), third_person(w)} & after_set))]
    if missing:
        problems.append("content words lost: " + ", ".join(sorted(set(missing))))
    added = [w for w in after if w not in set(before) and w not in inflected]
    if added:
        problems.append("words added: " + ", ".join(sorted(set(added))))
    return {"ok": not problems, "problems": problems}
