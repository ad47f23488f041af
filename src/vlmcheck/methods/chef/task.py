"""ChEF's task: every item asked under the settings its recipe's desideratum needs (docs/methods.md, "ChEF"); the
recipe, scenarios, inferencers, metrics and summary are in their own modules.  PPL needs the model's likelihoods:
without them the run stops before any call, naming every way forward.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, model_validator

from ...core.inputs import read_image
from ...core.messages import Message
from ...core.answers import read_yes_no
from ...core.roles import CapabilityError, GenerationConfig
from ...core.spec import load_model
from ..blind import withheld
from ..repeats import generation_config, repeated
from .summary import ChefSummary, official_answer
from ...run.calls import Session
from ...run.task import Sample, SpecTask
from . import metrics as M
from .inferencers import INFERENCERS, Ask, likelihood_refusal
from ..records import read_items
from .scenarios import LETTERS, ROW_KINDS, load_scenario

from .recipe import (CLASS_POOL_QUERY, CLASS_POOL_TEMPLATE, CLASS_TEMPLATE, ICE_ANSWER, JUDGE_SYSTEM,
                     LABEL_TEMPLATE, POOL_OF_SCENARIO, TEMPLATE_VERSION, VERBALIZERS, InferencerName,
                     Recipe, extract_choice, format_query, inferencer_refusal, resolve_recipe,
                     verbalizer_instruction, verbalizer_labels)


class ChefSpec(BaseModel):
    vlm: str
    recipe: Recipe
    data: str | None = None  # overrides recipe.scenario.path
    seed: int = 0
    # the blind control: every multiple-choice and yes/no item asked once more with its image withheld ("blind")
    blind: bool = False
    # every item's settings asked `repeats` times at `temperature` (methods/repeats.py)
    repeats: int = Field(1, ge=1)
    temperature: float = Field(0.0, ge=0.0)
    # the inferencer that produced the numbers; None asks for the recipe's default (what is recorded)
    inferencer: InferencerName | None = None

    @model_validator(mode="after")
    def _pick_inferencer(self) -> "ChefSpec":
        r = self.recipe
        if self.inferencer is None:
            self.inferencer = r.inferencer.type
        why = inferencer_refusal(r, self.inferencer)
        if why:
            raise ValueError(why)
        return self


class ChefTask(SpecTask):
    recipes = True  # runs the shipped recipes (vlmcheck list: a recipe named after a benchmark takes it)
    reads = ("multiple choice", "yes/no", "classes", "counts", "boxes", "captions", "hierarchy", "turns")
    reports = "its recipe's desideratum metric (accuracy, ECE, RRM, RIAM, MR, ...)"
    spec_model = ChefSpec
    name = "chef"
    #: a finished item's answer toward its benchmark's official figure (``compare`` pairs runs on it)
    official_answer = staticmethod(official_answer)

    @staticmethod
    def sweep_options(opts: dict[str, Any], base: Any) -> dict[str, Any]:
        """A sweep entry's options (``sweep.py``): a recipe named by a file beside the sweep file is read from
        there, else by its shipped name; the spec then records the whole recipe."""
        recipe = opts.get("recipe")
        if isinstance(recipe, str):
            local = base / recipe
            opts["recipe"] = resolve_recipe(str(local) if local.is_file() else recipe).model_dump()
        return opts

    @classmethod
    def samples_follow_rows(cls, task_spec: dict[str, Any]) -> bool:
        """A scenario of one item per row (ROW_KINDS) under the standard instruction: no in-context examples or
        query pools drawn from the other rows."""
        r = task_spec.get("recipe")
        r = r.model_dump() if hasattr(r, "model_dump") else r
        if not isinstance(r, dict):
            return False
        return ((r.get("scenario") or {}).get("type") in ROW_KINDS and r.get("desideratum") != "icl"
                and (r.get("instruction") or {}).get("type", "standard") == "standard")

    def __init__(self, spec: ChefSpec, vlm: Any = None, judge: Any = None) -> None:
        self.cfg = spec
        r = spec.recipe
        path = spec.data or r.scenario.path
        if path is None:
            raise ValueError(f"recipe {r.name}: no scenario path; pass --data")
        self.items, self.data_read = read_items(load_scenario, r.scenario.type, path, **r.scenario.options)
        self.inferencer = INFERENCERS[spec.inferencer]
        if spec.repeats > 1 and spec.inferencer in ("ppl", "multiturn_ppl"):
            raise ValueError("repeats need a generation inferencer (direct or cot): PPL scores do not vary")
        self.vlm = vlm if vlm is not None else load_model(spec.vlm, "vlm")
        if self.inferencer.needs_likelihood and not getattr(self.vlm.capabilities, "loglikelihood", False):
            raise CapabilityError(likelihood_refusal(r, spec.inferencer, getattr(self.vlm, "model_id", spec.vlm)))
        # items have turns exactly when the scenario is a turn one: ChefSpec has refused any inferencer that
        # cannot ask them, and multiturn_ppl elsewhere (recipe.inferencer_refusal)
        self.turn_task = next((it["meta"]["task"] for it in self.items if "turns" in it), None)
        if self.turn_task and (r.desideratum not in ("accuracy", "robustness") or r.instruction.type != "standard"
                               or (r.desideratum == "robustness" and r.metric.corrupt != ["image"])):
            raise ValueError(f"scenario {r.scenario.type!r} runs the accuracy desideratum, or robustness with "
                             "metric.corrupt: [image], under the standard instruction")
        if spec.blind and (self.turn_task or r.desideratum == "language"):
            raise ValueError("the blind control asks multiple-choice and yes/no questions; this recipe's "
                             f"{'turns' if self.turn_task else 'judged answers'} have none")
        m = r.metric
        self.judge = judge if judge is not None else (load_model(m.judge, "text") if m.judge else None)
        self.judge2, self.rewriter, self.extractor = (load_model(s, "text") if s else None
                                                      for s in (m.judge2, m.rewriter, m.extractor))
        if r.instruction.type == "ice" and r.instruction.ice.with_images and not self.vlm.capabilities.multi_image:
            raise ValueError(f"{self.vlm.model_id} does not declare multi-image support; set ice.with_images false")
        several = [it["id"] for it in self.items if len(it.get("images") or ()) > 1]
        if several and not getattr(self.vlm.capabilities, "multi_image", True):
            raise ValueError(f"{len(several)} items show several images (e.g. {several[0]!r}, SEED-Bench-2's image "
                             f"lists) and {self.vlm.model_id} does not declare multi-image support")
        self._emb: dict[str, Any] | None = None  # the topk retrievers' embeddings, by item id
        self._emb_lock = asyncio.Lock()

    @property
    def calls_depend_on_answers(self) -> bool:
        """The judge reads only right answers, the extractor only unparsed ones: a dry run counts both always."""
        return self.cfg.recipe.desideratum == "language" or self.extractor is not None

    def settings(self) -> list[tuple[str, dict[str, Any]]]:
        r = self.cfg.recipe
        if r.desideratum == "icl" or r.instruction.type == "ice":
            out = [(f"shots={k}", {"shots": k}) for k in r.instruction.ice.shots]
        elif r.desideratum == "instruction_following":
            out = [("original", {})] + [(f"{group}:{i}", {"verbalizer": group, "labels": labels})
                                        for group, verbs in VERBALIZERS.items() for i, labels in enumerate(verbs)]
        elif r.desideratum == "robustness":
            out = [("original", {})] + [(f"corrupt:{c}", {"corrupt": c}) for c in r.metric.corrupt]
        else:
            out = [("standard", {})]
        return out + ([("blind", {"blind": True})] if self.cfg.blind else [])

    async def _examples(self, item: dict[str, Any], k: int, session: Session) -> list[dict[str, Any]]:
        if k == 0:
            return []
        ice = self.cfg.recipe.instruction.ice
        # never the item itself, nor another rotation of the same question (MMBench CircularEval copies)
        group = item.get("meta", {}).get("group")
        pool = [it for it in self.items if it["id"] != item["id"]
                and (group is None or it.get("meta", {}).get("group") != group)]
        if ice.retriever == "fixed":
            return pool[:k]
        if ice.retriever == "random":
            from ...perturb.compose import sample_seed

            rng = np.random.default_rng(sample_seed(self.cfg.seed, item["id"]))
            return [pool[i] for i in rng.choice(len(pool), size=min(k, len(pool)), replace=False)]
        # topk_text, topk_image: every item's embedding once per task, not the whole pool again for each item
        async with self._emb_lock:
            if self._emb is None:
                ids = [it["id"] for it in self.items]
                if ice.retriever == "topk_text":
                    from ..cast import sentence_embeddings

                    self._emb = dict(zip(ids, sentence_embeddings([it["question"] for it in self.items])))
                else:
                    enc = session.encoder(load_model(ice.encoder, "encoder"))
                    mats = await enc.encode([await read_image(it["image"], root=it.get("root")) for it in self.items])
                    self._emb = dict(zip(ids, mats / (np.linalg.norm(mats, axis=1, keepdims=True) + 1e-12)))
        q = self._emb[item["id"]]
        return sorted(pool, key=lambda it: -float(self._emb[it["id"]] @ q))[:k]  # stable: ties keep pool order

    async def _ice_messages(self, examples: list[dict[str, Any]], labels: list[str]) -> list[Message]:
        msgs: list[Message] = []
        ice = self.cfg.recipe.instruction.ice
        if examples and not ice.with_images:
            msgs.append(Message.system("The following examples are text only; they have no relation to the image "
                                       "you will be asked about."))
        for ex in examples:
            # an example with more options than the question (ScienceQA: 2 to 5) labels its extra ones on
            ex_labels = list(labels) + list(LETTERS[len(labels):len(ex["options"])])
            q = format_query(ex["question"], ex["options"])
            shown = (ex.get("images") or [ex["image"]]) if ice.with_images and ex.get("image") else []
            parts: list = [await read_image(p, root=ex.get("root")) for p in shown]  # an example's every image
            msgs.append(Message.user(*parts, q))
            a = ex["answer"]
            msgs.append(Message.assistant(ICE_ANSWER.format(label=ex_labels[a], option=ex["options"][a])))
        return msgs

    async def run_sample(self, sample: Sample, session: Session) -> dict[str, Any]:
        return await repeated(lambda k: self._once(sample.payload, session, k), self.cfg.repeats)

    async def _once(self, item: dict[str, Any], session: Session, repeat: int) -> dict[str, Any]:
        # n_options: for a turn item, the number of ways to answer every turn (random accuracy = 1 / that)
        n_options = (int(np.prod([len(t["options"]) for t in item["turns"]])) if "turns" in item
                     else len(item["options"]))
        record: dict[str, Any] = {"question": item["question"], "options": item["options"], "answer": item["answer"],
                                  "n_options": n_options, "meta": item.get("meta", {}), "settings": {}}
        if item.get("image"):
            record["image"] = str(item["image"])  # for the report's thumbnails
        made: dict[str, Any] = {}  # the corrupted image, made once for the settings that show it
        for name, setting in self.settings():
            record["settings"][name] = await self._infer(item, {**setting, "repeat": repeat}, session, made)
        if self.cfg.recipe.desideratum == "language":
            record["judge"] = await self._judge(item, record["settings"]["standard"], session)
        return record

    async def _infer(self, item: dict[str, Any], setting: dict[str, Any], session: Session,
                     made: dict[str, Any]) -> dict[str, Any]:
        from ...perturb.compose import apply_chain, composite_chain, sample_seed
        from ...perturb.text import corrupt_question

        r = self.cfg.recipe
        question, options, answer = item["question"], list(item["options"]), item["answer"]
        # every image of the item, in order (SEED-Bench-2's image lists: methods/records.py), else its one image
        paths = item.get("images") or ([item["image"]] if item.get("image") else [])
        images = [await read_image(p, root=item.get("root")) for p in paths]
        out: dict[str, Any] = {}
        corrupt = setting.get("corrupt")
        seed = sample_seed(self.cfg.seed, item["id"])
        if setting.get("blind"):  # the control: no image (or a grey one each, for a model that requires one)
            held = [withheld(im, self.vlm) for im in images] or [withheld(None, self.vlm)]
            images, out["blind"] = [g for parts, _ in held for g in parts], held[0][1]
        if corrupt in ("image", "both") and images:
            chain = composite_chain(seed)
            if "image" not in made:  # one chain per item: "image" and "both" show the same corrupted images
                corrupted = [await asyncio.to_thread(apply_chain, im, chain) for im in images]  # off the loop
                made["image"] = (corrupted, await asyncio.to_thread(session.store.put_image, corrupted[0]))
            out["image_chain"] = chain
            images, out["image"] = made["image"]  # out["image"]: what the model saw (the first), for the report
        if "turns" in item:  # the turn scenarios: every turn its own PPL question (inferencers.MultiTurnPPL)
            ask = Ask(parts=list(images), query=item["question"], turns=item["turns"],
                      history_turns=r.inferencer.history)
            return {**out, **await self.inferencer(session.vlm(self.vlm), ask), "answer": item["answer"],
                    "labels": list(LETTERS[:len(item["options"])])}
        if corrupt in ("text", "both"):
            rewriter = None
            if self.rewriter is not None:
                text_model = session.text(self.rewriter)

                async def rewriter(instruction: str, q: str) -> str:
                    g = await text_model.generate([Message.user(f"{instruction}\nQuestion: {q}")],
                                                  GenerationConfig(max_tokens=128), template=TEMPLATE_VERSION)
                    return g.text
            c = await corrupt_question(question, options, answer, seed, rewriter=rewriter)
            question, options, answer = c["question"], c["options"], c["answer"]
            out["text_chain"] = c["chain"]
            out["question"] = question  # what the model was asked
        ask, labels = await self._ask(item, setting, session, images, question, options, seed)
        out.update(await self.inferencer(session.vlm(self.vlm), ask))  # the Inferencer (B.3)
        out.update(answer=answer, correct=out["pred"] == answer, labels=labels)
        return out

    async def _ask(self, item: dict[str, Any], setting: dict[str, Any], session: Session, images: list[Any],
                   question: str, options: list[str], seed: int) -> tuple[Ask, list[str]]:
        """The Instruction (B.2) for one question: its labels (a verbalizer's under instruction following), the
        query (a query-pool entry, the option listing), the in-context examples, the answer pool."""
        r = self.cfg.recipe
        n = len(options)
        if n > len(LETTERS):
            raise ValueError(f"{n} options: at most {len(LETTERS)} can be labelled")
        labels = list(LETTERS[:n])
        pool = POOL_OF_SCENARIO.get(r.scenario.type, "labels")
        extra = ""
        if "verbalizer" in setting:
            labels = verbalizer_labels(setting["verbalizer"], setting["labels"], n)
            extra = "\n" + verbalizer_instruction(labels, n)
        if r.instruction.type == "query_pool" and r.instruction.query_pool:
            queries = r.instruction.query_pool
            question = queries[seed % len(queries)].format(question=question)
        # class names scored by PPL: the authors' query alone, as LAMM's ChEF asks CIFAR-10 and Flickr30k
        lamm_classes = pool == "classes" and self.inferencer.name == "ppl" and r.scenario.type in CLASS_POOL_QUERY
        # POPE is asked as its bare yes/no question (C.6); every other scenario lists its options
        query = (question if pool == "yesno" else CLASS_POOL_QUERY[r.scenario.type] if lamm_classes else
                 format_query(question, options) + extra)
        if pool == "yesno":
            conts = list(options)  # "Yes", "No"
        else:
            template = r.inferencer.answer_template or (
                CLASS_POOL_TEMPLATE[r.scenario.type] if lamm_classes else
                CLASS_TEMPLATE if pool == "classes" else LABEL_TEMPLATE)
            conts = [template.format(label=labels[i], option=options[i]) for i in range(n)]
        examples = await self._examples(item, setting.get("shots", 0), session)
        c, k = self.cfg, setting.get("repeat", 0)
        ask = Ask(history=await self._ice_messages(examples, labels), parts=list(images), query=query,
                  answer_prompt="" if pool == "yesno" or lamm_classes else "\nAnswer with the option's label.",
                  then=(f"{query}\nTherefore, the answer is" if pool == "yesno" else
                        f"{query}\nTherefore, among the options, the answer is"),
                  continuations=conts, read=partial(self._read, session, question, options, labels, pool),
                  think_config=generation_config(r.inferencer.max_tokens, c.repeats, c.temperature, k),
                  answer_config=generation_config(32, c.repeats, c.temperature, k))
        return ask, labels

    async def _read(self, session: Session, question: str, options: list[str], labels: list[str], pool: str,
                    text: str) -> dict[str, Any]:
        """A generated answer read by the scenario's parser: ``pred`` (None: not read), how, and ``unread`` (a yes/no
        answer holding neither, which POPE's rule, ``metric.parser``, counts as yes)."""
        if pool == "yesno":
            said = read_yes_no(text, self.cfg.recipe.metric.parser)
            return {"pred": [o.lower() for o in options].index(said or "yes"), "extracted": True,
                    "extracted_by": "rule", "unread": said is None}
        pred = extract_choice(text, options, labels)
        how = "rule" if pred is not None else None
        if pred is None and self.extractor is not None:
            pred = await self._llm_extract(session, question, options, labels, text)
            how = "llm" if pred is not None else None
        return {"pred": pred, "extracted": pred is not None, "extracted_by": how, "unread": pred is None}

    async def _llm_extract(self, session: Session, question: str, options: list[str], labels: list[str],
                           answer: str) -> int | None:
        """MMBench-style second step: an LLM maps a free answer to an option label."""
        listing = "\n".join(f"{labels[i]}. {o}" for i, o in enumerate(options))
        prompt = (f"You are given a question, its options and an answer. Which option does the answer choose? "
                  f"Reply with the option's label only, or 'none' if it chooses none.\nQuestion: {question}\n"
                  f"Options:\n{listing}\nAnswer: {answer}")
        g = await session.text(self.extractor).generate([Message.user(prompt)], GenerationConfig(max_tokens=8),
                                                        template=TEMPLATE_VERSION)
        return extract_choice(g.text, options, labels)

    async def _judge(self, item: dict[str, Any], result: dict[str, Any], session: Session) -> dict[str, Any]:
        if self.judge is None:
            return {"skipped": "no judge: language performance needs a TextModel spec (metric.judge)"}
        if not result["correct"] and not getattr(self.judge, "dry_run", False):  # a dry run counts every answer
            return {"skipped": "conclusion incorrect (only correct items are judged)"}
        if "rationale" not in result:
            return {"skipped": "no chain of thought (use the cot or cot_ppl inferencer)"}
        gt = item["options"][item["answer"]]
        choice = item["options"][result["pred"]]
        body = (f"[Question]\n{item['question']}\n[Ground Truth]\n{gt}\n[Assistant's Chain of Thought]\n"
                f"{result['rationale']}\n[Assistant's Final Choice]\n{choice}")
        out: dict[str, Any] = {}
        for suffix, model in (("", self.judge), ("2", self.judge2)):
            if model is None:
                continue
            judge = session.text(model)
            raws = [(await judge.generate([Message.system(JUDGE_SYSTEM), Message.user(body)],
                                          GenerationConfig(max_tokens=512, temperature=1.0, seed=self.cfg.seed + k),
                                          template=TEMPLATE_VERSION)).text
                    for k in range(self.cfg.recipe.metric.judge_samples)]
            scores = [s for s in map(M.parse_judge_score, raws) if s is not None]
            out.update({f"scores{suffix}": scores, f"mean{suffix}": float(np.mean(scores)) if scores else None,
                        f"raw{suffix}": raws})
        return out

    def summary_folder(self) -> ChefSummary:
        """The summary folded one item at a time, as columns (methods/chef/summary.py, items.py)."""
        return ChefSummary(self.cfg.recipe, self.turn_task, self.cfg.seed, self.cfg.repeats, self.cfg.temperature,
                           self.cfg.inferencer)
