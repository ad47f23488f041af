"""Results on a terminal or in a log: every table and line the CLI and the demo print about a run.

Tables never cut the column that names a row (a model, a run, a recipe, a method): it takes the width of its
longest cell, and the other columns wrap, so an 80-column terminal or a SLURM log still shows which row is
which.  Messages (stderr) and tables asked for as output (``vlmcheck models``, ``chef list``; stdout) use
two consoles.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

console = Console(stderr=True)  # progress, results of a run, notes, errors
stdout = Console()  # what a command was asked to list


def table(columns: Sequence[str], rows: Iterable[Sequence[str]], keys: Sequence[str] = (),
          title: str | None = None) -> Table:
    """A table whose ``keys`` columns (the names that identify a row) are never wrapped or cut."""
    rows = [list(map(str, r)) for r in rows]
    cols = []
    for i, name in enumerate(columns):
        if name in keys:
            width = max([len(name)] + [len(r[i]) for r in rows])
            cols.append(Column(name, no_wrap=True, min_width=width))
        else:
            cols.append(Column(name, overflow="fold"))
    t = Table(*cols, title=title)
    for r in rows:
        t.add_row(*r)
    return t


def f4(x: Any) -> str:
    return "-" if x is None else f"{x:.4f}"


def rank_text(rank: float, all_ranks: Iterable[float]) -> str:
    """A rank as people write it: ``1``, ``2``; shared ranks as ``2=`` (ties take the best rank)."""
    ranks = list(all_ranks)
    r = int(rank) if float(rank).is_integer() else rank
    return f"{r}=" if ranks.count(rank) > 1 else f"{r}"


def run_done(out: Any, results: dict[str, Any]) -> None:
    counts = results["counts"]
    session = results.get("session", {})
    console.print(f"[green]done[/green] {counts['done']}/{counts['samples']} samples, {counts['failed']} failed; "
                  f"{session.get('model_calls', 0)} model calls, {session.get('cache_hits', 0)} cache hits. "
                  f"Results: {out}/results.json", highlight=False)


def estimate(est: dict[str, Any]) -> None:
    """A dry run's estimate (run/estimate.py): per role the calls still to make, tokens and cost."""
    def usd(x: Any) -> str:
        return "price unknown" if x is None else f"${x:.4f}"

    rows = [[role, str(r["calls"]), f"{r['input_tokens']:,}", f"{r['output_tokens']:,}"
             + ("*" if r["output_from"] == "max_tokens" else ""), usd(r["cost_usd"]),
             ", ".join(r["models"])] for role, r in est["roles"].items()]
    t = est["totals"]
    rows.append(["total", str(t["calls"]), f"{t['input_tokens']:,}", f"{t['output_tokens']:,}", usd(t["cost_usd"]), ""])
    s = est.get("samples", {})
    console.print(table(["role", "calls", "input tokens", "output tokens", "cost", "models"], rows,
                        keys=["role", "models"],  # model specs whole, also at 80 columns
                        title=f"dry run: {s.get('to_run', 0)} of {s.get('total', 0)} samples still to run "
                              f"({s.get('finished', 0)} finished); no model was called"))
    if any(r["output_from"] == "max_tokens" for r in est["roles"].values()):
        console.print("* output tokens counted at each request's max_tokens (no call of that model made yet)",
                      highlight=False)
    if t["upper_bound"]:
        console.print("These are upper bounds: the number of calls depends on the answers (a chain that stops, "
                      "fewer statements) or output tokens are counted at max_tokens.", highlight=False)


def genception(model: str, m: dict[str, Any]) -> None:
    T = m["T"]
    if f"GC@{T}" not in m:
        console.print(f"{model}: no scored chains")
        return
    g, c = m[f"GC@{T}"], m["chains"]
    fid = m.get(f"GC_FID@{T}")
    console.print(f"{model}: GC@{T} = {g['score']:.4f} [{g['ci95'][0]:.4f}, {g['ci95'][1]:.4f}] "
                  f"(mean of {g['categories']} category means; over images {g['image_mean']:.4f}); "
                  + (f"GC_FID@{T} = {fid:.4g}; " if fid is not None else "")
                  + f"{c['scored']} chains scored, refusal rate {m['refusal_rate']:.1%}, {c['failed']} failed")
    if m.get("refusal_rate"):
        non, pen = (m.get(f"GC@{T}_{k}") or {} for k in ("non_refused", "penalised"))
        console.print(f"[yellow]note:[/yellow] {model} refused {m['refusal_rate']:.1%} of its chains; GC@{T} counts "
                      f"what the generator drew from them (Algorithm 1); over chains that never refused "
                      f"{non.get('score', float('nan')):.4f}, penalised {pen.get('score', float('nan')):.4f}",
                      highlight=False)


