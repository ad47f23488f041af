"""Original-release forms of issue 46 (datasets/): each read from a small faithful replica built here from the
published schema, checked against values written by hand.  MMVP through VHExpansion end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from PIL import Image

from vlmcheck.core.roles import Capabilities, Generation
from vlmcheck.datasets import DatasetFormError, detect, load
from vlmcheck.methods.vhexpansion import VHExpansionTask, VHXSpec
from vlmcheck.methods.vhx_cases import load_cases
from vlmcheck.run.runner import RunOptions, run_task
from vlmcheck.methods.vhx_negation import check_negation
from vlmcheck.world.negator import negate_question


# MMVP's Questions.csv as released (github.com/tsb0601/MMVP): Index, Question, Options "(a) x (b) y",
# Correct Answer "(a)"; rows 2k-1 and 2k are one CLIP-blind pair asking the same question.
MMVP_CSV = """Index,Question,Options,Correct Answer
1,Is the dog facing left or right from the camera's perspective?,(a) Left (b) Right,(a)
2,Is the dog facing left or right from the camera's perspective?,(a) Left (b) Right,(b)
3,Are the butterfly's feet visible?,(a) Yes (b) No,(a)
4,Are the butterfly's feet visible?,(a) Yes (b) No,(a)
5,Is the door of the truck cab open?,(a) Yes (b) No,(b)
6,Is the door of the truck cab open?,(a) Yes (b) No,(a)
"""


def _mmvp(tmp_path: Path) -> Path:
    root = tmp_path / "MMVP"
    (root / "MMVP Images").mkdir(parents=True)
    for i in range(1, 7):  # image i is a solid red of level 30 i: the scripted model below tells them apart
        Image.new("RGB", (8, 8), (30 * i, 0, 0)).save(root / "MMVP Images" / f"{i}.jpg")
    (root / "Questions.csv").write_text(MMVP_CSV)
    return root


def test_mmvp_release_is_read_one_record_per_question(tmp_path):
    root = _mmvp(tmp_path)
    for path in (root, root / "Questions.csv"):
        assert detect(path).name == "mmvp"
        ds = load(path)
        assert [r.id for r in ds.records] == ["1", "2", "3", "4", "5", "6"]
        assert [r.group for r in ds.records] == ["pair-1", "pair-1", "pair-2", "pair-2", "pair-3", "pair-3"]
        assert ds.records[0].options == ["Left", "Right"] and ds.records[2].options == ["Yes", "No"]
        assert [r.answer for r in ds.records] == [0, 1, 0, 0, 1, 0]
        assert ds.records[1].images == [str(root / "MMVP Images" / "2.jpg")] and ds.distinct_images == 6
        assert not ds.skipped


def test_mmvp_cases_one_per_question_with_their_pair(tmp_path):
    cases = load_cases(_mmvp(tmp_path))
    assert [(c.id, c.question, c.answer) for c in cases] == [
        ("1", "Is the dog facing left or right from the camera's perspective? Is the answer 'Left'?", "yes"),
        ("2", "Is the dog facing left or right from the camera's perspective? Is the answer 'Left'?", "no"),
        ("3", "Are the butterfly's feet visible?", "yes"),
        ("4", "Are the butterfly's feet visible?", "yes"),
        ("5", "Is the door of the truck cab open?", "no"),
        ("6", "Is the door of the truck cab open?", "yes")]
    assert [c.meta["pair"] for c in cases] == ["pair-1", "pair-1", "pair-2", "pair-2", "pair-3", "pair-3"]


@pytest.mark.parametrize("question, negated", [
    ("Is the dog facing left or right from the camera's perspective? Is the answer 'Left'?",
     "Is the dog facing left or right from the camera's perspective? Is it false that the answer is 'Left'?"),
    ("Are the butterfly's feet visible?", "Is it false that the butterfly's feet are visible?"),
    ("Is the door of the truck cab open?", "Is it false that the door of the truck cab is open?"),
    ("How many eyes can you see in the animal's face? Is the answer 'One'?",
     "How many eyes can you see in the animal's face? Is it false that the answer is 'One'?"),
])
def test_negation_of_mmvp_style_questions(question, negated):
    assert negate_question(question) == negated
    assert check_negation(question, negated) == {"ok": True, "problems": []}


def test_negation_check_on_mmvp_style_questions_still_refuses_bad_ones():
    q = "Is the dog facing left or right? Is the answer 'Left'?"
    # an LLM's other faithful phrasing passes; a changed context, a lost word or no negation does not
    assert check_negation(q, "Is the dog facing left or right? Is the answer not 'Left'?")["ok"]
    assert not check_negation(q, "Is the dog facing up or down? Is it false that the answer is 'Left'?")["ok"]
    assert not check_negation(q, "Is the dog facing left or right? Is it false that the answer is?")["ok"]
    assert not check_negation(q, "Is the dog facing left or right? Is the answer 'Left'?")["ok"]


def test_dry_run_negation_of_an_mmvp_case_passes_the_check():
    # --dry-run's stand-in negator must count an MMVP case's negated question as a real negator's would be
    from vlmcheck.core.messages import Message
    from vlmcheck.methods.vhx_negation import NEGATION_PROMPT

    q = "Is the dog facing left or right? Is the answer 'Left'?"
    said = VHExpansionTask.dry_run_reply(None, "negator", [Message.user(NEGATION_PROMPT.format(question=q))], None)
    assert said == "Is the dog facing left or right? Is not the answer 'Left'?" and check_negation(q, said)["ok"]


class Scripted:
    """Answers from a script keyed by (image number, negated?): image i is red 30 i (JPEG keeps it near)."""

    model_id = "test:scripted"

    def __init__(self, script: dict[tuple[int, bool], str]) -> None:
        self.capabilities = Capabilities()
        self.script = script

    async def generate(self, messages, config):
        last = messages[-1]
        red = last.images[0].to_pil().convert("RGB").getpixel((4, 4))[0]
        return Generation(text=self.script[round(red / 30), "false" in last.text or " not " in last.text])


@pytest.mark.slow
def test_mmvp_through_vhexpansion_symmetric_and_pair_accuracy_by_hand(tmp_path):
    root = _mmvp(tmp_path)
    # truths (case: original, negation): 1 yes/no, 2 no/yes, 3 yes/no, 4 yes/no, 5 no/yes, 6 yes/no
    script = {(1, False): "Yes.", (1, True): "No.",    # both right
              (2, False): "No.", (2, True): "Yes.",    # both right
              (3, False): "Yes.", (3, True): "Yes.",   # original right, negation wrong
              (4, False): "No.", (4, True): "Yes.",    # original wrong, negation right
              (5, False): "No.", (5, True): "Yes.",    # both right
              (6, False): "Yes.", (6, True): "Yes."}   # original right, negation wrong
    task = VHExpansionTask(VHXSpec(vlm="ref:describer", cases=str(root), perturb=[]), vlm=Scripted(script))
    m = run_task(task, tmp_path / "run", RunOptions(progress=False)).results["metrics"]
    assert m["n_cases"] == 6 and m["negation"] == {"ok": 6, "failed": 0}
    orig = m["variants"]["original"]
    assert orig["n"] == 6 and orig["accuracy"] == pytest.approx(5 / 6)  # all but case 4
    assert orig["n_pairs"] == 6 and orig["symmetric_accuracy"] == pytest.approx(3 / 6)  # cases 1, 2, 5
    assert orig["yes_ratio"] == pytest.approx(8 / 12)
    # MMVP pairs: (1, 2) both right, (3, 4) case 4 wrong, (5, 6) both right
    assert orig["pair_accuracy"] == pytest.approx(2 / 3) and orig["n_mmvp_pairs"] == 3
    assert orig["mmvp_pairs_incomplete"] == 0


@pytest.mark.slow
def test_mmvp_through_vhx_run_cli(tmp_path):
    root = _mmvp(tmp_path)
    run = run_cli("vhx", "run", "--vlm", "ref:describer?yes_bias=1", "--cases", str(root), "--perturb", "", "--out",
                  str(tmp_path / "run"), "--no-progress")
    assert run.returncode == 0, run.stderr
    m = json.loads((tmp_path / "run" / "results.json").read_text())["metrics"]
    orig = m["variants"]["original"]
    # a model that says yes to everything: right on the yes cases 1, 3, 4, 6 (4/6); never right on a case and
    # its negation (0/6, computed: not null); pair (3, 4) is its only pair with both answers yes (1/3)
    assert m["n_cases"] == 6 and m["negation"] == {"ok": 6, "failed": 0}
    assert orig["accuracy"] == pytest.approx(4 / 6) and orig["symmetric_accuracy"] == 0.0
    assert orig["pair_accuracy"] == pytest.approx(1 / 3) and orig["n_mmvp_pairs"] == 3
    assert "MMVP pair accuracy: 0.333 over 3 pairs" in run.stdout + run.stderr


def test_mmvp_bad_input_is_one_sentence(tmp_path):
    root = _mmvp(tmp_path)
    (root / "Questions.csv").write_text("Index,Question,Options\n1,Q?,(a) x (b) y\n")
    with pytest.raises(DatasetFormError, match=r"Questions\.csv: expected MMVP's Questions\.csv .*Correct Answer"):
        load(root, form="mmvp")
    (root / "Questions.csv").write_text(MMVP_CSV)
    (root / "MMVP Images" / "6.jpg").unlink()
    ds = load(root)
    assert [r.id for r in ds.records] == ["1", "2", "3", "4", "5"]
    assert ds.skipped == [("row 7 (Index 6)", "no image MMVP Images/6.jpg")]
    import shutil

    shutil.rmtree(root / "MMVP Images")
    with pytest.raises(DatasetFormError, match="expected the folder 'MMVP Images' beside Questions.csv"):
        load(root)
