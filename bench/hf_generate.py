"""vlmcheck's `hf:` path against a bare batched `generate` loop at the same batch size (issue 51 goal 4: >= 0.97).

A small LLaVA of random weights (CLIP vision tower, Llama text model, a word-level tokenizer: the tests'
``tests/hf_tiny.py`` recipe at a size where generation, not Python, is most of the time) is built from configs
and saved to a temporary folder; no download.  N distinct photos on disk (``bench/api_throughput.py``'s crops).
Contenders, each in its own process, interleaved over ``--rounds`` rounds (medians):

* ``vlmcheck``: the command a user types, ``vlmcheck describe --vlm hf:DIR?device=cpu&batch_size=B --data
  MANIFEST --out OUT --max-tokens T`` (default concurrency, report and all);
* ``bare loop``: ``AutoProcessor`` + ``AutoModelForImageTextToText.from_pretrained``, then for each batch of B
  rows in order: open the images, the chat template, the processor, ``model.generate`` (greedy, T new tokens),
  decode; the answers written to a JSONL file.  The floor of any batched runner.

Both load the same checkpoint and import torch and transformers; each process's wall time from start to exit
(the fixed costs before the first batch and after the last included), torch on ``--threads`` threads in both.
Printed: the medians, speed = bare wall / vlmcheck wall (goal >= 0.97), how many answers agree (greedy: the
same text unless a batch's padding differs), and the load average.

    python bench/hf_generate.py [--n 64] [--batch-size 8] [--max-tokens 48] [--rounds 5] [--threads 1] [--quick]
                                [--before SRC]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
PROMPT = "describe this image"


def build_model(folder: Path) -> Path:
    """A LLaVA of random weights, big enough that a batch's generation takes a while on a CPU core."""
    sys.path.insert(0, str(BENCH.parent / "tests"))
    from hf_tiny import build_tiny_llava

    return build_tiny_llava(folder, image_size=112, patch_size=14,
                            vision={"hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4,
                                    "projection_dim": 128},
                            text={"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
                                  "num_attention_heads": 4, "num_key_value_heads": 4,
                                  "max_position_embeddings": 512})


