"""Records into each method's items: the one place where a benchmark read by the dataset layer
(:mod:`vlmcheck.datasets`) becomes GenCeption's images, ChEF's multiple-choice items, VHExpansion's yes/no
cases and CAST's scenes and pairs (:func:`dataset_for` says which sources the dataset layer reads).

One image, one unit: records sharing an image name one file, so GenCeption gets one item per distinct image and
ChEF and VHExpansion cluster by it.  Rows a reader left out are said on stderr; what a task read is collected
with :func:`read_items`, kept as the task's ``data_read``, printed at the run's start and recorded in results.json.
"""

from __future__ import annotations

import contextvars
import logging
import os
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..core import remote
from ..core.data import ImageItem
from ..core.dataset_files import row_window
from ..core.files import InputFileError
from ..datasets import Dataset, DatasetFormError, Record, detect, load, parse_source, path_options

log = logging.getLogger("vlmcheck")

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
T = TypeVar("T")


def with_benchmark(source: str, benchmark: str | None) -> str:
    """``--benchmark NAME`` folded into the source as ``NAME:SOURCE`` (what the run's spec keeps)."""
    if not benchmark:
        return source
    named, _, _ = parse_source(source)
    if named:
        if named != benchmark.lower():
            raise InputFileError(f"--benchmark {benchmark} but the source names {named!r}: {source}")
        return source
    return f"{benchmark.lower()}:{source}"


_READ: contextvars.ContextVar[list[Dataset] | None] = contextvars.ContextVar("vlmcheck_data_read", default=None)


def read_items(load: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, list[dict[str, Any]]]:
    """``load(*args, **kwargs)`` (a task's reader), and what it read: each dataset's ``choices()``, the rows its
    method could not use included (printed at the run's start, kept in results.json as ``data_read``)."""
    got: list[Dataset] = []
    token = _READ.set(got)
    try:
        items = load(*args, **kwargs)
    finally:
        _READ.reset(token)
    return items, [ds.choices() for ds in got]


def dataset_for(source: str | Path, benchmark_hint: str | None = None, **options: Any) -> Dataset | None:
    """The dataset layer's reading of ``source``, or None where the method's own reader keeps it.
    ``benchmark_hint``: the benchmark a caller reads (ChEF's ``scienceqa`` scenario), used where the source names
    none and is no other benchmark's copy."""
    text = str(source)
    benchmark, form, rest = parse_source(text)
    if benchmark is None and form is None and not rest.startswith("hfds:"):
        if remote.is_url(rest):
            return None
        p = Path(path_options(rest)[0])  # PATH?split=..: the reader's options after the path
        if not p.exists() or (p.is_file() and p.suffix.lower() in (".jsonl", ".ndjson")) \
                or (p.is_dir() and (p / "manifest.jsonl").is_file()):
            return None
        try:
            detect(p)
        except DatasetFormError:
            return None
    if benchmark_hint and benchmark is None and form is None and _generic(rest) \
            and not _copy_of_another(text, benchmark_hint):
        options = {"benchmark": benchmark_hint, **options}
    try:
        ds = load(text, **options)
    except DatasetFormError as exc:
        raise InputFileError(str(exc)) from None
    got = _READ.get()
    if got is not None:
        got.append(ds)
    line = ds.say_skipped()
    if line:
        log.warning("%s", line)
    for n in ds.notes:
        log.info("%s: %s", ds.source, n)
    return ds


def _generic(rest: str) -> bool:
    """``rest`` is read by a generic form (a Hub copy, a TSV), not by a benchmark's own (LAMM's meta files)."""
    if rest.startswith("hfds:"):
        return True
    try:
        return not detect(Path(path_options(rest)[0])).benchmarks
    except DatasetFormError:
        return False


def _copy_of_another(text: str, benchmark: str) -> bool:
    """``text`` is a Hub copy or VLMEvalKit TSV of a benchmark other than ``benchmark`` (by its name)."""
    from ..datasets import base

    probe = Dataset("", None, path_options(text)[0], [])
    rule = base.recognise(probe)
    return rule is not None and rule.benchmark != benchmark


