"""Plain text laid out for a terminal's width: lines wrapped between words but never between a figure and its
name or inside its interval, and ``chef list``'s listing."""

from __future__ import annotations

import re
import textwrap

#: the spaces a line is never wrapped at: around "=" before a figure, before a figure's interval, inside it
_GLUED = re.compile(r"(?<=\S) = (?=[-+\d.])|(?<=\d) (?=\[[-+\d.])|\[[-+\d.][\d.eE+-]*, [-+\d.][\d.eE+-]*\]")


def wrap_figures(text: str, width: int) -> str:
    """``text`` wrapped to ``width`` between words, a figure kept on one line with its name and interval."""
    glued = _GLUED.sub(lambda m: m.group(0).replace(" ", "\0"), text)
    lines = textwrap.wrap(glued, width, break_long_words=False, break_on_hyphens=False, subsequent_indent="  ")
    return "\n".join(ln.replace("\0", " ") for ln in lines) or text


def recipe_lines(rows: list[list[str]], long: bool, width: int) -> list[str]:
    """``chef list``: a line per recipe (name, desideratum, scenario, default inferencer), columns aligned;
    ``long``: a block per recipe with the other inferencers it takes and what it is, wrapped to ``width``."""
    if not long:
        cells = [["recipe", "desideratum", "scenario", "inferencer"]] + [
            [n, d.replace("_", " "), sc, inf.split(" (", 1)[0]] for n, d, sc, inf, _ in rows]
        widths = [max(len(r[i]) for r in cells) for i in range(3)]
        return ["  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3] for r in cells] + [
            "what each recipe measures, and its other inferencers: vlmcheck chef list --long"]
    width, out = max(40, width), []
    for name, desideratum, scenario, inferencer, description in rows:
        out += textwrap.wrap(f"{name}  {desideratum}; scenario {scenario}, inferencer {inferencer}", width,
                             subsequent_indent="  ")
        out += textwrap.wrap(" ".join(str(description).split()), width, initial_indent="    ",
                             subsequent_indent="    ")
    return out
