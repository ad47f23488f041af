"""Issue 62: every surface decides on the headline it prints.  Constructed runs whose headlines, margins and
p-values are computed here by hand from the methods' definitions: CAST's headline pools verdicts per cell over
pairs and averages the cells (the authors' Top-k analysis); its paired test swaps whole pairs between the runs
and recomputes that headline, enumerated here over every swap pattern."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

CAST_NAME = "CAST Top-3 cross-modal consistency"
MODS = ("text", "image", "both")
FMTS = ("one_both", "true_false", "yes_no")


# ----------------------------------------------------------------------------- constructed runs

def _cast_pair(i: int, statements: int, confirmed: int) -> dict:
    """A scene pair whose every generation wrote ``statements`` statements, the first ``confirmed`` of them
    confirmed by every validation (cross-modal or not) in every format, the others refuted."""
    gen = {g: {"statements": [{"text": f"s{j}", "verdicts": {f"{v}|{f}": {"verdict": int(j < confirmed)}
                                                             for v in MODS for f in FMTS}}
                              for j in range(statements)]} for g in MODS}
    return {"a": f"p{i}a", "b": f"p{i}b", "generation": gen}


def _cast(folder, model, pairs):
    """A CAST run on pairs 0..n-1: (statements, confirmed) per pair; its headline from the run's own scorer."""
    from vlmcheck.methods.cast_scores import cast_headline

    folder.mkdir(parents=True)
    results = [_cast_pair(i, s, c) for i, (s, c) in enumerate(pairs)]
    rows = [{"sample_id": f"pair{i}", "status": "done", "task": "cast", "seq": i, "result": r}
            for i, r in enumerate(results)]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    h = cast_headline(results)
    (folder / "results.json").write_text(json.dumps(
        {"task": "cast", "spec": {"task_spec": {"vlm": model}}, "counts": {"done": len(rows), "samples": len(rows)},
         "metrics": {"n_pairs": len(rows), "headline": h}}))
    return folder


# A: pairs 0-9 one statement, confirmed (1 of 1); pairs 10-19 three statements, none confirmed (0 of 3).
# Pooled per cell: 10 / 40 = 0.250 (the mean of per-pair shares would be 0.500).
# B: pairs 0-4 3 of 3, pairs 5-14 0 of 1, pairs 15-19 1 of 3.  Pooled: 20 / 40 = 0.500 (mean share 0.333).
A_PAIRS = [(1, 1)] * 10 + [(3, 0)] * 10
B_PAIRS = [(3, 3)] * 5 + [(1, 0)] * 10 + [(3, 1)] * 5


def exact_swap_p(a, b, delta=0.0):
    """Every one of the 2^n swap patterns of whole pairs: the headline (here one pooled ratio, every cell and
    format alike) recomputed for each; the share at least as far from 0 as the observed difference."""
    a, b = np.asarray(a, float), np.asarray(b, float)  # (confirmed, parsed) per pair, the 3 statements' worth
    n = len(a)
    S = ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1).astype(float)
    bs = b.copy()
    bs[:, 0] += delta * b[:, 1]
    move = bs - a
    ca, pa = a[:, 0].sum() + S @ move[:, 0], a[:, 1].sum() + S @ move[:, 1]
    cb, pb = bs[:, 0].sum() - S @ move[:, 0], bs[:, 1].sum() - S @ move[:, 1]
    t = ca / pa - cb / pb
    obs = a[:, 0].sum() / a[:, 1].sum() - bs[:, 0].sum() / bs[:, 1].sum()
    return float((np.abs(t) >= abs(obs) - 1e-12).mean())


def test_cast_headline_of_the_constructed_runs_by_hand(tmp_path):
    a = _cast(tmp_path / "A", "A", A_PAIRS)
    b = _cast(tmp_path / "B", "B", B_PAIRS)
    assert json.loads((a / "results.json").read_text())["metrics"]["headline"]["value"] == pytest.approx(0.25)
    assert json.loads((b / "results.json").read_text())["metrics"]["headline"]["value"] == pytest.approx(0.5)
