"""``ref:describer``: a reference VLM that sees only pixels.

It perceives a world scene with :func:`~vlmcheck.world.perceive.perceive`
(never the scene graph), then applies its *error knobs* to what it saw, then
answers from that belief:

* describe an image (any prompt that asks for a description, e.g. GenCeption's
  P_Desc) with the canonical description of its belief;
* yes/no, count, colour, shape, size, position, text, arithmetic and code
  questions, with or without lettered options;
* ``loglikelihood`` of answer continuations, with confidences taken from the
  perception margins (so they are neither all 0 nor all 1, and errors made
  by the knobs stay confidently wrong, as in real models);
* CAST: list similarities between two scenes, and judge a statement about two
  scenes, given as descriptions (text), as images (one side-by-side image or
  two images), or both.

Error knobs (spec parameters, probabilities in [0, 1]): ``omit`` (drop an
object), ``hallucinate`` (per empty cell, add an object), ``confuse``
(colour), ``misplace`` (move to a free cell), ``misread`` (one character of
the text), ``yes_bias`` (say yes when it believes no); ``level=L`` sets them
all at once (omit=confuse=misread=yes_bias=L, hallucinate=misplace=L/2);
``seed`` picks which objects are affected.  The random draws are fixed per
image and object, so raising a knob only adds errors to those of a lower
setting: models of one family are strictly ordered by quality.

On an image that is not a world scene (a photograph) it falls back to a
pipeline description: EfficientNet-Lite0 labels, OCR text, dominant colours.
When it does not understand a request it says so, like a weak model would.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import hashlib
import math
import operator
import re
from dataclasses import dataclass

import numpy as np
from PIL import Image

from ..core.messages import Message
from ..core.roles import Capabilities, Generation, GenerationConfig, Loglikelihood, Usage
from ..core.spec import ModelSpec, SpecError
from . import language as lang
from .perceive import Perceived, perceive, read_photo_text
from .scene import COLORS, SHAPES, SIZES, Scene, SceneObject, canonical_text, describe_scene, position_name

KNOBS = ("omit", "hallucinate", "confuse", "misplace", "misread", "yes_bias")


@dataclass(frozen=True)
class Knobs:
    omit: float = 0.0
    hallucinate: float = 0.0
    confuse: float = 0.0
    misplace: float = 0.0
    misread: float = 0.0
    yes_bias: float = 0.0
    seed: int = 0

    @classmethod
    def from_params(cls, params: dict[str, str]) -> "Knobs":
        unknown = set(params) - set(KNOBS) - {"level", "seed", "concurrency", "robust"}
        if unknown:
            raise SpecError(f"ref:describer: unknown parameter(s) {sorted(unknown)}; known: "
                            f"{', '.join(KNOBS)}, level, seed, robust")
        values: dict[str, float] = {}
        if "level" in params:
            lv = float(params["level"])
            values = {"omit": lv, "hallucinate": lv / 2, "confuse": lv, "misplace": lv / 2, "misread": lv,
                      "yes_bias": lv}
        for k in KNOBS:
            if k in params:
                values[k] = float(params[k])
        for k, v in values.items():
            if not 0.0 <= v <= 1.0:
                raise SpecError(f"ref:describer: {k}={v} is not a probability in [0, 1]")
        return cls(**values, seed=int(params.get("seed", 0)))


def _uniforms(*key) -> np.random.Generator:
    digest = hashlib.sha256(repr(key).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def apply_knobs(p: Perceived, knobs: Knobs, image_key: str) -> tuple[Scene, dict[int, float]]:
    """The describer's belief: what it perceived, with its errors applied.

    Every decision uses draws fixed by (seed, image, object, knob), so errors
    at a higher setting include those at a lower one.
    """
    scene = p.scene
    objs: list[SceneObject] = []
    conf: list[float] = []
    moves: list[float] = []
    for i, o in enumerate(scene.objects):
        rng = _uniforms(knobs.seed, image_key, "obj", o.row, o.col)
        u_omit, u_conf, u_move = rng.random(3)
        new_color = COLORS[(COLORS.index(o.color) + 1 + int(rng.integers(len(COLORS) - 1))) % len(COLORS)]
        if u_omit < knobs.omit:
            continue
        if u_conf < knobs.confuse:
            o = o.model_copy(update={"color": new_color})
        objs.append(o)
        conf.append(p.confidence.get(i, 0.8))
        moves.append(u_move)
    # misplace after omission, into cells that are free in the belief
    rows = 2 if scene.text else 3
    for i, (o, u_move) in enumerate(zip(list(objs), moves)):
        if u_move < knobs.misplace:
            used = {(x.row, x.col) for x in objs}
            free = [(r, c) for r in range(rows) for c in range(3) if (r, c) not in used]
            if free:
                r, c = free[int(_uniforms(knobs.seed, image_key, "move", o.row, o.col).integers(len(free)))]
                objs[i] = o.model_copy(update={"row": r, "col": c})
    used = {(x.row, x.col) for x in objs}
    for r in range(rows):
        for c in range(3):
            rng = _uniforms(knobs.seed, image_key, "cell", r, c)
            u = rng.random()
            shape, color, size = SHAPES[rng.integers(len(SHAPES))], COLORS[rng.integers(len(COLORS))], \
                SIZES[rng.integers(2)]
            if (r, c) not in used and u < knobs.hallucinate:
                objs.append(SceneObject(shape=shape, color=color, size=size, row=r, col=c))
                conf.append(0.8)
    text = scene.text
    if text:
        rng = _uniforms(knobs.seed, image_key, "text")
        u, pos, alt = rng.random(), int(rng.integers(len(text))), int(rng.integers(1, 9))
        if u < knobs.misread:
            text = _misread(text, pos, alt)
    order = sorted(range(len(objs)), key=lambda k: (objs[k].row, objs[k].col))
    belief = Scene(background=scene.background, objects=[objs[k] for k in order], text=text)
    return belief, {n: conf[k] for n, k in enumerate(order)}


def _misread(text: str, pos: int, alt: int) -> str:
    idx = [i for i, ch in enumerate(text) if ch.isalnum()]
    if not idx:
        return text
    i = idx[pos % len(idx)]
    ch = text[i]
    if ch.isdigit():
        new = str((int(ch) + alt) % 10)
    else:
        base = "a" if ch.islower() else "A"
        new = chr((ord(ch) - ord(base) + alt) % 26 + ord(base))
    return text[:i] + new + text[i + 1:]


# ----------------------------------------------------------------------------- arithmetic and code

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_FUNCS = {"max": max, "min": min, "abs": abs, "sum": sum, "len": len, "print": lambda *a: a[0] if a else None}


def evaluate(text: str) -> str | None:
    """Value of an arithmetic line ("3 x 4 =") or a one-line code snippet; None if not computable.

    A tiny AST interpreter (numbers, + - * / // % **, lists, and the
    functions max/min/abs/sum/len/print) instead of ``eval``: the text comes
    from an image.
    """
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


# ----------------------------------------------------------------------------- answers


@dataclass
class Answer:
    text: str  # what the model says
    value: str | None  # the normalised content, for matching options / continuations
    confidence: float  # belief that ``value`` is right
    kind: str = "value"  # value | yesno | number | none


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
        out = []
        for i, o in enumerate(self.b.objects):
            if subj is not None and not subj.matches(o):
                continue
            if q.position is not None and q.kind not in ("position_check",) and (o.row, o.col) != q.position:
                continue
            out.append(i)
        if out or not self.soft or q.kind in ("exists", "count_check", "position_check", "size_check"):
            return out
        # a degraded reading: shapes are the first thing blur and noise take, colours and places last; like a
        # model that is unsure, answer about the object that agrees with most of what was asked
        pos = q.position if q.kind != "position_check" else None
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
            flag = ans.value == "yes"
            if q.negated:
                flag = not flag
            ans = _yes(flag, ans.confidence)
            if not flag and self.knobs.yes_bias > 0:
                u = _uniforms(self.knobs.seed, self.key, "yes", question_text.strip().lower()).random()
                if u < self.knobs.yes_bias:
                    ans = _yes(True, ans.confidence)
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
        if k == "color":
            return Answer(o.color.capitalize() + ".", o.color, c)
        if k == "shape":
            return Answer(f"It is a {o.shape}.", o.shape, c)
        if k == "size":
            return Answer(f"It is {o.size}.", o.size, c)
        if k == "position":
            where = position_name(o.row, o.col)
            return Answer(f"It is in the {where}." if where != "center" else "It is in the center.", where, c)
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
    if ans.kind == "value" and val in POSITION_WORDS:
        pos = lang.find_position(opt)
        return pos is not None and position_name(*pos) == val
    return canonical_text(val) == canonical_text(opt) or re.search(rf"\b{re.escape(val)}\b", opt) is not None


POSITION_WORDS = {position_name(r, c) for r in range(3) for c in range(3)}


# ----------------------------------------------------------------------------- CAST


_CAST_GEN = re.compile(r"\bsimilarit(y|ies)\b", re.I)
_CAST_FORMATS = {
    "one_both": re.compile(r"only one of the", re.I),
    "true_false": re.compile(r"true for both", re.I),
    "yes_no": re.compile(r"describe both", re.I),
}
_CAST_WORDS = {"one_both": ("Both", "One"), "true_false": ("True", "False"), "yes_no": ("Yes", "No")}


def similarities(a: Scene, b: Scene, k: int = 5) -> list[str]:
    """Up to k statements true of both scenes, most specific first."""
    out: list[str] = []
    shared = [(o.size, o.color, o.shape) for o in a.objects
              if any((x.size, x.color, x.shape) == (o.size, o.color, o.shape) for x in b.objects)]
    covered: set = set()
    for size, color, shape in sorted(set(shared)):
        out.append(f"Both scenes contain a {size} {color} {shape}.")
        covered |= {(color, shape), shape, color}
    for color, shape in sorted({(o.color, o.shape) for o in a.objects} & {(o.color, o.shape) for o in b.objects}):
        if (color, shape) not in covered:
            out.append(f"Both scenes contain a {color} {shape}.")
            covered |= {(color, shape), shape, color}
    for shape in sorted({o.shape for o in a.objects} & {o.shape for o in b.objects}):
        if shape not in covered:
            out.append(f"Both scenes contain {'an' if shape[0] in 'aeiou' else 'a'} {shape}.")
            covered.add(shape)
    if a.background == b.background:
        out.append(f"Both scenes have a {a.background} background.")
    for color in sorted({o.color for o in a.objects} & {o.color for o in b.objects}):
        if color not in covered:
            out.append(f"Both scenes contain {'an' if color[0] in 'aeiou' else 'a'} {color} object.")
    if a.objects and len(a.objects) == len(b.objects):
        out.append(f"Both scenes show {len(a.objects)} objects.")
    if a.text and b.text:
        out.append("Both scenes contain a line of text.")
    return out[:k]


def statement_holds(statement: str, scene: Scene) -> bool | None:
    """Whether a similarity statement is true of one scene; None if not understood."""
    low = statement.lower()
    phrases = [p for p in lang.object_phrases(lang._QUOTED.sub(" ", low)) if not p.negated]
    known = False
    ok = True
    if "background" in low:
        bg = lang.find_background(low)
        if bg is not None:
            known = True
            ok = ok and scene.background == bg
    m = re.search(r"\b(\d+|one|two|three|four|five|six|seven|eight|nine) (objects|shapes|items)\b", low)
    if m:
        known = True
        n = int(m.group(1)) if m.group(1).isdigit() else lang.NUMBERS[m.group(1)]
        ok = ok and len(scene.objects) == n
        phrases = [p for p in phrases if p.shape or p.color or p.size]
    if re.search(r"\b(text|writing|written|words?)\b", low) and not phrases:
        known = True
        ok = ok and scene.text is not None
    pos = lang.find_position(low)
    for ph in phrases:
        if ph.shape is None and ph.color is None and ph.size is None:
            continue
        known = True
        need = ph.count if (ph.count and ph.count > 1) else 1
        hits = [o for o in scene.objects if ph.matches(o) and (pos is None or (o.row, o.col) == pos)]
        ok = ok and len(hits) >= need
    return ok if known else None


# ----------------------------------------------------------------------------- the model


@functools.lru_cache(maxsize=512)
def _perceive_cached(key: str, data: bytes, size: tuple[int, int], robust: bool = False) -> Perceived | None:
    img = Image.frombytes("RGB", size, data)
    return perceive(img, robust=robust)


class RefDescriber:
    """The ``ref:describer`` VLM (see module docstring)."""

    def __init__(self, spec: ModelSpec | None = None) -> None:
        params = dict(spec.params) if spec else {}
        self.knobs = Knobs.from_params(params)
        # robust=1: also read corrupted scenes (perceive_degraded); such a describer may take a photograph's
        # coloured regions for a scene's objects, so it is a knob, off by default
        self.robust = spec.get_bool("robust", False) if spec else False
        self.model_id = spec.canonical() if spec else "ref:describer"
        self.capabilities = Capabilities(multi_image=True, loglikelihood=True, seeded=True)
        self.concurrency_key = "ref:describer"
        self.max_concurrency = 2

    # -- perception ---------------------------------------------------------------

    def _see(self, img: Image.Image) -> tuple[Scene, dict[int, float], float, str, bool] | None:
        from ..core.images import image_hash

        rgb = img.convert("RGB")
        p = _perceive_cached(image_hash(rgb), rgb.tobytes(), rgb.size, self.robust)
        if p is None:
            return None
        # errors are drawn per perceived content, not per pixel hash: a perturbed copy that looks the same
        # to the describer gets the same errors, so perturbations only add the errors they cause
        content = hashlib.sha256(repr(p.scene.key()).encode()).hexdigest()
        belief, conf = apply_knobs(p, self.knobs, content)
        return belief, conf, p.text_confidence, content, p.degraded

    def _scenes_from_images(self, images: list[Image.Image]) -> list[Scene | None]:
        if len(images) == 1 and images[0].width >= 1.8 * images[0].height:
            im = images[0]
            half = im.width // 2
            images = [im.crop((0, 0, half, im.height)), im.crop((im.width - half, 0, im.width, im.height))]
        out = []
        for im in images[:2]:
            seen = self._see(im)
            out.append(seen[0] if seen else None)
        return out

    # -- role methods ----------------------------------------------------------------

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        text = await asyncio.to_thread(self._respond, messages)
        words = text.split()
        truncated = len(words) > config.max_tokens
        if truncated:
            text = " ".join(words[: config.max_tokens])
        prompt_words = sum(len(m.text.split()) for m in messages)
        n_images = sum(len(m.images) for m in messages)
        return Generation(text=text, finish_reason="length" if truncated else "stop",
                          usage=Usage(input_tokens=prompt_words + 64 * n_images, output_tokens=len(text.split())))

    async def loglikelihood(self, messages: list[Message], continuations: list[str]) -> list[Loglikelihood]:
        return await asyncio.to_thread(self._loglikelihood, messages, continuations)

    # -- internals ---------------------------------------------------------------------

    def _request(self, messages: list[Message]) -> tuple[str, list[Image.Image]]:
        users = [m for m in messages if m.role == "user"]
        if not users:
            return "", []
        last = users[-1]
        images = [im.to_pil() for im in last.images]
        if not images:  # the image may sit in an earlier turn of the same conversation
            for m in reversed(users[:-1]):
                if m.images:
                    images = [im.to_pil() for im in m.images]
                    break
        return last.text, images

    def _respond(self, messages: list[Message]) -> str:
        prompt, images = self._request(messages)
        fmt = next((name for name, rx in _CAST_FORMATS.items() if rx.search(prompt)), None)
        if fmt is not None:
            return self._cast_validate(prompt, images, fmt)
        if _CAST_GEN.search(prompt) and re.search(r"\b(two|both|scenes|images|descriptions)\b", prompt, re.I):
            return self._cast_generate(prompt, images)
        if not images:
            return "I need an image to answer this."
        seen = self._see(images[-1])
        if seen is None:
            return self._photo_answer(prompt, images[-1])
        belief, conf, tconf, key, soft = seen
        q = lang.parse_question(prompt)
        ans = WorldAnswerer(belief, conf, tconf, self.knobs, key, soft).answer(q, prompt)
        if q.options:
            for letter, opt in self._option_scores(q, ans, belief):
                return f"{letter}. {opt}"
            return "None of the options matches what I see."
        return ans.text

    @staticmethod
    def _option_scores(q: lang.Question, ans: Answer, belief: Scene) -> list[tuple[str, str]]:
        """Options consistent with the belief: by the answer value, or (for 'which of these ...'
        questions) each option read as a claim about the image."""
        hits = [(letter, opt) for letter, opt in q.options if _option_matches(ans, opt)]
        if not hits and ans.value is None:
            hits = [(letter, opt) for letter, opt in q.options if statement_holds(opt, belief)]
        return hits

    def _loglikelihood(self, messages: list[Message], continuations: list[str]) -> list[Loglikelihood]:
        prompt, images = self._request(messages)
        q = lang.parse_question(prompt)
        seen = self._see(images[-1]) if images else None
        ans, belief, soft = None, None, False
        turn = _turn_kind(prompt)
        if seen is not None and turn is not None:  # ChEF's detection and hierarchy turns
            ans = Answer("", None, 0.85, "claim")
            matched = [_turn_match(turn, prompt, c, seen[0]) for c in continuations]
            return _scores(continuations, matched, ans)
        if seen is not None and q.kind != "describe":
            belief, conf, tconf, key, soft = seen
            ans = WorldAnswerer(belief, conf, tconf, self.knobs, key, soft).answer(q, prompt)
        letters = dict(q.options)
        by_claim = ans is not None and ans.value is None and bool(q.options)
        if by_claim:  # "which of these ...": options read as claims
            ans = Answer("", None, 0.85, "claim")
        matched, claim_targets = [], []
        for cont in continuations:
            c = re.sub(r"^(the )?answer is:?\s*", "", cont.strip(), flags=re.I)
            m = re.fullmatch(r"\(?([A-Z])(?:[\.\)]\s*.*)?", c)  # "B" or "B. text": the option labelled B
            opt = letters.get(m.group(1)) if m and (m.group(1) in letters) else None
            target = opt if opt is not None else c
            if ans is None:
                matched.append(False)
            elif by_claim:
                matched.append(bool(statement_holds(target, belief)))
                claim_targets.append(target)
            else:
                matched.append(ans.value is not None and _option_matches(ans, target))
        if by_claim and soft and not any(matched) and claim_targets:
            matched = _closest_claims(claim_targets, belief)
            ans = Answer("", None, 0.6, "claim")
        return _scores(continuations, matched, ans)

    def _two_scenes(self, prompt: str, images: list[Image.Image]) -> tuple[list[Scene | None], list[Scene | None]]:
        """(scenes from text, scenes from images) - each list empty when that modality is absent."""
        texts = re.findall(r"(?:scene|description|image)\s*(?:1|2|one|two|a|b)\s*:\s*(.+?)(?=(?:\n\s*(?:scene|"
                           r"description|image)\s*(?:1|2|one|two|a|b)\s*:)|\n\s*statement\s*:|\Z)",
                           prompt, re.I | re.S)
        text_scenes: list[Scene | None] = []
        for t in texts[:2]:
            s, notes = lang.parse_description(t)
            text_scenes.append(s if (s.objects or s.text) else None)
        image_scenes = self._scenes_from_images(images) if images else []
        return text_scenes, image_scenes

    def _cast_generate(self, prompt: str, images: list[Image.Image]) -> str:
        text_scenes, image_scenes = self._two_scenes(prompt, images)
        scenes = image_scenes if len(image_scenes) == 2 else text_scenes
        if len(scenes) != 2 or any(s is None for s in scenes):
            return "I cannot make out two scenes to compare."
        a, b = scenes
        if len(text_scenes) == 2 and len(image_scenes) == 2 and all(text_scenes):
            # both modalities: what the descriptions say, plus what the images show
            a = _union(text_scenes[0], image_scenes[0])
            b = _union(text_scenes[1], image_scenes[1])
        sims = similarities(a, b)
        if not sims:
            return "The two scenes have nothing in common."
        return "\n".join(f"{i}. {s}" for i, s in enumerate(sims, 1))

    def _cast_validate(self, prompt: str, images: list[Image.Image], fmt: str) -> str:
        m = re.search(r"statement\s*:\s*(.+?)(?:\n|$)", prompt, re.I)
        if not m:
            return "I cannot find the statement to check."
        statement = m.group(1).strip()
        text_scenes, image_scenes = self._two_scenes(prompt, images)
        if len(text_scenes) == 2 and len(image_scenes) == 2 and all(text_scenes):
            scenes = [_union(t, i) for t, i in zip(text_scenes, image_scenes)]
        else:
            scenes = image_scenes if len(image_scenes) == 2 else text_scenes
        if len(scenes) != 2 or any(s is None for s in scenes):
            return "I cannot make out two scenes to compare."
        verdicts = [statement_holds(statement, s) for s in scenes]
        if any(v is None for v in verdicts):
            return "I am not sure what this statement means."
        both = all(verdicts)
        if not both and self.knobs.yes_bias > 0:
            u = _uniforms(self.knobs.seed, "cast", statement.lower(), prompt[:200]).random()
            both = u < self.knobs.yes_bias
        pos, neg = _CAST_WORDS[fmt]
        return pos if both else neg

    def _photo_answer(self, prompt: str, img: Image.Image) -> str:
        from .ref_models import describe_photo

        q = lang.parse_question(prompt)
        if q.kind == "describe":
            text = describe_photo(img)
            words = read_photo_text(img)
            return text + (f' Text visible in the image: "{words}".' if words else "")
        return "I cannot answer this question about a photograph; I can only describe it."


def _scores(continuations: list[str], matched: list[bool], ans: Answer | None) -> list[Loglikelihood]:
    """The answer's confidence shared by the matching continuations, the rest by the others; uniform when
    all or none match.  Per-token log-probabilities, so the mean is the continuation's log-probability."""
    k = len(continuations)
    n_match = sum(matched)
    out = []
    for cont, hit in zip(continuations, matched):
        if n_match == 0 or n_match == k:
            p = 1.0 / k
        elif hit:
            p = ans.confidence / n_match
        else:
            p = (1.0 - ans.confidence) / (k - n_match)
        n_tok = max(1, len(lang.words(cont)))
        out.append(Loglikelihood(sum=math.log(max(p, 1e-9)) * n_tok, n_tokens=n_tok))
    return out


