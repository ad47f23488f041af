"""A Hugging Face dataset's shards: which hold each config's splits (both forms), which config and split are read
(:func:`choose`, each choice said in the notes), and a shard's rows a batch at a time.  Every shard and JSON file
is opened under the rule for dataset files (core/dataset_files.py)."""

from __future__ import annotations

import contextlib
import fnmatch
import re
from pathlib import Path
from typing import Any, Iterator

from ..core import dataset_files
from ..core.files import InputFileError
from .base import DatasetFormError

SPLIT_PREFERENCE = ("test", "validation", "dev", "val", "train")
_SHARD = re.compile(r"^(?P<split>[A-Za-z0-9_.]+?)(-\d{5}-of-\d{5}.*)?$")


def shard_files(folder: Path) -> list[Path]:
    return sorted(p for pattern in ("*.parquet", "*.arrow") for p in folder.rglob(pattern)
                  if ".cache" not in p.parts and ".git" not in p.parts)


def _repo_root(folder: Path) -> Path:
    """The folder a Hub dataset's files must stay inside: the repository's folder for a snapshot in the Hugging
    Face cache (whose files link to ``../../blobs/``), else the folder itself."""
    return folder.parent.parent if folder.parent.name == "snapshots" else folder


def _json(path: Path) -> Any:
    try:
        return dataset_files.parse_json(dataset_files.read_text(path, _repo_root(path.parent), "JSON file"),
                                        str(path))
    except InputFileError as exc:
        raise DatasetFormError(str(exc)) from None


def _readme_configs(folder: Path) -> dict[str, dict[str, list[str]]]:
    """config -> split -> file patterns, from the README's YAML front matter (empty when it names none)."""
    try:
        import yaml

        text = dataset_files.read_text(folder / "README.md", _repo_root(folder), "dataset card")
        meta = yaml.safe_load(text[3:].split("\n---", 1)[0]) if text.startswith("---") else {}
    except Exception:  # no card, or a damaged one: the files' names still say the splits
        return {}
    out: dict[str, dict[str, list[str]]] = {}
    for cfg in meta.get("configs") or [] if isinstance(meta, dict) else []:
        if not isinstance(cfg, dict):
            continue
        files = cfg.get("data_files")
        if isinstance(files, dict):  # {split: pattern(s)}, the short form of [{split, path}, ...]
            files = [{"split": k, "path": v} for k, v in files.items()]
        splits: dict[str, list[str]] = {}
        for f in [files] if isinstance(files, str) else files if isinstance(files, list) else []:
            if isinstance(f, dict) and "split" in f:
                p = f.get("path")
                splits[str(f["split"])] = [p] if isinstance(p, str) else [str(x) for x in p or []]
            elif isinstance(f, str):
                splits.setdefault("train", []).append(f)
        out[str(cfg.get("config_name", "default"))] = splits
    return out


def snapshot_splits(folder: Path) -> dict[str, dict[str, list[Path]]]:
    """config -> split -> shard files of a Hub snapshot."""
    shards = shard_files(folder)
    rel = {p: p.relative_to(folder).as_posix() for p in shards}
    out: dict[str, dict[str, list[Path]]] = {}
    for cfg, splits in _readme_configs(folder).items():
        for split, patterns in splits.items():
            files = [p for p in shards if any(fnmatch.fnmatch(rel[p], pat) for pat in patterns)]
            if files:
                out.setdefault(cfg, {})[split] = files
    if out:
        return out
    for p in shards:  # no configs in the card: <config>/<split>-NNNNN-of-NNNNN.parquet, "data/" for the default
        m = _SHARD.match(p.name.rsplit(".", 1)[0])
        split = m.group("split") if m else p.stem
        parent = p.parent.relative_to(folder).as_posix()
        cfg = "default" if parent in (".", "data") else parent.removeprefix("data/")
        out.setdefault(cfg, {}).setdefault(split, []).append(p)
    return out


