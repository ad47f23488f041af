"""``vlmcheck merge OUT SHARD...``: one run folder from the folders of ``--shard i/N`` runs.

Shards are complete run folders of one run split by a hash of each sample id (``--shard i/N``; a SLURM
array or any set of machines runs them, no cluster engine).  Merging unions their stores - call cache,
sample journal and artifacts are content-addressed, so it is idempotent and takes any number of shards,
even while some are unfinished (their samples are reported pending) - and writes ``samples.jsonl``,
``results.json`` from the union (the caller writes the report: ``vlmcheck.api.merge_runs``), as the unsharded run would: samples in dataset order with
their index in the whole run, metrics over all of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.files import InputFileError
from ..store.db import DB_NAME, RunStore
from .runner import RunFolderExists, identity_spec, write_outputs
from .task import Sample, task_from_spec


def merge_runs(shards: list[str | Path], out: str | Path) -> dict[str, Any]:
    """Merge the shard folders into ``out`` (new, or an earlier merge of the same run); return results."""
    if not shards:
        raise InputFileError("give the shard run folders to merge")
    out = Path(out)
    specs = []
    for folder in map(Path, shards):
        if not (folder / DB_NAME).is_file():
            raise InputFileError(f"{folder}: not a run folder (no {DB_NAME})")
        with RunStore(folder, existing=True) as store:
            specs.append((folder, store.get_meta("spec"), store.get_meta("key_version") or 1))
    first_folder, first, key_version = specs[0]
    counts = {(spec.get("shard") or [None, None])[1] for _, spec, _ in specs}
    for folder, spec, kv in specs[1:]:
        if spec.get("task") != first.get("task") or identity_spec(spec.get("task_spec")) != identity_spec(
                first.get("task_spec")) or spec.get("limit") != first.get("limit") or kv != key_version:
            raise InputFileError(f"{folder} and {first_folder} are shards of different runs (task, models, data, "
                                 "settings or store version differ)")
    if len(counts) > 1:
        raise InputFileError(f"the shards split the run differently ({', '.join(str(c) for c in counts)} ways); "
                             "merge shards of one --shard i/N split")
    merged_spec = {**first, "shard": None}
    if (out / DB_NAME).is_file():
        with RunStore(out, existing=True) as store:
            prev = store.get_meta("spec")
        if identity_spec(prev.get("task_spec")) != identity_spec(first.get("task_spec")):
            raise RunFolderExists(f"{out} holds another run; merge into a new folder")
    task = task_from_spec(first["task"], first["task_spec"])
    samples = [Sample(s.id, s.payload, i) for i, s in enumerate(task.samples())]
    if first.get("limit") is not None:
        samples = samples[: first["limit"]]
    with RunStore(out) as store:
        store.set_meta("spec", {**merged_spec, "n_samples": len(samples), "merged_from": [str(s) for s in shards]})
        store.set_meta("key_version", key_version)
        sessions = []
        for folder in map(Path, shards):
            with RunStore(folder, existing=True) as shard:
                store.absorb(shard)
                sessions += shard.get_meta("sessions") or []
        store.set_meta("sessions", sessions)
        results = write_outputs(store, task, samples)
    return results