def leaderboard(board: dict[str, Any]) -> None:
    key = board["metric"]
    ranks = [r["rank"] for r in board["models"].values()]
    rows = []
    for model, r in board["models"].items():
        ci = r.get("ci95") or [float("nan")] * 2
        rows.append([rank_text(r["rank"], ranks), model, f"{r[key]:.4f}", f"[{ci[0]:.4f}, {ci[1]:.4f}]",
                     f"{r['gc_rank']:.2f}" if "gc_rank" in r else "-", ", ".join(r.get("tied_with") or []) or "-"])
    console.print(table(["rank", "model", key, "95% CI", "GC rank", "cannot be separated from (Holm, 5%)"], rows, keys=["model"]))


def vhexpansion(model: str, m: dict[str, Any]) -> None:
    rows = []
    for name, v in m.get("variants", {}).items():
        sym = v["symmetric_accuracy"]
        acc_s, sym_s = f"{v['accuracy']:.3f}", "-" if sym is None else f"{sym:.3f}"
        if "repeats" in v:  # Table 6e/6f: mean +- std over the repetitions
            ra, rs = v["repeats"]["accuracy"], v["repeats"]["symmetric_accuracy"]
            acc_s = f"{ra['mean']:.3f} ± {ra['std']:.3f}"
            sym_s = f"{rs['mean']:.3f} ± {rs['std']:.3f}"
        rows.append([name, acc_s, sym_s, f"{v['yes_ratio']:.2f}", str(v["new_vh_cases"])])
    console.print(table(["variant", "accuracy", "symmetric acc.", "yes ratio", "new VH cases"], rows,
                        keys=["variant"], title=model))
    if m.get("negation"):
        console.print(f"negations: {m['negation']['ok']} passed the check, {m['negation']['failed']} failed "
                      "(failed ones are left out of symmetric accuracy)")
    orig = m.get("variants", {}).get("original") or {}
    if orig.get("n_mmvp_pairs"):  # MMVP's own metric beside symmetric accuracy
        console.print(f"MMVP pair accuracy: {orig['pair_accuracy']:.3f} over {orig['n_mmvp_pairs']} pairs (both "
                      "questions of a pair right)")
    blind_line(m.get("blind"))


def blind_line(b: dict[str, Any] | None) -> None:
    """The blind control in one sentence: accuracy without the image and the vision gain with its interval."""
    metric = "accuracy" if b and "accuracy" in b else "consistency"
    if not b or b.get(metric) is None:
        return
    g = b.get("vision_gain") or {}
    gain = (f"{g['difference']:+.3f} [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]" if g.get("difference") is not None
            and g.get("ci95") else "-")
    console.print(f"blind control ({', '.join(b.get('request') or [])}): {metric} {b[metric]:.3f} without the "
                  f"image; vision gain {gain}", highlight=False)


def cast(model: str, m: dict[str, Any]) -> None:
    top = m.get("topk", {}).get("top3", {}).get("mean")  # Top-3: the paper's headline
    if not top:
        return
    rows = [[g, *["-" if row[v]["score"] is None else f"{row[v]['score']:.3f}" for v in ("text", "image", "both")]]
            for g, row in top.items()]
    console.print(table(["generated in \\ validated in", "text", "image", "both"], rows,
                        keys=["generated in \\ validated in"],
                        title=f"{model}: CAST Top-3 self-consistency, mean of the three prompt formats"))
    blind_line(m.get("blind"))


_CHEF_KEYS = ("accuracy", "ece", "overall", "riam", "mr_weighted", "acc_vm", "rrm", "pope", "language",
              "circular_accuracy", "vanilla_accuracy", "weighted_accuracy", "grounding_accuracy", "detection",
              "turn_accuracy")


def chef(model: str, m: dict[str, Any]) -> None:
    """The recipe's headline metrics and the accuracy of each setting, as a table (4 decimals)."""
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4f}"
        if isinstance(v, dict):
            return ", ".join(f"{k} {fmt(x)}" for k, x in v.items() if isinstance(x, (int, float, str)))
        return str(v)

    rows = [[k, fmt(m[k])] for k in _CHEF_KEYS if k in m]
    for name, v in m.get("settings", {}).items():
        rows.append([f"accuracy, {name}", fmt(v.get("accuracy"))])
        if m.get("answers_generated") and "unread" in v:  # issue 47: answers the parser could not read
            rows.append([f"unread answers, {name}", f"{v['unread']} ({v['unread_share']:.1%})"])
    used = f", {m['inferencer']} inferencer" if m.get("inferencer") else ""
    console.print(table(["metric", "value"], rows, keys=["metric"],
                        title=f"{model}: ChEF {m.get('recipe')} ({m.get('desideratum')}{used})"))
    for key in ("inferencer_note", "calibration_note"):
        if m.get(key):
            console.print(f"note: {m[key]}", highlight=False, soft_wrap=True, markup=False)
    if m.get("unread_warning"):
        console.print(f"[yellow]warning:[/yellow] {escape(m['unread_warning'])}", highlight=False, soft_wrap=True)
    blind_line(m.get("blind"))


