"""The commands in README.md and docs/ are true to the code (issue 17): every `vlmcheck` line in a bash block
parses against the real CLI (commands and options exist, values have the right types) and is safe to paste
into zsh (no unquoted ? [ ] &); the blocks marked ```bash offline run, as written, in a fresh folder."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer

from vlmcheck.cli import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _blocks(path: Path) -> list[tuple[str, list[str]]]:
    """(info string, command lines) of every fenced block; continuation lines joined, comments kept."""
    out, info, lines = [], None, []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.startswith("```"):
            if info is None:
                info, lines = raw[3:].strip(), []
            else:
                joined, buf = [], ""
                for ln in lines:
                    if ln.rstrip().endswith("\\"):
                        buf += ln.rstrip()[:-1] + " "
                    else:
                        joined.append(buf + ln)
                        buf = ""
                out.append((info, joined))
                info = None
            continue
        if info is not None:
            lines.append(raw)
    return out


def _commands():
    for path in DOCS:
        for info, lines in _blocks(path):
            if info.split()[:1] not in (["bash"], ["sh"], ["console"]):
                continue
            for ln in lines:
                if ln.strip().startswith("vlmcheck "):
                    yield path.name, info, ln.strip()


def _unquoted_specials(line: str) -> list[str]:
    bad, quote = [], None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] == " "):
            break
        elif ch in "?[]" or (ch == "&" and "&&" not in line[i - 1:i + 2]):
            bad.append(ch)
    return bad


COMMANDS = list(_commands())


def _rest(ctx) -> list[str]:
    """The words a group's context leaves for its subcommand (click 8.2 keeps them in ``args`` alone)."""
    return list(getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", None) or []) + ctx.args


def _is_group(cmd) -> bool:
    """A command group, whichever click typer builds on (typer 0.29 ships its own copy, so a check against
    ``click.Group`` never matched and no subcommand was checked)."""
    return hasattr(cmd, "resolve_command") and hasattr(cmd, "commands")


def test_docs_have_commands():
    assert len(COMMANDS) >= 25


@pytest.mark.parametrize("where, info, line", COMMANDS, ids=[f"{c[0]}:{c[2][:60]}" for c in COMMANDS])
def test_every_documented_command_parses_and_is_zsh_safe(where, info, line):
    assert not _unquoted_specials(line), f"quote it for zsh: {line}"
    words = shlex.split(line, comments=True)
    if ">" in words:  # a redirection ends the command
        words = words[:words.index(">")]
    cmd = typer.main.get_command(app)
    args = words[1:]
    ctx = cmd.make_context("vlmcheck", list(args), resilient_parsing=False)
    while _is_group(cmd) and _rest(ctx):
        rest = _rest(ctx)
        name, sub, rest = cmd.resolve_command(ctx, rest)
        assert sub is not None, f"no such command {name!r}: {line}"
        ctx = sub.make_context(name, rest, parent=ctx)  # raises UsageError for unknown options and bad values
        cmd = sub


_SHELL = set("$`|;&<>(){}\\!")  # what only a shell reads: such a line runs in bash


def _in_process(line: str, cwd: Path, env: dict):
    """``[NAME=VALUE ...] vlmcheck ARGS [> FILE]`` run as bash would (its assignments, globs and redirection) but
    through the CLI in this process (conftest's run_cli); None for any other line, which bash runs."""
    import glob

    from conftest import run_cli

    words = shlex.split(line, comments=True)
    target = None
    if len(words) >= 2 and words[-2] == ">":
        words, target = words[:-2], words[-1]
    assign = {}
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        name, value = words.pop(0).split("=", 1)
        assign[name] = value
    if not words or words[0] != "vlmcheck" or any(ch in _SHELL for w in words for ch in w):
        return None
    args = []
    for w in words[1:]:  # a word with * is its sorted matches, as bash globs it (? and [ are quoted: zsh-safe above)
        found = sorted(glob.glob(w, root_dir=cwd)) if "*" in w else []
        args.extend(found or [w])
    p = run_cli(*args, cwd=cwd, env={**env, **assign})
    if target is not None and p.returncode == 0:
        (cwd / target).write_text(p.stdout, encoding="utf-8")
    return p


@pytest.mark.slow
def test_the_offline_blocks_run_as_written(tmp_path):
    """Each line as written, in one fresh folder: a plain ``vlmcheck`` line (assignments, globs and a redirection
    as bash reads them) through the CLI in this process, any other line in bash."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "200"}
    ran = 0
    for path in DOCS:
        for info, lines in _blocks(path):
            if info.split() != ["bash", "offline"]:
                continue
            for line in lines:
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                p = _in_process(line, tmp_path, env) or subprocess.run(
                    ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
                assert p.returncode == 0, f"{path.name}: {line}\n{p.stderr[-3000:]}"
                ran += 1
    assert ran >= 10
    assert (tmp_path / "report.html").exists() and (tmp_path / "tables" / "runs.csv").exists()


def _inline_commands():
    """`vlmcheck ...` code spans written in the docs' text and tables (``...`` stands for what the reader fills)."""
    import re

    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"(?<!`)`(vlmcheck [^`]+)`(?!`)", text):
            yield path.name, m.group(1)


INLINE = list(_inline_commands())


def test_docs_have_inline_commands():
    assert len(INLINE) >= 20


@pytest.mark.parametrize("where, line", INLINE, ids=[f"{c[0]}:{c[1][:60]}" for c in INLINE])
def test_every_inline_command_names_real_commands_and_options(where, line):
    # docs/datasets.md gave `vlmcheck genception run --data ...`, which the CLI rejects (no command 'run')
    import re

    # a synopsis: `a|b` offers a or b (the first is checked), `[--opt V]` is optional (checked as given)
    text = re.sub(r"(\S+?)\|\S+", r"\1", line.split(" ...")[0]).replace("[", "").replace("]", "")
    words = shlex.split(text)[1:]
    cmd = typer.main.get_command(app)
    while _is_group(cmd) and words and not words[0].startswith("-"):
        sub = cmd.get_command(click.Context(cmd), words[0])
        assert sub is not None, f"{where}: no such command {words[0]!r}: {line}"
        cmd, words = sub, words[1:]
    if _is_group(cmd):
        return  # a group named on its own (`vlmcheck chef`)
    known = {o for p in cmd.params for o in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])}
    for w in words:
        if w.startswith("-") and w not in ("-", "--"):
            assert w.split("=")[0] in known, f"{where}: {cmd.name} has no option {w}: {line}"
    ctx = cmd.make_context(cmd.name, list(words), resilient_parsing=True)  # missing options are the reader's
    assert not ctx.args, f"{where}: {cmd.name} takes no argument {ctx.args[0]!r}: {line}"


def test_datasets_doc_says_where_popes_figures_differ_from_lmms_evals():
    """POPE's figures will differ from lmms-eval's on the same answers (its yes ratio is the truth's share of yes,
    its precision reads only exact "yes"/"no"): docs/datasets.md says so, and which one vlmcheck reports."""
    text = " ".join((ROOT / "docs" / "datasets.md").read_text(encoding="utf-8").split())
    para = text[text.index("POPE's figures differ from lmms-eval's"):][:900]
    assert "evaluate.py" in para and "yes ratio" in para and "TRUTH" in para and "precision" in para
