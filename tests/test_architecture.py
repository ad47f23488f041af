"""The shape of the code (docs/architecture.md): imports flow one way and form no circle, lazy imports included;
no source module is over 600 lines, and one over 400 says why at its top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: floors, lowest first.  A module may import its own package and any package on a lower floor; packages on one
#: floor are independent of each other.  ("" is the top-level package's own __init__: the public API.)
LAYERS: list[list[str]] = [
    ["_lazy"],  # importing a module on first use (numpy in core and metrics): below everything
    ["_version", "core", "metrics"],
    ["store", "testing", "datasets"],  # testing: the fake servers, which bill by core/tokens.py; datasets: benchmark readers
    ["run"],
    ["perturb"],
    ["models"],
    ["world"],
    ["methods"],
    ["finetune"],
    ["report", "export"],
    ["track"],  # experiment trackers: a finished run's results (export's metrics table) logged to MLflow, W&B, ...
    ["api"],
    ["meta", "sweep"],
    ["demo"],
    ["cli"],
    ["", "__main__"],
]


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, src: Path, modules: set[str]) -> set[str]:
    """Every vlmcheck module ``path`` imports, anywhere in the file (inside functions too), resolved to a module
    of ``modules``: ``from pkg import name`` is an import of ``pkg.name`` where that is a module, else of ``pkg``."""
    name = module_name(path, src)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            # a submodule's own parent packages are always imported before it: not a dependency to check
            if t and t != name and not name.startswith(t + "."):
                found.add(t)
    return found


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    files = {module_name(p, src): p for p in (src / "vlmcheck").rglob("*.py")}
    modules = set(files)
    return {m: imports_of(p, src, modules) for m, p in files.items()}


def floor(module: str) -> tuple[int, str]:
    """(floor index, top-level package) of a vlmcheck module."""
    top = module.split(".")[1] if module.count(".") else ""
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i, top
    raise AssertionError(f"{module}: its package {top!r} is on no floor of LAYERS; add it (docs/architecture.md)")


def wrong_way(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for m, targets in sorted(graph.items()):
        fm, pm = floor(m)
        for t in sorted(targets):
            ft, pt = floor(t)
            if pt != pm and ft >= fm:
                bad.append(f"{m} -> {t} ({pt!r} is {'above' if ft > fm else 'beside'} {pm!r})")
    return bad


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), and modules that import themselves."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.mark.slow
def test_imports_flow_one_way():
    assert wrong_way(import_graph()) == []


@pytest.mark.slow
def test_no_import_circle():
    assert circles(import_graph()) == []


def test_modules_are_short_or_say_why():
    too_long, unexplained = [], []
    for path in sorted((SRC / "vlmcheck").rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > 600:
            too_long.append(f"{path.relative_to(SRC)}: {len(lines)} lines")
        elif len(lines) > 400:
            head = "\n".join(lines[:40]).lower()
            if "why this module is long" not in head:
                unexplained.append(f"{path.relative_to(SRC)}: {len(lines)} lines and no 'Why this module is long'")
    assert too_long == [] and unexplained == []


@pytest.mark.parametrize("planted, expected", [
    ("from ..report.html import build_report\n", "vlmcheck.run.planted -> vlmcheck.report.html"),
    ("def f():\n    from ..methods import task_class\n", "vlmcheck.run.planted -> vlmcheck.methods"),
    ("import vlmcheck.cli\n", "vlmcheck.run.planted -> vlmcheck.cli"),
])
@pytest.mark.slow
def test_a_planted_wrong_way_import_fails(tmp_path, planted, expected):
    # the checks above run on a copy of the source with one wrong-way import planted, lazy ones included
    import shutil

    shutil.copytree(SRC / "vlmcheck", tmp_path / "vlmcheck", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "vlmcheck" / "run" / "planted.py").write_text(planted, encoding="utf-8")
    bad = wrong_way(import_graph(tmp_path))
    assert any(b.startswith(expected) for b in bad), bad


@pytest.mark.slow
def test_a_planted_circle_fails(tmp_path):
    import shutil

    shutil.copytree(SRC / "vlmcheck", tmp_path / "vlmcheck", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "vlmcheck" / "core" / "planted_a.py").write_text("def f():\n    from . import planted_b\n")
    (tmp_path / "vlmcheck" / "core" / "planted_b.py").write_text("from .planted_a import f\n")
    assert ["vlmcheck.core.planted_a", "vlmcheck.core.planted_b"] in circles(import_graph(tmp_path))


# ----------------------------------------------------------------------------- no switch on a method's name

#: where naming a method is the point: the methods themselves, the demo that runs them, the reference world,
#: the benchmark readers (a benchmark named "cast")
METHOD_HOMES = ("vlmcheck/methods/", "vlmcheck/world/", "vlmcheck/datasets/", "vlmcheck/demo.py")

#: the modules of methods/ that every method shares (a run's headline, comparisons, decisions, plans, records,
#: views): not a method's own, so they name none
SHARED_METHOD_MODULES = {f"vlmcheck/methods/{m}.py" for m in (
    "headline", "compare", "decide", "plan", "outcomes", "records", "refusals", "repeats", "views", "view_lines",
    "blind")}


def method_name_switches(source: str, names: set[str]) -> list[int]:
    """Lines of ``source`` that switch on a method's name: a comparison with it (``==``, ``!=``, ``in`` a literal
    tuple, list or set of them), a dict literal keyed by two or more of them (a table over methods; one such key
    is a word: perturb/text.py's synonyms of "describe"), or ``.startswith`` / ``.endswith`` it."""
    def named(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(named(e) for e in node.elts)
        return False

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(named(x) for x in [node.left, *node.comparators]):
            lines.append(node.lineno)
        elif isinstance(node, ast.Dict) and sum(k is not None and named(k) for k in node.keys) > 1:
            lines.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith") and any(named(a) for a in node.args)):
            lines.append(node.lineno)
    return lines


def test_nothing_above_the_methods_switches_on_a_methods_name():
    """Report, export, terminal, CLI, sweep, finetune, and the modules of methods/ that every method shares (the
    headline reader among them) learn what they show about a method from its view, its task protocol and its
    recorded headline (run/views.py, run/task.py), never from its name (docs/architecture.md)."""
    from vlmcheck.methods import TASK_NAMES

    found = []
    for path in sorted((SRC / "vlmcheck").rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(METHOD_HOMES) and rel not in SHARED_METHOD_MODULES:
            continue
        found += [f"{rel}:{n}" for n in method_name_switches(path.read_text(encoding="utf-8"), set(TASK_NAMES))]
    assert found == [], f"switches on a method's name outside its own modules: {found}"


@pytest.mark.parametrize("planted", ['if task == "cast":\n    pass', 'x = r["task"] in ("chef", "x")',
                                     'p = {"genception": 1, "cast": 2}.get(t)', 'ok = m.startswith("vhexpansion")',
                                     'if "describe" != t:\n    pass'])
def test_a_planted_switch_on_a_methods_name_is_found(planted):
    assert method_name_switches(planted, {"describe", "genception", "cast", "chef", "vhexpansion"}) == [1]
    # naming is not switching
    assert method_name_switches('name = "cast"\nf(x, "chef")\nS = {"chef": ["cook"]}', {"cast", "chef"}) == []
