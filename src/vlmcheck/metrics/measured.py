"""When a headline is a measurement: the entry of a headline that is not one, and the floor on answers read
(docs/methods.md, "When a headline is measured").  Each method decides it where it defines its headline.
"""

from __future__ import annotations

from typing import Any, Mapping

#: the least share of a figure's answers the parser must have read for the figure to be a measurement: below it,
#: the unread answers (counted as wrong, or as POPE's "yes") could move it more than the read ones
READ_FLOOR = 0.5

#: the field of a headline entry that holds why it is not a measurement
REASON = "not_measured"


def not_measured(name: str, reason: str, higher_is_better: bool = True) -> dict[str, Any]:
    """The headline entry of a run whose headline is not a measurement: its name, value and interval null, and
    ``not_measured``, the reason in words (a sentence without its leading capital or final full stop)."""
    return {"name": name, "value": None, "ci95": None, "interval": None, "higher_is_better": higher_is_better,
            REASON: reason}


def share_headline(name: str, k: Any, n: Any, unit: str, why: str | None = None) -> dict[str, Any]:
    """A headline that is a share of right answers from each sampled unit's right answers ``k`` and answers ``n``
    (arrays), with its clustered Wilson interval; :func:`not_measured` where ``why`` says it is not measured."""
    from .decisions import headline_entry, proportion_interval_counts

    if why:
        return not_measured(name, why)
    ci, how = proportion_interval_counts(k, n, unit)
    return headline_entry(name, float(k.sum() / n.sum()), ci, how)


def reason_of(entry: Any) -> str | None:
    """Why a headline entry is not a measurement (None: it is one, or there is no entry)."""
    return entry.get(REASON) if isinstance(entry, dict) and entry.get(REASON) else None


def unread_reason(read_shares: Mapping[str, float], what: str = "answers") -> str | None:
    """Why a figure of these settings' answers is not measured (``read_shares``: setting -> share read), where
    any is below :data:`READ_FLOOR`; else None."""
    low = {k: v for k, v in read_shares.items() if v < READ_FLOOR}
    if not low:
        return None
    listing = ", ".join(f"{k} {v:.0%}" for k, v in low.items())
    return (f"the parser read fewer than {READ_FLOOR:.0%} of the {what} ({listing} read), so the figure would "
            "measure the answer format, not the model")
