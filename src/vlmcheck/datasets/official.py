"""A benchmark's official figure (docs/datasets.md, "Official figures"): the score its authors' code reports,
declared once in the benchmark's own module with :func:`declare`.  The methods never name a benchmark: an item
carries ``meta["official"]`` (methods/records.py), a method folds its answers with :class:`Tally`, and
``results.json`` holds the figures under ``metrics["official"]``.  A share comes with its 95 % interval clustered
by image (:func:`share`); a declaration's ``outcomes`` gives its shares per question or group, which ``compare``
pairs two runs on."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..core.registry import Registry
from ..metrics.decisions import proportion_interval_counts
from .base import _load_readers


@dataclass(frozen=True, slots=True)
class Answer:
    """One benchmark question as a run answered it."""

    #: the sampled unit: the question's image
    unit: str
    correct: bool
    category: str | None = None
    #: what ties questions together in the benchmark's own scoring (MME's image, MMVP's pair, MMBench's question
    #: whose circular copies these are)
    group: str | None = None
    #: MMBench's circular copy number (0: the question itself)
    copy: int = 0
    #: yes/no benchmarks: the model's answer read as yes, and the truth
    said_yes: bool | None = None
    truth_yes: bool | None = None
    #: the question's sample id, which pairs it with the same question in another run (``compare``)
    key: str | None = None


#: a declaration's shares per unit: ``{figure: {key: (value, unit)}}``, whose means are the figures
Outcomes = Callable[[list[Answer]], dict[str, dict[str, tuple[float, str]]]]


@dataclass(frozen=True)
class Official:
    """A benchmark's official figure: its name, where its definition comes from, and how it is computed from the
    answers (``compute(answers) -> {figure: {"value", "ci95"?, "interval"?, ...}, "notes"?: [...]}``)."""

    benchmark: str
    name: str
    source: str
    compute: Callable[[list[Answer]], dict[str, Any]]
    #: for ``compare`` to pair two runs on (None: no figure is such a mean)
    outcomes: Outcomes | None = None


OFFICIAL: Registry[Official] = Registry("official figure", load=_load_readers)


def declare(benchmark: str, name: str, source: str, outcomes: Outcomes | None = None, *,
            replace: bool = False) -> Callable[[Callable[[list[Answer]], dict[str, Any]]], Any]:
    """Declare ``compute`` as ``benchmark``'s official figure; ``outcomes``: its shares per unit, for ``compare``."""

    def deco(compute: Callable[[list[Answer]], dict[str, Any]]) -> Callable[[list[Answer]], dict[str, Any]]:
        OFFICIAL.add(benchmark, Official(benchmark, name, source, compute, outcomes), replace=replace, stacklevel=2)
        return compute

    return deco


def official_for(benchmark: str | None) -> Official | None:
    """The official figure ``benchmark`` declares, or None (the benchmarks' modules are imported first)."""
    return OFFICIAL.get(benchmark) if benchmark else None


def declared() -> dict[str, Official]:
    return dict(OFFICIAL)


def share(hits: Sequence[bool], units: Sequence[str], unit: str = "image") -> dict[str, Any]:
    """A share with its clustered Wilson 95 % interval: ``{"value", "ci95", "interval", "n"}``."""
    if not len(hits):
        return {"value": None, "ci95": None, "n": 0}
    order: dict[str, int] = {}
    idx = np.array([order.setdefault(u, len(order)) for u in units])
    h = np.asarray(hits, dtype=float)
    k = np.bincount(idx, weights=h, minlength=len(order))
    n = np.bincount(idx, minlength=len(order)).astype(float)
    ci, how = proportion_interval_counts(k, n, unit)
    return {"value": float(h.mean()), "ci95": [float(ci[0]), float(ci[1])], "interval": how, "n": int(len(h))}


def grouped(answers: Iterable[Answer]) -> dict[str, list[Answer]]:
    """The answers by group (an answer without a group is its own), in the order the groups first appear."""
    out: dict[str, list[Answer]] = {}
    for i, a in enumerate(answers):
        out.setdefault(a.group if a.group is not None else f"#{i}", []).append(a)
    return out


