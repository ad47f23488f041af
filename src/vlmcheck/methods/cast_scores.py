"""CAST's scores: consistency matrices, the headline and the blind control, from each pair's verdicts.

A cell (generation x validation modality x format) pools the parsed verdicts of the statements with index < k
over pairs, as the authors' analysis computes Top-k; how each interval is made: docs/methods.md, "CAST".  Folded:
each pair's verdicts become one small array of codes (:func:`verdict_codes`), all the scores read, so
:class:`CastSummary` holds a pair in about 150 bytes instead of its record's 25 kB.
"""

from __future__ import annotations

import math
import warnings
from array import array
from typing import Any, Sequence

import numpy as np

from ..metrics.clusters import UnitSums, Units, resampled_sums
from ..metrics.decisions import expanded_percentile, headline_entry, too_few_units, widen_degenerate
from ..metrics.measured import not_measured, unread_reason
from .blind import blind_block_sums
from .repeats import spread

MODALITIES = ("text", "image", "both")
FORMATS = ("one_both", "true_false", "yes_no")
# a statement position's verdict, per (generation, validation, format)
ABSENT, UNPARSED, PARSED, CONFIRMED = 0, 1, 2, 3
UNIT = "scene pair"
#: the headline's cells, generated in one modality and validated in another, in the order of its counts
CROSS_CELLS = tuple((g, v) for g in MODALITIES for v in MODALITIES if g != v)


def verdict_codes(result: dict[str, Any], positions: int) -> np.ndarray:
    """A pair's verdicts as codes, shape (generation, validation, format, position) for the first
    ``positions`` statements of each generation: CONFIRMED (verdict 1), PARSED (another verdict), UNPARSED
    (none could be read) or ABSENT (the generation gave fewer statements)."""
    codes = np.zeros((len(MODALITIES), len(MODALITIES), len(FORMATS), positions), dtype=np.int8)
    for gi, g in enumerate(MODALITIES):
        for p, st in enumerate(result["generation"].get(g, {}).get("statements", [])[:positions]):
            verdicts = st["verdicts"]
            for vi, v in enumerate(MODALITIES):
                for fi, f in enumerate(FORMATS):
                    verdict = verdicts[f"{v}|{f}"]["verdict"]
                    codes[gi, vi, fi, p] = CONFIRMED if verdict == 1 else PARSED if verdict is not None else UNPARSED
    return codes


def _counts(codes: np.ndarray, g: str, v: str, fmt: str, positions: Sequence[int]) -> np.ndarray:
    """Per pair: [confirming verdicts, parsed verdicts, all verdicts] over statements at ``positions``."""
    c = codes[:, MODALITIES.index(g), MODALITIES.index(v), FORMATS.index(fmt)][:, list(positions)]
    return np.stack([(c == CONFIRMED).sum(1), (c >= PARSED).sum(1), (c >= UNPARSED).sum(1)], axis=1).astype(float)


def _ratio(c: np.ndarray) -> np.ndarray:
    return np.divide(c[..., 0], c[..., 1], out=np.full(c.shape[:-1], np.nan), where=c[..., 1] > 0)


def _cell(counts: dict[str, np.ndarray], fmts, seed: int, n_boot: int = 2000) -> dict[str, Any]:
    """Pooled score per format (confirming / parsed, over all pairs), then the mean over ``fmts``;
    the bootstrap resamples pairs, all formats with the same draw."""
    def score(c: dict[str, np.ndarray]) -> np.ndarray:
        per = np.stack([_ratio(c[f]) for f in fmts])
        with warnings.catch_warnings():  # a cell with no parsed verdict in any format stays NaN (None)
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(per, axis=0)

    totals = {f: counts[f].sum(axis=0) for f in fmts}
    value = float(score(totals))
    n_total = sum(totals[f][2] for f in fmts)
    n_parsed = sum(totals[f][1] for f in fmts)
    ci = None
    n_pairs = len(next(iter(counts.values())))
    if not np.isnan(value) and not too_few_units(n_pairs):
        sums = resampled_sums(np.concatenate([counts[f] for f in fmts], axis=1), seed, n_boot)
        boots = score({f: sums[:, 3 * i:3 * i + 3] for i, f in enumerate(fmts)})
        boots = boots[~np.isnan(boots)]
        ci = expanded_percentile(boots, n_pairs)
    point = None if np.isnan(value) else value
    ci, widened = widen_degenerate(ci, point, n_pairs, few=True)  # few or all-equal pairs: the bound on the pairs
    return {"score": point, "ci95": ci, "ci_method": _ci_method(n_pairs, widened) if ci is not None else None,
            "unparseable_rate": (1 - n_parsed / n_total) if n_total else None, "n_verdicts": int(n_total)}


