"""Reading dataset images safely inside a run: every dataset image a method uses goes through :func:`read_image`
(or :func:`read_image_part`), which keeps reads inside the dataset's folder (symlinks resolved) unless the run
allows outside paths, reads only regular files under a size cap, reads and decodes in worker threads so the event
loop that drives the model calls never waits on a disk, and charges the decoded pixels to a memory budget shared
by the run's samples (docs/usage.md, ``--pixel-budget-mb``).

The budget is held per sample (:func:`sample_lease`).  A sample's first image waits until the budget has room (or
nothing else is held, so one image larger than the budget still runs alone); its later images are charged
without waiting, so two samples can never wait on each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import posixpath
import time
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .._lazy import lazy_module

Image = lazy_module("PIL.Image")  # Pillow on first use (vlmcheck/_lazy.py)

from .images import (DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_PIXELS, BadImageError, decode_image, image_size,
                     read_file_bytes, source_file)
from .probe import Header, probe
from . import remote
from .messages import ImagePart

DEFAULT_PIXEL_BUDGET = 2_000_000_000  # bytes of decoded RGB pixels in flight
BYTES_PER_PIXEL = 3  # decoded images are 8-bit RGB


class PixelBudget:
    """Bytes of decoded pixels that the run's samples may hold at once."""

    def __init__(self, total: int) -> None:
        self.total = max(1, int(total))
        self.used = 0
        self.peak = 0
        self._waiting = 0  # samples inside acquire's slow path (waiting for room, or about to)
        self._cond = asyncio.Condition()  # bound to a loop on first use only

    async def acquire(self, n: int, wait: bool) -> None:
        # room now and nobody waiting: charged at once, without the condition's lock (one event loop thread:
        # nothing runs between the test and the charge, nor between the wait's end and the charge)
        if self._waiting or (wait and self.used and self.used + n > self.total):
            self._waiting += 1
            try:
                async with self._cond:
                    if wait:
                        await self._cond.wait_for(lambda: self.used == 0 or self.used + n <= self.total)
            finally:
                self._waiting -= 1
        self.used += n
        self.peak = max(self.peak, self.used)

    async def release(self, n: int) -> None:
        if n <= 0:
            return
        self.used -= n
        if self._waiting:  # only a waiting sample needs waking
            async with self._cond:
                self._cond.notify_all()


@dataclass
class InputPolicy:
    allow_outside: bool = False
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_pixels: int = DEFAULT_MAX_PIXELS
    budget: PixelBudget | None = None
    #: send a dataset file as it is, keyed by its bytes (:func:`read_image_part`); False in stores before key v3
    file_keys: bool = True
    #: the dataset folders this run resolved (folder -> real path), or None: resolved on every read
    dirs: dict[str, str] | None = None
    #: deadlines of an image read from an http(s) URL (core/remote.py)
    url_read_timeout_s: float = remote.READ_TIMEOUT_S
    url_total_timeout_s: float = remote.TOTAL_TIMEOUT_S


@dataclass
class _Lease:
    held: int = 0


#: the run's input policy in this context (``active_policy.set(...)`` returns the token for ``reset``)
active_policy: ContextVar[InputPolicy] = ContextVar("vlmcheck_input_policy", default=InputPolicy())
_lease: ContextVar[_Lease | None] = ContextVar("vlmcheck_sample_lease", default=None)


class sample_lease:  # noqa: N801 - used as `async with sample_lease():`, as the generator it replaced
    """Everything decoded by :func:`read_image` inside this block is released at its end (a class: cheaper than
    an ``asynccontextmanager`` once per sample)."""

    async def __aenter__(self) -> _Lease:
        self.lease = _Lease()
        self.token = _lease.set(self.lease)
        return self.lease

    async def __aexit__(self, *exc: object) -> None:
        _lease.reset(self.token)
        budget = active_policy.get().budget
        if budget is not None:
            await budget.release(self.lease.held)


async def release_for_batch() -> None:
    """Give back what the current sample holds from the budget while its requests wait in a provider batch: a
    batch forms only from the samples that reach it within its window, so a sample waiting for one (minutes to
    hours) must not keep later samples from being read (its request bodies are in the batch's file by then)."""
    lease = _lease.get()
    budget = active_policy.get().budget
    if lease is not None and budget is not None and lease.held:
        held, lease.held = lease.held, 0
        await budget.release(held)


def confine(path: str | os.PathLike, root: str | os.PathLike | None, allow_outside: bool = False,
            dirs: dict[str, str] | None = None) -> None:
    """A :class:`BadImageError` unless ``path`` resolves inside ``root`` (or no root is given, or outside paths
    are allowed); a URL must lie under its dataset's folder URL (core/remote.py).  ``dirs``: the run's resolved
    folders (:attr:`InputPolicy.dirs`)."""
    if remote.is_url(path) or (root is not None and remote.is_url(root)):
        if root is None or allow_outside or remote.inside(str(path), str(root)):
            return
        raise BadImageError(f"{path}: outside the dataset folder {root}; pass --allow-outside to read it")
    if root is None or allow_outside:
        return
    real_root = _real_dir(os.fspath(root), dirs)
    real = _real_path(os.fspath(path), dirs)  # follows symlinks; never opens the file
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise BadImageError(
            f"{path}: resolves outside the dataset folder {real_root} (to {real}); "
            f"pass --allow-outside to read images outside it")


