"""The dataset layer's contract: records, the forms, schemes and benchmarks registries, detection and loading.

A *form* is one way a benchmark is laid out on disk: a function that reads a path into a :class:`Dataset`,
registered with :func:`register_form` beside a cheap ``detect`` that looks at file names (at most a file's first
bytes).  Records are neutral: what a benchmark says about an item and where its images are; the rules every
reader follows and what each method reads from a record are in docs/datasets.md.  A source is a path,
``NAME:PATH`` (NAME a benchmark or a form) or a registered scheme (``hfds:ORG/NAME``).
"""

from __future__ import annotations

import inspect
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qsl

from ..core.registry import Registry


class DatasetFormError(ValueError):
    """A dataset that cannot be read in the form asked for; the message is one sentence naming the file."""


@dataclass(slots=True)
class Record:
    """One benchmark item, as the benchmark defines it."""

    id: str
    #: the item's images, as paths (or URLs) inside ``root``; rows sharing an image share the same string
    images: list[str] = field(default_factory=list)
    question: str | None = None
    #: the options' texts, in the benchmark's order (A, B, C, ... for lettered options)
    options: list[str] = field(default_factory=list)
    #: the benchmark's answer: an option index for multiple choice, "yes"/"no", a label, a caption, a count
    answer: Any = None
    #: context shown with the question (ScienceQA's hint, MMBench's hint)
    hint: str | None = None
    category: str | None = None
    split: str | None = None
    #: the id that ties items together (MMVP's pair of images, MMBench's circular copies, POPE's image)
    group: str | None = None
    #: a description of the image (DOCCI, Flickr30k captions, a CAST scene's text)
    description: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: the folder the images must stay inside
    root: str | None = None


@dataclass
class Dataset:
    """What a reader read: the records, and everything it had to leave out or decide."""

    form: str
    benchmark: str | None
    source: str
    records: list[Record]
    #: (row reference, reason) for every row left out
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: decisions the reader took that the user should know (e.g. "split 'test' chosen: the only one")
    notes: list[str] = field(default_factory=list)
    #: the config and split(s) read, the rows found (before any was left out) and a table's column names
    config: str | None = None
    splits: list[str] = field(default_factory=list)
    rows: int | None = None
    columns: list[str] = field(default_factory=list)

    @property
    def distinct_images(self) -> int:
        return len({p for r in self.records for p in r.images})

    def say_skipped(self) -> str | None:
        """One line on the rows left out (how many, and why), or None."""
        top = "; ".join(f"{n} {r}" for r, n in sorted(self.left_out().items(), key=lambda x: -x[1])[:3])
        return f"{self.source}: {len(self.skipped)} rows skipped ({top})" if self.skipped else None

    def left_out(self) -> dict[str, int]:
        """reason -> how many rows were left out for it (in the order first met)."""
        return dict(Counter(reason for _, reason in self.skipped))

    def choices(self) -> dict[str, Any]:
        """What was read and what was chosen, as a run records it (``results.json``'s ``data_read``)."""
        return {"source": self.source, "form": self.form, "benchmark": self.benchmark, "config": self.config,
                "splits": list(self.splits), "rows": self.rows,
                # rows less those left out, by the reader, the benchmark's rule or the method reading it
                "items": len(self.records) if self.rows is None else self.rows - len(self.skipped),
                "left_out": self.left_out(), "notes": list(self.notes)}


def choices_line(d: dict[str, Any]) -> str:
    """One line saying what a run reads (:meth:`Dataset.choices`), printed at the start of the run."""
    parts = [f"form {d.get('form')}"]
    if d.get("benchmark"):
        parts.append(f"benchmark {d['benchmark']}")
    if d.get("config"):
        parts.append(f"config {d['config']!r}")
    if d.get("splits"):
        parts.append(("split " if len(d["splits"]) == 1 else "splits ") + ", ".join(map(repr, d["splits"])))
    rows = d.get("rows")
    counts = (f"{rows} rows read, " if rows is not None else "") + f"{d.get('items')} items"
    left = d.get("left_out") or {}
    out = "; ".join(f"{n} {r}" for r, n in sorted(left.items(), key=lambda x: -x[1]))
    said = [n for n in d.get("notes") or [] if n.startswith(("split ", "config ", "circular"))
            and n != f"config {d.get('config')!r}"]
    return (f"data {d.get('source')}: {', '.join(parts)}: {counts}; left out: "
            + (f"{sum(left.values())} ({out})" if left else "none") + "".join(f"; {n}" for n in said))