def _ci_method(n: int, widened: bool) -> str:
    """How a cell's or the headline's interval was made; a bound says so and why (report/html.bound_note)."""
    if not widened:
        return "bootstrap, resampling pairs (expanded percentile)"
    if too_few_units(n):
        return (f"{'clopper-pearson' if n < 2 else 'wilson'} bound on the {n} pair(s) as units (too few pairs "
                "for a bootstrap: fewer units than any test needs to reject anything)")
    return "wilson bound on n pairs (every pair the same score)"


def _codes_of(results: list[dict[str, Any]], positions: int) -> np.ndarray:
    shape = (len(MODALITIES), len(MODALITIES), len(FORMATS), positions)
    return np.stack([verdict_codes(r, positions) for r in results]) if results else np.zeros((0, *shape), np.int8)


def cast_scores(results: list[dict[str, Any]], k_values=(1, 3, 5), seed: int = 0, k_max: int = 5) -> dict[str, Any]:
    """Consistency matrices per format and format-averaged: Top-k (statements with index < k) and per
    statement position, pooled over pairs as the authors' analysis does, with bootstrap CIs over pairs."""
    positions = max(*k_values, k_max, 3)
    counts = np.array([[len(r["generation"].get(g, {}).get("statements", [])) for g in MODALITIES]
                       for r in results], dtype=np.int64).reshape(len(results), len(MODALITIES))
    return scores_of_codes(_codes_of(results, positions), counts, k_values, seed, k_max)


def scores_of_codes(codes: np.ndarray, statements: np.ndarray, k_values=(1, 3, 5), seed: int = 0,
                    k_max: int = 5) -> dict[str, Any]:
    """:func:`cast_scores` from the pairs' verdict codes and their statement counts per generation modality."""
    out: dict[str, Any] = {"n_pairs": len(codes), "statements": {}, "topk": {}, "position": {}}
    for gi, g in enumerate(MODALITIES):
        n = statements[:, gi]
        out["statements"][g] = {"mean_per_pair": float(np.mean(n)) if len(n) else 0.0,
                                "pairs_without": int((n == 0).sum())}

    def matrices(positions) -> dict[str, Any]:
        cells: dict[str, Any] = {fmt: {g: {} for g in MODALITIES} for fmt in (*FORMATS, "mean")}
        for g in MODALITIES:
            for v in MODALITIES:
                counts = {f: _counts(codes, g, v, f, positions) for f in FORMATS}
                for f in FORMATS:
                    cells[f][g][v] = _cell(counts, (f,), seed)
                cells["mean"][g][v] = _cell(counts, FORMATS, seed)
        return cells

    for k in k_values:
        out["topk"][f"top{k}"] = matrices(range(k))
    for p in range(1, k_max + 1):
        out["position"][f"pos{p}"] = matrices([p - 1])
    out["headline"] = headline_of_codes(codes)
    return out


def cast_headline(results: list[dict[str, Any]], k: int = 3, clusters: list[str] | None = None) -> dict[str, Any]:
    """The headline, Top-k cross-modal consistency: the mean of the six cells generated in one modality and
    validated in another, with a 95 % interval over scene pairs (:func:`headline_of_codes`).  ``clusters``: a
    label per result; results with one label (repeats of one pair) are pooled as one unit."""
    inverse = None
    if clusters is not None:
        _, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    return headline_of_codes(_codes_of(results, max(k, 1)), k, inverse)


#: how the headline's interval is made where the pairs differ
JACKKNIFE = "jackknife over pairs on the logit scale, t quantile on pairs - 1 df"


def jackknife_logit(num: np.ndarray, den: np.ndarray, alpha: float = 0.05) -> list[float] | None:
    """The headline's interval from each pair's counts ``num``, ``den`` (pairs x cells and formats): the
    jackknife standard error of logit(headline) at the t quantile on pairs - 1 df, mapped back (it covers where
    the bootstrap did not: docs/methods.md).  None where the headline, or it without some pair, is 0 or 1."""
    from scipy.stats import t

    n = len(num)
    total_n, total_d = num.sum(0), den.sum(0)
    h = float(headline_of_sums(total_n, total_d))
    loo = np.asarray(headline_of_sums(total_n[None, :] - num, total_d[None, :] - den), dtype=float)
    if n < 2 or not 0 < h < 1 or not np.all((loo > 0) & (loo < 1)):
        return None
    lg = np.log(loo / (1 - loo))
    se = math.sqrt((n - 1) / n * float(((lg - lg.mean()) ** 2).sum()))
    centre, q = math.log(h / (1 - h)), float(t.ppf(1 - alpha / 2, n - 1))
    return [1 / (1 + math.exp(-(centre - q * se))), 1 / (1 + math.exp(-(centre + q * se)))]