def chef_aggregate(agg: dict[str, Any]) -> None:
    cols = agg["columns"]
    rows = [[r["scenario"], str(r["recipe"]), str(r["seed"]), str(r["n"]), *(f4(r[c]) for c in cols)]
            for r in agg["rows"]]
    rows.append(["Avg. (weighted by n)", "", "", str(agg["avg"]["n"]), *(f4(agg["avg"][c]) for c in cols)])
    console.print(table(["scenario", "recipe", "seed", "n", *cols], rows, keys=["scenario", "recipe"],
                        title=f"ChEF {agg['desideratum']}: {agg['model']}"))
    if "overall" in agg:
        console.print(f"overall calibration (1 - weighted ECE, Table 8): {agg['overall']:.4f}")
    for sv in agg.get("seed_variance", []):
        devs = ", ".join(f"seed {s}: {d:.4f}" for s, d in sv["deviation"].items())
        console.print(f"seeds on {sv['scenario']} ({sv['recipe']}): mean {sv['column']} {sv['mean']:.4f}; |deviation| "
                      f"{devs}")


def vhx_compare(cmp: dict[str, Any]) -> None:
    f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    d = lambda x: "-" if x is None else f"{x:+.3f}"  # noqa: E731
    one_dataset = len({r["dataset"] for r in cmp["rows"]}) <= 2  # one dataset and "all": "all" repeats it
    rows = []
    for r in cmp["rows"]:
        if one_dataset and r["dataset"] == "all":
            continue
        a, s_ = r["accuracy"], r["symmetric_accuracy"]
        p = lambda c: "" if c.get("p_holm") is None else f" (p {c['p_holm']:.3g})"  # noqa: E731  Holm-adjusted
        rows.append([r["dataset"], r["variant"], str(r["n"]), f(a["before"]), f(a["after"]), d(a["delta"]) + p(a),
                     f(s_["before"]), f(s_["after"]), d(s_["delta"]) + p(s_)])
    console.print(table(["dataset", "variant", "n", "acc. before", "after", "Δ (p, Holm)", "sym. before", "after",
                         "Δ (p, Holm)"], rows,
                        keys=["dataset", "variant"], title=f"{cmp['before']['model']} -> {cmp['after']['model']}"))
    for g in cmp["general"]:
        console.print(f"general ability: {g['task']} {g['metric']} {f(g['before'])} -> {f(g['after'])} "
                      f"({d(g['delta'])})")
    console.print(f"{cmp['cases']['compared']} cases compared; {cmp['cases']['only_before']} only before, "
                  f"{cmp['cases']['only_after']} only after (left out)")


def sweep_summary(summary: list[dict[str, Any]], title: str) -> None:
    rows = [[r["method"], r["model"], r["metric"], f4(r["value"]), f"{r['failed']}/{r['samples']}"] for r in summary]
    console.print(table(["method", "model", "metric", "value", "failed"], rows, keys=["method", "model"],
                        title=title))


def meta(res: dict[str, Any]) -> None:
    metrics = list(res["kendall_tau"])
    rows = [[lv, *[f"{row[m]:.4f}" for m in metrics]] for lv, row in res["table"].items()]
    rows.append(["Kendall tau", *[f"{res['kendall_tau'][m]:.3f}" for m in metrics]])
    stdout.print(table(["error level", *metrics], rows, keys=["error level"]))


def providers(entries: dict[str, Any]) -> None:
    rows = [[name, ", ".join(e.roles), e.description] for name, e in entries.items()]
    stdout.print(table(["provider", "roles", "description"], rows, keys=["provider"]))


def recipes(rows: list[list[str]]) -> None:
    stdout.print(table(["recipe", "desideratum", "scenario", "inferencer", "description"], rows, keys=["recipe"]))


def comparisons(cmp: dict[str, Any]) -> None:
    """``vlmcheck compare``: one line per pair of runs and metric (A minus B); lines wrap, nothing is cut."""
    def p(x: Any) -> str:
        return "-" if x is None else f"{x:.4g}"

    console.print(f"[bold]{cmp['method']}: paired comparisons[/bold] (A - B on the samples all the runs finished; "
                  "interval at the level of its Holm step)")
    for c in cmp["comparisons"]:
        ci = "" if not c["ci95"] else f" [{c['ci95'][0]:.4f}, {c['ci95'][1]:.4f}]"
        verdict = "separated" if c.get("separated") else "cannot be separated"
        console.print(f"  {c['metric']}: {c['a']} - {c['b']} = {f4(c['difference'])}{ci}, p {p(c['p_value'])} "
                      f"(Holm {p(c.get('p_holm'))}, {c['test'] or '-'}): {verdict}; {c['n_paired']} shared, "
                      f"{c['n_left_out']} left out", highlight=False, soft_wrap=True)