@dataclass(frozen=True)
class Form:
    name: str
    #: the benchmarks this form carries (e.g. ("pope",)); empty for a generic form (a Hub snapshot)
    benchmarks: tuple[str, ...]
    detect: Callable[[Path], bool]
    read: Callable[..., Dataset]
    #: where its schema is published (dataset card, VLMEvalKit class, the original repository)
    schema: str = ""
    #: the options its reader takes where its signature does not name them (``*_column``: any column role)
    options: tuple[str, ...] | None = None
    #: what its records carry (:data:`RECORD_KINDS`); empty for a generic form (what its columns hold)
    carries: tuple[str, ...] = ()


#: the kinds of thing a record can carry, which the methods make their items of (a method's ``reads``)
RECORD_KINDS = ("images", "yes/no", "multiple choice", "classes", "counts", "boxes", "captions", "descriptions",
                "hierarchy", "turns", "scene pairs")


def _load_readers(registry: Registry | None = None) -> None:
    """Import every module of this package, each registering its forms, benchmarks and official figure."""
    import importlib
    import pkgutil

    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if mod.name not in ("base", "__init__"):
            importlib.import_module(f"{__package__}.{mod.name}")


FORMS: Registry[Form] = Registry("dataset form", error=DatasetFormError, load=_load_readers)
#: source schemes (``hfds``) -> their reader ``read(source, *, benchmark=None, **options)``
SCHEMES: Registry[Callable[..., Dataset]] = Registry("source scheme", error=DatasetFormError, load=_load_readers)


@dataclass(frozen=True)
class Benchmark:
    """A benchmark, declared in its own module, with its one definition of which rows are its items, applied by
    :func:`load` on every route: ``select(ds)`` leaves rows out (into ``ds.skipped``) and marks what ties them.

    ``hub``: the Hub repositories holding a copy (any case); ``tsv``: VLMEvalKit TSV name prefixes;
    ``recognise(ds)``: a copy known from its columns or rows; ``config`` / ``split``: what a Hub copy reads when
    none is named; ``hub_copy(ds)``: what its Hub copies need beyond datasets/hub.py (MMVP's pairs)."""

    benchmark: str
    select: Callable[[Dataset], None] = lambda ds: None
    hub: tuple[str, ...] = ()
    tsv: tuple[str, ...] = ()
    recognise: Callable[[Dataset], bool] | None = None
    config: str | None = None
    split: str | None = None
    #: what its rows carry (:data:`RECORD_KINDS`), for a benchmark read only by the generic forms (MMBench)
    carries: tuple[str, ...] = ()
    hub_copy: Callable[[Dataset], None] | None = None


BENCHMARKS: Registry[Benchmark] = Registry("benchmark", error=DatasetFormError, load=_load_readers)


def register_benchmark(rule: Benchmark, *, replace: bool = False) -> Benchmark:
    return BENCHMARKS.add(rule.benchmark, rule, replace=replace, stacklevel=2)


def item_rules() -> dict[str, Benchmark]:
    """Every registered benchmark, by name."""
    return dict(BENCHMARKS)


def items_rule(benchmark: str | None = None, *, hub: str | None = None) -> Benchmark | None:
    """The registration of ``benchmark``, or of the benchmark whose Hub copy is repository ``hub``."""
    if benchmark:
        return BENCHMARKS.get(benchmark.lower())
    if hub:
        return next((r for r in BENCHMARKS.values() if hub.lower() in (h.lower() for h in r.hub)), None)
    return None


