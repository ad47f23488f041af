"""``describe``: ask a VLM one prompt per image (a manifest row may carry its own ``prompt``) and record its answers
with their status and usage.  Where the dataset gives expected ``keywords`` per image (any of a ``|``-separated set
of synonyms), each answer's keyword recall is scored: the share of them that appear as words in it.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from typing import Any

from .._lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use (vlmcheck/_lazy.py)
from pydantic import BaseModel

from ..core.answers import answer_status
from ..core.inputs import read_image_part
from ..core.messages import Message
from ..core.roles import GenerationConfig
from ..core.spec import load_model
from ..metrics.decisions import headline_entry, proportion_interval_independent, widen_degenerate
from ..metrics.stats import bootstrap_ci
from ..run.calls import Session
from ..run.task import Sample, SpecTask
from .records import load_images, read_items

DEFAULT_PROMPT = "Describe this image in detail."
TEMPLATE_VERSION = "describe-v1"


class DescribeSpec(BaseModel):
    vlm: str
    data: str
    prompt: str = DEFAULT_PROMPT
    max_tokens: int = 512
    temperature: float = 0.0


def keyword_recall(text: str, keywords: list[str]) -> float:
    words = set(re.findall(r"[a-z0-9]+", text.lower()))
    hits = 0
    for kw in keywords:
        options = [o.strip().lower() for o in kw.split("|") if o.strip()]
        if any(all(w in words for w in re.findall(r"[a-z0-9]+", o)) for o in options):
            hits += 1
    return hits / len(keywords) if keywords else float("nan")


class DescribeTask(SpecTask):
    reads = ('images',)
    reports = 'keyword recall of the descriptions'
    spec_model = DescribeSpec
    name = "describe"

    def __init__(self, spec: DescribeSpec, vlm: Any = None) -> None:
        self.cfg = spec
        self.items, self.data_read = read_items(load_images, spec.data)
        self.vlm = vlm if vlm is not None else load_model(spec.vlm, "vlm")
        # one for every sample (no sample changes it): a pydantic model validated once, not once per sample
        self._config = GenerationConfig(max_tokens=spec.max_tokens, temperature=spec.temperature)

    follows_rows = True  # one sample per distinct image, in the dataset's order (methods/records.load_images)

    async def run_sample(self, sample: Sample, session: Session) -> dict[str, Any]:
        item = sample.payload
        image = await read_image_part(item.path, root=item.root)
        prompt = item.meta.get("prompt") or self.cfg.prompt
        gen = await session.vlm(self.vlm).generate([Message.user(image, prompt)], self._config,
                                                   template=TEMPLATE_VERSION)
        record: dict[str, Any] = {  # image_path: for the report's thumbnails
            "image": item.id, "image_path": str(item.path), "image_sha256": image.sha256, "category": item.category,
            "prompt": prompt, "answer": gen.text, "answer_status": answer_status(gen),
            "finish_reason": gen.finish_reason, "usage": gen.usage.model_dump()}
        keywords = item.meta.get("keywords")
        if keywords:
            record["keywords"] = keywords
            record["keyword_recall"] = keyword_recall(gen.text, keywords)
        return record

    @staticmethod
    def summary_folder() -> "DescribeSummary":
        return DescribeSummary()


class DescribeSummary:
    """describe's summary from columns: a count per answer status, each answer's length in words and each
    keyword recall (about 16 bytes a sample, where the records are about 2 kB)."""

    def __init__(self) -> None:
        self.statuses: Counter[str] = Counter()
        self.lengths: array = array("l")
        self.recalls: array = array("d")

    def add(self, record: dict[str, Any]) -> None:
        r = record["result"]
        self.statuses[r["answer_status"]] += 1
        self.lengths.append(len(r["answer"].split()))
        if "keyword_recall" in r:
            self.recalls.append(r["keyword_recall"])

    def result(self, failed: list[dict[str, Any]] = ()) -> dict[str, Any]:
        n = len(self.lengths)
        out: dict[str, Any] = {"n": n, "answer_status": dict(self.statuses),
                               "mean_answer_words": sum(self.lengths) / n if n else None}  # integers: exact
        if self.recalls:
            recalls = np.asarray(self.recalls, dtype=float)
            mean = float(recalls.mean())
            ci, widened = widen_degenerate(list(bootstrap_ci(recalls)), mean, int(recalls.size))
            out["keyword_recall"] = {"mean": mean, "ci95": ci, "n": int(recalls.size)}
            how = {"method": "wilson bound (every image the same recall)" if widened else "percentile bootstrap",
                   "unit": "image", "n_units": int(recalls.size)}
            out["headline"] = headline_entry("keyword recall", mean, ci, how)
        elif n:  # no reference keywords: the share of images described (not refused, not empty)
            ok = self.statuses.get("ok", 0)
            # each image its own unit, so the interval depends on the count answered, not on which
            ci, how = proportion_interval_independent(ok, n, "image")  # numpy-free: a one-image run never loads it
            out["headline"] = headline_entry("share answered", ok / n, ci, how)
        return out
