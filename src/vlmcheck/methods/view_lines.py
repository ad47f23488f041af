"""What the terminal prints after a run of a built-in method (``summary`` of its view, ``methods/views.py``): lines
and tables as data (:class:`~vlmcheck.run.views.Line`), printed by ``report/terminal.py``'s ``show``."""

from __future__ import annotations

from typing import Any

from ..metrics.measured import reason_of
from ..run.views import Line


def unmeasured(model: str, m: dict[str, Any]) -> list[Line]:
    """The headline that is not a measurement, said as such with its reason (metrics/measured.py); none else."""
    h = m.get("headline") if isinstance(m.get("headline"), dict) else {}
    why = reason_of(h)
    return [Line(f"{model}: {h.get('name')} not measured: {why}", highlight=False, markup=False,
                 soft_wrap=True)] if why else []


def headline_lines(model: str, m: dict[str, Any]) -> list[Line]:
    """A method without its own lines: its headline with its interval."""
    h = m.get("headline") if isinstance(m.get("headline"), dict) else {}
    if reason_of(h):
        return unmeasured(model, m)
    if not h or h.get("value") is None:
        return [Line(f"{model}: no headline (no finished sample)", highlight=False)] + official(model, m)
    ci = h.get("ci95")
    ci_s = f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci and None not in ci else ""
    return [Line(f"{model}: {h.get('name')} = {h['value']:.4f}{ci_s}", highlight=False, markup=False,
                 soft_wrap=True)] + official(model, m)


def official(model: str, m: dict[str, Any]) -> list[Line]:
    """The benchmark's official figures (``metrics["official"]``, datasets/official.py) as a table: each figure
    with its interval where it is a share, then the declaration's notes."""
    if not m.get("official"):  # most runs: no benchmark's figure, and no numpy for a one-image run
        return []
    from ..datasets.official import rows as official_rows

    got = official_rows(m.get("official"))
    if not got:
        return []
    block = m["official"]
    blocks = list(block["benchmarks"].values()) if "benchmarks" in block else [block]
    table = []
    for bench, name, v in got:
        ci = v.get("ci95")
        value = "-" if v.get("value") is None else f"{v['value']:.4g}" if abs(v["value"]) > 1 else f"{v['value']:.4f}"
        table.append([bench, name, value, f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "-",
                      str((v.get("interval") or {}).get("n_units", "-")) if ci else "-"])
    title = f"{model}: official figures - " + "; ".join(b["name"] for b in blocks)
    out = [Line((["benchmark", "figure", "value", "95% CI (by image)", "images"], table, ["figure"], title))]
    for b in blocks:
        out.append(Line(f"{b['benchmark']}: computed as {b['source']}", highlight=False, soft_wrap=True))
        for n in b.get("notes") or ():
            out.append(Line(f"{b['benchmark']}: {n}", err=True, kind="note", highlight=False, soft_wrap=True))
    return out


def genception(model: str, m: dict[str, Any]) -> list[Line]:
    T = m["T"]
    if reason_of(m.get("headline")):  # the mean s(t) per step beside the reason: what the run did measure
        steps = ", ".join(f"s({t}) {v:.4f}" for t, v in enumerate(m.get("s_mean") or [], 1))
        return unmeasured(model, m) + [Line(f"{model}: mean over images {steps}; {m['chains']['scored']} chains "
                                            "scored", highlight=False, markup=False, soft_wrap=True)]
    if f"GC@{T}" not in m:
        return [Line(f"{model}: no scored chains")]
    g, c = m[f"GC@{T}"], m["chains"]
    fid = m.get(f"GC_FID@{T}")
    how = str(((m.get("headline") or {}).get("interval") or {}).get("method") or "")
    bound = f" ({how}: a conservative interval, wide on purpose)" if "bound" in how else ""
    out = [Line(f"{model}: GC@{T} = {g['score']:.4f} [{g['ci95'][0]:.4f}, {g['ci95'][1]:.4f}]{bound} "
                f"(mean of {g['categories']} category means; over images {g['image_mean']:.4f}); "
                + (f"GC_FID@{T} = {fid:.4g}; " if fid is not None else "")
                + f"{c['scored']} chains scored, refusal rate {m['refusal_rate']:.1%}, {c['failed']} failed")]
    if m.get("refusal_rate"):
        non, pen = (m.get(f"GC@{T}_{k}") or {} for k in ("non_refused", "penalised"))
        out.append(Line(f"{model} refused {m['refusal_rate']:.1%} of its chains; GC@{T} counts what the generator "
                        f"drew from them (Algorithm 1); over chains that never refused "
                        f"{non.get('score', float('nan')):.4f}, penalised {pen.get('score', float('nan')):.4f}",
                        err=True, kind="note", highlight=False))
    return out


