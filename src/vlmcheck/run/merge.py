"""``vlmcheck merge OUT SHARD...`` (docs/usage.md, "Shards"): one run folder from the folders of ``--shard i/N``
runs, built in a temporary folder beside OUT that takes OUT's place whole.  The caller writes the report."""

from __future__ import annotations

import os
import re
import shutil
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ..core.files import InputFileError, broken_link
from ..store.db import DB_NAME, RunStore
from .folder import RunFolderExists, check_replaceable, folder_lock, lock_file, mark_run_folder
from .runner import RunOptions, identity_spec, select_samples, write_outputs
from .task import task_from_spec


def merge_runs(shards: list[str | Path], out: str | Path, overwrite: bool = False) -> dict[str, Any]:
    """Merge the shard folders into ``out`` (new, or an earlier merge of the same run, or with ``overwrite``
    any run folder); return the results."""
    if not shards:
        raise InputFileError("give the shard run folders to merge")
    out = Path(out)
    if not str(out).strip():
        raise InputFileError("the merged run's folder is empty; give OUT")
    if broken_link(out):
        raise InputFileError(broken_link(out))
    shards = [Path(s) for s in shards]
    for folder in shards:
        a, b = folder.resolve(), out.resolve()
        if a == b or b in a.parents or a in b.parents:
            raise InputFileError(f"{out} is one of the shards to merge ({folder}) or holds one; merge into a new "
                                 "folder")
    specs = []
    for folder in shards:
        if not (folder / DB_NAME).is_file():
            raise InputFileError(f"{folder}: no such folder" if not folder.exists() else
                                 f"{folder}: not a run folder (no {DB_NAME})")
        with RunStore(folder, existing=True, read_only=True) as store:
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
    out.parent.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        stack.enter_context(lock_file(out.parent / f".{out.name}.merge.lock", out))  # merges into OUT take turns
        ours = re.compile(rf"\.{re.escape(out.name)}\.merge-(old-)?\d+")  # the folders a merge makes, nothing else
        for stale in out.parent.iterdir():  # a killed merge's unfinished folder
            if stale.is_dir() and not stale.is_symlink() and ours.fullmatch(stale.name):
                shutil.rmtree(stale, ignore_errors=True)
        previous = None
        if out.exists():
            stack.enter_context(folder_lock(out))  # no run works in OUT meanwhile
            if (out / DB_NAME).is_file():
                with RunStore(out, existing=True, read_only=True) as store:
                    prev = store.get_meta("spec")
                same = identity_spec(prev.get("task_spec")) == identity_spec(first.get("task_spec"))
                if not same and not overwrite:
                    raise RunFolderExists(f"{out} holds another run; merge into a new folder or pass --overwrite")
                previous = out if same else None
            check_replaceable(out)  # OUT holds a run (or nothing): never a user's files
        tmp = out.parent / f".{out.name}.merge-{os.getpid()}"
        try:
            results = _build(tmp, shards, first, key_version, previous)
            _put_in_place(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return results


def _build(tmp: Path, shards: list[Path], first: dict[str, Any], key_version: int,
           previous: Path | None) -> dict[str, Any]:
    task = task_from_spec(first["task"], first["task_spec"])
    samples = select_samples(task, RunOptions(limit=first.get("limit")))
    with RunStore(tmp) as store:
        store.set_meta("spec", {**first, "shard": None, "n_samples": len(samples),
                                "merged_from": [str(s) for s in shards]})
        store.set_meta("key_version", key_version)
        sessions = []
        for folder in ([previous] if previous else []) + shards:  # an earlier merge keeps what it held
            with RunStore(folder, existing=True, read_only=True) as shard:
                store.absorb(shard)
                if folder is not previous:
                    sessions += shard.get_meta("sessions") or []
        store.set_meta("sessions", sessions)
        results = write_outputs(store, task, samples)
    mark_run_folder(tmp)
    return results


def _put_in_place(tmp: Path, out: Path) -> None:
    """``tmp`` becomes ``out`` in one step: renamed when ``out`` is absent, else exchanged with it (Linux
    ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames) and the old one removed."""
    if not out.exists():
        os.rename(tmp, out)
        return
    if not _exchange(tmp, out):
        old = out.parent / f".{out.name}.merge-old-{os.getpid()}"
        os.rename(out, old)
        os.rename(tmp, out)
        tmp = old
    shutil.rmtree(tmp, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    # no stdlib call swaps two directories atomically; renameat2 does on Linux (glibc >= 2.28)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    return renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0