def recognise(ds: Dataset) -> Benchmark | None:
    """The rule of the benchmark ``ds`` is a copy of (its Hub repository, TSV name, columns or rows), or None."""
    name = ds.source.removeprefix("hfds:").split("?", 1)[0]
    rule = items_rule(hub=name)
    if rule is None and name.lower().endswith(".tsv"):
        rule = next((r for r in BENCHMARKS.values() if any(Path(name).name.lower().startswith(t.lower())
                                                            for t in r.tsv)), None)
    return rule or next((r for r in BENCHMARKS.values() if r.recognise is not None and r.recognise(ds)), None)


def apply_items(ds: Dataset, benchmark: str | None = None) -> Dataset:
    """``ds`` restricted to its benchmark's items: the one named, else the reader's, else the one it is a copy of."""
    if ds.rows is None:
        ds.rows = len(ds.records) + len(ds.skipped)
    rule = items_rule(benchmark or ds.benchmark)
    if rule is None and not (benchmark or ds.benchmark):
        rule = recognise(ds)
    if rule is not None:
        ds.benchmark = rule.benchmark
        rule.select(ds)
        if not ds.records:
            why = "; ".join(f"{n} {r}" for r, n in ds.left_out().items()) or "no rows"
            raise DatasetFormError(f"{ds.source}: no {rule.benchmark} items in it (left out: {why})")
    return ds


def register_scheme(scheme: str, *, replace: bool = False) -> Callable[[Callable[..., Dataset]], Any]:
    """``@register_scheme("hfds")``: the reader of sources written ``SCHEME:...``, which are not paths."""
    return lambda read: SCHEMES.add(scheme, read, replace=replace, stacklevel=2)


def register_form(name: str, *, detect: Callable[[Path], bool], benchmarks: tuple[str, ...] = (),
                  schema: str = "", options: tuple[str, ...] | None = None, carries: tuple[str, ...] = (),
                  replace: bool = False) -> Callable[[Callable[..., Dataset]], Callable[..., Dataset]]:
    """Register ``read(path, *, benchmark=None, **options) -> Dataset`` as form ``name``'s reader."""
    unknown = set(carries) - set(RECORD_KINDS)
    if unknown:
        raise ValueError(f"dataset form {name!r}: {sorted(unknown)} are not record kinds ({', '.join(RECORD_KINDS)})")

    def deco(read: Callable[..., Dataset]) -> Callable[..., Dataset]:
        FORMS.add(name, Form(name, tuple(benchmarks), detect, read, schema, options, tuple(carries)),
                  replace=replace, stacklevel=2)
        return read

    return deco


def forms() -> dict[str, Form]:
    return dict(FORMS)


def detect(path: str | Path, benchmark: str | None = None) -> Form:
    """The first registered form whose ``detect`` accepts ``path`` (among those carrying ``benchmark``, if named)."""
    p = Path(path)
    # a benchmark's own forms before the generic ones (a Hub snapshot, a VLMEvalKit TSV)
    candidates = sorted((f for f in forms().values()
                         if benchmark is None or not f.benchmarks or benchmark in f.benchmarks),
                        key=lambda f: not f.benchmarks)
    for f in candidates:
        try:
            if f.detect(p):
                return f
        except OSError:
            continue
    known = ", ".join(sorted(forms()))
    raise DatasetFormError(f"{path}: no known dataset form found there"
                           + (f" for benchmark {benchmark!r}" if benchmark else "") + f" (forms: {known})")


def benchmarks() -> tuple[str, ...]:
    """The names ``--benchmark`` and ``NAME:PATH`` take: the registered benchmarks and those a form carries."""
    return tuple(sorted({*item_rules(), *(b for f in forms().values() for b in f.benchmarks)}))


