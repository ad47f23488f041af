"""``human:PATH``: human-written descriptions served as a describer (GenCeption's human baseline; docs/methods.md).

PATH is a CSV (columns ``image``, ``text``) or JSONL file, image paths relative to it; images are matched by pixel
hash, so the run's dataset may live anywhere.  An image the humans did not describe is an error for its chain.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ..core.errors import ModelCallError
from ..core.files import JsonlRecords
from ..core.images import image_hash, load_image
from ..core.messages import Message
from ..core.roles import Capabilities, Generation, GenerationConfig, Usage
from ..core.spec import ModelSpec, SpecError


class HumanDescriptions:
    def __init__(self, spec: ModelSpec) -> None:
        path = Path(spec.name)
        if not path.is_file():
            raise SpecError(f"human:{spec.name}: no such file")
        # an absolute image path stays as it is under the file's folder
        self.by_hash = {image_hash(load_image(path.parent / row["image"])): row["text"] for row in self._read(path)}
        self.model_id = spec.canonical()
        self.capabilities = Capabilities(multi_image=False, seeded=True)
        self.concurrency_key = self.model_id
        self.max_concurrency = 8

    @staticmethod
    def _read(path: Path) -> list[dict[str, str]]:
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            rows = list(JsonlRecords(path))
        else:
            with path.open(newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
        for i, row in enumerate(rows, 1):
            if not isinstance(row.get("image"), str) or not isinstance(row.get("text"), str):
                raise SpecError(f"{path}: row {i} needs 'image' and 'text'")
        return rows

    async def generate(self, messages: list[Message], config: GenerationConfig) -> Generation:
        images = [im for m in messages for im in m.images]
        text = self.by_hash.get(images[-1].pixel_sha256()) if images else None
        if text is None:
            raise ModelCallError("unsupported", "no human description for this image (humans describe only the "
                                                "seed images they were given: use -T 1 and the same --per-category "
                                                "draw)")
        return Generation(text=text, finish_reason="stop", usage=Usage(output_tokens=len(text.split())))
