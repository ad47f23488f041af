"""The report's charts, as inline SVG: GenCeption's s(t) curves with a bootstrap band, CAST's heatmaps, ChEF's
reliability diagram."""

from __future__ import annotations

import functools
import io
from typing import Any

from ..run.labels import run_labels


def _svg(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg"):]  # drop the XML prolog; matplotlib escapes the text it draws


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"
    plt.rcParams["text.parse_math"] = False  # every text literal: a model named `$\frac$` is a name, not a formula
    return plt


def s_curves(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per GenCeption run: the model, and per step t its mean s(t) over images with a 95% bootstrap CI over
    images (seed 0), from the finished samples."""
    import numpy as np

    from ..metrics.stats import bootstrap_ci

    out = []
    for r, label in zip(runs, run_labels((r["results"], r.get("folder")) for r in runs)):
        per_image = [s["result"]["s"] for s in r["samples"]
                     if s.get("status") == "done" and (s.get("result") or {}).get("s")]
        if not per_image:
            continue
        T = max(len(x) for x in per_image)
        steps = []
        for t in range(T):
            vals = np.array([x[t] for x in per_image if len(x) > t and x[t] is not None], dtype=float)
            lo, hi = bootstrap_ci(vals, seed=0) if len(vals) else (float("nan"), float("nan"))
            steps.append({"t": t + 1, "mean": float(vals.mean()) if len(vals) else float("nan"), "lo": lo, "hi": hi,
                          "n": int(len(vals))})
        out.append({"model": label, "steps": steps})
    return out


def _s_curve(runs: list[dict[str, Any]]) -> str | None:
    curves = s_curves(runs)
    if not curves:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for c in curves:
        t = [x["t"] for x in c["steps"]]
        line, = ax.plot(t, [x["mean"] for x in c["steps"]], marker="o", label=c["model"])
        ax.fill_between(t, [x["lo"] for x in c["steps"]], [x["hi"] for x in c["steps"]], color=line.get_color(),
                        alpha=0.18, linewidth=0)
    ax.set_xlabel("step t")
    ax.set_ylabel("mean s(t) (band: 95% CI over images)")
    ax.set_xticks(range(1, max(len(c["steps"]) for c in curves) + 1))
    ax.grid(alpha=0.3)
    # below the axes, one model per line: long model specs stay legible and never cover the curves
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1, frameon=False)
    return _svg(fig)


def cast_k(results: dict[str, Any]) -> int:
    """The k of a CAST run's headline ("CAST Top-3 ..."), 3 for a run whose results record no headline."""
    import re

    found = re.search(r"Top-(\d+)", ((results.get("metrics") or {}).get("headline") or {}).get("name") or "")
    return int(found.group(1)) if found else 3


def _cast_heatmaps(run: dict[str, Any]) -> list[dict[str, str]]:
    """A heatmap per prompt format at the k of the run's headline, so the two say the same thing."""
    topk = run["results"]["metrics"].get("topk", {})
    top = topk.get(f"top{cast_k(run['results'])}") or next(iter(topk.values()), None)
    if not top:
        return []
    mods = ["text", "image", "both"]
    return [{"format": fmt, "svg": _heatmap_svg(fmt, tuple(tuple(mat[g][v]["score"] for v in mods) for g in mods))}
            for fmt, mat in top.items()]


@functools.lru_cache(maxsize=64)
def _heatmap_svg(fmt: str, scores: tuple[tuple[float | None, ...], ...]) -> str:
    """One prompt format's heatmap, drawn once per process for the same scores (a run's own report and a
    report over several runs show the same one)."""
    import numpy as np

    plt = _plt()
    mods = ["text", "image", "both"]
    arr = np.array([[np.nan if x is None else x for x in row] for row in scores], dtype=float)
    fig, ax = plt.subplots(figsize=(3.2, 2.8))
    im = ax.imshow(arr, vmin=0, vmax=1, cmap="viridis")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="consistency")
    ax.set_xticks(range(3), mods)
    ax.set_yticks(range(3), mods)
    ax.set_xlabel("validated in")
    ax.set_ylabel("generated in")
    for i in range(3):
        for j in range(3):
            ax.text(j, i, "-" if np.isnan(arr[i, j]) else f"{arr[i, j]:.2f}", ha="center", va="center",
                    color="w" if (np.isnan(arr[i, j]) or arr[i, j] < 0.6) else "k", fontsize=8)
    ax.set_title(fmt, fontsize=9)
    return _svg(fig)


def reliability_figure(bins: list[dict[str, Any]]):
    """Reliability diagram: each equal-count bin's accuracy against its mean confidence, both on [0, 1], the
    diagonal of perfect calibration from (0, 0) to (1, 1), each point labelled with its bin's item count."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(3.4, 3.3))
    conf = [b["confidence"] for b in bins]
    acc = [b["accuracy"] for b in bins]
    ax.plot([0, 1], [0, 1], ls="--", color="gray", label="perfect calibration")
    ax.plot(conf, acc, "o-", color="#4c72b0", label="accuracy per bin")
    for c, a, b in zip(conf, acc, bins):
        ax.annotate(str(b["n"]), (c, a), textcoords="offset points", xytext=(3, -9), fontsize=6, color="#333")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("mean confidence in bin")
    ax.set_ylabel("accuracy in bin")
    ax.set_title("reliability (numbers: items per bin)", fontsize=8)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig
