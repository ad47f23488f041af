"""ChEF's Inferencers (supplementary B.3; docs/methods.md, "Inferencers"): how the model's answer to one question
is obtained.  The task makes an :class:`Ask` - the in-context turns, the image, the question, the answer pool as
scored continuations, how a generated answer is read - and an Inferencer puts it to the model.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

import numpy as np

from ...core.messages import Message
from ...core.roles import GenerationConfig
from .recipe import COT_PROMPT, TEMPLATE_VERSION, usable_inferencers


def ppl_choice(scores: Sequence[float]) -> dict[str, Any]:
    """PPL's choice from the mean log-likelihood of each answer-pool member: the argmax (the first on ties), the
    softmax of the scores as probabilities and their max as the confidence (ECE, supplementary C.1)."""
    s = np.asarray(scores, dtype=float)
    p = np.exp(s - s.max())
    p /= p.sum()
    return {"pred": int(np.argmax(s)), "confidence": float(p.max()), "probs": [float(x) for x in p]}


@dataclass(kw_only=True)
class Ask:
    """One question as the Scenario and Instruction put it, built by keyword.  ``read(text)`` reads a generated
    answer into ``{pred, extracted, extracted_by, unread}``; ``continuations`` is the answer pool PPL scores."""

    history: list[Message] = field(default_factory=list)  # in-context examples (Instruction)
    parts: list  # the image, or nothing
    query: str  # the question, with its options where the pool is their labels
    answer_prompt: str = ""  # what asks for the answer directly ("" for a bare yes/no question or a class prompt)
    then: str = ""  # the second turn after a chain of thought ("...Therefore, among the options, the answer is")
    continuations: list[str] = field(default_factory=list)
    read: Callable[[str], Awaitable[dict[str, Any]]] | None = None  # None: turn questions, scored only
    think_config: GenerationConfig = field(default_factory=GenerationConfig)  # the rationale
    answer_config: GenerationConfig = field(default_factory=GenerationConfig)  # a generated answer
    turns: list[dict[str, Any]] = field(default_factory=list)  # a turn scenario's PPL turns
    history_turns: bool = False  # MultiTurnPPL: ask each turn after the earlier ones and their answers

    def first_turn(self, suffix: str) -> list[Message]:
        return self.history + [Message.user(*self.parts, self.query + suffix)]


async def _generated(vlm: Any, messages: list[Message], ask: Ask) -> dict[str, Any]:
    """A generated answer read by the parser; ``cut``: it stopped at the token limit (an unread answer's hint)."""
    gen = await vlm.generate(messages, ask.answer_config, template=TEMPLATE_VERSION)
    return {"answer_text": gen.text, "cut": gen.finish_reason == "length", "confidence": None,
            **await ask.read(gen.text)}


async def _think(vlm: Any, ask: Ask) -> tuple[str, list[Message]]:
    """CoT's first turn: the rationale, and the conversation that asks for the answer after it."""
    messages = ask.first_turn("\n" + COT_PROMPT)
    rationale = (await vlm.generate(messages, ask.think_config, template=TEMPLATE_VERSION)).text
    return rationale, messages + [Message.assistant(rationale), Message.user(ask.then)]


async def _score(vlm: Any, messages: list[Message], continuations: list[str]) -> dict[str, Any]:
    lls = await vlm.loglikelihood(messages, continuations, template=TEMPLATE_VERSION)
    return {**ppl_choice([ll.mean for ll in lls]), "extracted": True}


@dataclass(frozen=True)
class Inferencer:
    """One of B.3's ways to put an :class:`Ask` to the model (``ask``, awaited by calling the inferencer)."""

    name: str
    ask: Callable[[Any, Ask], Awaitable[dict[str, Any]]]
    needs_likelihood: bool = False  # scores the answer pool (the model's loglikelihood capability)
    generates_answer: bool = False  # the answer is generated text, read by a parser

    def __call__(self, vlm: Any, ask: Ask) -> Awaitable[dict[str, Any]]:
        return self.ask(vlm, ask)


async def _direct(vlm: Any, ask: Ask) -> dict[str, Any]:
    """B.3 (1): the greedy answer, read by the scenario's parser."""
    return await _generated(vlm, ask.first_turn(ask.answer_prompt), ask)


async def _cot(vlm: Any, ask: Ask) -> dict[str, Any]:
    """B.3 (2): "Let's think step by step", then the answer after the rationale, read by the parser."""
    rationale, messages = await _think(vlm, ask)
    return {"rationale": rationale, **await _generated(vlm, messages, ask)}


async def _ppl(vlm: Any, ask: Ask) -> dict[str, Any]:
    """B.3 (3): the answer pool's likelihoods; the most likely member is the answer."""
    if ask.turns:  # a turn scenario under PPL is asked as multi-turn PPL
        return await _multiturn_ppl(vlm, ask)
    return await _score(vlm, ask.first_turn(ask.answer_prompt), ask.continuations)


async def _cot_ppl(vlm: Any, ask: Ask) -> dict[str, Any]:
    """B.3 (4), Table 7: Multi-Turn with CoT in the first turn and PPL in the second."""
    rationale, messages = await _think(vlm, ask)
    return {"rationale": rationale, **await _score(vlm, messages, ask.continuations)}


async def _multiturn_ppl(vlm: Any, ask: Ask) -> dict[str, Any]:
    """B.3 (4), D.2: each turn a PPL question with its own answer pool, asked on its own with the image (the
    authors' code) or after the earlier turns and their predicted answers (``history: true``); the item is right
    when every turn is."""
    async def one(turn: dict[str, Any], history: list[Message]) -> dict[str, Any]:
        conts = [turn["template"].format(option=o) for o in turn["options"]]
        msgs = history + [Message.user(*([] if history else ask.parts), turn["prompt"])]
        c = await _score(vlm, msgs, conts)
        return {"role": turn["role"], "label": turn["label"], "pred": c["pred"], "answer": turn["answer"],
                "correct": c["pred"] in turn["accept"], "confidence": c["confidence"], "probs": c["probs"],
                "values": turn["values"], "continuation": conts[c["pred"]]}

    if ask.history_turns:
        done: list[dict[str, Any]] = []
        history: list[Message] = []
        for t in ask.turns:
            res = await one(t, history)
            done.append(res)
            history = history + [Message.user(*([] if history else ask.parts), t["prompt"]),
                                 Message.assistant(res["continuation"])]
    else:  # independent questions, as the authors ask them: all at once
        done = list(await asyncio.gather(*(one(t, []) for t in ask.turns)))
    first = done[0]
    return {"turns": done, "pred": first["pred"], "confidence": first["confidence"], "probs": first["probs"],
            "extracted": True, "correct": all(t["correct"] for t in done)}


INFERENCERS: dict[str, Inferencer] = {i.name: i for i in (
    Inferencer("direct", _direct, generates_answer=True), Inferencer("cot", _cot, generates_answer=True),
    Inferencer("ppl", _ppl, needs_likelihood=True), Inferencer("cot_ppl", _cot_ppl, needs_likelihood=True),
    Inferencer("multiturn_ppl", _multiturn_ppl, needs_likelihood=True))}


def likelihood_refusal(recipe: Any, inferencer: str, model_id: str) -> str:
    """One sentence for a run whose inferencer scores answers by likelihood on a model that gives none: every way
    forward, the generation inferencers only where the recipe allows them, with their cost to fidelity."""
    gen = [n for n in usable_inferencers(recipe) if not INFERENCERS[n].needs_likelihood]
    ways = ["a server that returns prompt log-probabilities (vLLM: add ?prompt_logprobs=1 to the model spec)"]
    if gen:
        cost = ("generated answers read by a parser: no confidence, so no ECE" +
                (" and no calibration score" if recipe.desideratum == "calibration" else "") +
                ", and an answer the parser cannot read counts as wrong")
        ways.append(f"{' or '.join('--inferencer ' + g for g in gen)} ({cost})")
    ways.append("a local hf: model")
    why = "" if gen else " (its turn questions are asked only by likelihood)"
    return (f"recipe {recipe.name} scores answers by likelihood with the {inferencer} inferencer, which model "
            f"{model_id!r} does not provide (no 'loglikelihood' capability){why}: use " + ", or ".join(ways) + ".")