def _require(ds: Dataset, records: list[Record], what: str, ok: Any) -> list[Record]:
    """The records that have ``what``; the others left out, counted in ``ds.skipped`` with the reason."""
    source = ds.source
    if not records:
        raise InputFileError(f"{source}: no records in it")
    bad = [r.id for r in records if not ok(r)]
    if len(bad) == len(records):
        raise InputFileError(f"{source}: no record has {what} (e.g. {bad[0]!r})")
    if bad:
        log.warning("%s: %d records skipped: no %s (e.g. %r)", source, len(bad), what, bad[0])
        ds.skipped += [(b, f"no {what}") for b in bad]
    return [r for r in records if ok(r)]


def image_items(ds: Dataset) -> list[ImageItem]:
    """One item per distinct image (the first record naming it gives its category); its id is the image's path
    inside its root, stable across runs (a stored image's name is its content hash)."""
    seen: dict[str, ImageItem] = {}
    for r in ds.records:
        for path in r.images:
            if path in seen:
                continue
            root = r.root or os.path.dirname(path)
            try:
                rid = Path(path).relative_to(root).as_posix()
            except ValueError:
                rid = path
            seen[path] = ImageItem(id=rid, path=path, category=r.category, root=r.root)
    if not seen:
        raise InputFileError(f"{ds.source}: no images in it ({len(ds.records)} records, all text-only)")
    without = [r.id for r in ds.records if not r.images]
    if without:
        log.warning("%s: %d records without an image left out", ds.source, len(without))
        ds.skipped += [(w, "no image") for w in without]
    return list(seen.values())


def prompt_of(ds: Dataset, r: Record, kind: str | None = None) -> str:
    """A record's question as a run asks it: the hint above the question, under "Context" for ScienceQA (its own
    and LAMM's wording), else "Hint" (MMBench's, VLMEvalKit's); ChEF's multiple-choice scenarios then list the
    options (``chef.recipe.format_query``)."""
    q = r.question or ""
    word = "Context" if kind == "scienceqa" or ds.benchmark == "scienceqa" else "Hint"
    return f"{word}: {r.hint}\n{q}" if r.hint else q


def _pictures(r: Record) -> dict[str, Any]:
    """A ChEF item's images: ``image`` the first (the cluster unit, the report's thumbnail), and ``images`` all
    of them, in order, where a record has several (SEED-Bench-2's ``data_id`` lists, as ChEF's loader)."""
    return {"image": r.images[0] if r.images else None, **({"images": list(r.images)} if len(r.images) > 1 else {})}


def official_benchmark(ds: Dataset, r: Record) -> str | None:
    """The benchmark whose official figure a record counts toward (datasets/official.py): the record's own (a
    LAMM meta file's), else the dataset's where it declares a figure, else the one the source is named for."""
    from ..datasets.official import benchmark_of, official_for

    named = r.meta.get("benchmark") or (ds.benchmark if official_for(ds.benchmark) else None)
    return benchmark_of(named, ds.source)


def _official(ds: Dataset, r: Record, group: str | None = None) -> dict[str, Any]:
    """``meta["official"]``: the record's :func:`official_benchmark` and its group (MME's image, MMVP's pair,
    MMBench's question), or nothing."""
    b = official_benchmark(ds, r)
    return {"official": {"benchmark": b, "group": group or r.group}} if b else {}


def _yes_no(v: Any) -> str | None:
    s = str(v).strip().lower()
    return s if s in ("yes", "no") else None


