"""Scenes of the reference world (docs/world.md): scene graphs, seeded generation, rendering (deterministic: no
anti-aliasing, Pillow's bundled font), and the canonical English description (:func:`describe_scene`), which is
what an error-free describer says and what :mod:`vlmcheck.world.language` parses back into the same scene.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from pydantic import BaseModel, Field

#: The eight named object colours of the reference world (RGB).
NAMED_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (240, 220, 40),
    "orange": (245, 140, 30),
    "purple": (140, 60, 190),
    "pink": (245, 130, 190),
    "brown": (130, 80, 40),
}
SHAPES = ("circle", "square", "triangle", "star", "hexagon", "diamond")
COLORS = tuple(NAMED_COLORS)
SIZES = ("small", "large")
BACKGROUNDS: dict[str, tuple[int, int, int]] = {
    "white": (250, 250, 250),
    "light gray": (218, 218, 218),
    "beige": (240, 228, 200),
    "light blue": (205, 225, 245),
}
TEXT_RGB = (15, 15, 15)
ROWS = ("top", "middle", "bottom")
COLS = ("left", "center", "right")

#: MME-style categories of world scenes.
VISUAL_CATEGORIES = ("existence", "count", "position", "color", "shape")
TEXTUAL_CATEGORIES = ("ocr", "numerical", "code")
CATEGORIES = VISUAL_CATEGORIES + TEXTUAL_CATEGORIES


def position_name(row: int, col: int) -> str:
    if (row, col) == (1, 1):
        return "center"
    return f"{ROWS[row]} {COLS[col]}"


POSITIONS = {position_name(r, c): (r, c) for r in range(3) for c in range(3)}

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def number_word(n: int) -> str:
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)


def plural(shape: str) -> str:
    return shape + ("es" if shape.endswith(("x", "s")) else "s")


class SceneObject(BaseModel):
    shape: Literal[SHAPES]
    color: str
    size: Literal[SIZES] = "large"
    row: int = Field(ge=0, le=2)
    col: int = Field(ge=0, le=2)

    @property
    def position(self) -> str:
        return position_name(self.row, self.col)

    def phrase(self) -> str:
        return f"{self.size} {self.color} {self.shape}"


class Scene(BaseModel):
    background: str = "white"
    objects: list[SceneObject] = Field(default_factory=list)
    text: str | None = None
    category: str | None = None

    def key(self) -> tuple:
        """Order-independent identity of the content (ignores ``category``)."""
        objs = tuple(sorted((o.row, o.col, o.shape, o.color, o.size) for o in self.objects))
        return (self.background, objs, self.text)

    def same_content(self, other: "Scene") -> bool:
        return self.key() == other.key()

    def free_cells(self) -> list[tuple[int, int]]:
        used = {(o.row, o.col) for o in self.objects}
        rows = 2 if self.text else 3
        return [(r, c) for r in range(rows) for c in range(3) if (r, c) not in used]


_TOKEN = re.compile(r"\d+|[A-Za-z_]+|\*\*|[^\sA-Za-z0-9_]")
_BINARY = {"+", "-", "*", "/", "=", "**", "%"}


def canonical_text(text: str) -> str:
    """One spelling for a text line, whatever spacing OCR returned.

    Binary operators get one space either side, a comma one space after it,
    brackets none; words are separated by one space.
    """
    tokens = _TOKEN.findall(text.strip())
    out = ""
    for tok in tokens:
        if tok in _BINARY:
            out = out.rstrip() + f" {tok} "
        elif tok == ",":
            out = out.rstrip() + ", "
        elif tok in ")]":
            out = out.rstrip() + tok
        elif tok in "([":
            out += tok
        else:
            if out and (out[-1].isalnum() or out[-1] in ")]"):
                out += " "
            out += tok
    return re.sub(r"\s+", " ", out).strip()


def shifted(ch: str, step: int) -> str:
    """The digit or letter ``step`` places after ``ch`` (cyclic, same case): a misread character."""
    if ch.isdigit():
        return str((int(ch) + step) % 10)
    base = ord("a" if ch.islower() else "A")
    return chr((ord(ch) - base + step) % 26 + base)


_WORDS = ("apple", "river", "cat", "house", "green tea", "sunset", "robot", "piano", "garden", "winter",
          "OPEN", "STOP", "EXIT", "HELLO", "cloud", "bread", "lamp", "ocean", "tiger", "violin")
# No "*" (the OCR model reads it as "+" or a plus-minus sign) and no lone "x"
# (read as "X"): multiplication is written "x" in arithmetic, code avoids it.
_CODE_FORMS = ("print({a} + {b})", "n = {a} - {b}", "max({a}, {b})", "min({a}, {b})",
               "print({a} - {b})", "sum([{a}, {b}])", "abs({b} - {a})", "len([{a}, {b}])")


def _make_text(category: str, rng: np.random.Generator) -> str:
    if category == "numerical":
        a, b = int(rng.integers(1, 20)), int(rng.integers(1, 10))
        op = str(rng.choice(["+", "-", "x"]))
        return f"{a} {op} {b} ="
    if category == "code":
        a, b = int(rng.integers(1, 10)), int(rng.integers(1, 10))
        return canonical_text(str(rng.choice(_CODE_FORMS)).format(a=a, b=b))
    n = int(rng.integers(1, 3))
    if rng.random() < 0.3:
        return str(int(rng.integers(10, 1000)))
    return " ".join(str(w) for w in rng.choice(_WORDS, size=n, replace=False))


def generate_scene(rng: np.random.Generator, category: str) -> Scene:
    """A random scene whose content suits ``category`` (see :data:`CATEGORIES`)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown scene category {category!r}; known: {', '.join(CATEGORIES)}")
    textual = category in TEXTUAL_CATEGORIES
    background = str(rng.choice(list(BACKGROUNDS)))
    rows = 2 if textual else 3
    cells = [(r, c) for r in range(rows) for c in range(3)]
    n = int(rng.integers(1, 4)) if textual else int(rng.integers(2, 7))
    chosen = [cells[i] for i in rng.choice(len(cells), size=n, replace=False)]
    objects: list[SceneObject] = []
    if category == "count":
        # a repeated kind of object, 2-4 times, plus distractors
        shape, color = str(rng.choice(SHAPES)), str(rng.choice(COLORS))
        k = min(int(rng.integers(2, 5)), n)
        for i, (r, c) in enumerate(chosen):
            objects.append(SceneObject(shape=shape, color=color, size=str(rng.choice(SIZES)), row=r, col=c)
                           if i < k else random_object(rng, r, c))
    else:
        objects = [random_object(rng, r, c) for r, c in chosen]
    text = _make_text(category, rng) if textual else None
    return Scene(background=background, objects=objects, text=text, category=category)


