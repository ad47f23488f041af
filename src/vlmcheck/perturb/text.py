"""Text corruptions of ChEF (supplementary Table 2), seeded and recorded; the categories: docs/perturbations.md.

The basic, sentence, word and character categories corrupt the question text, the choice category only the option
order (ChEF section C.5).  Sentence-level rewrites need a ``TextModel`` (an LLM rewrites the question); without one
they are skipped and the skip is recorded with its reason.  Every function takes a numpy Generator, so a recorded
seed regenerates the same corrupted input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Awaitable, Callable, Container

import numpy as np

# ----------------------------------------------------------------------------- word lists (ours)

CONTRACTIONS = {
    "is not": "isn't", "are not": "aren't", "do not": "don't", "does not": "doesn't", "did not": "didn't",
    "can not": "can't", "cannot": "can't", "will not": "won't", "would not": "wouldn't", "it is": "it's",
    "what is": "what's", "there is": "there's", "that is": "that's", "where is": "where's", "who is": "who's",
    "how is": "how's", "they are": "they're", "we are": "we're", "you are": "you're", "i am": "i'm",
    "has not": "hasn't", "have not": "haven't", "should not": "shouldn't", "could not": "couldn't",
}
EXPANSIONS = {v: k for k, v in CONTRACTIONS.items() if k != "can not"}

#: Synonyms that keep the meaning of a question about an image.
SYNONYMS = {
    "image": ["picture", "photo"], "picture": ["image", "photo"], "photo": ["picture", "image"],
    "show": ["display", "depict"], "shows": ["displays", "depicts"], "shown": ["displayed", "depicted"],
    "large": ["big"], "big": ["large"], "small": ["little"], "little": ["small"], "object": ["item", "thing"],
    "objects": ["items", "things"], "located": ["placed", "positioned"], "place": ["location", "spot"],
    "colour": ["color", "hue"], "color": ["colour", "hue"], "kind": ["type", "sort"], "type": ["kind", "sort"],
    "written": ["printed"], "text": ["writing", "words"], "many": ["numerous"], "visible": ["seen"],
    "contain": ["include", "hold"], "contains": ["includes", "holds"], "near": ["close to", "beside"],
    "answer": ["response", "reply"], "correct": ["right", "accurate"], "select": ["choose", "pick"],
    "choose": ["select", "pick"], "following": ["subsequent"], "describe": ["portray", "depict"],
    "find": ["locate", "spot"], "result": ["outcome"], "question": ["query"], "scene": ["setting", "view"],
    "person": ["individual"], "people": ["persons", "individuals"], "appear": ["seem"], "appears": ["seems"],
    "identify": ["recognize", "determine"], "main": ["primary", "principal"], "shape": ["form", "figure"],
    "top": ["upper"], "bottom": ["lower"], "center": ["middle", "centre"], "middle": ["center", "centre"],
}
ADVERBS = ["really", "actually", "clearly", "exactly", "basically", "truly", "simply", "indeed", "certainly",
           "honestly"]
IRRELEVANT = [
    "The weather has been pleasant this week.", "Many people enjoy a cup of tea in the afternoon.",
    "Trains in some countries run on time almost every day.", "Some birds migrate thousands of kilometres.",
    "The library opens at nine in the morning.", "Music can make long journeys feel shorter.",
]
OCR_CONFUSIONS = {"o": "0", "0": "o", "l": "1", "1": "l", "i": "l", "e": "c", "c": "e", "s": "5", "5": "s",
                  "b": "6", "g": "9", "z": "2", "a": "o", "u": "v", "m": "rn", "n": "h", "h": "b", "t": "f"}
COMMON_MISSPELLINGS = {
    "the": "teh", "which": "wich", "there": "thier", "their": "there", "what": "waht", "image": "imgae",
    "picture": "pciture", "color": "colr", "colour": "colur", "where": "wher", "object": "obejct",
    "objects": "obejcts", "many": "mnay", "written": "writen", "answer": "anwser", "following": "folowing",
    "question": "qeustion", "different": "diffrent", "separate": "seperate", "receive": "recieve",
    "position": "postion", "correct": "corect", "shape": "shpae", "large": "lrage", "small": "smal",
}
_QWERTY = {ch: (r, c) for r, row in enumerate(["qwertyuiop", "asdfghjkl", "zxcvbnm"]) for c, ch in enumerate(row)}
#: each key's neighbours on a QWERTY keyboard
KEYBOARD = {ch: "".join(sorted(o for o, (r2, c2) in _QWERTY.items() if o != ch and max(abs(r2 - r), abs(c2 - c)) <= 1))
            for ch, (r, c) in _QWERTY.items()}

# ----------------------------------------------------------------------------- methods

_WORD = re.compile(r"[A-Za-z]+")


def _keep_case(src: str, new: str) -> str:
    if src.isupper() and len(src) > 1:
        return new.upper()
    if src[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


def lowercase(text: str, severity: int, rng: np.random.Generator) -> str:
    return text.lower()


def contraction_expansion(text: str, severity: int, rng: np.random.Generator) -> str:
    """Contract what can be contracted; if nothing can, expand contractions."""
    out = text
    for long, short in CONTRACTIONS.items():
        out = re.sub(rf"\b{long}\b", lambda m: _keep_case(m.group(0), short), out, flags=re.I)
    if out != text:
        return out
    for short, long in EXPANSIONS.items():
        out = re.sub(rf"\b{re.escape(short)}(?![\w'])", lambda m: _keep_case(m.group(0), long), out, flags=re.I)
    return out


_SHARE = [0.1, 0.2, 0.3, 0.4, 0.5]


def _word_edit(edit: Callable[[str, np.random.Generator], str],
               eligible: Callable[[str], bool] = lambda w: len(w) >= 3) -> Callable:
    """A corruption that applies ``edit`` to a share of the eligible words (10% at severity 1 .. 50% at 5)."""
    def fn(text: str, severity: int, rng: np.random.Generator) -> str:
        matches = [m for m in _WORD.finditer(text) if eligible(m.group(0))]
        if not matches:
            return text
        k = min(max(1, int(round(_SHARE[severity - 1] * len(matches)))), len(matches))
        chosen = {matches[i].start() for i in rng.choice(len(matches), size=k, replace=False)}
        return _WORD.sub(lambda m: edit(m.group(0), rng) if m.start() in chosen else m.group(0), text)
    return fn


def insert_adverb(text: str, severity: int, rng: np.random.Generator) -> str:
    """Insert one adverb before the first verb-like word (is/are/does/do/can/...), else after the first word."""
    m = re.search(r"\b(is|are|does|do|can|was|were|has|have)\b", text, re.I)
    adv = str(rng.choice(ADVERBS))
    if m and m.start() > 0:
        return text[:m.end()] + f" {adv}" + text[m.end():]
    head, _, tail = text.partition(" ")
    return f"{head} {adv} {tail}"


def add_irrelevant(text: str, severity: int, rng: np.random.Generator) -> str:
    sentence = str(rng.choice(IRRELEVANT))
    return f"{sentence} {text}" if rng.random() < 0.5 else f"{text} {sentence}"


def _edit_letter(word: str, rng: np.random.Generator, letters: Container[str], new: Callable[[str], str]) -> str:
    """``word`` with one of its ``letters`` (lowercased), drawn at random, replaced by ``new(letter)``."""
    idx = [i for i, ch in enumerate(word.lower()) if ch in letters]
    if not idx:
        return word
    i = int(rng.choice(idx))
    return word[:i] + new(word[i]) + word[i + 1:]


def _ocr(word: str, rng: np.random.Generator) -> str:
    return _edit_letter(word, rng, OCR_CONFUSIONS, lambda ch: OCR_CONFUSIONS[ch.lower()])


def _typo(word: str, rng: np.random.Generator) -> str:
    i = int(rng.integers(len(word) - 1))
    op = int(rng.integers(3))
    if op == 0:  # swap neighbours
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if op == 1:  # drop a letter
        return word[:i] + word[i + 1:]
    return word[:i + 1] + word[i] + word[i + 1:]  # double a letter


def _spelling(word: str, rng: np.random.Generator) -> str:
    known = COMMON_MISSPELLINGS.get(word.lower())
    if known:
        return _keep_case(word, known)
    return _edit_letter(word, rng, "aeiou",
                        lambda ch: _keep_case(ch, str(rng.choice([v for v in "aeiou" if v != ch.lower()]))))


def _keyboard(word: str, rng: np.random.Generator) -> str:
    return _edit_letter(word, rng, KEYBOARD, lambda ch: _keep_case(ch, str(rng.choice(list(KEYBOARD[ch.lower()])))))


# ----------------------------------------------------------------------------- options


def circular_options(options: list[str], answer: int, rng: np.random.Generator) -> tuple[list[str], int, dict]:
    k = int(rng.integers(1, len(options))) if len(options) > 1 else 0
    return options[k:] + options[:k], (answer - k) % len(options), {"shift": k}


def reverse_options(options: list[str], answer: int, rng: np.random.Generator) -> tuple[list[str], int, dict]:
    return list(reversed(options)), len(options) - 1 - answer, {}


# ----------------------------------------------------------------------------- sentence level (LLM)

SENTENCE_PROMPTS = {
    "passive": "Rewrite the following question in the passive voice. Keep its meaning; return only the question.",
    "active": "Rewrite the following question in the active voice. Keep its meaning; return only the question.",
    "casual": "Rewrite the following question in a casual, informal style. Keep its meaning; return only the "
              "question.",
    "formal": "Rewrite the following question in a formal style. Keep its meaning; return only the question.",
    "back_translation": "Translate the following question into German and then back into English. Return only "
                        "the final English question.",
}


@dataclass(frozen=True)
class TextMethod:
    name: str
    category: str
    severities: int
    fn: Callable | None  # None: sentence-level, needs a TextModel


TEXT_METHODS: dict[str, TextMethod] = {m.name: m for m in [
    TextMethod("lowercase", "basic", 1, lowercase),
    TextMethod("contraction_expansion", "basic", 1, contraction_expansion),
    *[TextMethod(n, "sentence", 1, None) for n in SENTENCE_PROMPTS],
    TextMethod("swap_synonym", "word", 5, _word_edit(lambda w, rng: _keep_case(w, str(rng.choice(SYNONYMS[w.lower()]))),
                                                     lambda w: w.lower() in SYNONYMS)),
    TextMethod("insert_adverb", "word", 1, insert_adverb),
    TextMethod("add_irrelevant", "word", 1, add_irrelevant),
    *[TextMethod(name, "character", 5, _word_edit(edit)) for name, edit in
      (("ocr", _ocr), ("typos", _typo), ("spelling_error", _spelling), ("keyboard", _keyboard))],
    TextMethod("circular_options", "choice", 1, circular_options),
    TextMethod("reverse_options", "choice", 1, reverse_options),
]}
#: the categories in ChEF's order, each applying one random method or all of them in turn
TEXT_STRATEGY = {"basic": "sequential", "sentence": "random", "word": "random", "character": "random",
                 "choice": "random"}

Rewriter = Callable[[str, str], Awaitable[str]]  # (instruction, question) -> rewritten question


async def corrupt_question(question: str, options: list[str] | None, answer: int | None, seed: int,
                           rewriter: Rewriter | None = None) -> dict:
    """ChEF's composite text corruption of one multiple-choice item: ``{"question", "options", "answer", "chain"}``,
    ``chain`` listing every step with its method, severity and parameters, or why it was skipped."""
    rng = np.random.default_rng(seed)
    chain: list[dict] = []
    q, opts, ans = question, list(options or []), answer
    for cat, strategy in TEXT_STRATEGY.items():
        methods = [m for m in TEXT_METHODS.values() if m.category == cat]
        picked = methods if strategy == "sequential" else [methods[int(rng.integers(len(methods)))]]
        for m in picked:
            sev = int(rng.integers(1, m.severities + 1))
            step = {"method": m.name, "category": cat, "severity": sev}
            if cat == "sentence" and rewriter is None:
                step["skipped"] = "no TextModel given: sentence-level rewriting needs an LLM (metric.rewriter)"
            elif cat == "sentence":
                new = (await rewriter(SENTENCE_PROMPTS[m.name], q)).strip()
                if not new or new == q:
                    step["skipped"] = "the rewriter returned the question unchanged"
                else:
                    step["from"], q = q, new
            elif cat == "choice" and (len(opts) < 2 or ans is None):
                step["skipped"] = "not a multiple-choice item"
            elif cat == "choice":
                opts, ans, params = m.fn(opts, ans, rng)
                step.update(params)
            else:
                q = m.fn(q, sev, rng)
            chain.append(step)
    return {"question": q, "options": opts, "answer": ans, "chain": chain}
