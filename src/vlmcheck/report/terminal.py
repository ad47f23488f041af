"""Results on a terminal or in a log: every table and line the CLI and the demo print about a run (a method's
own lines: methods/view_lines.py).

Tables keep every number whole at any width (:func:`fit`), so an 80- or 60-column terminal or a SLURM log shows
every figure and which row it belongs to.  Messages go to stderr (``console``), results to stdout (``tables``),
so that ``> results.txt`` and ``| tee`` capture the results.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..core.printable import inert
from ..methods import view_lines as _lines
from ..methods.views import view_for
from .text import recipe_lines, wrap_figures

if TYPE_CHECKING:
    from rich.console import Console, Group, RenderableType


class _Console:
    """Rich's ``Console``, made when first used (importing rich is a visible share of a short run's start-up,
    and messages to a file or a pipe never need it)."""

    def __init__(self, stderr: bool) -> None:
        self._stderr, self._made, self._quiet = stderr, None, False

    def made(self) -> "Console":
        if self._made is None:
            from rich.console import Console

            self._made = Console(stderr=self._stderr)
            self._made.quiet = self._quiet
        return self._made

    @property
    def file(self) -> Any:
        return (sys.stderr if self._stderr else sys.stdout) if self._made is None else self._made.file

    @property
    def quiet(self) -> bool:
        return self._quiet if self._made is None else self._made.quiet

    @quiet.setter
    def quiet(self, value: bool) -> None:
        if self._made is None:
            self._quiet = value
        else:
            self._made.quiet = value

    def __getattr__(self, name: str) -> Any:  # every other attribute: the rich Console's
        if name.startswith("_"):  # not set (a copy, before __init__): never the rich Console's private names
            raise AttributeError(name)
        return getattr(self.made(), name)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Rich's print, every string first made inert (core/printable.py): a line often holds a sample's id, a
        path or a server's message, and no such text may send the terminal an escape sequence."""
        self.made().print(*(inert(o) if isinstance(o, str) else o for o in objects), **kwargs)


console = _Console(stderr=True)  # progress, notes, warnings, errors
stdout = _Console(stderr=False)  # what a command was asked for: result tables, lists
tables = stdout  # a run's result tables (stdout, so that `> file` and `| tee` capture them)


def _plain(con: Any) -> bool:
    """Whether ``con`` is one of ours, not yet made, writing to what rich would treat as a file or a pipe (no
    ``TTY_COMPATIBLE``, ``FORCE_COLOR`` or notebook): rich would print a message there as its bare text."""
    if not isinstance(con, _Console) or con._made is not None:
        return False
    if any(k in os.environ for k in ("TTY_COMPATIBLE", "FORCE_COLOR", "TTY_INTERACTIVE")):
        return False
    import builtins

    if hasattr(builtins, "get_ipython"):  # IPython, perhaps a notebook: rich decides
        return False
    isatty = getattr(con.file, "isatty", None)
    try:
        return isatty is not None and not isatty()
    except ValueError:
        return False


def say(text: str, label: str = "", colour: str = "", con: Any = None) -> None:
    """A message on one line of stderr (``con``: another console): ``label`` (coloured on a terminal), then
    ``text`` as it is, never read as markup or emoji codes, never wrapped (a log keeps it whole and greppable)."""
    con = console if con is None else con
    text = inert(text)
    if _plain(con):
        if not con.quiet:
            con.file.write(f"{label} {text}\n" if label else f"{text}\n")
        return
    from rich.markup import escape

    head = f"[{colour}]{escape(label)}[/{colour}] " if label and colour else f"{escape(label)} " if label else ""
    con.print(head + escape(text), highlight=False, soft_wrap=True, emoji=False)


# a figure (at most 32 characters): digits with their punctuation (CI brackets, signs, thousands, $, %, ±, an
# exponent, "(p 0.03)")
_FIGURE = re.compile(r"[-+−±\d\s.,:;=\[\]()%$/*eE]*(\(p [\d.e\-]+\))?[*]?|-|price unknown")
MIN_TEXT = 10  # the narrowest a folding column (a model spec, prose) is made before the rows become blocks


