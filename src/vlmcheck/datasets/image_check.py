"""Whether every image a dataset names can be opened as a run opens it (``vlmcheck data inspect``): a file is
read and checked as a run would (:func:`.imagestore.image_problem`); an embedded image was checked from its
bytes as the reader met them."""

from __future__ import annotations

from typing import Iterable

from .imagestore import image_problem


def unopenable(paths: Iterable[str], embedded: dict[str, str | None] | None = None) -> list[tuple[str, str]]:
    """(path, why) of each distinct image that cannot be opened; ``embedded``: the verdicts on embedded ones."""
    from ..core import remote
    from ..core.images import BadImageError, read_file_bytes

    embedded = embedded or {}
    bad: list[tuple[str, str]] = []
    for p in dict.fromkeys(paths):
        if p in embedded:
            why = embedded[p]
        elif remote.is_url(p):
            continue  # a URL is fetched by the run, not here (data inspect never goes on the network)
        else:
            try:
                why = image_problem(read_file_bytes(p), p)
            except BadImageError as exc:
                why = str(exc)
        if why:
            bad.append((p, why))
    return bad
