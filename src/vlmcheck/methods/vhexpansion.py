"""VHExpansion (Liu et al.): expand yes/no visual-hallucination test cases.

Per case (image, question, yes/no answer): ask the question on the original image; negate it (Fig. 3's prompt
through a ``TextModel``, or ``ref:negator``) and check the negation (vhx_negation.py); ask both on each common
perturbation and, optionally, on an adversarial image (I-FGSM or PGD on the visual embedding).  Answers are read
with POPE's rule; the metrics per variant are in vhx_summary.py, the details in docs/methods.md.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from pydantic import Field

from ..core.answers import read_yes_no
from ..core.files import InputFileError, JsonlRecords, copy_atomic, read_results, write_text_atomic
from ..core.images import image_hash, load_image
from ..core.inputs import read_image
from ..core.messages import Message
from ..core.roles import GenerationConfig, require
from ..core.spec import load_model
from .blind import withheld
from .records import read_items
from .repeats import RepeatsSpec
from .vhx_cases import VHX_TASK, Case, load_cases  # noqa: F401 - re-exported: the cases are part of this method's API
from ..perturb.adversarial import AttackConfig, AttackResult
from ..perturb.image import CORRUPTIONS, PRESETS, corrupt
from ..run.batching import Batcher
from ..run.calls import Session
from ..run.task import Sample, SpecTask
from .vhx_negation import NEGATION_PROMPT, check_negation, split_context
from .vhx_summary import VHXSummary, official_answer

TEMPLATE_VERSION = "vhexpansion-v1"
DEFAULT_PERTURB = ["vhx_gaussian_noise", "vhx_brightness", "vhx_defocus_blur", "vhx_jpeg"]


class VHXSpec(RepeatsSpec):
    vlm: str
    cases: str
    negator: str | None = "ref:negator"
    perturb: list[str] = Field(default_factory=lambda: list(DEFAULT_PERTURB))
    attack: str | None = None  # "ifgsm" | "pgd"
    attack_target: str | None = None  # None: the VLM itself (white-box); else an encoder spec (surrogate)
    attack_config: AttackConfig = Field(default_factory=AttackConfig)
    max_tokens: int = 32
    seed: int = 0


def _parse_perturbation(name: str) -> tuple[str, int]:
    base, _, sev = name.partition(":")
    if base not in CORRUPTIONS and base not in PRESETS:
        raise ValueError(f"unknown perturbation {base!r}; known: {', '.join(sorted(PRESETS) + sorted(CORRUPTIONS))}")
    return base, int(sev) if sev else 1 if base in PRESETS else 3


class VHExpansionTask(SpecTask):
    reads = ('yes/no', 'multiple choice')
    reports = 'symmetric accuracy over negation and perturbations'
    spec_model = VHXSpec
    name = VHX_TASK
    #: a finished case's answer toward its benchmark's official figure (``compare`` pairs runs on it)
    official_answer = staticmethod(official_answer)

    def __init__(self, spec: VHXSpec, vlm: Any = None, negator: Any = None, attack_target: Any = None) -> None:
        self.cfg = spec
        self.items, self.data_read = read_items(load_cases, spec.cases)
        for p in spec.perturb:
            _parse_perturbation(p)
        self.vlm = vlm if vlm is not None else load_model(spec.vlm, "vlm")
        self.negator = negator if negator is not None else (load_model(spec.negator, "text") if spec.negator
                                                             else None)
        self.target = None
        if spec.attack:
            if spec.attack not in ("ifgsm", "pgd"):
                raise ValueError("attack must be 'ifgsm' or 'pgd'")
            self.target = attack_target if attack_target is not None else (
                load_model(spec.attack_target, "encoder") if spec.attack_target else self.vlm)
            require(self.target, "vision_embedding", "an adversarial attack on the visual embedding")
            self._attack_cfg = spec.attack_config.model_copy(update={"method": spec.attack})
            self._batcher = Batcher(self._attack_batch, batch_size=8)

    # one case per record with an image and a question, in the dataset's order (methods/records.vhx_cases)
    follows_rows = True

    def _attack_batch(self, key, items):
        from ..perturb.adversarial import attack

        images, flags = [i[0] for i in items], [i[1] for i in items]
        return attack(self.target, images, flags, self._attack_cfg)

    def dry_run_reply(self, attr: str, messages: list[Message], config: Any) -> str | None:
        """A dry run's stand-in answers (run/estimate.py): a negation that passes the check (one "not" after the
        first word), so that the negated question is counted as a real negator's would be."""
        if attr == "negator":
            q = messages[-1].text.rsplit("The question is:", 1)[-1].strip().rstrip(".").strip()
            context, last = split_context(q)  # an MMVP case: only its yes/no question is negated
            first, _, rest = last.partition(" ")
            return f"{context}{first} not {rest}"
        return None

    async def _adversarial(self, session: Session, img, hallucinated: bool) -> dict[str, Any]:
        def entry(res: AttackResult) -> dict[str, Any]:
            return {"artifact": session.store.put_image(res.image),
                    **{f.name: getattr(res, f.name) for f in fields(res) if f.name != "image"}}

        if getattr(self.target, "dry_run", False):  # a dry run computes no attack; its two questions still count
            return entry(AttackResult(img, hallucinated, cosine_start=0.0, cosine_final=0.0, linf=0.0, steps=0))
        request = {"image": image_hash(img), "hallucinated": hallucinated, "config": self._attack_cfg.model_dump()}

        async def invoke():
            return entry(await self._batcher.submit("attack", (img, hallucinated))), None

        out, _ = await session.cached("attack", self.target, request, TEMPLATE_VERSION, invoke)
        return out

    async def _ask(self, session: Session, img, question: str, repeat: int = 0) -> dict[str, Any]:
        """``img``: the image, or the parts of a blind request (a list: none, or a grey image)."""
        cfg = GenerationConfig(max_tokens=self.cfg.max_tokens, temperature=self.cfg.temperature,
                               seed=repeat if self.cfg.repeats > 1 else None)
        parts = img if isinstance(img, list) else [img]
        g = await session.vlm(self.vlm).generate([Message.user(*parts, question)], cfg, template=TEMPLATE_VERSION)
        return {"text": g.text, "parsed": read_yes_no(g.text) or "yes"}  # POPE: unread is yes

    async def run_sample(self, sample: Sample, session: Session) -> dict[str, Any]:
        case: Case = sample.payload
        img = await read_image(case.image, root=case.root)
        flip = "no" if case.answer == "yes" else "yes"
        record: dict[str, Any] = {"image": case.image, "question": case.question, "answer": case.answer,
                                  "meta": case.meta, "variants": {}}
        neg = None
        if self.negator is not None:
            g = await session.text(self.negator).generate(
                [Message.user(NEGATION_PROMPT.format(question=case.question))], GenerationConfig(max_tokens=96),
                template=TEMPLATE_VERSION)
            neg = g.text.strip()
            check = check_negation(case.question, neg)
            record["negation"] = {"question": neg, "answer": flip, **check}
            if not check["ok"]:
                neg = None
        else:
            record["negation"] = {"question": None, "ok": False, "problems": ["no negator configured"]}

        async def variant(name: str, image, params: dict[str, Any]) -> None:
            v: dict[str, Any] = {"params": params}
            if name != "original" and not isinstance(image, list):
                v["image"] = session.store.put_image(image)  # content-addressed: the attack's own artifact again
            runs = []
            for k in range(self.cfg.repeats):
                a = await self._ask(session, image, case.question, k)
                r: dict[str, Any] = {"answer": a["text"], "parsed": a["parsed"], "correct": a["parsed"] == case.answer}
                if neg:
                    b = await self._ask(session, image, neg, k)
                    r.update(neg_answer=b["text"], neg_parsed=b["parsed"], neg_correct=b["parsed"] == flip)
                runs.append(r)
            v.update(runs[0])
            if self.cfg.repeats > 1:
                v["repeats"] = runs
            record["variants"][name] = v

        await variant("original", img, {})
        if self.cfg.blind:
            parts, carried = withheld(img, self.vlm)
            await variant("blind", parts, {"image": carried})
        # pixel work in a worker thread: on the event loop it would hold up every other sample's requests
        seed = (int((await asyncio.to_thread(image_hash, img))[:8], 16) ^ self.cfg.seed) if self.cfg.perturb else 0
        for p in self.cfg.perturb:
            base, sev = _parse_perturbation(p)
            shown = await asyncio.to_thread(corrupt, img, base, sev, seed=seed)
            await variant(p, shown, {"corruption": base, "severity": sev, "seed": seed})
        if self.target is not None:
            hallucinated = not record["variants"]["original"]["correct"]
            adv = await self._adversarial(session, img, hallucinated)
            adv_img = await asyncio.to_thread(load_image, session.store.image_path(adv["artifact"]))
            await variant(f"adv_{self.cfg.attack}", adv_img, {k: v for k, v in adv.items() if k != "artifact"})
        return record

    def summary_folder(self) -> VHXSummary:
        return VHXSummary(self.cfg.perturb, self.cfg.attack, self.cfg.repeats)