def headline_of_codes(codes: np.ndarray, k: int = 3, inverse: np.ndarray | None = None) -> dict[str, Any]:
    """:func:`cast_headline` from verdict codes; ``inverse``: each row's cluster, numbered 0.. in sorted label
    order (as ``np.unique`` numbers them).  The interval: :func:`jackknife_logit`, or the labelled Wilson bound
    on the pairs (on 5 pairs or fewer, every pair alike, or no jackknife)."""
    counts = {(g, v, f): _counts(codes, g, v, f, range(k)) for g, v in CROSS_CELLS for f in FORMATS}
    name = f"CAST Top-{k} cross-modal consistency"
    asked = sum(float(c[:, 2].sum()) for c in counts.values())
    read = sum(float(c[:, 1].sum()) for c in counts.values())
    # a measurement only where there were verdicts to read and the parser read the floor's share of them
    # (metrics/measured.py): the unread ones are left out, so below it the figure rests on a few answers
    if len(codes) and not asked:
        return not_measured(name, "the model wrote no statement to validate in any pair")
    why = unread_reason({"cross-modal verdicts": read / asked}, "verdicts") if asked else None
    if why:
        return not_measured(name, why)
    if inverse is not None:  # repeats of one pair: their verdicts pooled, one unit
        n_keys = int(inverse.max()) + 1 if len(inverse) else 0
        for key, c in counts.items():
            summed = np.zeros((n_keys, c.shape[1]))
            np.add.at(summed, inverse, c)
            counts[key] = summed
    n = len(next(iter(counts.values())))
    num = np.stack([c[:, 0] for c in counts.values()], -1)  # (pairs, cells x formats)
    den = np.stack([c[:, 1] for c in counts.values()], -1)
    point = float(headline_of_sums(num.sum(0), den.sum(0))) if n else float("nan")
    ci, undefined = None, False
    if not too_few_units(n) and not np.isnan(point):
        ci = jackknife_logit(num, den)
        undefined = ci is None and 0 < point < 1
        if undefined:  # the Wilson bound below, whatever the spread
            ci = [point, point]
    point_value = None if np.isnan(point) else point
    # too few pairs, every pair alike, or no jackknife: the Wilson (one pair: Clopper-Pearson) bound on the n pairs
    ci, widened = widen_degenerate(ci, point_value, n, few=True)
    if not widened:
        method = JACKKNIFE
    elif undefined:
        method = (f"wilson bound on the {n} pairs as units (the headline without one pair reaches 0 or 1: no "
                  "jackknife on the logit scale)")
    else:
        method = _ci_method(n, widened)
    return headline_entry(name, point_value, ci, {"method": method, "unit": UNIT, "n_units": n})