class _Fitted:
    """A table laid out for the width of the console that prints it (:func:`fit`)."""

    def __init__(self, *args: Any) -> None:
        self.args = args

    def __rich_console__(self, con: Console, options: Any):
        yield fit(*self.args, width=options.max_width)


def table(columns: Sequence[str], rows: Iterable[Sequence[str]], keys: Sequence[str] = (),
          title: str | None = None) -> RenderableType:
    """Rows in which no figure is ever wrapped or cut, laid out when printed (:func:`fit`)."""
    return _Fitted(list(columns), [[inert(str(c)) for c in r] for r in rows], list(keys),
                   inert(title) if title else title)


def fit(columns: Sequence[str], rows: list[list[str]], keys: Sequence[str], title: str | None,
        width: int) -> RenderableType:
    """A column whose cells are all figures is as wide as its longest cell, never wrapped; the ``keys`` columns
    (the names of a row) stay whole where they can, and they and prose fold, never cut, into what is left of
    ``width``; where even that does not fit, each row is a block of "column: value" lines.  ``title`` goes on
    its own lines above, wrapped at ``width``."""
    from rich.console import Group
    from rich.table import Column, Table
    from rich.text import Text

    figure = [bool(rows) and name not in keys and all(len(r[i]) <= 32 and _FIGURE.fullmatch(r[i]) for r in rows)
              for i, name in enumerate(columns)]
    # a figure column: its longest figure, or its header's longest word (the header wraps between words)
    natural = [max([len(r[i]) for r in rows] + ([max(map(len, name.split()))] if figure[i] else [len(name)]))
               for i, name in enumerate(columns)]
    text = [i for i, f in enumerate(figure) if not f]
    # each column pads one space either side and a rule parts them, edges included: sum(widths) + 3 n + 1
    room = width - sum(w for w, f in zip(natural, figure) if f) - 3 * len(columns) - 1
    widths = list(natural)
    if sum(natural[i] for i in text) > room:  # the text columns share what is left
        # the names of rows whole where they fit (a log stays greppable), prose folding first
        # (a name longer than the terminal less 20 characters cannot share a line with figures: it folds)
        whole = {i for i in text if columns[i] in keys and natural[i] <= width - 20}
        rest = [i for i in text if i not in whole]
        least = min(MIN_TEXT, (room - sum(natural[i] for i in whole)) // max(1, len(rest)))
        if least < 6:  # prose would be under 6 characters a line: a block per row instead
            return _blocks(columns, rows, keys, title)
        floor = {i: natural[i] if i in whole else min(natural[i], least) for i in text}
        spare, want = room - sum(floor.values()), sum(natural[i] - floor[i] for i in text)
        for i in text:  # above its floor, each in proportion to what it lacks
            widths[i] = floor[i] + (natural[i] - floor[i]) * spare // max(1, want)
    cols = [Column(Text(name, overflow="fold"), justify="right" if figure[i] else "left", width=widths[i],
                   overflow="fold")
            for i, name in enumerate(columns)]
    t = Table(*cols)
    for r in rows:
        t.add_row(*r)
    return t if title is None else Group(Text(title, style="bold", overflow="fold"), t)


def _blocks(columns: Sequence[str], rows: list[list[str]], keys: Sequence[str], title: str | None) -> Group:
    """A table too wide for the terminal, a block per row: its key cells, then each other cell on its line."""
    from rich.console import Group
    from rich.text import Text

    named = [i for i, c in enumerate(columns) if c in keys] or [0]
    parts: list[RenderableType] = [Text(title, style="bold", overflow="fold")] if title else []
    for r in rows:
        parts.append(Text(" / ".join(r[i] for i in named if r[i]), style="bold", overflow="fold"))
        parts += [Text(f"  {columns[i]}: {r[i]}", overflow="fold") for i in range(len(columns))
                  if i not in named and r[i]]
    return Group(*parts)


def num(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def rank_text(rank: float | None, all_ranks: Iterable[float | None]) -> str:
    """A rank as people write it: ``1``, ``2``; shared ranks as ``2=`` (ties take the best rank); ``-`` for a run
    without one (nothing scored)."""
    if rank is None:
        return "-"
    ranks = list(all_ranks)
    r = int(rank) if float(rank).is_integer() else rank
    return f"{r}=" if ranks.count(rank) > 1 else f"{r}"


def run_done(out: Any, results: dict[str, Any]) -> None:
    counts, session = results["counts"], results.get("session", {})
    say(f"{counts['done']}/{counts['samples']} samples, {counts['failed']} failed; "
        f"{session.get('model_calls', 0)} model calls, {session.get('cache_hits', 0)} cache hits. "
        f"Results: {out}/results.json", "done", "green")
    # why samples failed: each failure kind with its count and one example message (already redacted)
    for kind, k in sorted((counts.get("failure_kinds") or {}).items(), key=lambda kv: -kv[1]["count"]):
        say(f"{k['count']} x {kind}, e.g. {k['sample_id']}: {k['example']}", "failed:", "red")
    checks = results.get("server_checks") or {}
    for w in checks.get("warnings", []):
        if w not in (checks.get("said") or []):  # a warning the run gave as it happened is not repeated
            say(w, "warning:", "yellow")


def estimate(est: dict[str, Any]) -> None:
    """A dry run's estimate (run/estimate.py): per role the calls still to make, tokens and cost."""
    usd = lambda x: "price unknown" if x is None else f"${x:.4f}"  # noqa: E731
    rows = [[role, str(r["calls"]), f"{r['input_tokens']:,}", f"{r['output_tokens']:,}"
             + ("*" if r["output_from"] == "max_tokens" else ""), usd(r["cost_usd"]),
             ", ".join(r["models"])] for role, r in est["roles"].items()]
    t = est["totals"]
    rows.append(["total", str(t["calls"]), f"{t['input_tokens']:,}", f"{t['output_tokens']:,}", usd(t["cost_usd"]), ""])
    s = est.get("samples", {})
    tables.print(table(["role", "calls", "input tokens", "output tokens", "cost", "models"], rows,
                        keys=["role", "models"],  # model specs whole, also at 80 columns
                        title=f"dry run: {s.get('to_run', 0)} of {s.get('total', 0)} samples still to run "
                              f"({s.get('finished', 0)} finished); no model was called"))
    if any(r["output_from"] == "max_tokens" for r in est["roles"].values()):
        tables.print("* output tokens counted at each request's max_tokens (no call of that model made yet)",
                      highlight=False)
    if t["upper_bound"]:
        tables.print("These are upper bounds: the number of calls depends on the answers (a chain that stops, "
                      "fewer statements) or output tokens are counted at max_tokens.", highlight=False)


def show(lines: list[Any]) -> None:
    """Print a method's lines (``methods/views.py``'s ``Line``): a table as a table, a note or a warning
    prefixed as such, each where it says."""
    for ln in lines:
        if isinstance(ln.text, tuple):
            tables.print(table(*ln.text))
            continue
        con = console if ln.err else tables
        if ln.markup is False and ln.soft_wrap and not ln.kind and not ln.highlight and _plain(con):
            if not con.quiet:  # one literal line to a file or a pipe: what rich writes there, without loading rich
                con.file.write(f"{ln.text}\n")
            continue
        kw = {k: v for k, v in (("highlight", ln.highlight), ("markup", ln.markup), ("soft_wrap", ln.soft_wrap))
              if v is not None}
        text = ln.text
        if not ln.soft_wrap and isinstance(text, str) and con.width:
            # wrapped here, never between a figure and what it is ("GC@1 =" | "0.3151") or inside its interval
            head = len(ln.kind) + 2 if ln.kind else 0
            text, kw["soft_wrap"] = wrap_figures(" " * head + text, con.width)[head:], True
        if ln.kind:
            from rich.markup import escape

            text = f"[yellow]{ln.kind}:[/yellow] {escape(str(text))}"
        if ln.markup is False:  # taken literally: no emoji codes either
            kw["emoji"] = False
        con.print(text, **kw)


def leaderboard(board: dict[str, Any]) -> None:
    """GenCeption's leaderboard: ranked on the images every run scored (``on_shared``, as ``compare``), each
    run's own score and interval beside; a run that scored no chain has no rank and "-" for its figures."""
    key = board["metric"]
    ranks = [r["rank"] for r in board["models"].values()]
    n = (board.get("shared") or {}).get("n")
    rows = []
    for model, r in board["models"].items():
        ci = r.get("ci95")
        row = [rank_text(r["rank"], ranks), model]
        if n:
            row.append(num(r.get("on_shared")))
        row += [num(r.get(key)), "-" if not ci else f"[{ci[0]:.4f}, {ci[1]:.4f}]",
                f"{r['gc_rank']:.2f}" if r.get("gc_rank") is not None else "-",
                ", ".join(r.get("tied_with") or []) or "-"]
        rows.append(row)
    columns = (["rank", "model"] + ([f"{key} on the {n} shared images"] if n else [])
               + [f"{key} on its own images", "95% CI", "GC rank", "cannot be separated from (Holm, 5%)"])
    if rows:
        tables.print(table(columns, rows, keys=["model"]))
    for model, why in (board.get("not_measured") or {}).items():  # left out of the ranks, with the reason
        tables.print(f"{model}: {key} not measured: {why}", highlight=False, markup=False, soft_wrap=True)


def chef_aggregate(agg: dict[str, Any]) -> None:
    cols = agg["columns"]
    rows = [[r["scenario"], str(r["recipe"]), str(r["seed"]), str(r["n"]), *(num(r[c]) for c in cols)]
            for r in agg["rows"]]
    rows.append(["Avg. (weighted by n)", "", "", str(agg["avg"]["n"]), *(num(agg["avg"][c]) for c in cols)])
    tables.print(table(["scenario", "recipe", "seed", "n", *cols], rows, keys=["scenario", "recipe"],
                        title=f"ChEF {agg['desideratum']}: {agg['model']}"))
    if "overall" in agg:
        tables.print(f"overall calibration (1 - weighted ECE, Table 8): {agg['overall']:.4f}")
    for sv in agg.get("seed_variance", []):
        devs = ", ".join(f"seed {s}: {d:.4f}" for s, d in sv["deviation"].items())
        tables.print(f"seeds on {sv['scenario']} ({sv['recipe']}): mean {sv['column']} {sv['mean']:.4f}; |deviation| "
                      f"{devs}")


def vhx_compare(cmp: dict[str, Any]) -> None:
    def pair(m: dict[str, Any]) -> list[str]:  # before, after, and the change with its Holm-adjusted p
        p = "" if m.get("p_holm") is None else f" (p {m['p_holm']:.3g})"
        return [num(m["before"], ".3f"), num(m["after"], ".3f"), num(m["delta"], "+.3f") + p]

    rows = [[r["dataset"], r["variant"], str(r["n"]), *pair(r["accuracy"]), *pair(r["symmetric_accuracy"])]
            for r in cmp["rows"]]
    tables.print(table(["dataset", "variant", "n", "acc. before", "after", "Δ (p, Holm)", "sym. before", "after",
                        "Δ (p, Holm)"], rows,
                       keys=["dataset", "variant"], title=f"{cmp['before']['model']} -> {cmp['after']['model']}"))
    for g in cmp["general"]:
        before, after, delta = pair(g)
        tables.print(f"general ability: {g['task']} {g['metric']} {before} -> {after} ({delta})")
    tables.print(f"{cmp['cases']['compared']} cases compared; {cmp['cases']['only_before']} only before, "
                 f"{cmp['cases']['only_after']} only after (left out)")


def sweep_summary(summary: list[dict[str, Any]], title: str) -> None:
    rows = [[r["method"], r["model"], r["metric"],
             f"not measured: {r['not_measured']}" if r.get("not_measured") else num(r["value"]),
             f"{r['failed']}/{r['samples']}"] for r in summary]
    tables.print(table(["method", "model", "metric", "value", "failed"], rows, keys=["method", "model"],
                        title=title))


def meta(res: dict[str, Any]) -> None:
    metrics = list(res["kendall_tau"])
    rows = [[lv, *[f"{row[m]:.4f}" for m in metrics]] for lv, row in res["table"].items()]
    rows.append(["Kendall tau", *[f"{res['kendall_tau'][m]:.3f}" for m in metrics]])
    stdout.print(table(["error level", *metrics], rows, keys=["error level"]))


def providers(entries: dict[str, Any]) -> None:
    from ..core.spec import PROVIDERS

    origins = PROVIDERS.origins()  # the module that registered it, or "plugin <distribution>"
    rows = [[name, ", ".join(e.roles), e.description, origins.get(name, "")] for name, e in entries.items()]
    stdout.print(table(["provider", "roles", "description", "registered by"], rows, keys=["provider"]))


def recipes(rows: list[list[str]], long: bool = False) -> None:
    """``chef list``: :func:`~vlmcheck.report.text.recipe_lines` on stdout, no trailing space, never rewrapped."""
    from rich.text import Text

    for ln in recipe_lines(rows, long, stdout.width):
        stdout.print(Text(ln), soft_wrap=True, highlight=False)


def comparisons(cmp: dict[str, Any]) -> None:
    """``vlmcheck compare``: one line per pair of runs and metric (A minus B); lines wrap, nothing is cut."""
    if not cmp["comparisons"]:
        return
    tables.print(f"[bold]{cmp['method']}: paired comparisons[/bold] (A - B on the samples all the runs finished; "
                  "each interval at the level of its Holm step: 1 - the alpha its test is judged at)")
    for c in cmp["comparisons"]:
        level = c.get("ci_level")
        ci = ("" if not c["ci95"] else
              f", {'%g' % round(100 * (level or 0.95), 2)}% CI [{c['ci95'][0]:.4f}, {c['ci95'][1]:.4f}]")
        judged = "" if level is None else f" against its Holm level {1 - level:.4g}"
        verdict = "separated" if c.get("separated") else "cannot be separated"
        tables.print(f"  {c['metric']}: {c['a']} - {c['b']} = {num(c['difference'])}{ci}; p {num(c['p_value'], '.4g')}"
                      f"{judged} (Holm-adjusted p {num(c.get('p_holm'), '.4g')}; {c['test'] or '-'}): {verdict}; "
                      f"{c['n_paired']} shared, {c['n_left_out']} left out", highlight=False, soft_wrap=True)
    for o in cmp.get("official") or ():  # the benchmark's official figures of each run, side by side
        figs = "; ".join(f"{k} {num(v['value'])}" + (f" [{v['ci95'][0]:.4f}, {v['ci95'][1]:.4f}]" if v.get("ci95")
                                                     else "") for k, v in o["figures"].items())
        tables.print(f"  official figures, {o['model']}: {figs}", highlight=False, soft_wrap=True)


def results(results: dict[str, Any], model: str | None = None) -> None:
    """The table a finished run's command prints (``resume`` and ``retry-failed`` too): the lines its method's
    view declares (``methods/views.py``), else its headline; titled ``model``, else the run's label."""
    from ..run.labels import run_label

    if not (results.get("counts") or {}).get("done"):  # nothing measured: no table of nothing (the failures
        return                                          # and the exit status have said why, on stderr)
    model = model or run_label(results)
    lines = view_for(results.get("task")).summary or _lines.headline_lines
    show(lines(model, results.get("metrics") or {}))