async def _read_url(path: str | os.PathLike, root: str | os.PathLike | None, policy: InputPolicy) -> bytes:
    """A dataset image at a URL, confined, read on the loop (http) or on threads of its own (other protocols):
    never on the decoding threads, so a slow server fails its own sample and holds no reader others need."""
    confine(path, root, policy.allow_outside, policy.dirs)
    return await remote.read_bytes_async(
        str(path), policy.max_file_bytes, root=None if root is None else str(root),
        allow_outside=policy.allow_outside, read_timeout=policy.url_read_timeout_s,
        total_timeout=policy.url_total_timeout_s)


@functools.lru_cache(maxsize=1024)
def _real_root(root: str, dev: int, ino: int) -> str:
    # one dataset folder for thousands of images: resolved once (a realpath lstats every component), keyed by
    # the folder it is now, so a link re-pointed between two runs of one process is resolved again
    return os.path.realpath(root)


def _real_dir(folder: str, dirs: dict[str, str] | None) -> str:
    """``os.path.realpath(folder)``: once per run where the run keeps ``dirs`` (:attr:`InputPolicy.dirs`), else
    once per folder as it is now (a ``stat``, then :func:`_real_root`)."""
    folder = folder or "."
    real = dirs.get(folder) if dirs is not None else None
    if real is not None:
        return real
    try:
        st = os.stat(folder)
    except OSError:
        return os.path.realpath(folder)  # not cached: read_file_bytes says why in one sentence
    real = _real_root(folder, st.st_dev, st.st_ino)
    if dirs is not None:
        dirs[folder] = real
    return real


def _real_path(path: str, dirs: dict[str, str] | None = None) -> str:
    """``os.path.realpath(path)``, its folder resolved once (:func:`_real_dir`): the file's name is then one
    ``lstat`` instead of one per component of the path."""
    head, tail = os.path.split(path)
    if tail in ("", ".", ".."):
        return os.path.realpath(path)
    full = os.path.join(_real_dir(head, dirs), tail)
    return os.path.realpath(path) if os.path.islink(full) else full


def dataset_path(base: str | os.PathLike, image: str) -> str:
    """An image reference from a manifest, relative to the manifest's folder ``base`` unless absolute (a path
    or a URL)."""
    if remote.is_url(image) or remote.is_url(base):
        return remote.join(str(base), image)
    if os.path is posixpath and isinstance(image, str) and not image.startswith("/"):
        # the common case, a relative path: its folder joined to ``base`` once per folder (Path's parsing was
        # most of the time a manifest of 2,000 rows took to load), then the file's name after it; the same text
        folder, _, name = image.rpartition("/")
        if name not in ("", ".", ".."):
            joined = _joined_folder(os.fspath(base), folder)
            return joined + name if joined.endswith("/") else name if joined == "." else f"{joined}/{name}"
    p = Path(image)
    return str(p if p.is_absolute() else Path(base) / p)


@functools.lru_cache(maxsize=4096)
def _joined_folder(base: str, folder: str) -> str:
    return str(Path(base) / folder)


