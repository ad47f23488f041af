"""CAST's verdicts as rows: the export's ``<run>-verdicts`` table and ``load_tables``' ``cast_verdicts``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from ..core.files import JsonlRecords, read_results


def cast_verdict_rows(folder: str | Path) -> Iterator[dict[str, Any]]:
    """A CAST run's verdicts as rows, one per pair, repeat, generation modality, statement, validation
    modality and prompt format: ``verdict`` is 1 (the statement holds), 0 (it does not) or None (unread),
    ``raw`` the model's words; per-pair consistency is a ``groupby`` away, no JSON to parse."""
    folder = Path(folder)
    spec = (read_results(folder).get("spec") or {}).get("task_spec") or {}
    base = {"run": str(folder), "model": spec.get("vlm") or spec.get("model")}
    for rec in JsonlRecords(folder / "samples.jsonl"):
        if rec.get("status") != "done":
            continue
        first = rec.get("result") or {}
        for repeat, r in enumerate([first, *first.get("repeats", [])]):
            for g, entry in (r.get("generation") or {}).items():
                for k, st in enumerate(entry.get("statements") or []):
                    cells = [(key.partition("|"), False, v) for key, v in (st.get("verdicts") or {}).items()]
                    # the blind control: validated in the image modality, the images withheld
                    cells += [(("image", "|", fmt), True, v) for fmt, v in (st.get("blind") or {}).items()]
                    for (modality, _, fmt), withheld, v in cells:
                        yield {**base, "sample_id": rec.get("sample_id"), "repeat": r.get("repeat", repeat),
                               "generation": g, "statement": k + 1, "validation": modality, "format": fmt,
                               "blind": withheld, "verdict": v.get("verdict"), "raw": v.get("raw"),
                               "text": st.get("text")}