def bare_loop(model_dir: str, manifest: Path, out: Path, batch_size: int, max_tokens: int) -> None:
    """What a hand-written batched runner does: batches of ``batch_size`` rows in order, one after another."""
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32).eval()
    tok = processor.tokenizer
    tok.padding_side = "left"
    rows = [json.loads(x) for x in manifest.read_text().splitlines() if x.strip()]
    conv = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPT}]}]
    text = processor.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
    with out.open("w") as f, torch.inference_mode():
        for i in range(0, len(rows), batch_size):
            batch = rows[i:i + batch_size]
            images = [Image.open(manifest.parent / r["image"]).convert("RGB") for r in batch]
            inputs = processor(text=[text] * len(batch), images=images, return_tensors="pt", padding=True)
            gen = model.generate(**inputs, max_new_tokens=max_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
            for r, row in zip(batch, gen[:, inputs["input_ids"].shape[1]:]):
                f.write(json.dumps({"id": r["id"], "answer": tok.decode(row, skip_special_tokens=True).strip()}) + "\n")


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """Wall time and CPU (user + system, from wait4) of ``cmd``."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code:
            err.seek(0)
            last = (err.read().decode(errors="replace").strip().splitlines() or ["no output on stderr"])[-1]
            raise SystemExit(f"bench failed: {' '.join(cmd[:3])} exited with status {code} ({last}).")
    return wall, usage.ru_utime + usage.ru_stime


def answers(path: Path) -> dict[str, str]:
    return {r["id"]: r["answer"] for r in map(json.loads, path.read_text().splitlines())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", choices=["bare"])
    ap.add_argument("--model")
    ap.add_argument("--manifest")
    ap.add_argument("--out")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of both contenders (0: torch's default)")
    ap.add_argument("--quick", action="store_true", help="N = 32, 3 rounds")
    ap.add_argument("--before", metavar="SRC", help="also run another checkout's src/ folder as 'vlmcheck before'")
    ap.add_argument("--goal", type=float, default=0.97)
    args = ap.parse_args()
    if args.worker:
        bare_loop(args.model, Path(args.manifest), Path(args.out), args.batch_size, args.max_tokens)
        return 0
    if args.quick:
        args.n, args.rounds = min(args.n, 32), 3
    tmp = Path(tempfile.mkdtemp(prefix="vlmcheck-hfgen-"))
    try:
        model = build_model(tmp / "model")
        subprocess.run([sys.executable, str(BENCH / "api_throughput.py"), "--worker", "images", "--folder",
                        str(tmp / "imgs"), "--n", str(args.n), "--size", "256"], check=True)
        manifest = tmp / "manifest.jsonl"
        rows = [json.loads(x) for x in manifest.read_text().splitlines() if x.strip()]
        manifest.write_text("".join(json.dumps(dict(r, prompt=PROMPT)) + "\n" for r in rows))
        # torch's threads: one by default, for both (on a shared machine two OpenMP threads that spin-wait for each
        # other make a batch 20x slower, which would measure the machine); --threads 0 leaves torch's default
        env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                   **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {}))
        src = {"vlmcheck": str(BENCH.parent / "src"), **({"vlmcheck before": str(Path(args.before).resolve())}
                                                       if args.before else {})}
        cli = "import sys; from vlmcheck.cli import main; sys.argv[0] = 'vlmcheck'; main()"

        def command(name: str, out: Path) -> tuple[list[str], dict]:
            if name == "bare loop":
                return ([sys.executable, __file__, "--worker", "bare", "--model", str(model), "--manifest",
                         str(manifest), "--out", str(out), "--batch-size", str(args.batch_size), "--max-tokens",
                              str(args.max_tokens)], env)
            return ([sys.executable, "-c", cli, "describe", "--vlm",
                     f"hf:{model}?device=cpu&batch_size={args.batch_size}", "--data", str(manifest), "--out",
                     str(out), "--max-tokens", str(args.max_tokens)],  # progress lines on, as by default
                    dict(env, PYTHONPATH=src[name]))

        names = ["bare loop", *src]
        walls: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.rounds):
            for name in names:
                out = tmp / f"{name.replace(' ', '-')}-{r}"
                wall, cpu = timed(*command(name, out))
                walls[name].append(wall)
                cpus[name].append(cpu)
        bare = answers(tmp / "bare-loop-0")
        mine = {r["sample_id"]: r["result"]["answer"] for r in map(json.loads, (tmp / "vlmcheck-0" / "samples.jsonl")
                .read_text().splitlines()) if r.get("result")}
    finally:
        load = os.getloadavg()
        keep = os.environ.get("BENCH_KEEP")
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    med = {n: statistics.median(w) for n, w in walls.items()}
    print(f"N = {args.n} photos, batch size {args.batch_size}, {args.max_tokens} new tokens (greedy), "
          f"{args.rounds} interleaved rounds (medians); load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"on {os.cpu_count()} CPUs")
    for name in names:
        print(f"  {name:16} wall {med[name]:7.2f} s   ({', '.join(f'{w:.2f}' for w in walls[name])})   CPU "
              f"{statistics.median(cpus[name]):7.2f} s")
    same = sum(mine.get(k) == v for k, v in bare.items())
    print(f"  answers identical to the bare loop's: {same} of {len(bare)} (vlmcheck answered {len(mine)})")
    if args.before:
        print(f"  vlmcheck before: speed {med['bare loop'] / med['vlmcheck before']:.3f} of the bare loop")
    speed = med["bare loop"] / med["vlmcheck"]
    met = speed >= args.goal
    print(f"goal: vlmcheck hf: speed / bare batched generate loop's {speed:.3f} (>= {args.goal}): "
          f"{'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