def headline_of_sums(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """The headline from pooled counts: ``num`` the confirming and ``den`` the parsed verdicts of each cross-modal
    cell and format (last axis: :data:`CROSS_CELLS` x :data:`FORMATS`, cells major), summed over pairs; the mean
    over cells of the mean over formats of each share.  The one definition the headline and comparisons use."""
    num, den = np.broadcast_arrays(np.asarray(num, dtype=float), np.asarray(den, dtype=float))
    shape = (*num.shape[:-1], len(CROSS_CELLS), len(FORMATS))
    num, den = num.reshape(shape), den.reshape(shape)
    # nanmean twice, written out (the paired test evaluates it thousands of times): an empty format or cell is
    # left out; a headline with no parsed verdict at all is NaN
    has = den > 0
    ratio = np.divide(num, den, out=np.zeros(shape), where=has)
    formats = has.sum(-1)
    cell = np.divide(ratio.sum(-1), formats, out=np.zeros(formats.shape), where=formats > 0)
    cells = (formats > 0).sum(-1)
    return np.divide(cell.sum(-1), cells, out=np.full(cells.shape, np.nan), where=cells > 0)


def pair_counts(result: dict[str, Any], k: int = 3) -> np.ndarray:
    """One pair's (confirming, parsed) verdicts of the first ``k`` statements, per cross-modal cell and format
    (shape (6 x 3, 2), the order :func:`headline_of_sums` reads); its repeats' verdicts pooled with its own,
    as the headline pools a pair's repeats."""
    out = np.zeros((len(CROSS_CELLS) * len(FORMATS), 2))
    index = {(g, f"{v}|{f}"): c * len(FORMATS) + FORMATS.index(f)
             for c, (g, v) in enumerate(CROSS_CELLS) for f in FORMATS}
    for r in (result, *(result.get("repeats") or ())):
        for g, entry in (r.get("generation") or {}).items():
            for st in (entry.get("statements") or [])[:k]:
                for cell, verdict in (st.get("verdicts") or {}).items():
                    i = index.get((g, cell))  # a same-modality cell is not in the headline
                    if i is None or verdict.get("verdict") is None:
                        continue
                    out[i, 0] += verdict["verdict"] == 1
                    out[i, 1] += 1
    return out


class CastSummary:
    """``add(record)`` each finished pair, then ``result(failed)``: the ``metrics`` of results.json.  Keeps each
    pair's (and repeat's) verdict codes, its statement counts and, for the blind control, its per-pair sums."""

    def __init__(self, k: int, seed: int, repeats: int = 1, temperature: float = 0.0,
                 blind_request: str | None = None) -> None:
        self.k, self.seed, self.repeats, self.temperature = k, seed, repeats, temperature
        self.positions = max(3, k)  # Top-1, Top-3, Top-k, positions 1..k and the Top-3 headline
        self.codes = [bytearray() for _ in range(repeats)]  # repeat -> the codes of its pairs, one after another
        self.labels = [array("q") for _ in range(repeats)]  # repeat -> each of its pairs' unit number
        self.statements = array("q")  # statements per generation modality of each pair (repeat 0)
        self.units = Units()
        self.blind_request = blind_request
        self.blind = UnitSums(2, self.units)

    def add(self, rec: dict[str, Any]) -> None:
        r = rec["result"]
        self.statements.extend(len(r["generation"].get(g, {}).get("statements", [])) for g in MODALITIES)
        self._add(0, r)
        for k, again in enumerate(r.get("repeats", ())[:self.repeats - 1], start=1):
            self._add(k, again)
        if self.blind_request is None:
            return
        for st in (st for entry in r["generation"].values() for st in entry["statements"]):
            for fmt, b in (st.get("blind") or {}).items():
                seen = st["verdicts"].get(f"image|{fmt}", {}).get("verdict")
                if seen is not None and b["verdict"] is not None:
                    self.blind.add(f"{r['a']}|{r['b']}", float(seen == 1), float(b["verdict"] == 1))

    def _add(self, repeat: int, r: dict[str, Any]) -> None:
        self.codes[repeat] += verdict_codes(r, self.positions).tobytes()
        self.labels[repeat].append(self.units(f"{r['a']}|{r['b']}"))

    def _codes(self, repeat: int) -> np.ndarray:
        shape = (len(MODALITIES), len(MODALITIES), len(FORMATS), self.positions)
        return np.frombuffer(bytes(self.codes[repeat]), dtype=np.int8).reshape(-1, *shape)

    def result(self, failed: list[dict[str, Any]] = ()) -> dict[str, Any]:
        codes = self._codes(0)
        statements = np.array(self.statements, dtype=np.int64).reshape(-1, len(MODALITIES))
        out = scores_of_codes(codes, statements, k_values=sorted({1, 3, self.k}), seed=self.seed, k_max=self.k)
        if self.repeats > 1 and len(codes):  # the headline per repeat beside; the headline pools each pair's
            per = [self._codes(k) for k in range(self.repeats)]
            out["repeats"] = spread([headline_of_codes(c)["value"] for c in per], self.temperature)
            # the clusters numbered in sorted label order, as np.unique numbers them (the labels are distinct)
            rank = np.unique(np.asarray(self.units.labels(), dtype=str), return_inverse=True)[1]
            inverse = rank[np.concatenate([np.array(lab, dtype=np.int64) for lab in self.labels])]
            out["headline"] = headline_of_codes(np.concatenate(per), inverse=inverse)
            if out["headline"].get("interval") is not None:
                out["headline"]["interval"]["repeats"] = self.repeats
        if self.blind_request is not None and len(codes):
            per, request = self.blind, self.blind_request
            out["blind"] = blind_block_sums(per, UNIT, metric="consistency")
            out["blind"].update(request=[request.split(" ")[0] + " image" if request != "no image" else request],
                                n=per.n, sighted_consistency=float(per.sums(0).sum() / per.n) if per.n else None)
        written = int(statements.sum())
        out["statements_written"] = written
        if len(statements) and not written:  # a matrix of "-" says nothing by itself: say why
            out["empty_reason"] = (f"the model wrote no statements in any of the {len(statements)} pairs' "
                                   "generations (CAST's parser found no numbered statement in its answers: see "
                                   "'raw' in samples.jsonl), so there is nothing to validate and every matrix is "
                                   "empty")
        return out
