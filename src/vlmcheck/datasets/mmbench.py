"""MMBench (Liu et al., 2023): its official figure.  MMBench's release is VLMEvalKit's TSV (read by
:mod:`.vlmeval_tsv`) and its Hub copy a snapshot (:mod:`.hub`); both hold the circular copies of each question
(``index + k x 1,000,000``, options rotated), which the records carry as ``meta["circular_copy"]`` and the
question they copy as their group.
"""

from __future__ import annotations

from .official import Answer, declare, grouped, per_group, per_question, share


def mmbench_outcomes(answers: list[Answer]) -> dict:
    circ = {g: qs for g, qs in grouped(answers).items() if len(qs) > 1}
    return {"vanilla_accuracy": per_question([a for a in answers if a.copy == 0]),
            **({"circular_accuracy": per_group(circ)} if circ else {})}


@declare("mmbench", "MMBench circular and vanilla accuracy",
         "VLMEvalKit vlmeval/dataset/utils/multiple_choice.py (CircularEval: a question counts only when every "
         "circular copy is right; VanillaEval: the questions themselves, copy 0)", outcomes=mmbench_outcomes)
def circular_vanilla(answers: list[Answer]) -> dict:
    """CircularEval (the MMBench paper's figure): the share of questions whose every circular copy was answered
    right; VanillaEval: the share of the questions themselves (copy 0) answered right.  Both clustered by image.
    A run that asked no copies has no circular accuracy (said in the notes)."""
    groups = grouped(answers)
    circ = {g: qs for g, qs in groups.items() if len(qs) > 1}
    first = [a for a in answers if a.copy == 0]
    out: dict = {"vanilla_accuracy": share([a.correct for a in first], [a.unit for a in first])}
    if circ:
        out["circular_accuracy"] = share([all(a.correct for a in qs) for qs in circ.values()],
                                         [qs[0].unit for qs in circ.values()])
    notes = []
    if not circ:
        notes.append("no circular copies asked (a VanillaEval run): no circular accuracy")
    elif len(circ) < len(groups):
        notes.append(f"{len(groups) - len(circ)} questions with one copy answered, left out of circular accuracy")
    if notes:
        out["notes"] = notes
    return out