def accuracy(answers: list[Answer]) -> dict[str, Any]:
    """Plain accuracy over the questions, clustered by image (SEED-Bench's and ScienceQA's figure)."""
    return {"accuracy": share([a.correct for a in answers], [a.unit for a in answers])}


def per_question(answers: Iterable[Answer], value: Callable[[Answer], bool] = lambda a: a.correct
                 ) -> dict[str, tuple[float, str]]:
    """Each question's outcome (right: 1, else 0; or ``value``), keyed by its sample id, unit its image."""
    return {str(a.key): (float(value(a)), a.unit) for a in answers if a.key is not None}


def per_group(groups: dict[str, list[Answer]], unit: Callable[[list[Answer]], str] = lambda qs: qs[0].unit
              ) -> dict[str, tuple[float, str]]:
    """Each group's outcome (every question right: 1, else 0), keyed by the group."""
    return {g: (float(all(a.correct for a in qs)), unit(qs)) for g, qs in groups.items()}


def accuracy_outcomes(answers: list[Answer]) -> dict[str, dict[str, tuple[float, str]]]:
    return {"accuracy": per_question(answers)}


@dataclass
class Tally:
    """The answers of a run's questions whose benchmark has an official figure; :meth:`result`: the figures."""

    answers: dict[str, list[Answer]] = field(default_factory=dict)

    def add(self, benchmark: str | None, answer: Answer) -> None:
        if benchmark and (benchmark in self.answers or official_for(benchmark) is not None):
            self.answers.setdefault(benchmark, []).append(answer)

    def result(self) -> dict[str, Any] | None:
        if not self.answers:
            return None
        # one benchmark per run in practice; several (a mixed source) each get their own entry
        out = {b: figures(b, a) for b, a in self.answers.items()}
        return next(iter(out.values())) if len(out) == 1 else {"benchmarks": out}


def figures(benchmark: str, answers: list[Answer]) -> dict[str, Any]:
    """``metrics["official"]`` of ``answers``: the declaration's name and source, then its figures."""
    off = OFFICIAL[benchmark]
    return {"benchmark": benchmark, "name": off.name, "source": off.source, "n_questions": len(answers),
            **off.compute(answers)}


def answer_of(meta: dict[str, Any] | None, *, unit: str, correct: bool, category: str | None = None,
              copy: int = 0, said_yes: bool | None = None, truth_yes: bool | None = None, key: str | None = None
              ) -> tuple[str | None, Answer]:
    """(benchmark, Answer) of an item whose ``meta["official"]`` the records layer wrote."""
    o = (meta or {}).get("official") or {}
    return o.get("benchmark"), Answer(unit=unit, correct=bool(correct), category=category, group=o.get("group"),
                                      copy=int(copy or 0), said_yes=said_yes, truth_yes=truth_yes, key=key)


def rows(official: dict[str, Any] | None) -> list[tuple[str, str, dict[str, Any]]]:
    """(benchmark, figure, entry) of every figure in ``metrics["official"]``."""
    if not isinstance(official, dict):
        return []
    blocks = official["benchmarks"].values() if "benchmarks" in official else [official]
    return [(str(b.get("benchmark")), k, v) for b in blocks for k, v in b.items()
            if isinstance(v, dict) and "value" in v]


def benchmark_of(benchmark: str | None, source: str) -> str | None:
    """The benchmark whose official figure a dataset's questions count toward: the one the reader or the user
    named, else the one its file or Hub repository is named for - the name's first ``_``-separated word, without
    dashes, equal to a benchmark that declares a figure (VLMEvalKit's ``MMBench_DEV_EN.tsv``,
    ``SEEDBench_IMG.tsv``, ``ScienceQA_TEST.tsv``; the Hub's ``lmms-lab/MME``, ``lmms-lab/SEED-Bench``); a
    name that only starts like one (``MME-RealWorld``) is none."""
    if benchmark:
        return benchmark
    text = source.partition("?")[0].rstrip("/")
    stem = PurePosixPath(text.removeprefix("hfds:")).name.rsplit(".", 1)[0] if text else ""
    word = re.sub(r"[-\s]", "", stem.split("_")[0]).lower()
    return word if word in declared() else None