def chef_items(ds: Dataset, kind: str, *, turn_rows: dict[str, Any], retrieval_items: Any, circular: bool = False,
               question: str | None = None, **options: Any) -> list[dict[str, Any]]:
    """ChEF's items of scenario ``kind`` from records (the item layout of chef/scenarios.py, which passes its
    row builders: ``turn_rows`` for the turn kinds, ``retrieval_items`` for caption retrieval)."""
    recs = ds.records
    if kind in turn_rows:
        recs = _require(ds, recs, "image", lambda r: r.images)
        rows = [{**r.meta, "id": r.id, "image": r.images[0]} for r in recs]
        if recs[0].meta.get("tree") and "tree" not in options:  # the label tree the reader built chains from
            options = {**options, "tree": recs[0].meta["tree"]}
        items = turn_rows[kind](rows, Path(recs[0].root or "."), **options)
        for it, r in zip(items, recs):
            it.setdefault("root", r.root)
        return items
    if kind == "pope":  # MME and POPE: yes/no (options Yes / No)
        recs = _require(ds, recs, "a yes/no answer", lambda r: _yes_no(r.answer) and r.question)
        return [{"id": r.id, **_pictures(r), "question": r.question, "options": ["Yes", "No"],
                 "answer": 0 if _yes_no(r.answer) == "yes" else 1,
                 "meta": {"pope": True, "category": r.category, **_official(ds, r)}, "root": r.root} for r in recs]
    if kind == "classification":
        recs = _require(ds, recs, "a label", lambda r: r.answer is not None and r.images)
        labels = [r.options[r.answer] if r.options and isinstance(r.answer, int) else str(r.answer) for r in recs]
        pool = sorted(set(labels))
        q = question or "What is the category of the image?"
        return [{"id": r.id, **_pictures(r), "question": q, "options": pool, "answer": pool.index(lab),
                 "meta": {}, "root": r.root} for r, lab in zip(recs, labels)]
    if kind == "retrieval":
        recs = _require(ds, recs, "a caption", lambda r: r.description and r.images)
        rows = [{"id": r.id, "image": r.images[0], "caption": r.description, "root": r.root} for r in recs]
        return retrieval_items(rows, question=question or "Which caption describes the image?", **options)
    # multiple choice: mc, scienceqa, mmbench, world
    recs = _require(ds, recs, "options and an answer among them",
                    lambda r: r.options and isinstance(r.answer, int) and 0 <= r.answer < len(r.options))
    out = []
    copies = any("circular_copy" in r.meta for r in recs)  # the data's own copies: never rotated again
    grouped = kind == "mmbench" or ds.benchmark == "mmbench"
    for r in recs:
        copy_no = r.meta.get("circular_copy", 0)
        base = {**_pictures(r), "question": prompt_of(ds, r, kind), "root": r.root,
                "meta": {"category": r.category, **({"group": r.group or r.id} if grouped else {}),
                         **_official(ds, r, (r.group or r.id) if grouped else None)}}
        if copy_no and not circular:
            ds.skipped.append((r.id, "circular copy: VanillaEval asks each question once"))
            continue
        if not circular or copies or kind != "mmbench":
            out.append({**base, "id": r.id, "options": list(r.options), "answer": r.answer,
                        "meta": {**base["meta"], **({"rotation": copy_no} if circular else {})}})
            continue
        for k in range(len(r.options)):  # CircularEval: one copy per rotation of the options
            rot = r.options[k:] + r.options[:k]
            out.append({**base, "id": f"{r.id}@{k}", "options": rot, "answer": (r.answer - k) % len(rot),
                        "meta": {**base["meta"], "rotation": k}})
    return out


