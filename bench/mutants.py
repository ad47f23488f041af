"""Does the suite catch a wrong headline number?  Hand-written mutants of the headline formulas (issue 50 item 4).

Each mutant is one textual change to one formula (the paper's definition turned into a plausible slip: ECE
where 1 - ECE is meant, unparseable verdicts in CAST's denominator, unweighted GC@T ...).  For each, a copy of
``src/`` gets the change and the method's tests run against it (``-m "not slow"`` with ``--all`` left out: the
fast lane must catch it); a mutant is killed when a test fails.

    python bench/mutants.py [--all] [-k NAME]

Prints one line per mutant and the figure "killed K of N".  Exit 1 when a mutant survives.  A mutant whose text
is no longer in its file is reported as stale (the formula moved: update the list).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the tests most likely to catch each formula first: pytest -x stops at the first failure
CHEF = ["tests/test_oracles.py", "tests/test_chef.py", "tests/test_chef_folded.py", "tests/test_folded_summaries.py"]
CAST = ["tests/test_cast.py", "tests/test_folded_summaries.py", "tests/test_oracles.py"]
GEN = ["tests/test_genception.py", "tests/test_oracles.py"]
VHX = ["tests/test_folded_summaries.py", "tests/test_vhexpansion.py", "tests/test_oracles.py"]
DESCRIBE = ["tests/test_demo_describe.py", "tests/test_outputs_stream.py", "tests/test_oracles.py"]

#: (name, file under src/vlmcheck, the formula's text, the mutant's text, the tests that should catch it)
MUTANTS = [
    ("chef calibration overall = ECE (summary)", "methods/chef/summary.py",
     'overall=1 - cal["ece"]', 'overall=cal["ece"]', CHEF),
    ("chef calibration overall = ECE (recipe aggregate)", "methods/chef/aggregate.py",
     'out["overall"] = 1 - avg["ece"]', 'out["overall"] = avg["ece"]', CHEF),
    ("chef calibration headline interval on ECE", "methods/chef/headline.py",
     "return 1 - M.ece_equal_count(", "return M.ece_equal_count(", CHEF),
    ("chef ECE bins unweighted", "methods/chef/metrics.py",
     'sum(b["n"] * abs(b["confidence"] - b["accuracy"]) / n for b in bins)',
     'sum(abs(b["confidence"] - b["accuracy"]) / len(bins) for b in bins)', CHEF),
    ("chef RIAM sign flipped", "methods/chef/metrics.py",
     "(acc_icl_mean - acc_0shot) / (acc_0shot - acc_random)", "(acc_0shot - acc_icl_mean) / (acc_0shot - acc_random)",
     CHEF),
    ("chef RRM without the random baseline", "methods/chef/metrics.py",
     "(acc_corrupted - acc_random) / (acc_original - acc_random) * 100", "acc_corrupted / acc_original * 100", CHEF),
    ("chef POPE F1 as the arithmetic mean", "methods/chef/metrics.py",
     "f1 = 2 * precision * recall / (precision + recall)", "f1 = (precision + recall) / 2", CHEF),
    ("CAST unparseable verdicts in the denominator", "methods/cast_scores.py",
     "np.divide(c[..., 0], c[..., 1], out=np.full(c.shape[:-1], np.nan), where=c[..., 1] > 0)",
     "np.divide(c[..., 0], c[..., 2], out=np.full(c.shape[:-1], np.nan), where=c[..., 2] > 0)", CAST),
    ("CAST best format instead of the format mean", "methods/cast_scores.py",
     "return np.nanmean(per, axis=0)", "return np.nanmax(per, axis=0)", CAST),
    ("GenCeption GC@T unweighted", "metrics/stats.py",
     "w = np.arange(1, t + 1, dtype=float)", "w = np.ones(t, dtype=float)", GEN),
    ("VHExpansion symmetric accuracy with 'or'", "methods/vhx_summary.py",
     'self.sym.add(unit, float(bool(v["correct"] and v["neg_correct"])))',
     'self.sym.add(unit, float(bool(v["correct"] or v["neg_correct"])))', VHX),
    ("chef POPE yes ratio from the ground truth", "methods/chef/metrics.py",
     '"yes_ratio": float(p.mean()) if p.size', '"yes_ratio": float(t.mean()) if t.size', CHEF),
    ("VHExpansion yes ratio from the ground truth", "methods/vhx_summary.py",
     'self.yes += v["parsed"] == "yes"', 'self.yes += (v["parsed"] == "yes") == bool(v["correct"])', VHX),
    ("MMVP pair accuracy as any question right", "methods/vhx_summary.py",
     "whole = [right == n for n, right in self.pairs.values() if n >= 2]",
     "whole = [right > 0 for n, right in self.pairs.values() if n >= 2]", VHX),
    ("MMVP pair accuracy over pairs with one question left", "methods/vhx_summary.py",
     "whole = [right == n for n, right in self.pairs.values() if n >= 2]",
     "whole = [right == n for n, right in self.pairs.values() if n >= 1]", VHX),
    ("describe keyword recall over one keyword more", "methods/describe.py",
     "return hits / len(keywords) if keywords", "return hits / (len(keywords) + 1) if keywords", DESCRIBE),
]


def run_mutant(name: str, rel: str, old: str, new: str, tests: list[str], all_tests: bool) -> str:
    with tempfile.TemporaryDirectory(prefix="vlmcheck-mutant-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__"))
        path = src / "vlmcheck" / rel
        text = path.read_text(encoding="utf-8")
        if text.count(old) != 1:
            return "stale"
        path.write_text(text.replace(old, new), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(src)}
        # no CPU budget: a test that fails for using too much CPU on a loaded machine has not caught the mutant
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--cpu-budget", "0",
               *[t for t in tests if (ROOT / t).exists()]]
        if not all_tests:
            cmd += ["-m", "not slow"]
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if p.returncode == 1:
            return "killed"
        return "survived" if p.returncode == 0 else f"error (pytest exit {p.returncode})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="run the slow tests too")
    ap.add_argument("-k", default="", help="only the mutants whose name contains this")
    args = ap.parse_args()
    chosen = [m for m in MUTANTS if args.k.lower() in m[0].lower()]
    killed = 0
    for name, rel, old, new, tests in chosen:
        start = time.monotonic()
        verdict = run_mutant(name, rel, old, new, tests, args.all)
        killed += verdict == "killed"
        print(f"{verdict:9s} {time.monotonic() - start:6.0f} s  {name}", flush=True)
    print(f"killed {killed} of {len(chosen)} mutants of the headline formulas")
    return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
