"""Our image corruptions against the `imagecorruptions` package (ImageNet-C reference code, 2020).

For every corruption of that package, on the same 20 images (224x224 crops of scikit-image's photos) and all five
severities:

* median time ratio ours / theirs per corruption (goal <= 1.0);
* mean PSNR against the clean image per severity, side by side (goal: within
  1.5 dB of theirs).

Needs `pip install imagecorruptions --no-deps "setuptools<81"` (the package
imports pkg_resources).  Run: `python bench/corruptions.py [NAME ...]`.

The package's last release (2020) predates NumPy 2 and scikit-image 0.19+:
glass_blur and gaussian_blur call ``gaussian(..., multichannel=True)`` and fog
uses ``np.float_``.  :func:`_run_reference_as_written` restores those two names
for the duration of the bench, so the reference code itself runs unchanged.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings

import numpy as np
from PIL import Image

warnings.simplefilter("ignore")


def images(n: int = 20, size: int = 224) -> list[np.ndarray]:
    from skimage import data

    names = ["astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "immunohistochemistry", "motorcycle_left",
             "retina", "colorwheel", "logo", "camera", "cat"]
    out = []
    for name in names:
        try:
            arr = getattr(data, name)()
        except Exception:  # noqa: BLE001 - a missing bundled photo is skipped
            continue
        if arr.ndim == 2:
            arr = np.stack([arr] * 3, -1)
        arr = arr[..., :3]
        h, w = arr.shape[:2]
        s = min(h, w)
        for flip in (False, True):
            crop = arr[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s]
            img = Image.fromarray(crop.astype(np.uint8)).resize((size, size), Image.BICUBIC)
            if flip:
                img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            out.append(np.asarray(img))
    return out[:n]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(((a.astype(np.float64) - b.astype(np.float64)) ** 2).mean())
    return 10 * np.log10(255.0 ** 2 / max(mse, 1e-10))


def _run_reference_as_written() -> None:
    """Give the 2020 reference code the two APIs it was written against (see the module doc)."""
    import imagecorruptions.corruptions as ref

    if not hasattr(np, "float_"):
        np.float_ = np.float64
    original = ref.gaussian

    def gaussian(image, sigma=1, multichannel=None, **kw):
        if multichannel:
            kw["channel_axis"] = -1
        return original(image, sigma=sigma, **kw)

    ref.gaussian = gaussian


def main() -> int:
    try:
        from imagecorruptions import corrupt as theirs, get_corruption_names
    except ImportError as exc:
        print(f"imagecorruptions is not importable ({exc}); install it with "
              "pip install imagecorruptions --no-deps 'setuptools<81'")
        return 2
    _run_reference_as_written()
    from vlmcheck.perturb.image import corrupt as ours

    imgs = images()
    print(f"{len(imgs)} images, 224x224, severities 1-5")
    print(f"{'corruption':<18} {'time ratio':>10}   PSNR ours / theirs (dB) per severity          max |diff|")
    worst_ratio, worst_gap, broken = 0.0, 0.0, []
    only = set(sys.argv[1:])  # optional: names of the corruptions to run
    for name in get_corruption_names("all"):
        if only and name not in only:
            continue
        try:
            theirs(imgs[0], corruption_name=name, severity=1)
        except Exception as exc:  # noqa: BLE001
            broken.append(f"{name} ({type(exc).__name__})")
            continue
        ratios, p_ours, p_theirs = [], [[] for _ in range(5)], [[] for _ in range(5)]
        for i, arr in enumerate(imgs):
            pil = Image.fromarray(arr)
            for s in range(1, 6):
                np.random.seed(i * 10 + s)
                t0 = time.perf_counter()
                b = np.asarray(theirs(arr, corruption_name=name, severity=s))
                t1 = time.perf_counter()
                a = np.asarray(ours(pil, name, s, seed=i))
                t2 = time.perf_counter()
                ratios.append((t2 - t1) / max(t1 - t0, 1e-9))
                p_ours[s - 1].append(psnr(a, arr))
                p_theirs[s - 1].append(psnr(np.clip(b, 0, 255).astype(np.uint8), arr))
        ratio = statistics.median(ratios)
        mo = [float(np.mean(v)) for v in p_ours]
        mt = [float(np.mean(v)) for v in p_theirs]
        gap = max(abs(x - y) for x, y in zip(mo, mt))
        worst_ratio, worst_gap = max(worst_ratio, ratio), max(worst_gap, gap)
        cells = "  ".join(f"{x:4.1f}/{y:4.1f}" for x, y in zip(mo, mt))
        flag = "" if ratio <= 1.0 and gap <= 1.5 else "  <-- misses a goal"
        print(f"{name:<18} {ratio:10.2f}   {cells}   {gap:4.2f}{flag}")
    print(f"not run by imagecorruptions even with the shim: {', '.join(broken) or 'none'}")
    print(f"worst median time ratio {worst_ratio:.2f} (goal <= 1.0); worst PSNR gap {worst_gap:.2f} dB (goal <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
