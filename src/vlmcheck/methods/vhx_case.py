"""VHExpansion's test case, in a module of its own: vhx_cases.py reads records through records.py, and both build
it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Case:
    """A yes/no test case.  A slotted dataclass: a million of them are a run's sample list (about 0.5 kB each,
    against 1.1 kB as a pydantic model), and Ray's workers find the image it names (run/ray_worker.py)."""
    id: str
    image: str
    question: str
    answer: str
    meta: dict[str, Any] = field(default_factory=dict)
    root: str | None = None  # the folder the image must stay inside (core/inputs.py)
