"""What a ``ref:describer`` believes it saw: a perceived scene with its *error knobs* applied.

The knobs (``omit``, ``hallucinate``, ``confuse``, ``misplace``, ``misread``, ``yes_bias``; ``level`` sets them
all) draw from random numbers fixed per image and object, so raising a knob only adds errors to those of a lower
setting (see ``describer.py``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..core.spec import SpecError
from .perceive import Perceived
from .scene import COLORS, SHAPES, SIZES, Scene, SceneObject, shifted


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
        def number(k: str, typ=float):
            try:
                return typ(params[k])
            except ValueError:
                raise SpecError(f"ref:describer: {k}={params[k]!r} is not a number") from None

        values: dict[str, float] = {}
        if "level" in params:
            lv = number("level")
            values = {"omit": lv, "hallucinate": lv / 2, "confuse": lv, "misplace": lv / 2, "misread": lv,
                      "yes_bias": lv}
        for k in KNOBS:
            if k in params:
                values[k] = number(k)
        for k, v in values.items():
            if not 0.0 <= v <= 1.0:
                raise SpecError(f"ref:describer: {k}={v} is not a probability in [0, 1]")
        return cls(**values, seed=number("seed", int) if "seed" in params else 0)


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
    belief = Scene(background=scene.background, objects=objs, text=scene.text)
    # misplace after omission, into cells that are free in the belief
    for i, (o, u_move) in enumerate(zip(list(belief.objects), moves)):
        if u_move < knobs.misplace and (free := belief.free_cells()):
            r, c = free[int(_uniforms(knobs.seed, image_key, "move", o.row, o.col).integers(len(free)))]
            belief.objects[i] = o.model_copy(update={"row": r, "col": c})
    for r, c in belief.free_cells():
        rng = _uniforms(knobs.seed, image_key, "cell", r, c)
        if rng.random() < knobs.hallucinate:
            belief.objects.append(SceneObject(shape=SHAPES[rng.integers(len(SHAPES))], row=r, col=c,
                                              color=COLORS[rng.integers(len(COLORS))], size=SIZES[rng.integers(2)]))
            conf.append(0.8)
    text = belief.text
    if text:
        rng = _uniforms(knobs.seed, image_key, "text")
        u, pos, alt = rng.random(), int(rng.integers(len(text))), int(rng.integers(1, 9))
        idx = [i for i, ch in enumerate(text) if ch.isalnum()]
        if u < knobs.misread and idx:  # one letter or digit read as another
            i = idx[pos % len(idx)]
            belief.text = text[:i] + shifted(text[i], alt) + text[i + 1:]
    order = sorted(range(len(belief.objects)), key=lambda k: (belief.objects[k].row, belief.objects[k].col))
    belief.objects = [belief.objects[k] for k in order]
    return belief, {n: conf[k] for n, k in enumerate(order)}
