"""How a ``ref:describer`` answers a question from its belief: yes/no, count, colour, shape, size, position,
text, arithmetic and code questions, with or without lettered options, each with a confidence; and asked without
its image (the blind control, :func:`blind_answer`), from its language prior only (docs/world.md).
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass

import numpy as np

from . import language as lang
from .knobs import Knobs, _uniforms
from .scene import (COLORS, POSITIONS, SHAPES, SIZES, Scene, SceneObject, canonical_text, describe_scene,
                    position_name)


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_FUNCS = {"max": max, "min": min, "abs": abs, "sum": sum, "len": len, "print": lambda *a: a[0] if a else None}


def evaluate(text: str) -> str | None:
    """Value of an arithmetic line ("3 x 4 =") or a one-line code snippet; None if not computable. A tiny AST
    interpreter (numbers, + - * / // % **, lists, max/min/abs/sum/len/print), not ``eval``: the text comes from
    an image."""
    src = text.strip().rstrip("=").strip()
    src = re.sub(r"(?<=\d)\s*[x×]\s*(?=\d)", " * ", src)
    if re.fullmatch(r"[A-Za-z_]\w*\s*=\s*.+", src):
        src = src.split("=", 1)[1].strip()
    try:
        value = _eval(ast.parse(src, mode="eval").body)
    except (SyntaxError, ValueError, TypeError, ZeroDivisionError, OverflowError):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value) if isinstance(value, (int, float)) else None


def _eval(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 10:
            raise ValueError("exponent too large")
        return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand)
    if isinstance(node, ast.List):
        return [_eval(e) for e in node.elts]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        return _FUNCS[node.func.id](*[_eval(a) for a in node.args])
    raise ValueError("unsupported expression")


@dataclass
class Answer:
    text: str  # what the model says
    value: str | None  # the normalised content, for matching options / continuations
    confidence: float  # belief that ``value`` is right
    kind: str = "value"  # value | yesno | number | none | claim


#: how an answer about one of the object's attributes is said
_SAYS = {"color": "{}.", "shape": "It is a {}.", "size": "It is {}.", "position": "It is in the {}."}


def _yes(flag: bool, conf: float) -> Answer:
    return Answer("Yes." if flag else "No.", "yes" if flag else "no", conf, "yesno")


class WorldAnswerer:
    """Answers questions from a belief (a :class:`Scene`) and its confidences."""

    def __init__(self, belief: Scene, conf: dict[int, float], text_conf: float, knobs: Knobs, key: str,
                 soft: bool = False) -> None:
        self.b, self.conf, self.text_conf, self.knobs, self.key = belief, conf, text_conf, knobs, key
        self.soft = soft  # a degraded reading: fall back on the closest object (see _matching)

    def _matching(self, q: lang.Question) -> list[int]:
        subj = q.subject
        pos = q.position if q.kind != "position_check" else None  # a position check asks for the position
        out = [i for i, o in enumerate(self.b.objects)
               if (subj is None or subj.matches(o)) and (pos is None or (o.row, o.col) == pos)]
        if out or not self.soft or q.kind in ("exists", "count_check", "position_check", "size_check"):
            return out
        # a degraded reading: shapes are the first thing blur and noise take, colours and places last; like a
        # model that is unsure, answer about the object that agrees with most of what was asked
        scores = [soft_match(subj, pos, o) for o in self.b.objects]
        best = max(scores, default=0.0)
        if best <= 0:
            return []
        if q.kind == "count":  # count what agrees with the question's colour (or shape), not one best guess
            return [i for i, s in enumerate(scores) if s >= 1.0 and s == best] or [int(np.argmax(scores))]
        return [i for i, s in enumerate(scores) if s == best]

    def _c(self, idx: list[int], default: float = 0.9) -> float:
        return min((self.conf.get(i, 0.8) for i in idx), default=default)

    def answer(self, q: lang.Question, question_text: str) -> Answer:
        ans = self._answer(q)
        if ans.kind == "yesno":
            flag = (ans.value == "yes") != q.negated
            if not flag and self.knobs.yes_bias > 0:
                u = _uniforms(self.knobs.seed, self.key, "yes", question_text.strip().lower()).random()
                flag = u < self.knobs.yes_bias
            ans = _yes(flag, ans.confidence)
        return ans

    def _answer(self, q: lang.Question) -> Answer:
        b = self.b
        k = q.kind
        if k == "describe":
            return Answer(describe_scene(b), None, 0.9)
        if k == "background":
            return Answer(f"The background is {b.background}.", b.background, 0.95)
        if k in ("text", "text_exists", "text_check", "compute", "compute_check"):
            return self._text_answer(q)
        idx = self._matching(q)
        if k == "exists":
            if q.subject is not None and (q.subject.count or 1) > 1 and q.subject.plural:
                return _yes(len(idx) >= q.subject.count, self._c(idx))
            return _yes(bool(idx), self._c(idx))
        if k == "count":
            n = len(idx)
            return Answer(str(n), str(n), float(np.clip(0.97 - 0.06 * n, 0.5, 0.97)), "number")
        if k == "count_check":
            return _yes(len(idx) == q.number, float(np.clip(0.95 - 0.05 * len(idx), 0.5, 0.95)))
        if not idx:
            if k in ("position_check", "size_check"):
                return _yes(False, 0.85)
            return Answer("I cannot find such an object in the image.", None, 0.5, "none")
        o, c = b.objects[idx[0]], self._c(idx[:1])
        if k in _SAYS:  # an attribute of the object: color, shape, size or position
            said = _SAYS[k].format(getattr(o, k))
            return Answer(said[:1].upper() + said[1:], getattr(o, k), c)
        if k == "position_check":
            return _yes(any((b.objects[i].row, b.objects[i].col) == q.position for i in idx), c)
        if k == "size_check":
            return _yes(any(b.objects[i].size == q.value for i in idx), c)
        return Answer("I do not understand the question.", None, 0.5, "none")

    def _text_answer(self, q: lang.Question) -> Answer:
        t = self.b.text
        c = float(np.clip(self.text_conf, 0.5, 0.99))
        if q.kind == "text_exists":
            return _yes(t is not None, 0.95)
        if q.kind == "text_check":
            return _yes(t is not None and q.value is not None and q.value.lower() in t.lower(), c)
        if t is None:
            return Answer("There is no text in the image.", None, 0.8, "none")
        if q.kind == "compute_check":
            return _yes(evaluate(t) == q.value, c * 0.95)
        if q.kind == "compute":
            v = evaluate(t)
            if v is None:
                return Answer(f'I read "{t}" but cannot compute a result from it.', None, 0.5, "none")
            return Answer(v, v, c * 0.95, "number")
        return Answer(f'The text says "{t}".', t, c)


def soft_match(subj: "lang.ObjectPhrase | None", pos: tuple[int, int] | None, o: SceneObject) -> float:
    """How much of an object phrase (and a position) an object agrees with: colour and position 1 each,
    shape 0.8, size 0.3; a stated attribute that disagrees counts nothing."""
    s = 0.0
    if subj is not None:
        s += (subj.color == o.color) * 1.0 + (subj.shape == o.shape) * 0.8 + (subj.size == o.size) * 0.3
    if pos is not None:
        s += ((o.row, o.col) == pos) * 1.0
    return s


def _option_matches(ans: Answer, option: str) -> bool:
    opt = option.strip().lower().rstrip(".")
    if ans.value is None:
        return False
    val = ans.value.lower()
    if ans.kind == "yesno":
        return lang.words(opt)[:1] == [val]
    if ans.kind == "number":
        nums = re.findall(r"-?\d+(?:\.\d+)?", opt) or [str(lang.NUMBERS[w]) for w in lang.words(opt)
                                                      if w in lang.NUMBERS and w not in ("a", "an")]
        return bool(nums) and nums[0] == val
    if ans.kind == "value" and val in POSITIONS:
        pos = lang.find_position(opt)
        return pos is not None and position_name(*pos) == val
    return canonical_text(val) == canonical_text(opt) or re.search(rf"\b{re.escape(val)}\b", opt) is not None


_YESNO = ("exists", "text_exists")
PRIOR = {"color": COLORS[0], "shape": SHAPES[0], "size": SIZES[0], "count": "1"}


def blind_answer(prompt: str, knobs: Knobs) -> str:
    """Yes/no: "yes" at its base rate of yes; colour, shape, size and count: the world's most common value
    (uniform draws: the first value; 1 to 3 objects of a kind: 1); options: the one that matches that guess."""
    q = lang.parse_question(prompt)
    if q.kind in _YESNO or q.kind.endswith("_check"):
        p_yes = 0.5 + knobs.yes_bias / 2
        return "Yes." if _uniforms("blind", prompt.strip().lower(), knobs.seed).random() < p_yes else "No."
    guess = PRIOR.get(q.kind)
    if q.options:
        hit = next(((letter, opt) for letter, opt in q.options if guess and guess in opt.lower()), q.options[0])
        return f"{hit[0]}. {hit[1]}"
    return guess if guess else "I cannot tell without the image."
