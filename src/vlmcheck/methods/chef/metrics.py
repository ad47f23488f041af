"""ChEF's desiderata metrics (supplementary sections C.1-C.6), from per-item outcomes."""

from __future__ import annotations

import re
from itertools import takewhile

import numpy as np

from ...metrics.stats import iou  # noqa: F401  (re-exported: the detection metric's overlap)


def random_accuracy(option_counts) -> float:
    """Expected accuracy of uniform guessing: mean over items of 1 / number of options."""
    counts = np.asarray(list(option_counts), dtype=float)
    return float(np.mean(1.0 / counts)) if counts.size else float("nan")


def ece_equal_count(confidences, correct, n_bins: int = 10) -> dict:
    """ECE = sum_b n_b |conf_b - acc_b| / N over equal-count bins of the items sorted by confidence (the first
    N mod n_bins bins one item more), and the reliability diagram's bins."""
    conf = np.asarray(confidences, dtype=float)
    acc = np.asarray(correct, dtype=float)
    n = conf.size
    if n == 0:
        return {"ece": float("nan"), "bins": []}
    order = np.argsort(conf, kind="stable")
    bins = [{"n": int(idx.size), "confidence": float(conf[idx].mean()), "accuracy": float(acc[idx].mean())}
            for idx in np.array_split(order, n_bins) if idx.size]
    ece = sum(b["n"] * abs(b["confidence"] - b["accuracy"]) / n for b in bins)
    return {"ece": float(ece), "bins": bins}


def riam(acc_0shot: float, acc_icl: list[float], acc_random: float) -> float:
    """RIAM = (mean(acc_1..N shots) - acc_0) / (acc_0 - acc_random) * 50 + 50."""
    acc_icl_mean = float(np.mean(acc_icl))
    return (acc_icl_mean - acc_0shot) / (acc_0shot - acc_random) * 50 + 50


def rrm(acc_original: float, acc_corrupted: float, acc_random: float) -> float:
    """RRM = (acc_crp - acc_random) / (acc_original - acc_random) * 100."""
    return (acc_corrupted - acc_random) / (acc_original - acc_random) * 100


def match_ratio(original_positions, manipulated_positions) -> float:
    """Share of items whose predicted option position is the same with and without the verbalizer."""
    a, b = list(original_positions), list(manipulated_positions)
    return float(np.mean([x == y for x, y in zip(a, b)])) if a else float("nan")


def pope_metrics(predicted_yes, truth_yes) -> dict:
    p, t = np.asarray(predicted_yes, dtype=bool), np.asarray(truth_yes, dtype=bool)
    tp, fp = int((p & t).sum()), int((p & ~t).sum())
    fn, tn = int((~p & t).sum()), int((~p & ~t).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"accuracy": (tp + tn) / max(p.size, 1), "precision": precision, "recall": recall, "f1": f1,
            "yes_ratio": float(p.mean()) if p.size else float("nan"), "n": int(p.size)}


def parse_judge_score(text: str) -> int | None:
    """The integer after '[Overall Score]' (Fig. 6 output format), 0..10."""
    m = re.search(r"\[overall score\]\s*\**\s*(\d{1,2})", text, re.IGNORECASE)
    if not m:
        return None
    v = int(m.group(1))
    return v if 0 <= v <= 10 else None


def weighted_accuracy(chains) -> float:
    """Omnibenchmark's WeightedACC (ChEF D.2): mean over items of the levels right from the coarsest down to the
    first mistake, over the chain's length (the authors' multi-turn PPL metric)."""
    chains = [list(c) for c in chains]
    return float(np.mean([len(list(takewhile(bool, c))) / len(c) for c in chains])) if chains else float("nan")


def detection_scores(items, threshold: float = 0.5) -> dict:
    """VOC2012 multi-turn PPL scores as the authors' ``Detection.ppl_metric`` (docs/methods.md, "VOC2012
    detection"); ``items``: per image, ``{"categories": [(gt_label, predicted_label)], "boxes": [(label,
    predicted_box)], "gt": [(label, box)]}``.  A box turn counts only for a label some category turn got right."""
    cls_right = cls_n = box_right = box_n = n_gt = 0
    for it in items:
        n_gt += len(it["gt"])
        cls_n += len(it["categories"])
        found = {pred for _, pred in it["categories"]} & {lab for lab, _ in it["gt"]}
        cls_right += sum(pred in found for _, pred in it["categories"])
        boxes = [(lab, box) for lab, box in it["boxes"] if lab in found]
        box_n += len(boxes)
        box_right += sum(any(g == lab and iou(g_box, box) > threshold for g, g_box in it["gt"]) for lab, box in boxes)
    return {"classification_acc": cls_right / cls_n if cls_n else float("nan"),
            "grounding_acc": box_right / box_n if box_n else float("nan"),
            "mAR": box_right / n_gt if n_gt else float("nan"),
            "category_turns": cls_n, "box_turns": box_n, "objects": n_gt}
