"""What the report, export, terminal and CLI show about a method's runs: a small per-method view, declared by the
method and looked up by the run's task name, so that nothing above the methods switches on a method's name.

A method gives its task class a ``report_view`` (a :class:`MethodView`), or registers one with
:func:`register_view` (the built-in methods do so in ``methods/views.py``).  A method without one gets
:data:`GENERIC`: its samples one row each (its ``answer``, its numeric fields), its headline in the summary, the
first screen and the leaderboards, its records in the export - never silently absent.

Every field is optional; what a field is for:

- ``label``: the method's name as a reader writes it ("GenCeption"); the task name where empty.
- ``row(result, folder) -> {"summary", "answer", "correct", "images"}``: a finished (or failed) sample's row in
  the report's samples table; ``images`` a list of ``{"path", "label", ...}`` (path relative to the run folder
  or absolute; the other keys are shown beside the thumbnail: ``answer``, ``ok``, ``neg_answer``, ``neg_ok``,
  ``note``).
- ``key_answer(result)``: what two runs of the method are compared on where they disagree (the report marks it).
- ``panels``: the report's per-run sections the method fills, by name (``report/panels.py``: ``chains``,
  ``heatmaps``, ``settings``, ``variants``); ``together``: its sections over several runs of the method
  (``s_curve``).
- ``leaderboard(folders, external_csv) -> board``: the method's leaderboard over several runs (``compare``, the
  report, a sweep), None where it has none.
- ``units``: (field, column): the export explodes a sample into one row per entry of ``result[field]``, naming
  it in ``column``; None: one row per sample.
- ``tables``: further export tables per run, ``{suffix: rows(folder)}`` (CAST's verdicts: ``<run>-verdicts``).
- ``summary(model, metrics) -> [Line]``: what the terminal prints after a run; None: the headline.
- ``columns``: the export's names for columns whose field names would mislead in a tidy row (ChEF's two
  ``answer`` fields, the item's and the setting's, are both the right option's index: ``truth``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple

from ..core.registry import Registry
from .registry import declared


class Line(NamedTuple):
    """One thing the terminal prints about a run: ``text`` (a string, or a table as ``(columns, rows, keys,
    title)``), on stderr where ``err`` (notes, warnings) else stdout; ``kind`` ``"note"``/``"warning"`` is
    prefixed as such; ``highlight`` and ``markup`` as rich takes them."""

    text: Any
    err: bool = False
    kind: str = ""
    highlight: bool | None = None
    markup: bool | None = None
    soft_wrap: bool | None = None


@dataclass(frozen=True)
class MethodView:
    label: str = ""
    row: Callable[[dict[str, Any], Path], dict[str, Any]] | None = None
    key_answer: Callable[[dict[str, Any]], Any] | None = None
    panels: tuple[str, ...] = ()
    together: tuple[str, ...] = ()
    leaderboard: Callable[..., dict[str, Any]] | None = None
    units: tuple[str, str] | None = None
    tables: Mapping[str, Callable[[Path], Iterator[dict[str, Any]]]] = field(default_factory=dict)
    summary: Callable[[str, dict[str, Any]], list[Line]] | None = None
    columns: Mapping[str, str] = field(default_factory=dict)


#: a method that declares no view: generic rows, its headline, its records
GENERIC = MethodView()

#: ``register_view(name, view)``: what the report, export, terminal and CLI show about task ``name``'s runs (for a
#: task class that does not carry ``report_view`` itself)
VIEWS: Registry[MethodView] = Registry("method view")
register_view = VIEWS.add


def view_for(name: str | None) -> MethodView:
    """Task ``name``'s view: registered, else its class's ``report_view``, else :data:`GENERIC`."""
    try:
        return declared(str(name), VIEWS, "report_view", lambda v: isinstance(v, MethodView)) or GENERIC
    except (ImportError, AttributeError):  # a method that cannot load here still gets the generic view
        return GENERIC


def label_of(name: str | None) -> str:
    return view_for(name).label or str(name)
