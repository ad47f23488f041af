"""How a ``ref:describer`` answers a question asked without its image (the blind control, docs/world.md): from
its language prior only, as a real model that sees no image could - never from the scene. Yes/no: "yes" at its
base rate (0.5 plus half its ``yes_bias``), drawn per question from a seeded hash; colour, shape, size and count:
the world's most common value (uniform draws: the first value; 1 to 3 objects of a kind: 1); options: the one
that matches that guess, else the first.
"""

from __future__ import annotations

from . import language as lang
from .knobs import Knobs, _uniforms
from .scene import COLORS, SHAPES, SIZES

_YESNO = ("exists", "text_exists")
PRIOR = {"color": COLORS[0], "shape": SHAPES[0], "size": SIZES[0], "count": "1"}


def blind_answer(prompt: str, knobs: Knobs) -> str:
    q = lang.parse_question(prompt)
    if q.kind in _YESNO or q.kind.endswith("_check"):
        p_yes = 0.5 + knobs.yes_bias / 2
        return "Yes." if _uniforms("blind", prompt.strip().lower(), knobs.seed).random() < p_yes else "No."
    guess = PRIOR.get(q.kind)
    if q.options:
        hit = next(((letter, opt) for letter, opt in q.options if guess and guess in opt.lower()), q.options[0])
        return f"{hit[0]}. {hit[1]}"
    return guess if guess else "I cannot tell without the image."
