"""POPE (Li et al., 2023) as released: ``coco_pope_{random,popular,adversarial}.json``, JSON Lines (question_id,
image, text, label yes/no), the images COCO's val2014.  One record per question, id ``<split>-<question_id>``
(ids restart in each file), group the image (six questions each); a folder reads every split file (the 9,000
test cases of VHExpansion's Table 1).  Images: ``images=DIR``, else beside the file, in ``val2014/`` or
``images/`` beside it, or ``../val2014/``."""

from __future__ import annotations

import re
from pathlib import Path

from ._release import first_json_keys, found, json_lines, once, refuse
from .base import Dataset, Record, register_form
from .official import Answer, declare, per_question, share

KEYS = {"question_id", "image", "text", "label"}
_NAME = re.compile(r"(?:.*_)?pope_(random|popular|adversarial)\.jsonl?$", re.I)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if _NAME.match(p.name) and p.is_file())
    return [path]


def detect(path: Path) -> bool:
    files = _files(path)
    return bool(files) and all(_NAME.match(f.name) for f in files) and KEYS <= first_json_keys(files[0])


def _image_folder(file: Path, first_image: str, images: str | Path | None) -> Path:
    if images:
        return Path(images)
    here = file.parent
    for folder in (here, here / "val2014", here / "images", here.parent / "val2014"):
        if (folder / first_image).is_file():
            return folder
    raise refuse(file, f"the COCO images it names (e.g. {first_image}) beside it, in val2014/ or images/ beside "
                       "it, or in ../val2014/ (or give images=DIR)")


@register_form("pope", detect=detect, benchmarks=("pope",),
               schema="github.com/AoiDragon/POPE output/coco/coco_pope_*.json (question_id, image, text, label)",
               carries=('images', 'yes/no'))
def read(path: Path, *, benchmark: str | None = None, images: str | Path | None = None,
         split: str | None = None, **_) -> Dataset:
    files = _files(path)
    if split:
        files = [f for f in files if (m := _NAME.match(f.name)) and m.group(1).lower() == split]
    if not files:
        raise refuse(path, "POPE's coco_pope_{random,popular,adversarial}.json" + (f" (split {split!r})" if split
                                                                                   else ""))
    ds = Dataset("pope", "pope", str(path), [])
    for file in files:
        m = _NAME.match(file.name)
        name = m.group(1).lower() if m else file.stem
        expected = "POPE's JSON Lines (question_id, image, text, label)"
        rows = json_lines(file, expected)
        missing = KEYS - set(rows[0][1])
        if missing:
            raise refuse(file, f"{expected}; line {rows[0][0]} lacks {', '.join(sorted(missing))}")
        folder = _image_folder(file, str(rows[0][1]["image"]), images)
        unique = once(file, "one line per question_id")
        for n, r in rows:
            where = f"{file.name}:{n}"
            rid = f"{name}-{r.get('question_id')}"
            unique(rid, str(r.get('question_id')), f" at line {n}")
            label = str(r.get("label", "")).strip().lower()
            if label not in ("yes", "no") or not isinstance(r.get("image"), str) or not r.get("text"):
                ds.skipped.append((where, f"needs an image, a text and a yes/no label (label {r.get('label')!r})"))
                continue
            img = folder / r["image"]
            if not img.is_file():
                ds.skipped.append((where, f"image {r['image']} not in {folder}"))
                continue
            ds.records.append(Record(id=rid, images=[str(img)], question=str(r["text"]), answer=label, split=name,
                                     group=r["image"], root=str(folder)))
        if images is None and folder != file.parent:
            ds.notes.append(f"{file.name}: images read from {folder}")
    return found(path, ds, "POPE questions whose images exist")


def pope_outcomes(answers: list[Answer]) -> dict:
    """The shares two runs can be paired on, question by question: accuracy, recall (the questions whose truth
    is yes, the same in both runs) and the yes ratio; precision's questions (those a run said yes to) differ
    between runs, so it is not paired."""
    yn = [a for a in answers if a.said_yes is not None and a.truth_yes is not None]
    return {"accuracy": per_question(yn, lambda a: a.said_yes == a.truth_yes),
            "recall": per_question([a for a in yn if a.truth_yes], lambda a: bool(a.said_yes)),
            "yes_ratio": per_question(yn, lambda a: bool(a.said_yes))}


@declare("pope", "POPE (accuracy, precision, recall, F1, yes ratio)",
         "POPE's evaluate.py (github.com/AoiDragon/POPE); lmms-eval's pope task differs: docs/datasets.md",
         outcomes=pope_outcomes)
def pope_figures(answers: list[Answer]) -> dict:
    """POPE's evaluate.py over the answers read as yes/no (positive = yes): accuracy (TP+TN)/N, precision
    TP/(TP+FP), recall TP/(TP+FN), F1 their harmonic mean, and the yes ratio - the share of the MODEL's answers
    that are yes (not of the truth's, as lmms-eval computes it).  Accuracy, precision, recall and the yes ratio
    are shares, each with its interval clustered by image (POPE asks six questions of an image); F1 is not."""
    yn = [a for a in answers if a.said_yes is not None and a.truth_yes is not None]
    said = [a.said_yes for a in yn]
    truth = [a.truth_yes for a in yn]
    units = [a.unit for a in yn]
    tp = sum(s and t for s, t in zip(said, truth))
    fp = sum(s and not t for s, t in zip(said, truth))
    fn = sum(t and not s for s, t in zip(said, truth))
    pick = lambda keep: ([s == t for s, t, k in zip(said, truth, keep) if k],  # noqa: E731
                         [u for u, k in zip(units, keep) if k])
    precision = share(*pick(said))            # of the answers "yes": the truth is yes
    recall = share(*pick(truth))              # of the questions whose truth is yes: answered yes
    p, r = tp / (tp + fp) if tp + fp else 0.0, tp / (tp + fn) if tp + fn else 0.0
    out = {"accuracy": share([s == t for s, t in zip(said, truth)], units), "precision": precision,
           "recall": recall, "f1": {"value": 2 * p * r / (p + r) if p + r else 0.0, "ci95": None},
           "yes_ratio": share(said, units)}
    if len(yn) < len(answers):
        out["notes"] = [f"{len(answers) - len(yn)} questions without a yes/no answer or truth left out"]
    return out
