"""What the report, export, terminal and CLI show about a method's runs: a small per-method view, declared by the
method (docs/architecture.md, "Where to add things"), so that nothing above the methods switches on its name; a
method without one gets :data:`GENERIC`, never silently absent."""

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
    label: str = ""  # the method's name as a reader writes it ("GenCeption"); the task name where empty
    # a sample's row in the report's samples table, {"summary", "answer", "correct", "images"}: images a list of
    # {"path" (relative to the run folder, or absolute), "label", and answer/ok/neg_answer/neg_ok/note shown beside}
    row: Callable[[dict[str, Any], Path], dict[str, Any]] | None = None
    key_answer: Callable[[dict[str, Any]], Any] | None = None  # what two runs are compared on where they disagree
    # the report's per-run sections it fills, by name (report/panels.py: chains, heatmaps, settings, variants), and
    # its sections over several runs of the method (s_curve)
    panels: tuple[str, ...] = ()
    together: tuple[str, ...] = ()
    # (folders, external_csv) -> its leaderboard over several runs (compare, the report, a sweep); None: none
    leaderboard: Callable[..., dict[str, Any]] | None = None
    # (field, column): the export's one row per entry of result[field], named in column; None: one per sample
    units: tuple[str, str] | None = None
    # further export tables per run, {suffix: rows(folder)} (CAST's verdicts: <run>-verdicts)
    tables: Mapping[str, Callable[[Path], Iterator[dict[str, Any]]]] = field(default_factory=dict)
    summary: Callable[[str, dict[str, Any]], list[Line]] | None = None  # what the terminal prints; None: headline
    # the export's names for columns whose field names would mislead in a tidy row (ChEF's two ``answer`` fields,
    # the item's and the setting's, are both the right option's index: ``truth``)
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
