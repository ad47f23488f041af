"""The headline metric of a finished run of each method, from its results.json: what the summary of a
sweep, the report's leaderboards and ``vhx compare``'s general-ability check show for a run."""

from __future__ import annotations

from typing import Any

from ..metrics.measured import reason_of


def headline_of(results: dict[str, Any]) -> dict[str, Any]:
    """A run's headline as results.json records it (``metrics.headline``: name, value, ci95, interval); for a run
    made before every method recorded one, the same fields read from where that run kept them."""
    m = results.get("metrics", {}) or {}
    entry = m.get("headline")
    if isinstance(entry, dict) and entry.get("name"):
        return entry
    name, value = headline(results)
    return {"name": name, "value": value, "ci95": _legacy_ci(results, name), "interval": None,
            "higher_is_better": True}


def not_measured_reason(results: dict[str, Any]) -> str | None:
    """Why a run's headline is not a measurement, as its method recorded (``metrics.headline.not_measured``,
    metrics/measured.py); None where it is one.  What every surface shows in place of the number."""
    return reason_of(headline_of(results))


def _legacy_ci(results: dict[str, Any], name: str) -> list | None:
    m, task = results.get("metrics", {}) or {}, results.get("task")
    if task == "genception":
        return (m.get(f"GC@{m.get('T')}") or {}).get("ci95")
    if task == "vhexpansion":
        return (m.get("variants", {}).get("original") or {}).get("symmetric_accuracy_ci95")
    if task == "describe":
        return (m.get("keyword_recall") or {}).get("ci95")
    if task == "chef" and name == "POPE accuracy":
        return (m.get("pope") or {}).get("accuracy_ci95")
    if task == "chef" and name == "accuracy":
        return next(iter(m.get("settings", {}).values()), {}).get("accuracy_ci95")
    return None


def headline(results: dict[str, Any]) -> tuple[str, float | None]:
    """(name, value) of a run's headline metric, from its results.json."""
    m = results.get("metrics", {})
    entry = m.get("headline")
    if isinstance(entry, dict) and entry.get("name"):  # recorded by the run (every method since issue 34)
        return entry["name"], entry.get("value")
    task = results.get("task")
    if task == "genception":
        k = f"GC@{m.get('T')}"
        return k, (m.get(k) or {}).get("score")
    if task == "vhexpansion":
        return "symmetric accuracy", (m.get("variants", {}).get("original") or {}).get("symmetric_accuracy")
    if task == "cast":
        top = m.get("topk", {}).get("top3", {}).get("mean")
        if top:
            vals = [top[g][v]["score"] for g in top for v in top[g] if g != v and top[g][v]["score"] is not None]
            return "CAST Top-3 cross-modal consistency", sum(vals) / len(vals) if vals else None
    if task == "chef":
        if m.get("headline") in ("weighted_accuracy", "grounding_accuracy"):  # Omnibenchmark, VOC2012 (turns.py)
            name = {"weighted_accuracy": "WeightedACC", "grounding_accuracy": "grounding accuracy (mAP@0.5)"}
            return name[m["headline"]], m.get(m["headline"])
        if m.get("vanilla_accuracy") is not None:  # MMBench: VanillaEval is the headline (ChEF D.2)
            return "VanillaEval accuracy", m["vanilla_accuracy"]
        for k in ("overall", "riam", "mr_weighted"):
            if k in m:
                return k, m[k]
        if "pope" in m:
            return "POPE accuracy", m["pope"]["accuracy"]
        if isinstance(m.get("rrm"), dict) and "both" in m["rrm"]:  # robustness: ChEF's RRM, image + text corrupted
            return "RRM (image and text corrupted)", m["rrm"]["both"]
        st = next(iter(m.get("settings", {}).values()), {})
        return "accuracy", st.get("accuracy")
    if task == "describe":
        if (m.get("keyword_recall") or {}).get("mean") is not None:
            return "keyword recall", m["keyword_recall"]["mean"]
        status, n = m.get("answer_status") or {}, m.get("n") or 0
        return "share answered", (status.get("ok", 0) / n) if n else None  # no reference keywords: coverage
    return "-", None


def vision_gain_of(results: dict[str, Any]) -> dict[str, Any] | None:
    """The blind control's vision gain beside the headline (issue 35): sighted minus blind, with its interval and
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
