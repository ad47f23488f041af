"""CAST in the reference world: the similarities a ``ref:describer`` states between two scenes it believes it saw,
and whether a statement holds for a scene.
"""

from __future__ import annotations

import re

from . import language as lang
from .ref_models import article
from .scene import Scene

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
            out.append(f"Both scenes contain {article(shape)} {shape}.")
            covered.add(shape)
    if a.background == b.background:
        out.append(f"Both scenes have a {a.background} background.")
    for color in sorted({o.color for o in a.objects} & {o.color for o in b.objects}):
        if color not in covered:
            out.append(f"Both scenes contain {article(color)} {color} object.")
    if a.objects and len(a.objects) == len(b.objects):
        out.append(f"Both scenes show {len(a.objects)} objects.")
    if a.text and b.text:
        out.append("Both scenes contain a line of text.")
    return out[:k]


def statement_holds(statement: str, scene: Scene) -> bool | None:
    """Whether a similarity statement is true of one scene; None if not understood."""
    low = statement.lower()
    phrases = [p for p in lang.object_phrases(lang._QUOTED.sub(" ", low)) if not p.negated]
    checks = []  # one per part of the statement understood
    if "background" in low and (bg := lang.find_background(low)) is not None:
        checks.append(scene.background == bg)
    m = re.search(r"\b(\d+|one|two|three|four|five|six|seven|eight|nine) (objects|shapes|items)\b", low)
    if m:
        n = int(m.group(1)) if m.group(1).isdigit() else lang.NUMBERS[m.group(1)]
        checks.append(len(scene.objects) == n)
    if re.search(r"\b(text|writing|written|words?)\b", low) and not phrases:
        checks.append(scene.text is not None)
    pos = lang.find_position(low)
    for ph in phrases:  # each names a shape, a colour or a size (object_phrases)
        need = ph.count if (ph.count and ph.count > 1) else 1
        hits = [o for o in scene.objects if ph.matches(o) and (pos is None or (o.row, o.col) == pos)]
        checks.append(len(hits) >= need)
    return all(checks) if checks else None