def saved_splits(folder: Path) -> dict[str, dict[str, list[Path]]]:
    if (folder / "dataset_dict.json").is_file():
        try:
            names = _json(folder / "dataset_dict.json")["splits"]
            names = list(names) if isinstance(names, list) else names["?"]
        except (OSError, ValueError, KeyError, TypeError):
            raise DatasetFormError(f"{folder / 'dataset_dict.json'}: expected {{\"splits\": [...]}} as "
                                   "datasets.DatasetDict.save_to_disk writes it") from None
        return {"default": {str(s): sorted((folder / str(s)).glob("data-*.arrow")) for s in names}}
    try:
        state = _json(folder / "state.json")
        files = [folder / f["filename"] for f in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise DatasetFormError(f"{folder / 'state.json'}: expected the _data_files list that "
                               "datasets.Dataset.save_to_disk writes") from None
    return {"default": {str(state.get("_split") or "train") if isinstance(state, dict) else "train": files}}


@contextlib.contextmanager
def open_shard(path: Path) -> Iterator[tuple[Any, int | None, Iterator[Any]]]:
    """(schema, rows it declares: None for an arrow stream, record batches) of a shard read under the rule for
    dataset files (a regular file inside the dataset; streamed, so no size cap), pyarrow's errors told with the
    file's name (a truncated shard: pyarrow's sentence names no file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = dataset_files.current_root.get()  # the folder being read (datasets.load, read_hfds)
    try:
        dataset_files.check_file(path, _repo_root(Path(root) if root is not None else path.parent), "shard")
    except InputFileError as exc:
        raise DatasetFormError(str(exc)) from None
    try:
        if path.suffix == ".parquet":
            with pq.ParquetFile(path) as shard:
                yield shard.schema_arrow, shard.metadata.num_rows, shard.iter_batches(batch_size=256)
            return
        with pa.memory_map(str(path)) as src:
            try:
                reader = pa.ipc.open_stream(src)
            except pa.ArrowInvalid:  # the file format rather than the stream save_to_disk writes
                src.seek(0)
                reader = pa.ipc.open_file(src)
            if isinstance(reader, pa.ipc.RecordBatchStreamReader):
                yield reader.schema, None, iter(reader)
            else:
                batches = range(reader.num_record_batches)
                yield reader.schema, sum(reader.get_batch(i).num_rows for i in batches), map(reader.get_batch, batches)
    except (OSError, pa.ArrowException) as exc:
        raise DatasetFormError(f"{path}: not a readable {path.suffix[1:]} shard ({exc})") from None


def shard_schema(path: Path) -> Any:
    with open_shard(path) as (found, _, _batches):
        return found


def iter_rows(files: list[Path]) -> Iterator[dict[str, Any]]:
    """Rows of the shards, a batch at a time (never the whole table in memory), a shard over the row cap refused
    (before a row is read where it declares its rows)."""
    cap, env = dataset_files.limits().rows, dataset_files.ENV["rows"][0]
    for path in files:
        with open_shard(path) as (_, declared, batches):
            if declared is not None and declared > cap:
                raise DatasetFormError(f"{path}: {declared} rows, more than the {cap} a dataset file may hold "
                                       f"(raise it with {env})")
            rows = 0
            for batch in batches:
                rows += batch.num_rows
                if rows > cap:
                    raise DatasetFormError(f"{path}: more than the {cap} rows a dataset file may hold (raise it "
                                           f"with {env})")
                yield from batch.to_pylist()


def _count_rows(files: list[Path]) -> int | None:
    """Rows in a split's shards as they declare them (None where one does not: an arrow stream)."""
    counts = []
    try:
        for path in files:
            with open_shard(path) as (_, declared, _batches):
                counts.append(declared)
    except DatasetFormError:
        return None
    return None if None in counts else sum(counts)


def choose(splits: dict[str, dict[str, list[Path]]], config: str | None, split: str | None, source: str,
           default: Any = None) -> tuple[str, str, list[Path], list[str]]:
    """(config, split, files, notes): the ones asked for, else the only one, else the benchmark's default
    (``default``: its :class:`~.base.Benchmark`), else ``default``; a split by :data:`SPLIT_PREFERENCE`.  Several
    configs and none named nor defined is refused, as ``datasets.load_dataset`` refuses it; the notes say every
    choice and, where other splits were not read, their rows."""
    notes = []
    if not splits:
        raise DatasetFormError(f"{source}: no parquet or arrow shards found")
    names = ", ".join(splits)
    if config is None:
        if len(splits) == 1:
            config = next(iter(splits))
        elif default is not None and default.config in splits:
            config = default.config
            notes.append(f"config {config!r} read: {default.benchmark}'s (configs: {names}; pass ?config=NAME)")
        elif "default" in splits:
            config = "default"
            notes.append(f"config 'default' read (configs: {names}; pass ?config=NAME)")
        else:
            raise DatasetFormError(f"{source}: config name is missing: pick one of its configs with ?config=NAME "
                                   f"({names})")
    if config not in splits:
        raise DatasetFormError(f"{source}: no config {config!r} (configs: {names})")
    avail = splits[config]
    if split is None:
        if len(avail) == 1:
            split = next(iter(avail))
            notes.append(f"split {split!r} read: the only one")
        else:
            ours = default is not None and default.split in avail
            split = default.split if ours else next((s for s in SPLIT_PREFERENCE if s in avail), next(iter(avail)))
            counts = {s: _count_rows(f) for s, f in avail.items()}
            said = ", ".join(s if counts[s] is None else f"{s} {counts[s]}" for s in avail)
            of = f"{counts[split]} of {sum(counts.values())} rows" if None not in counts.values() else "one split"
            notes.append(f"split {split!r} read" + (f" ({default.benchmark}'s)" if ours else "")
                         + f": {of} (splits: {said}; pass ?split=NAME)")
    if split not in avail:
        raise DatasetFormError(f"{source}: no split {split!r} (splits: {', '.join(avail)})")
    return config, split, avail[split], notes
