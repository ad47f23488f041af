"""``hfds:ORG/NAME`` of a Hub repository that holds a benchmark's release files rather than parquet or arrow
shards: the snapshot in the Hugging Face cache is read by that release's own form, as the same files given as a
folder are."""

from __future__ import annotations

from pathlib import Path

from .base import Dataset, DatasetFormError, _check_options, detect


def release_in_repo(folder: Path, source: str, benchmark: str | None, given: dict[str, str]) -> Dataset:
    """A Hub repository that holds a benchmark's release files rather than shards, read by that release's own
    form."""
    try:
        f = detect(folder, benchmark)
    except DatasetFormError:
        f = None
    if f is None or f.name in ("hf-snapshot", "hf-saved"):
        raise DatasetFormError(f"{folder}: neither a Hub snapshot (parquet/arrow shards), a save_to_disk folder "
                               "(state.json or dataset_dict.json) nor a benchmark's release files") from None
    _check_options(f, source, given)
    ds = f.read(folder.absolute(), benchmark=benchmark, **given)
    ds.notes.append(f"{source}: the repository holds {f.name}'s release files, read as that release")
    return ds