def parse_source(source: str | Path) -> tuple[str | None, str | None, str]:
    """``NAME:PATH`` -> (benchmark or None, form or None, PATH); any other string is a path as it is."""
    text = str(source)
    head, sep, rest = text.partition(":")
    if not sep or rest.startswith("//") or head == "hfds":
        return None, None, text
    name = head.strip().lower()
    if name in benchmarks():
        return name, None, rest
    if name in forms():
        return None, name, rest
    return None, None, text


def path_options(text: str) -> tuple[str, dict[str, str]]:
    """``PATH?k=v&k2=v2`` -> (PATH, {k: v, ...}): a reader's options after a local path, as ``hfds:`` takes them;
    a path that exists as written (a file name holding "?") is taken as it is."""
    head, sep, query = text.rpartition("?")
    if not sep or not head or "=" not in query or Path(text).exists():
        return text, {}
    return head, dict(parse_qsl(query, keep_blank_values=True))


def _check_options(f: Form, source: str, given: dict[str, str]) -> None:
    """Refuse an option the form's reader does not take (those it registered, else its keyword-only ones)."""
    takes = list(f.options) if f.options is not None else [
        p.name for p in inspect.signature(f.read).parameters.values()
        if p.kind is p.KEYWORD_ONLY and p.name != "benchmark"]
    wrong = [k for k in given if k not in takes and not (k.endswith("_column") and "*_column" in takes)]
    if wrong:
        raise DatasetFormError(f"{source}: the {f.name} form takes no option {wrong[0]!r}"
                               + (f" (it takes {', '.join(takes)})" if takes else " (it takes none)"))


def load(path: str | Path, benchmark: str | None = None, form: str | None = None, **options: Any) -> Dataset:
    """Read ``path`` (``NAME:PATH``, a scheme's source, ``PATH?k=v&...``) as ``form`` or the detected one, then
    restricted to its benchmark's items; options passed here win over those in the path."""
    named_b, named_f, rest = parse_source(path)
    benchmark, form = benchmark or named_b, form or named_f
    scheme = rest.partition(":")[0]
    if form is None and scheme in SCHEMES and not rest.partition(":")[2].startswith("//"):
        return apply_items(_guarded(lambda: SCHEMES[scheme](rest, benchmark=benchmark, **options), rest, scheme),
                           benchmark)
    rest, given = path_options(rest)
    f = FORMS[form] if form else detect(rest, benchmark)
    if not Path(rest).exists():
        raise DatasetFormError(f"{rest}: no such file or folder")
    _check_options(f, rest, given)
    from ..core.dataset_files import reading

    where = Path(rest).absolute()  # a relative path reads as the absolute one (images named absolutely)
    with reading(where):  # every file the reader opens stays inside the source (core/dataset_files.py)
        ds = _guarded(lambda: f.read(where, benchmark=benchmark, **{**given, **options}), rest, f.name)
    if given:
        ds.notes.append("options: " + ", ".join(f"{k}={v}" for k, v in given.items()))
    return apply_items(ds, benchmark)


def _guarded(read: Callable[[], Dataset], source: str, form: str) -> Dataset:
    """``read()``, whatever a malformed file makes it raise turned into one sentence naming the file."""
    from ..core.files import InputFileError

    try:
        return read()
    except DatasetFormError:
        raise
    except InputFileError as exc:
        raise DatasetFormError(str(exc)) from None
    except UnicodeError as exc:
        raise DatasetFormError(f"{source}: not UTF-8 text where {form} expects it ({exc.reason})") from None
    except OSError as exc:  # a name too long, a file gone while read: the file, and the system's reason
        raise DatasetFormError(f"{str(exc.filename or source)[:300]}: cannot be read as {form} "
                               f"({exc.strerror or exc})") from None
    except (RecursionError, MemoryError, TypeError, AttributeError, KeyError, IndexError) as exc:
        # a value of a shape no reader check foresaw: still one sentence naming the source
        raise DatasetFormError(f"{source}: cannot be read as {form} ({type(exc).__name__}: "
                               f"{str(exc)[:200]})") from None
