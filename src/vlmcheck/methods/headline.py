"""The headline metric of a finished run of each method, from its results.json: what the summary of a
sweep, the report's leaderboards and ``vhx compare``'s general-ability check show for a run."""

from __future__ import annotations

from typing import Any

from ..metrics.measured import reason_of


def headline_of(results: dict[str, Any]) -> dict[str, Any]:
    """A run's headline as results.json records it (``metrics.headline``: name, value, ci95, interval); where it
    records none, an entry with no value and :func:`unrecorded`'s sentence as ``not_measured``."""
    m = results.get("metrics", {}) or {}
    entry = m.get("headline")
    if isinstance(entry, dict) and entry.get("name"):
        return entry
    return {"name": "-", "value": None, "ci95": None, "interval": None, "higher_is_better": True,
            "not_measured": unrecorded(results)}


def unrecorded(results: dict[str, Any]) -> str:
    """Why a results.json shows no headline: it records none (``metrics.headline``), and the version that
    wrote it (``spec.vlmcheck_version``); a run that finished no sample records none either."""
    version = (results.get("spec") or {}).get("vlmcheck_version") or "an unknown version"
    return (f"its results.json (written by vlmcheck {version}) records no headline: no sample finished, or that "
            "version did not record one")


def not_measured_reason(results: dict[str, Any]) -> str | None:
    """Why a run's headline is not a measurement, as its method recorded (``metrics.headline.not_measured``,
    metrics/measured.py); None where it is one.  What every surface shows in place of the number."""
    return reason_of(headline_of(results))


def headline(results: dict[str, Any]) -> tuple[str, float | None]:
    entry = headline_of(results)
    return entry["name"], entry.get("value")


def vision_gain_of(results: dict[str, Any]) -> dict[str, Any] | None:
    """The blind control's vision gain beside the headline: sighted minus blind, with its interval and
    the metric it is of (VHExpansion: symmetric accuracy where negations exist, else accuracy)."""
    b = (results.get("metrics") or {}).get("blind")
    if not isinstance(b, dict):
        return None
    if (b.get("vision_gain_symmetric") or {}).get("difference") is not None:
        return {**b["vision_gain_symmetric"], "metric": "symmetric accuracy", "blind": b.get("symmetric_accuracy")}
    if (b.get("vision_gain") or {}).get("difference") is not None:
        metric = "consistency" if "consistency" in b else "accuracy"  # CAST: confirmations in the image modality
        return {**b["vision_gain"], "metric": metric, "blind": b.get(metric)}
    return None