def vhx_cases(ds: Dataset) -> list[Any]:
    """Yes/no cases, one per record with an image and a question: a yes/no answer as it is (MME, POPE, VHTest); a
    multiple-choice record (MMVP) as ONE binary case, as VHExpansion counts them (Table 1, section 3): options
    Yes/No ask the question as it is, any others whether the first one is the answer (docs/methods.md); the MMVP
    pair id travels in ``meta["pair"]`` for MMVP's pair accuracy."""
    from .vhx_case import Case

    def usable(r: Record) -> bool:
        if len(r.images) != 1 or not r.question:
            return False
        if r.options:
            return isinstance(r.answer, int) and 0 <= r.answer < len(r.options)
        return _yes_no(r.answer) is not None

    out = []
    for r in _require(ds, ds.records, "an image, a question and a yes/no answer (or options)", usable):
        meta: dict[str, Any] = {k: v for k, v in {"category": r.category, "group": r.group,
                                                  "split": r.split}.items() if v}
        if r.options:
            said = [o.strip().lower().rstrip(".") for o in r.options]
            if sorted(said) == ["no", "yes"]:
                question, answer = r.question, said[r.answer]
            else:
                q = r.question.strip() + ("" if r.question.strip().endswith(("?", ".")) else "?")
                question, answer = f"{q} Is the answer '{r.options[0].strip()}'?", "yes" if r.answer == 0 else "no"
                meta["asked_option"] = r.options[0]
            meta.update(options=list(r.options), correct_option=r.options[r.answer])
        else:
            question, answer = r.question, _yes_no(r.answer)
        if r.group and ds.benchmark == "mmvp":
            meta["pair"] = r.group
        meta.update(_official(ds, r))
        out.append(Case(id=r.id, image=r.images[0], question=question, answer=answer, meta=meta, root=r.root))
    return out


def cast_corpus(ds: Dataset) -> list[dict[str, Any]]:
    """Scenes (image, description) for ``cast pairs``: DOCCI, Flickr30k, any record with both."""
    recs = _require(ds, ds.records, "an image and a description", lambda r: r.images and r.description)
    return [{"id": r.id, "image": r.images[0], "description": r.description, "root": r.root} for r in recs]


def cast_pairs(ds: Dataset) -> list[dict[str, Any]]:
    """Scene pairs for ``cast run``: records sharing a ``group``, two to a group, in record order (``a`` first),
    each with an image and a description (the CAST authors' pair files)."""
    groups: dict[str, list[Record]] = {}
    for r in ds.records:
        if r.group is not None:
            groups.setdefault(r.group, []).append(r)
    pairs = []
    window = row_window.get()
    for gid, members in groups.items():
        if len(members) == 1 and window is not None and window.cut:
            break  # its other side may lie in the rows not read: the pairs after it wait for a wider read
        if len(members) != 2 or not all(m.images and m.description for m in members):
            log.warning("%s: group %r left out: a pair is two records, each with an image and a description",
                        ds.source, gid)
            continue
        sides = {s: {"id": m.id, "image": m.images[0], "description": m.description, "root": m.root}
                 for s, m in zip("ab", members)}
        pairs.append({"id": gid, **sides})
    if not pairs:
        raise InputFileError(f"{ds.source}: no scene pairs in it (records sharing a group, two to a group)")
    return pairs


def load_images(source: str | Path) -> list[ImageItem]:
    """GenCeption's and describe's images: one per distinct image from the dataset layer, else the image
    folder / JSONL manifest / URL reader (core/data.py)."""
    from ..core.data import load_image_dataset

    def read() -> list[ImageItem]:
        ds = dataset_for(source)
        return image_items(ds) if ds is not None else load_image_dataset(source)

    return for_limit(read)  # --limit N: the first N rows, more where they hold fewer than N images


def for_limit(read: Any, count: Any = len) -> Any:
    """``read()`` (a method's samples) under ``--limit N``'s row window (core/dataset_files.read_samples): the
    rows it needs, read again wider where they give fewer than N samples; only the last read is the run's."""
    from ..core.dataset_files import read_samples

    got = _READ.get()
    mark = len(got) if got is not None else 0

    def again() -> Any:
        if got is not None:
            del got[mark:]
        return read()

    return read_samples(again, count)


def source_name(source: str | Path) -> str | None:
    """The dataset's declared name (core/data.py), else the benchmark a source names (``mme:PATH`` -> mme)."""
    from ..core.data import dataset_name

    benchmark, form, rest = parse_source(str(source))
    return dataset_name(rest) or benchmark
