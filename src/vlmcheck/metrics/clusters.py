"""Per-unit sums folded one answer at a time (flat arrays: a summary streamed over a million records holds
numbers per unit, where pandas' ``groupby`` would need every answer first), and bootstrap draws in bounded memory.
Units keep the order in which they first appeared, so a bootstrap draws the same units as the list-based functions.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import repeat
from typing import Iterable, Iterator, Sequence

from .._lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)

#: the most unit indices one chunk of bootstrap draws holds (8 MB of int64)
DRAW_CELLS = 1 << 20


@dataclass(eq=False)  # shared by identity
class Units:
    """Unit labels numbered once, shared by every :class:`UnitSums` of one summary (a label is held once)."""

    ids: dict[str, int] = field(default_factory=dict)

    def __call__(self, label: str) -> int:
        return self.ids.setdefault(label, len(self.ids))

    def labels(self) -> list[str]:
        return list(self.ids)


class UnitSums:
    """Per-unit sums of ``width`` columns and the number of answers, folded one answer at a time."""

    def __init__(self, width: int = 1, units: Units | None = None) -> None:
        self.units = units if units is not None else Units()
        self.cols = [array("d") for _ in range(width)]
        self.count = array("q")
        self.first = array("q")  # the order in which each unit first appeared here (-1: never)
        self.n_units = 0
        self.n = 0

    @classmethod
    def of(cls, labels: Iterable[str], *columns: Sequence[float]) -> UnitSums:
        """The sums of lists of answers (one value per answer in each column) and their units."""
        out = cls(len(columns))
        for i, label in enumerate(labels):
            out.add(label, *(float(c[i]) for c in columns))
        return out

    def add(self, label: str, *values: float) -> None:
        i = self.units(label)
        if i >= len(self.count):
            self._grow(i + 1)
        if self.first[i] < 0:
            self.first[i] = self.n_units
            self.n_units += 1
        self.count[i] += 1
        self.n += 1
        for col, v in zip(self.cols, values):
            col[i] += v

    def _grow(self, size: int) -> None:
        extra = max(size, 2 * len(self.count), 64) - len(self.count)
        for col in self.cols:
            col.frombytes(bytes(8 * extra))
        self.count.frombytes(bytes(8 * extra))
        self.first.extend(repeat(-1, extra))

    def _order(self) -> np.ndarray:
        first = np.array(self.first, dtype=np.int64)
        seen = np.flatnonzero(first >= 0)
        return seen[np.argsort(first[seen], kind="stable")]

    def sums(self, column: int = 0) -> np.ndarray:
        """Per unit, in order of first appearance: the sum of ``column``."""
        return np.array(self.cols[column], dtype=float)[self._order()]

    def sizes(self) -> np.ndarray:
        """Per unit, in order of first appearance: how many answers."""
        return np.array(self.count, dtype=float)[self._order()]

    def total(self, column: int = 0) -> float:
        return float(sum(self.cols[column]))


def draws(rng: np.random.Generator, n_units: int, n_boot: int, cells: int | None = None) -> Iterator[np.ndarray]:
    """The bootstrap's resamples (``n_boot`` rows of ``n_units`` unit indices) in chunks of at most ``cells``
    indices: the rows of one ``(n_boot, n_units)`` draw, without its 16 GB at a million units."""
    step = max(1, (DRAW_CELLS if cells is None else cells) // max(n_units, 1))
    for done in range(0, n_boot, step):
        yield rng.integers(0, n_units, size=(min(step, n_boot - done), n_units))


#: resamples' weights kept whole up to this many cells (32 MB); every cell of a CAST summary reuses them
WEIGHT_CELLS = 1 << 22


@lru_cache(maxsize=2)
def _weights(seed: int, n_units: int, n_boot: int) -> np.ndarray:
    w = np.concatenate(list(_weight_chunks(seed, n_units, n_boot)))
    w.flags.writeable = False
    return w


def _weight_chunks(seed: int, n_units: int, n_boot: int) -> Iterator[np.ndarray]:
    for idx in draws(np.random.default_rng(seed), n_units, n_boot):
        rows = len(idx)
        flat = (idx + np.arange(rows)[:, None] * n_units).ravel()
        yield np.bincount(flat, minlength=rows * n_units).reshape(rows, n_units).astype(float)


def resampled_sums(values: np.ndarray, seed: int, n_boot: int) -> np.ndarray:
    """Per resample of ``draws(default_rng(seed), len(values), n_boot)``, ``values[idx].sum(1)`` as one product
    (times each unit was drawn) @ values; exactly equal for counts (integer sums below 2**53)."""
    n = len(values)
    if n_boot * n <= WEIGHT_CELLS:
        return _weights(seed, n, n_boot) @ values
    return np.concatenate([w @ values for w in _weight_chunks(seed, n, n_boot)])
