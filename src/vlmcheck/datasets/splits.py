"""Which config and split of a Hugging Face dataset are read (:func:`choose`), each choice said in the notes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import DatasetFormError

SPLIT_PREFERENCE = ("test", "validation", "dev", "val", "train")


def _count_rows(files: list[Path]) -> int | None:
    """Rows in a split's shards, from the files' metadata (None where that is not cheap: an arrow stream)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 0
    try:
        for path in files:
            if path.suffix == ".parquet":
                n += pq.ParquetFile(path).metadata.num_rows
            else:
                with pa.memory_map(str(path)) as src:
                    reader = pa.ipc.open_file(src)  # a stream (save_to_disk's) is not counted without reading it
                    n += sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    except (OSError, pa.ArrowException):
        return None
    return n


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