async def read_image(path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> Image.Image:
    """Load a dataset image under the current :class:`InputPolicy` (see the module docstring)."""
    return await _read(path, root, None)


async def read_image_part(path: str | os.PathLike, *, root: str | os.PathLike | None = None) -> ImagePart:
    """A dataset image as the :class:`ImagePart` a message carries.  A file that can be sent as it is
    (:func:`~vlmcheck.core.probe.probe`) is never decoded: keyed by the hash of its bytes, its data URL charged to
    the budget instead of pixels.  Any other file is decoded as :func:`read_image` does.  A local file up to
    :data:`INLINE_MAX_BYTES` is read on the event loop's thread until such reads are slow; a larger one, a URL,
    and every file after slow reads go to a worker, so the loop's thread never waits on a slow disk."""
    policy = active_policy.get()
    if not policy.file_keys:
        return await _read(path, root, _part)
    label = str(path)

    def read(inline_max: int | None = None, confined: bool = False) -> tuple[bytes, Header, ImagePart | None] | None:
        data, st = fetched, None
        if data is None:  # a local file (a URL was fetched on the loop)
            if not confined:
                confine(path, root, policy.allow_outside, policy.dirs)
            if inline_max is not None:
                with contextlib.suppress(OSError):  # read_file_bytes says why, in one sentence
                    st = os.stat(path)  # read_file_bytes checks this stat, not one of its own
                if st is not None and st.st_size > inline_max:
                    return None  # too large for the loop's thread: read in a worker
            data = read_file_bytes(path, max_bytes=policy.max_file_bytes, st=st)
        header = probe(data, label, max_pixels=policy.max_pixels)
        if not header.sendable:
            return data, header, None
        part = ImagePart.from_file(data, header)
        part.keep_url_only()  # a request in flight holds the image once (its base64), as a plain SDK client does
        return data, header, part

    fetched = await _read_url(path, root, policy) if remote.is_url(path) else None
    got, confined = None, False
    if _inline.ok and fetched is None:
        started = time.perf_counter()
        try:
            got = read(INLINE_MAX_BYTES)
            confined = True  # checked on the loop already: a large file's worker does not resolve it again
        finally:
            _inline.took(time.perf_counter() - started)
    if got is None:
        got = await asyncio.get_running_loop().run_in_executor(_reader_pool(), read, None, confined)
    data, header, part = got
    if part is None:
        return await _read(path, root, _part, (data, (header.width, header.height)))
    await _charge(policy, _lease.get(), len(part.data_url()))  # what the part holds (keep_url_only)
    return part


async def _charge(policy: InputPolicy, lease: _Lease | None, n: int) -> None:
    """Charge ``n`` bytes to the budget for the current sample (its first charge waits for room)."""
    if policy.budget is not None and lease is not None:
        await policy.budget.acquire(n, wait=lease.held == 0)
        lease.held += n


#: A dataset file sent as it is, up to this size, is read, checked and encoded on the event loop's own thread: for
#: a small file the trip to a worker and back costs more CPU (GIL contention) than the work (bench/api_throughput.py).
INLINE_MAX_BYTES = 512 * 1024
#: Inline reads slower than this (a network filesystem, a cold disk), three in a row (one slow read may be the
#: first import or a garbage collection), send every later read to the workers.
INLINE_SLOW_S = 0.005
INLINE_SLOW_RUN = 3


class _Inline:
    ok = True
    slow = 0  # slow inline reads in a row

    def took(self, seconds: float) -> None:
        self.slow = self.slow + 1 if seconds > INLINE_SLOW_S else 0
        self.ok = self.slow < INLINE_SLOW_RUN  # never called again once False


_inline = _Inline()


def _part(img: Image.Image) -> ImagePart:
    # fresh from decode_image: the hash taken at decode is its pixels' hash, no second one (ImagePart.from_pil)
    source = source_file(img)
    part = ImagePart.from_source(source, img.width, img.height) if source is not None else ImagePart.from_pil(img)
    part.data_url()  # made once here and kept, see ImagePart.data_url
    return part


async def _read(path: str | os.PathLike, root: str | os.PathLike | None, then: Callable[[Image.Image], Any] | None,
                read_already: tuple[bytes, tuple[int, int]] | None = None):
    policy = active_policy.get()
    label = str(path)
    lease = _lease.get()
    budgeted = policy.budget is not None and lease is not None

    def read() -> tuple[bytes, tuple[int, int]]:
        # confinement, the read and the header's size in one trip to a worker thread (each trip costs the loop)
        confine(path, root, policy.allow_outside, policy.dirs)
        data = read_file_bytes(path, max_bytes=policy.max_file_bytes)  # a URL was fetched on the loop
        return data, (image_size(data, label) if budgeted and data else (0, 0))

    def decode() -> Any:
        img = decode_image(data, label, max_pixels=policy.max_pixels)
        return img if then is None else then(img)

    loop = asyncio.get_running_loop()
    pool = _reader_pool()
    if read_already is None and remote.is_url(path):
        fetched = await _read_url(path, root, policy)
        read_already = fetched, (image_size(fetched, label) if budgeted and fetched else (0, 0))
    data, (width, height) = read_already or await loop.run_in_executor(pool, read)
    if budgeted:
        if width * height > policy.max_pixels:
            return decode()  # decode_image says why; nothing is decoded, so nothing is charged
        await _charge(policy, lease, width * height * BYTES_PER_PIXEL)
    return await loop.run_in_executor(pool, decode)


@functools.cache
def _reader_pool() -> ThreadPoolExecutor:
    """The threads that read and decode dataset images: one per CPU.  Not asyncio's default executor
    (``cpu_count + 4`` threads): decoding holds the GIL most of the time, so with more decoding threads than cores
    the event loop's thread, which sets the pace of a fast API run, waits for the GIL behind them; fewer starve
    the loop of decoded images (bench/api_throughput.py)."""
    try:
        n = len(os.sched_getaffinity(0))  # the CPUs this process may run on
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return ThreadPoolExecutor(max_workers=max(1, min(32, n)), thread_name_prefix="vlmcheck-io")


if hasattr(os, "register_at_fork"):  # a forked child has none of its parent's threads: a copied pool waits forever
    os.register_at_fork(after_in_child=_reader_pool.cache_clear)