def export_expanded(run_folder: str | Path, out: str | Path) -> Path:
    """Write the expanded dataset (JSONL + images) and negations.csv for human review."""
    run_folder, out = Path(run_folder), Path(out)
    task = read_results(run_folder)["task"]
    if task != "vhexpansion":
        raise InputFileError(f"{run_folder}: a {task!r} run; vhx export takes a VHExpansion run (vlmcheck vhx run)")
    (out / "images").mkdir(parents=True, exist_ok=True)
    rows, negs = [], []
    for rec in JsonlRecords(run_folder / "samples.jsonl"):
        if rec["status"] != "done":
            continue
        r, sid = rec["result"], rec["sample_id"]
        neg = r.get("negation", {})
        negs.append([sid, r["question"], neg.get("question"), neg.get("ok"), "; ".join(neg.get("problems", []))])
        for name, v in r["variants"].items():
            if name == "blind":  # the blind control has no image: not an expanded test case
                continue
            src = Path(r["image"]) if name == "original" else run_folder / v["image"]
            dest = out / "images" / f"{_safe(sid)}__{_safe(name)}{src.suffix or '.png'}"
            copy_atomic(src, dest)
            prov = {"source_case": sid, "transformation": name, "parameters": v.get("params", {})}
            questions = [(r["question"], r["answer"], "original question", v.get("parsed"), v.get("correct"))]
            if neg.get("ok"):
                questions.append((neg["question"], neg["answer"], "negated question", v.get("neg_parsed"),
                                  v.get("neg_correct")))
            for q, a, how, said, right in questions:
                if name == "original" and how == "original question":
                    continue  # the source case itself is not new
                # model_correct False marks the expanded cases this model got wrong (its new VH cases)
                rows.append({"image": f"images/{dest.name}", "question": q, "answer": a,
                             "model_answer": said, "model_correct": right,
                             "provenance": {**prov, "question": how}})
    manifest = out / "expanded.jsonl"
    write_text_atomic(manifest, "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows))
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["case", "original", "negated", "check_ok", "problems", "human_ok"])
    w.writerows(row + [""] for row in negs)
    write_text_atomic(out / "negations.csv", buf.getvalue())  # a kill never leaves half the review sheet
    return manifest


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:80]

