"""Defaults, not copies: one yes/no reader, one fold, one command table, one method-command skeleton, keyword-only
construction of ChEF's questions."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from vlmcheck.core.answers import read_yes_no

SRC = Path(__file__).resolve().parents[1] / "src" / "vlmcheck"

# ----------------------------------------------------------------------------- one yes/no reader

#: answer -> (lenient, POPE's evaluate.py), None where the rule finds no yes/no word (unread: POPE scores it yes).
#: By hand: lenient = the first sentence (ends at . ! ? before a space, or a newline), its letters-only words in
#: any case, "no"/"not" -> no, else "yes" -> yes.  pope = the text before the first ".", commas removed, split on
#: single spaces, one of "No", "no", "not" exactly -> no; else any yes/no/not word in any case -> yes (read, and
#: scored yes as POPE's code scores it).
YES_NO = {
    "No": ("no", "no"),
    "no.": ("no", "no"),
    "Yes.": ("yes", "yes"),
    "Yes, there is no cat.": ("no", "no"),  # pope: "Yes there is no cat"
    "No, there is not.": ("no", "no"),
    "There is not a cat.": ("no", "no"),
    "There is not.": ("no", "no"),
    "No, there isn't.": ("no", "no"),  # pope: "No there isn't" -> "No"
    " no": ("no", "no"),  # pope: split(" ") gives ['', 'no']
    "Yes. No.": ("yes", "yes"),  # the first sentence only
    "Yes. There is no doubt.": ("yes", "yes"),
    "Yes\nNo": ("yes", "yes"),  # lenient: the first line; pope: one word "Yes\nNo", no exact no, a yes in it
    # where the two rules differ: POPE's code takes case and punctuation as written (the published POPE numbers)
    "NO": ("no", "yes"),
    "No!": ("no", "yes"),
    "Not sure.": ("no", "yes"),
    # no yes/no word: unread under both (ChEF's lenient check matched \b-words, VHExpansion's letter runs: "Yes1"
    # was unread for one and read for the other; both read it now)
    "Yes1 there is.": ("yes", "yes"),
    "nope": (None, None),
    "I cannot tell.": (None, None),
    "Sure": (None, None),
    "": (None, None),
}


@pytest.mark.parametrize("text", list(YES_NO))
def test_one_yes_no_reader_each_rule_by_hand(text):
    lenient, pope = YES_NO[text]
    assert read_yes_no(text) == lenient
    assert read_yes_no(text, "lenient") == lenient
    assert read_yes_no(text, "pope") == pope


def test_no_other_module_reads_a_yes_no_answer():
    # the old readers by name, and any module other than core/answers.py that reads "no"/"not" out of an answer
    for f in SRC.rglob("*.py"):
        text = f.read_text()
        for name in ("def pope_answer", "def pope_read", "def pope_evaluate_answer", "def says_yes_or_no"):
            assert name not in text, (f, name)
        if f.name != "answers.py":
            assert '{"no", "not"}' not in text and '"not" in words' not in text, f


# ----------------------------------------------------------------------------- one fold


def test_a_spec_task_summarizes_with_its_folder_by_default():
    from vlmcheck.run.task import SpecTask

    class Count:
        def __init__(self):
            self.n = 0

        def add(self, record):
            self.n += record["result"]

        def result(self, failed=()):
            return {"sum": self.n, "failed": len(failed)}

    class Toy(SpecTask):
        def summary_folder(self):
            return Count()

    assert Toy().summarize([{"result": 2}, {"result": 3}], [{"sample_id": "x"}]) == {"sum": 5, "failed": 1}


def test_no_method_writes_out_the_fold():
    for f in (SRC / "methods").rglob("*.py"):
        tree = ast.parse(f.read_text())
        defs = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        assert "summarize" not in defs, f  # SpecTask.summarize folds with the method's summary_folder()


# ----------------------------------------------------------------------------- ChEF's Ask by keyword


def test_ask_is_built_by_keyword_only():
    from vlmcheck.methods.chef.inferencers import Ask

    async def read(text):
        return {}

    with pytest.raises(TypeError):
        Ask([], [], "q", "", "", [], read)  # noqa: the positional form is refused
    ask = Ask(parts=[], query="Is it?", read=read)
    assert (ask.history, ask.answer_prompt, ask.then, ask.continuations) == ([], "", "", [])
    for f in (SRC / "methods" / "chef").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Ask":
                assert not node.args, f"{f}:{node.lineno}: Ask(...) with positional arguments"


# ----------------------------------------------------------------------------- one command table


def test_no_cli_module_names_a_top_level_command():
    # cli.COMMANDS is the only place a command is named (a group's own sub-commands are named in its module)
    for f in (SRC / "cli").glob("*.py"):
        if f.name == "__init__.py":
            continue
        text = f.read_text()
        assert not re.search(r"def register\(|add_typer\(|\bapp\.command\(", text), f


# ----------------------------------------------------------------------------- one method-command skeleton


def test_no_cli_module_copies_the_method_command_skeleton():
    # cli/_common.method_task and run_method: a method command declares its task's fields, nothing else
    for f in (SRC / "cli").glob("*.py"):
        if f.name == "_common.py":
            continue
        text = f.read_text()
        for piece in ('load_model(spec, "vlm")', ".canonical()", "if results is None", "check_failures([results]"):
            assert piece not in text, (f.name, piece)


# ----------------------------------------------------------------------------- a declared headline


def test_a_share_headline_is_declared_by_name_and_counts():
    import numpy as np

    from vlmcheck.metrics.measured import share_headline

    k, n = np.array([2.0, 1.0, 0.0]), np.array([2.0, 2.0, 2.0])  # three images, two answers each: 3 of 6 right
    h = share_headline("accuracy", k, n, "image")
    assert (h["name"], h["value"], h["higher_is_better"]) == ("accuracy", 0.5, True)
    assert (h["interval"]["unit"], h["interval"]["n_units"], h["interval"]["n"]) == ("image", 3, 6)
    assert h["ci95"][0] < 0.5 < h["ci95"][1]
    # the images disagree (1, 0.5, 0): a design effect above 1, so a wider interval than six independent answers
    flat = share_headline("accuracy", np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0]), np.ones(6), "answer")
    assert flat["value"] == 0.5 and h["ci95"][1] - h["ci95"][0] > flat["ci95"][1] - flat["ci95"][0]
    unmeasured = share_headline("accuracy", k, n, "image", "the parser read fewer than half of the answers")
    assert unmeasured["value"] is None and unmeasured["ci95"] is None
    assert unmeasured["not_measured"] == "the parser read fewer than half of the answers"


def test_the_methods_name_their_share_headline():
    for rel in ("methods/vhx_summary.py", "methods/chef/headline.py"):
        text = (SRC / rel).read_text()
        assert "share_headline(" in text and '_ci95"], orig["intervals"]' not in text, rel
        for name in ('"accuracy"', '"POPE accuracy"', '"VanillaEval accuracy"', '"symmetric accuracy"'):
            assert f"headline_entry({name}" not in text and f"not_measured({name}" not in text, (rel, name)
