"""Reading English about world scenes: descriptions (``ref:renderer``), object phrases, questions and CAST
statements (``ref:describer``).

The grammar is small but tolerant: synonyms, plurals, number words and digits, negation ("no", "not",
"without"). What it cannot read it ignores; callers decide how to say so.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from .scene import BACKGROUNDS, COLORS, NUMBER_WORDS, Scene, SceneObject, canonical_text

SHAPE_WORDS: dict[str, str] = {
    "circle": "circle", "circles": "circle", "disc": "circle", "discs": "circle", "disk": "circle",
    "disks": "circle", "dot": "circle", "dots": "circle", "ball": "circle", "balls": "circle",
    "square": "square", "squares": "square", "box": "square", "boxes": "square",
    "triangle": "triangle", "triangles": "triangle",
    "star": "star", "stars": "star",
    "hexagon": "hexagon", "hexagons": "hexagon",
    "diamond": "diamond", "diamonds": "diamond", "rhombus": "diamond", "rhombuses": "diamond",
    "lozenge": "diamond", "lozenges": "diamond",
}
GENERIC_WORDS = {"object", "objects", "shape", "shapes", "thing", "things", "item", "items", "figure", "figures"}
PLURAL_WORDS = {w for w in list(SHAPE_WORDS) + list(GENERIC_WORDS) if w.endswith("s") and w not in ("rhombus",)}
COLOR_WORDS: dict[str, str] = {c: c for c in COLORS}
COLOR_WORDS.update({"grey": "gray", "violet": "purple", "magenta": "pink", "crimson": "red",
                    "scarlet": "red", "navy": "blue", "gold": "yellow", "golden": "yellow", "tan": "brown"})
SIZE_WORDS = {"large": "large", "big": "large", "huge": "large", "larger": "large", "bigger": "large",
              "small": "small", "little": "small", "tiny": "small", "smaller": "small"}
NUMBERS = {w: i for i, w in enumerate(NUMBER_WORDS)}
NUMBERS.update({"a": 1, "an": 1, "single": 1, "couple": 2, "pair": 2})
NEGATORS = {"no", "not", "without", "none", "nothing", "neither", "nor", "never"}

_ROW_WORDS = {"top": 0, "upper": 0, "middle": 1, "center": 1, "centre": 1, "central": 1, "bottom": 2,
              "lower": 2}
_COL_WORDS = {"left": 0, "middle": 1, "center": 1, "centre": 1, "central": 1, "right": 2}

_POS_RE = re.compile(
    r"\b(?:(top|upper|middle|center|centre|central|bottom|lower)[\s-]*"
    r"(left|right|middle|center|centre)?|(left|right)[\s-]*(?:middle|center|centre|side)?"
    r"|(middle|center|centre))(?:\s+(?:corner|side|part|of the image|of the picture|cell|row))*\b",
    re.IGNORECASE)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def find_positions(text: str) -> list[tuple[int, int]]:
    """The grid positions named in ``text``, in order (e.g. 'upper-left corner' -> (0, 0))."""
    return [p for p in (_position_from_match(m) for m in _POS_RE.finditer(text)) if p is not None]


def find_position(text: str) -> tuple[int, int] | None:
    return next(iter(find_positions(text)), None)


def _position_from_match(m: re.Match) -> tuple[int, int] | None:
    a, b, side, centre = (g.lower() if g else None for g in m.groups())
    if centre:
        return (1, 1)
    if side:
        return (1, _COL_WORDS[side])
    row = _ROW_WORDS[a]  # the pattern's only other alternative
    if b:
        return (row, _COL_WORDS[b])
    # "top" alone: a row, not a cell; "middle"/"center" alone: the centre
    return (1, 1) if row == 1 else None


@dataclass
class ObjectPhrase:
    """An object mention: any attribute may be None (not said)."""

    shape: str | None = None
    color: str | None = None
    size: str | None = None
    count: int | None = None
    plural: bool = False
    negated: bool = False
    start: int = 0  # word index

    def matches(self, obj: SceneObject) -> bool:
        return ((self.shape is None or obj.shape == self.shape)
                and (self.color is None or obj.color == self.color)
                and (self.size is None or obj.size == self.size))

    def noun(self) -> str:
        return (self.shape or "object") + ("s" if self.plural else "")

    def text(self) -> str:
        return " ".join(x for x in (self.size, self.color, self.noun()) if x)


def object_phrases(text: str) -> list[ObjectPhrase]:
    """Every object mention in ``text``, left to right."""
    toks = words(text)
    out: list[ObjectPhrase] = []
    for i, tok in enumerate(toks):
        if tok not in SHAPE_WORDS and tok not in GENERIC_WORDS:
            continue
        if tok in GENERIC_WORDS and i + 1 < len(toks) and toks[i + 1] in SHAPE_WORDS:
            continue
        ph = ObjectPhrase(shape=SHAPE_WORDS.get(tok), plural=tok in PLURAL_WORDS, start=i)
        j = i - 1
        while j >= 0 and i - j <= 5:
            w = toks[j]
            if w in COLOR_WORDS and ph.color is None:
                ph.color = COLOR_WORDS[w]
            elif w in SIZE_WORDS and ph.size is None:
                ph.size = SIZE_WORDS[w]
            elif w in ("and", "or", "colored", "coloured", "shaped", "sized", "solid", "filled", "plain",
                       "single", "other", "more", "same", "similar", "lone"):
                if w == "single":
                    ph.count = 1
            elif w in NUMBERS or w.isdigit():
                ph.count = int(w) if w.isdigit() else NUMBERS[w]
                if j > 0 and toks[j - 1] in NEGATORS:
                    ph.negated = True
                break
            elif w in NEGATORS:
                ph.negated = True
                break
            else:
                break
            j -= 1
        if ph.count is None and ph.plural is False:
            ph.count = 1
        if ph.shape is None and ph.color is None and ph.size is None:
            continue  # "objects" alone says nothing
        out.append(ph)
    return out


_SUMMARY = re.compile(r"\b(in total|altogether|overall|in all|total of|summary|colou?rs used|colou?rs present)\b",
                      re.IGNORECASE)
_QUOTED = re.compile(r"[\"“”']([^\"“”']{1,60})[\"“”']")


def quoted_text(text: str) -> str | None:
    for m in _QUOTED.finditer(text):
        inner = m.group(1).strip()
        if inner and not re.fullmatch(r"s\b.*", inner):
            return inner
    return None


def find_background(text: str) -> str | None:
    """Background name from phrases like 'on a light grey background' or 'the background is beige'."""
    low = " ".join(words(text.replace("grey", "gray")))
    for m in re.finditer(r"\bbackground\b", low):
        for window in (low[max(0, m.start() - 20): m.start()], low[m.end(): m.end() + 40]):
            for name in sorted(BACKGROUNDS, key=len, reverse=True):
                if re.search(rf"\b{name}\b", window):
                    return name
    return None


# a sentence ends at . ! ? ; or a line break, except inside quoted text (which may contain ".")
_SENTENCE = re.compile(r'(?:[^"“”.!?;\n]|["“”][^"“”]*(?:["“”]|\Z))*[.!?;\n]?')


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def parse_description(text: str) -> tuple[Scene, list[str]]:
    """Scene graph of a free English description, and notes on what was not understood.

    Objects with a stated position go there; others fill free cells in
    reading order.  Summary sentences ("In total there are ...") add objects
    only when no sentence placed any.
    """
    notes: list[str] = []
    placed: dict[tuple[int, int], SceneObject] = {}
    unplaced: list[ObjectPhrase] = []
    summary: list[ObjectPhrase] = []
    text_item = None
    for sent in split_sentences(text):
        q = quoted_text(sent)
        if (q and re.search(r"\b(text|written|reads|says|word|words|label|caption|number|code|line)\b", sent, re.I)
                and not re.search(r"\bno (text|writing|words)\b", sent, re.I)):
            text_item = text_item or canonical_text(q)
        sent_wo_quotes = _QUOTED.sub(" ", sent)
        phrases = [p for p in object_phrases(sent_wo_quotes) if not p.negated]
        if not phrases:
            continue
        if _SUMMARY.search(sent_wo_quotes):
            summary.extend(phrases)
            continue
        positions = find_positions(sent_wo_quotes)
        counts = [max(p.count or 1, 1) for p in phrases]
        if positions and sum(counts) == len(positions):
            each = [ph for ph, k in zip(phrases, counts) for _ in range(k)]  # a phrase per object, in order
            placed.update({pos: _object(ph, pos) for ph, pos in zip(each, positions)})
        else:
            unplaced.extend(phrases)
    if not placed and not unplaced:
        unplaced = summary
    scene = Scene(background=find_background(text) or "white", text=text_item)
    scene.objects = list(placed.values())
    for ph in unplaced:
        for _ in range(max(ph.count or 1, 1)):
            free = scene.free_cells()
            if not free:
                notes.append(f"no room left for '{ph.text()}'")
                break
            scene.objects.append(_object(ph, free[0]))
    if text_item is not None:
        # the bottom row holds the text: move objects out of it where there is room
        for o in [o for o in scene.objects if o.row == 2]:
            scene.objects.remove(o)
            free = scene.free_cells()
            if free:
                scene.objects.append(o.model_copy(update={"row": free[0][0], "col": free[0][1]}))
            else:
                notes.append(f"no room for '{o.phrase()}' above the text")
    scene.objects.sort(key=lambda o: (o.row, o.col))
    if not scene.objects and not scene.text:
        notes.append("no objects or text recognised in the description")
    return scene, notes


def _object(ph: ObjectPhrase, pos: tuple[int, int]) -> SceneObject:
    return SceneObject(shape=ph.shape or "circle", color=ph.color if ph.color in COLORS else "red",
                       size=ph.size or "large", row=pos[0], col=pos[1])


@dataclass
class Question:
    """What a question asks, in a form the describer can answer."""

    kind: str  # exists | count | count_check | color | position | position_check | shape | size | size_check
    #            | text | text_check | compute | background | describe | unknown
    subject: ObjectPhrase | None = None
    position: tuple[int, int] | None = None
    number: int | None = None
    value: str | None = None
    negated: bool = False
    options: list[tuple[str, str]] = field(default_factory=list)  # (letter, option text)


_OPTION_RE = re.compile(r"(?:^|\n|\s)\(?([A-Z])[\.\)\:]\s+([^\n]+?)(?=(?:\s+\(?[A-Z][\.\)\:]\s)|\n|$)")


def split_options(prompt: str) -> tuple[str, list[tuple[str, str]]]:
    """Separate a multiple-choice prompt into question text and [(letter, text)]."""
    m = re.search(r"(?:^|\n)\s*(?:options|choices)\s*:?", prompt, re.IGNORECASE)
    head, tail = (prompt[: m.start()], prompt[m.end():]) if m else (prompt, prompt)
    opts = [(a, b.strip().rstrip(".")) for a, b in _OPTION_RE.findall(tail)]
    letters = [a for a, _ in opts]
    if len(opts) >= 2 and letters == [chr(ord("A") + i) for i in range(len(letters))]:
        if not m:
            first = re.search(r"(?:^|\n|\s)\(?A[\.\)\:]\s", prompt)
            head = prompt[: first.start()] if first else prompt
        return head.strip(), opts
    return prompt.strip(), []


_QUESTION_WORDS = {"how", "many", "what", "where", "which", "color", "colour", "colors", "colours", "shape",
                   "there", "image", "picture", "located", "position", "background", "text", "written", "writing",
                   "result", "describe", "description", "corner", "kind", "type", "size", "count", "number",
                   "objects", "contain", "contains", "shown", "show", "shows", "visible", "exactly", "equal",
                   "evaluate", "expression", "calculation", "arithmetic", "output", "code", "print", "value",
                   # common words that lie one edit from a vocabulary word ("does" / "dots", "side" / "size")
                   "does", "have", "with", "that", "this", "these", "those", "from", "into", "some", "says", "read",
                   "word", "words", "than", "more", "less", "other", "same", "both", "each", "every", "also", "true",
                   "false", "answer", "option", "options", "label", "instead", "letters", "following", "question",
                   "please", "choose", "select", "correct", "best", "photo", "seen", "they", "them", "their", "side",
                   "sides", "part", "cell", "made", "drawn", "line", "lines", "tell", "find", "give", "there's",
                   "located", "between", "next", "above", "below", "only", "just", "look", "looks", "like"}
_OCR_DIGITS = str.maketrans({"0": "o", "1": "l", "3": "e", "4": "a", "5": "s", "6": "b", "7": "t", "8": "b",
                             "9": "g", "2": "z"})


#: words a paraphrase puts in place of the grammar's own (a reader of English knows them)
_SYNONYMS = {"numerous": "many", "form": "shape", "forms": "shapes", "hue": "color", "outcome": "result",
             "printed": "written", "displayed": "shown", "depicted": "shown", "placed": "located",
             "positioned": "located", "photo": "image", "picture": "image"}


_VOCAB = (set(SHAPE_WORDS) | GENERIC_WORDS | set(COLOR_WORDS) | set(SIZE_WORDS) | set(NUMBER_WORDS)
          | set(_ROW_WORDS) | set(_COL_WORDS) | _QUESTION_WORDS | set(_SYNONYMS))


def _edits(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insertions, deletions, substitutions, adjacent swaps."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


@functools.lru_cache(maxsize=4096)  # every question of a run goes through here, with the same few words
def _reader_word(tok: str) -> str:
    """A word as the grammar reads it: repaired, then a paraphrase's word replaced by the grammar's own."""
    low = tok.lower()
    if any(c.isdigit() for c in low) and any(c.isalpha() for c in low):
        low = low.translate(_OCR_DIGITS)  # OCR-style noise: "c0l0r" -> "color"
    if low in _VOCAB or len(low) < 4 or not low.isalpha():
        fixed = low if low != tok.lower() and low in _VOCAB else tok
    else:
        limit = 1 if len(low) <= 5 else 2
        scored = sorted((_edits(low, w), w) for w in _VOCAB if abs(len(w) - len(low)) <= limit)
        unique = scored and scored[0][0] <= limit and (len(scored) == 1 or scored[1][0] > scored[0][0])
        fixed = scored[0][1] if unique else tok
    return _SYNONYMS.get(fixed.lower(), fixed)


def repair_typos(text: str) -> str:
    """A question as a reader of English takes it, whatever typos, OCR noise, synonyms or an irrelevant
    sentence did to it: words mapped back to the world's vocabulary (a unique closest word within 1 edit, 2
    for words of 6 letters or more), paraphrases to the grammar's words ("how numerous" -> "how many"), and
    of several sentences the question ones.  Quoted text is left as it is."""
    parts = re.split(r'("[^"]*"|\'[^\']*\')', text)
    out = "".join(p if i % 2 else re.sub(r"[A-Za-z0-9]+", lambda m: _reader_word(m.group(0)), p)
                  for i, p in enumerate(parts))
    out = re.sub(r"\bwhat number of\b", "how many", out, flags=re.I)
    sentences = re.findall(r'[^.?!]*(?:"[^"]*"[^.?!]*)*[.?!]|[^.?!]+$', out)
    asked = [x for x in sentences if x.strip().endswith("?")]
    return " ".join(x.strip() for x in asked) if asked and len(sentences) > 1 else out


def parse_question(prompt: str) -> Question:
    """Classify a question about one image."""
    head, options = split_options(prompt)
    q = _classify(repair_typos(head))
    q.options = options
    return q


#: what a question about an object asks for, by the phrase that asks it (the first that matches)
_ASKS = {
    "count": r"\bhow many\b",
    "color": r"\bwhat\s+(colou?r)\b|\bwhich\s+colou?r\b|\bcolou?r of\b",
    "shape": r"\bwhat\s+(shape|kind of shape|type of shape|object)\b|\bwhich\s+shape\b|\bshape of\b",
    "position": r"\bwhere\b|\bwhich (position|cell|part)\b|\bposition of\b"
                r"|\blocated\b(?!.*\b(top|bottom|left|right|center|centre|middle)\b)",
    "size": r"\bwhat size\b|\bhow (big|large)\b",
}


def _classify(text: str) -> Question:
    low = re.sub(r"^\s*(question|q)\s*:\s*", "", text.lower().strip())
    negated = (m := re.search(r"\bis it (?:false|not true|untrue) that\b", low)) is not None
    if negated:
        low = low[m.end():]
    if re.search(r"\b(describe|description|caption)\b", low):
        return Question("describe")
    quoted = quoted_text(text)
    if re.search(r"\b(result|answer to|equal|equals|evaluate|output|print|return|value of|calculat|sum of)\w*",
                 low) and re.search(r"\b(code|expression|calculation|arithmetic|problem|equation|math|result|"
                                    r"output|evaluate|written|text)\b", low):
        num = re.search(r"\b(?:be|is|equal|equals|equal to|print|output|return)s?\s+(-?\d+)\b", low)
        if num and (negated or re.match(r"\s*(is|does|are|do|will|would)\b", low)):
            return Question("compute_check", value=num.group(1), negated=negated)
        return Question("compute", negated=negated)
    if re.search(r"\b(text|written|write|writing|say|says|read|reads|word|words|caption|label)\b", low) and (
            "background" not in low):
        if quoted and (negated or re.match(r"\s*(is|does|are|do|can)\b", low)):
            return Question("text_check", value=canonical_text(quoted), negated=negated)
        if re.match(r"\s*(is|are|does|do)\b.*\b(any|some)\b", low):
            return Question("text_exists", negated=negated)
        return Question("text", negated=negated)
    if "background" in low:
        return Question("background", negated=negated)
    phrases = object_phrases(_QUOTED.sub(" ", low))
    subject = phrases[0] if phrases else None
    pos = find_position(low)
    nm = re.search(r"\b(exactly |precisely )?(\d+|zero|one|two|three|four|five|six|seven|eight|nine)\b", low)
    if subject is not None and subject.negated and not re.match(r"\s*how many", low):
        negated = not negated
        subject.negated = False
    for kind, rx in _ASKS.items():
        if re.search(rx, low):  # a position question's cell is its answer, not part of the question
            return Question(kind, subject=subject, position=None if kind == "position" else pos, negated=negated)
    if subject is None:
        return Question("unknown", negated=negated)
    if (re.search(r"\b(are there|is there|there are|there is)\b", low) and subject.plural and nm
            and nm.group(2) != "one" and (subject.count or 0) > 1):
        return Question("count_check", subject=subject, number=subject.count, position=pos, negated=negated)
    if re.match(r"\s*(is|are)\s+(the|this|that)\b", low):
        # "Is the red circle in the top left?" / "Is the red circle large?"
        noun = subject.noun()
        rest = low[low.find(noun) + len(noun):]
        if re.search(r"\b(large|big|small|little|tiny)\b", rest):
            size = "large" if re.search(r"\b(large|big)\b", rest) else "small"
            return Question("size_check", subject=subject, value=size, negated=negated)
        rpos = find_position(rest)
        if rpos is not None:
            return Question("position_check", subject=subject, position=rpos, negated=negated)
    return Question("exists", subject=subject, position=pos, negated=negated)