def random_object(rng: np.random.Generator, r: int, c: int) -> SceneObject:
    return SceneObject(shape=str(rng.choice(SHAPES)), color=str(rng.choice(COLORS)),
                       size=str(rng.choice(SIZES)), row=r, col=c)


LARGE_RADIUS = 0.38  # of the cell size
SMALL_RADIUS = 0.20


def shape_polygon(shape: str, cx: float, cy: float, r: float) -> list[tuple[float, float]] | None:
    """Vertices of ``shape`` centred at (cx, cy) with outer radius r; None for a circle."""
    if shape == "circle":
        return None
    if shape == "square":
        h = 0.85 * r
        return [(cx - h, cy - h), (cx + h, cy - h), (cx + h, cy + h), (cx - h, cy + h)]
    if shape == "triangle":  # equilateral, pointing up: height/width = 0.866
        return [(cx, cy - r), (cx + r * math.sqrt(3) / 2, cy + r / 2), (cx - r * math.sqrt(3) / 2, cy + r / 2)]
    if shape == "diamond":  # taller than wide: height/width = 1.33
        return [(cx, cy - r), (cx + 0.75 * r, cy), (cx, cy + r), (cx - 0.75 * r, cy)]
    if shape == "hexagon":  # flat top and bottom: height/width = 0.866
        return [(cx + r * math.cos(a), cy + r * math.sin(a)) for a in np.arange(6) * math.pi / 3]
    if shape == "star":  # outer and inner (0.42 r) points in turn, the first at the top
        radii = [r if i % 2 == 0 else 0.42 * r for i in range(10)]
        angles = [-math.pi / 2 + i * math.pi / 5 for i in range(10)]
        return [(cx + q * math.cos(a), cy + q * math.sin(a)) for q, a in zip(radii, angles)]
    raise ValueError(f"unknown shape {shape!r}")


def object_box(obj: SceneObject) -> list[float]:
    """The object's bounding box [x1, y1, x2, y2] as fractions of the image side (detection ground truth).

    Computed from the same geometry :func:`render_scene` draws, so it is exact up to pixel rounding.
    """
    cell = 1 / 3
    cx, cy = (obj.col + 0.5) * cell, (obj.row + 0.5) * cell
    r = (LARGE_RADIUS if obj.size == "large" else SMALL_RADIUS) * cell
    poly = shape_polygon(obj.shape, cx, cy, r) or [(cx - r, cy - r), (cx + r, cy + r)]
    xs, ys = [x for x, _ in poly], [y for _, y in poly]
    return [min(xs), min(ys), max(xs), max(ys)]


def render_scene(scene: Scene, size: int = 384) -> Image.Image:
    bg = BACKGROUNDS.get(scene.background, BACKGROUNDS["white"])
    img = Image.new("RGB", (size, size), bg)
    draw = ImageDraw.Draw(img)
    cell = size / 3
    for obj in scene.objects:
        cx, cy = (obj.col + 0.5) * cell, (obj.row + 0.5) * cell
        r = (LARGE_RADIUS if obj.size == "large" else SMALL_RADIUS) * cell
        fill = NAMED_COLORS[obj.color]
        poly = shape_polygon(obj.shape, cx, cy, r)
        if poly is None:
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
        else:
            draw.polygon([(round(x), round(y)) for x, y in poly], fill=fill)
    if scene.text:
        fnt = ImageFont.load_default(size=max(10, round(size * 0.075)))  # bundled: the same on every machine
        box = draw.textbbox((0, 0), scene.text, font=fnt)
        w, h = box[2] - box[0], box[3] - box[1]
        x = (size - w) / 2 - box[0]
        y = 2.5 * cell - h / 2 - box[1]
        draw.text((round(x), round(y)), scene.text, fill=TEXT_RGB, font=fnt)
    return img


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def describe_scene(scene: Scene) -> str:
    """The canonical English description of a scene."""
    n = len(scene.objects)
    noun = "object" if n == 1 else "objects"
    parts = [f"The image shows {number_word(n)} {noun} on a {scene.background} background."]
    for obj in sorted(scene.objects, key=lambda o: (o.row, o.col)):
        parts.append(f"In the {obj.position} there is a {obj.phrase()}.")
    if scene.objects:
        counts = Counter(o.shape for o in scene.objects)
        items = [f"{number_word(k)} {s if k == 1 else plural(s)}" for s, k in sorted(counts.items())]
        parts.append(f"In total there {'is' if n == 1 else 'are'} {_join(items)}.")
        colors = sorted({o.color for o in scene.objects})
        parts.append(f"The colors used are {_join(colors)}.")
    if scene.text:
        parts.append(f'At the bottom of the image the text "{scene.text}" is written in black.')
    else:
        parts.append("There is no text in the image.")
    return " ".join(parts)
