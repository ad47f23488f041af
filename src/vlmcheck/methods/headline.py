"""The headline metric of a finished run of each method, from its results.json: what the summary of a
sweep, the report's leaderboards and ``vhx compare``'s general-ability check show for a run."""

from __future__ import annotations

from typing import Any


def headline(results: dict[str, Any]) -> tuple[str, float | None]:
    """(name, value) of a run's headline metric, from its results.json."""
    m = results.get("metrics", {})
    task = results.get("task")
    if task == "genception":
        k = f"GC@{m.get('T')}"
        return k, (m.get(k) or {}).get("score")
    if task == "vhexpansion":
        return "symmetric accuracy", (m.get("variants", {}).get("original") or {}).get("symmetric_accuracy")
    if task == "cast":
        if (m.get("headline") or {}).get("name"):
            return m["headline"]["name"], m["headline"]["value"]
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
