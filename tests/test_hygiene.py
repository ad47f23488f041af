"""Code that explains itself and carries nothing dead: no issue number in src/'s comments or docstrings, no
module-level function or class without a caller, no line wider than the house's 120 characters
(tests/test_architecture.py holds the rules on imports, module length and switches on a method's name).  Static
scans of the source with ``ast`` and ``tokenize``: fast, no import of the package."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# ----------------------------------------------------------------------------- no issue numbers in the source

#: a reference to an issue or pull request: "issue 51", "issues 34 and 48", "(issue #12)", "#48", "PR 7"
ISSUE_REF = re.compile(r"\bissues?\s+#?\d+|(?<![\w&/#])#\d{2,}\b|\bPR\s*#?\d+", re.IGNORECASE)


def _docstrings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                yield body[0].lineno, body[0].value.value


def issue_references(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of ``source`` that cites an issue or pull request number."""
    if not ISSUE_REF.search(source):  # most files: nothing to tokenize
        return []
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and ISSUE_REF.search(tok.string.lstrip("#")):
            found.append((tok.start[0], tok.string.strip()))
    for line, text in _docstrings(ast.parse(source)):
        for i, part in enumerate(text.splitlines()):
            if ISSUE_REF.search(part):
                found.append((line + i, part.strip()))
    return sorted(found)


def _py_files():
    return sorted((SRC / "vlmcheck").rglob("*.py"))


def test_no_issue_number_in_source_comments_or_docstrings():
    """A comment says why; the issue that asked for it is history (git log has it)."""
    found = [f"{p.relative_to(SRC)}:{line}: {text[:100]}" for p in _py_files()
             for line, text in issue_references(p.read_text(encoding="utf-8"))]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("planted", ["x = 1  # see issue 51\n", "# (issues 34 and 48)\n",
                                     'def f():\n    """Folded (issue 37 item 1)."""\n', "y = 2  # fixed in #48\n",
                                     '"""A module (PR 12)."""\n'])
def test_a_planted_issue_number_is_found(planted):
    assert len(issue_references(planted)) == 1
    # a colour, an HTML entity, a count in code and an "issue" in prose are not references
    assert issue_references('c = "#333"  # grey\nn = 48  # the 48 items\n# an issue with it\ns = "&#39;"\n') == []


# ----------------------------------------------------------------------------- no dead module-level code

#: names with no caller in src/ that are kept on purpose, each with its reason
ALLOWED_UNCALLED = {
    # metrics/decisions.py: the unfolded bootstrap that ChEF's folded one is tested against (test_chef_folded.py)
    # and bench/decisions.py's paired RRM bootstrap uses; the list form of a share's interval that a method
    # outside the package calls (tests/test_method_views.py's toy method, bench/decision_screen.py)
    "cluster_bootstrap", "proportion_interval",
    # run/task.py: the Protocol that documents what a task gives compare and plan (duck-typed, never named)
    "DecidableTask",
}

#: string constants that name a definition: a lazy registry target ("pkg.module:attr"), a dotted path's last part,
#: or the name itself (the public API's table in vlmcheck/__init__.py, __all__)
_TARGET = re.compile(r"^(?:[\w.]+[:.])?(?P<name>[A-Za-z_]\w*)$")


def _defined(tree: ast.Module) -> list[ast.AST]:
    """The module-level functions and classes of a module (decorated ones are registered by their decorator:
    a CLI command, a registered adapter, not counted)."""
    return [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and not n.decorator_list and not (n.name.startswith("__") and n.name.endswith("__"))]


def _names(node: ast.AST, skip: set[int]):
    """Every name ``node`` references: names, attributes, imports, and strings that name a definition (not
    docstrings, whose ids are added to ``skip`` as their owners are met: ast.walk meets a parent first)."""
    for n in ast.walk(node):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body \
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant):
            skip.add(id(n.body[0].value))
        if isinstance(n, ast.Name):
            yield n.id
        elif isinstance(n, ast.Attribute):
            yield n.attr
        elif isinstance(n, ast.alias):
            yield n.name.rpartition(".")[2]
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip:
            if (m := _TARGET.match(n.value.strip())) is not None:
                yield m["name"]


def uncalled(sources: dict[str, str]) -> list[str]:
    """``module:name`` of every module-level function or class of ``sources`` (module -> text) that nothing
    references outside its own definition: no name, attribute or import of it, no string naming it."""
    used: dict[str, int] = {}
    defined: list[tuple[str, str, int]] = []  # (module, name, references from within its own definition)
    for module, text in sources.items():
        tree = ast.parse(text)
        skip: set[int] = set()
        if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
            skip.add(id(tree.body[0].value))
        counted = {id(n) for n in _defined(tree)}
        for stmt in tree.body:
            own = 0
            for name in _names(stmt, skip):
                used[name] = used.get(name, 0) + 1
                own += id(stmt) in counted and name == stmt.name
            if id(stmt) in counted:
                defined.append((module, stmt.name, own))
    return [f"{module}:{name}" for module, name, own in defined
            if used.get(name, 0) - own <= 0 and name not in ALLOWED_UNCALLED]


def test_every_module_level_function_and_class_has_a_caller():
    sources = {p.relative_to(SRC).as_posix(): p.read_text(encoding="utf-8") for p in _py_files()}
    assert uncalled(sources) == []


def test_a_planted_dead_function_is_found():
    sources = {"a.py": "def used():\n    return 1\n\ndef dead():\n    return dead()\n\nclass Gone:\n    pass\n",
               "b.py": "from a import used\nx = used()\nT = {'lazy': 'pkg.mod:Target'}\n",
               "c.py": "class Target:\n    pass\n\n@app.command()\ndef cmd():\n    pass\n\ndef __getattr__(n):\n"
                       "    pass\n"}
    # dead() calls only itself; Gone has no reference; Target is a registry's string; cmd is registered
    assert sorted(uncalled(sources)) == ["a.py:Gone", "a.py:dead"]


# ----------------------------------------------------------------------------- lines a reader sees whole

#: the width the code is written to; a shorter house is not one with more on each line
MAX_LINE = 120


def long_lines(source: str) -> list[int]:
    """Numbers of the lines of ``source`` longer than :data:`MAX_LINE` characters."""
    return [n for n, line in enumerate(source.splitlines(), 1) if len(line) > MAX_LINE]


def test_no_line_in_src_is_longer_than_the_house_width():
    found = {p.relative_to(SRC).as_posix(): lines for p in _py_files() if (lines := long_lines(p.read_text("utf-8")))}
    assert found == {}


def test_a_planted_long_line_is_found():
    assert long_lines("x = 1\n" + "y = '" + "a" * 120 + "'\n" + "z = 2\n") == [2]