def _closest_claims(claims: list[str], belief: Scene) -> list[bool]:
    """For a degraded reading: the claims ("pink circle") closest to some object seen (:func:`soft_match`)."""
    scores = []
    for c in claims:
        phrases = [p for p in lang.object_phrases(c.lower()) if not p.negated]
        scores.append(max((soft_match(phrases[0], None, o) for o in belief.objects), default=0.0) if phrases else 0.0)
    best = max(scores, default=0.0)
    return [best > 0 and s == best for s in scores]


_BOX_TURN = re.compile(r"bounding boxes of (.+?) in the image", re.I)
_CLAIM_PREFIX = re.compile(r"^(the image shows|the fine-grained category label for this image is|it is)\s*", re.I)


def _turn_kind(prompt: str) -> str | None:
    """ChEF turn prompts (chef/turns.py): a detection category turn or hierarchy level ("claim"), a box turn."""
    p = prompt.strip().lower()
    if _BOX_TURN.search(prompt):
        return "box"
    if p == "the image shows" or "category label" in p:
        return "claim"
    return None


def _turn_match(kind: str, prompt: str, continuation: str, belief: Scene) -> bool:
    if kind == "claim":  # "The image shows a circle" / "... label for this image is red circle"
        return bool(statement_holds(_CLAIM_PREFIX.sub("", continuation.strip()), belief))
    from .scene import object_box
    from ..metrics.stats import iou

    label = _BOX_TURN.search(prompt).group(1)
    phrases = lang.object_phrases(label.lower())
    nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", continuation)]
    if len(nums) != 4 or not phrases:
        return False
    mine = [object_box(o) for o in belief.objects if phrases[0].matches(o)]
    return any(iou(b, nums) > 0.5 for b in mine)


def _union(a: Scene | None, b: Scene | None) -> Scene:
    """What either source shows (text first)."""
    if a is None:
        return b or Scene()
    if b is None:
        return a
    cells = {(o.row, o.col): o for o in b.objects}
    cells.update({(o.row, o.col): o for o in a.objects})
    return Scene(background=a.background, objects=[cells[k] for k in sorted(cells)], text=a.text or b.text)


def make_describer(spec: ModelSpec, role: str) -> RefDescriber:
    return RefDescriber(spec)