def blind(b: dict[str, Any] | None) -> list[Line]:
    """The blind control in one sentence: accuracy without the image and the vision gain with its interval."""
    metric = "accuracy" if b and "accuracy" in b else "consistency"
    if not b or b.get(metric) is None:
        return []
    g = b.get("vision_gain") or {}
    gain = (f"{g['difference']:+.3f} [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]" if g.get("difference") is not None
            and g.get("ci95") else "-")
    return [Line(f"blind control ({', '.join(b.get('request') or [])}): {metric} {b[metric]:.3f} without the "
                 f"image; vision gain {gain}", highlight=False)]


def vhexpansion(model: str, m: dict[str, Any]) -> list[Line]:
    rows = []
    for name, v in m.get("variants", {}).items():
        sym = v["symmetric_accuracy"]
        acc_s, sym_s = f"{v['accuracy']:.3f}", "-" if sym is None else f"{sym:.3f}"
        if "repeats" in v:  # Table 6e/6f: mean +- std over the repetitions
            acc_s, sym_s = (f"{x['mean']:.3f} ± {x['std']:.3f}" for x in (v["repeats"]["accuracy"],
                                                                         v["repeats"]["symmetric_accuracy"]))
        unread = "-" if v.get("unread_share") is None else f"{v['unread_share']:.2f}"
        rows.append([name, acc_s, sym_s, f"{v['yes_ratio']:.2f}", unread, str(v["new_vh_cases"])])
    out = [Line((["variant", "accuracy", "symmetric acc.", "yes ratio", "unread", "new VH cases"], rows,
                 ["variant"], model))]
    if m.get("unread_warning"):
        out.append(Line(m["unread_warning"], err=True, kind="warning", highlight=False))
    out += unmeasured(model, m)
    if m.get("negation"):
        out.append(Line(f"negations: {m['negation']['ok']} passed the check, {m['negation']['failed']} failed "
                        "(failed ones are left out of symmetric accuracy)"))
    orig = m.get("variants", {}).get("original") or {}
    if orig.get("n_mmvp_pairs"):  # MMVP's own metric beside symmetric accuracy
        out.append(Line(f"MMVP pair accuracy: {orig['pair_accuracy']:.3f} over {orig['n_mmvp_pairs']} pairs (both "
                        "questions of a pair right)"))
    return out + blind(m.get("blind")) + official(model, m)


def cast(model: str, m: dict[str, Any]) -> list[Line]:
    top = m.get("topk", {}).get("top3", {}).get("mean")  # Top-3: the paper's headline
    out = [Line(m["empty_reason"], err=True, kind="warning", highlight=False, soft_wrap=True)] \
        if m.get("empty_reason") else []
    if not top:
        return out + unmeasured(model, m)
    rows = [[g, *["-" if row[v]["score"] is None else f"{row[v]['score']:.3f}" for v in ("text", "image", "both")]]
            for g, row in top.items()]
    out.append(Line((["generated in \\ validated in", "text", "image", "both"], rows, ["generated in \\ validated in"],
                     f"{model}: CAST Top-3 self-consistency, mean of the three prompt formats")))
    return out + unmeasured(model, m) + blind(m.get("blind"))


_CHEF_KEYS = ("accuracy", "ece", "overall", "riam", "mr_weighted", "acc_vm", "rrm", "pope", "language",
              "circular_accuracy", "vanilla_accuracy", "weighted_accuracy", "grounding_accuracy", "detection",
              "turn_accuracy")


def chef(model: str, m: dict[str, Any]) -> list[Line]:
    """The recipe's headline metrics and the accuracy of each setting, as a table (4 decimals)."""
    def fmt(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4f}"
        if isinstance(v, dict):
            return ", ".join(f"{k} {fmt(x)}" for k, x in v.items() if x is None or isinstance(x, (int, float, str)))
        return str(v)

    rows = [[k, fmt(m[k])] for k in _CHEF_KEYS if k in m]
    for name, v in m.get("settings", {}).items():
        rows.append([f"accuracy, {name}", fmt(v.get("accuracy"))])
        if m.get("answers_generated") and "unread" in v:  # answers the parser could not read
            rows.append([f"unread answers, {name}", f"{v['unread']} ({v['unread_share']:.1%})"])
    used = f", {m['inferencer']} inferencer" if m.get("inferencer") else ""
    out = [Line((["metric", "value"], rows, ["metric"],
                 f"{model}: ChEF {m.get('recipe')} ({m.get('desideratum')}{used})"))] + unmeasured(model, m)
    for key in ("inferencer_note", "calibration_note"):
        if m.get(key):
            out.append(Line(m[key], err=True, kind="note", highlight=False, soft_wrap=True))
    if m.get("unread_warning"):
        out.append(Line(m["unread_warning"], err=True, kind="warning", highlight=False, soft_wrap=True))
    return out + blind(m.get("blind")) + official(model, m)
