"""How a ``ref:describer`` answers a question asked without its image (the blind control): from its
language prior only, as a real model that sees no image could - never from the scene.

* yes/no questions: "yes" with the describer's base rate of yes, 0.5 plus half its ``yes_bias`` (a describer at
  error level 0.3 leans to yes), drawn per question from a seeded hash so a rerun gives the same answer;
* what-colour, what-shape, how-many and which-size questions: the world's most common value (the world draws
  colours, shapes and sizes uniformly, so its first value; scenes hold 1 to 3 objects of a kind, so 1);
* lettered options: the option that matches that prior answer, else the first option;
* anything else: it says it cannot tell.
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
