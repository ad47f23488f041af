"""Cost of one adversarial attack step against the floor: a bare forward + backward.

On a small randomly initialised LLaVA built from a config (CLIP vision tower
+ projector), for a batch of images, we time

* the floor: ``vision_embedding(x + delta)`` -> cosine -> gradient for delta only, in plain PyTorch;
* our I-FGSM and PGD steps (the same plus sign/projection/clamping and bookkeeping),

and print the ratio per step (goal <= 1.15).  Run: `python bench/attack.py`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def build(folder: Path) -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from hf_tiny import build_tiny_llava

    return build_tiny_llava(folder, image_size=96, patch_size=16,
                            vision={"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 4,
                                    "num_attention_heads": 4, "projection_dim": 128},
                            text={"hidden_size": 64, "intermediate_size": 128, "max_position_embeddings": 2048})


def main() -> int:
    import torch
    import torch.nn.functional as F
    from PIL import Image

    from vlmcheck.core.spec import load_model
    from vlmcheck.perturb.adversarial import AttackConfig, attack

    torch.set_num_threads(2)
    folder = build(Path(tempfile.mkdtemp()) / "llava")
    model = load_model(f"hf:{folder}", "vlm")
    rng = np.random.default_rng(0)
    batch = 8
    imgs = [Image.fromarray(rng.integers(0, 256, (96, 96, 3), dtype=np.uint8)) for _ in range(batch)]
    x = torch.from_numpy(np.stack([np.asarray(i) for i in imgs])).permute(0, 3, 1, 2).float() / 255
    steps = 30

    with torch.no_grad():
        e0 = model.vision_embedding(x)
    delta = torch.zeros_like(x)

    def floor_step():
        d = delta.clone().requires_grad_(True)
        cos = F.cosine_similarity(e0.flatten(1), model.vision_embedding(x + d).flatten(1), dim=1)
        torch.autograd.grad(cos.sum(), d)  # gradient for the input only: the least any attack step must do

    for _ in range(3):
        floor_step()
    t0 = time.perf_counter()
    for _ in range(steps):
        floor_step()
    floor = (time.perf_counter() - t0) / steps
    print(f"model: LLaVA, CLIP 4x128 @96px + projector; batch {batch}; {steps} steps")
    print(f"floor (forward + backward): {1000 * floor:.1f} ms/step")
    worst = 0.0
    for method in ("ifgsm", "pgd"):
        attack(model, imgs, [False] * batch, AttackConfig(method=method, steps_clean=3))  # warm up
        t0 = time.perf_counter()
        attack(model, imgs, [False] * batch, AttackConfig(method=method, steps_clean=steps))
        per = (time.perf_counter() - t0) / steps  # everything included: resizing, 3 extra forwards, saving
        ratio = per / floor
        worst = max(worst, ratio)
        print(f"{method}: {1000 * per:.1f} ms/step, ratio to floor {ratio:.2f} (goal <= 1.15)")
    print(f"worst ratio {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
