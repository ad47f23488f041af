"""Corrupted copies of image files (``vlmcheck perturb``): OUT/<corruption>/s<severity>/<relative path>.png."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..core.files import write_bytes_atomic
from ..core.images import BadImageError, encode_image, iter_image_files, load_image
from ..core.progress import track
from .image import CORRUPTIONS, PRESETS, corrupt


@dataclass
class Written:
    written: int = 0
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # unreadable files and why


def corruption_names(names: list[str]) -> list[str]:
    """The corruptions asked for (``all``: every one); ValueError naming the unknown ones."""
    names = sorted(CORRUPTIONS) if names == ["all"] else list(names)
    unknown = [n for n in names if n not in CORRUPTIONS and n not in PRESETS]
    if unknown:
        raise ValueError(f"unknown corruption(s) {unknown}; known: " + ", ".join(sorted(CORRUPTIONS) + sorted(PRESETS)))
    return names


def perturb_files(source: Path, names: list[str], severities: list[int], out: Path, seed: int = 0) -> Written:
    """Write every image of ``source`` (a file or a folder) under every corruption and severity, losslessly;
    each file is written whole or not at all (temp file, then rename)."""
    names = corruption_names(names)
    if any(not 1 <= s <= 5 for s in severities):
        raise ValueError("severities are 1..5")
    files = [source] if source.is_file() else iter_image_files(source)
    base = source.parent if source.is_file() else source
    done = Written()
    for path in track(files, "perturb"):
        rel = path.relative_to(base).with_suffix(".png")
        try:
            img = load_image(path)
        except BadImageError as exc:
            done.skipped.append((path, str(exc)))
            continue
        for name in names:
            for sev in ([1] if name in PRESETS else severities):
                target = out / name / f"s{sev}" / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                write_bytes_atomic(target, encode_image(corrupt(img, name, sev, seed=seed), "PNG"))
                done.written += 1
    return done
