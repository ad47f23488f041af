"""inspect_ai contender of bench/api_throughput.py --peers (run with bench/.venv-inspect's Python).

One sample per image: a user message with the image file (inspect_ai reads and base64-encodes it) and the
prompt, through the ``openai-api`` provider (any OpenAI-compatible server) at ``--concurrency`` connections,
with inspect's response cache on, so a second run of the same command is its rerun.

    python run_inspect.py MANIFEST BASE_URL LOG_DIR CONCURRENCY CACHE_DIR
"""

import json
import os
import sys


def main() -> None:
    manifest, base_url, log_dir, concurrency, cache_dir = sys.argv[1:6]
    os.environ["BENCH_BASE_URL"], os.environ["BENCH_API_KEY"] = base_url, "EMPTY"
    os.environ["INSPECT_CACHE_DIR"] = cache_dir
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageUser, ContentImage, ContentText
    from inspect_ai.scorer import exact
    from inspect_ai.solver import generate

    rows = [json.loads(x) for x in open(manifest) if x.strip()]
    folder = os.path.dirname(os.path.abspath(manifest))
    samples = [Sample(id=r["id"], target="", input=[ChatMessageUser(content=[
        ContentImage(image=os.path.join(folder, r["image"])), ContentText(text=r["prompt"])])]) for r in rows]
    task = Task(dataset=samples, solver=generate(cache=True), scorer=exact())
    logs = eval(task, model="openai-api/bench/fake", log_dir=log_dir, display="none",
                max_connections=int(concurrency), max_samples=int(concurrency), max_tokens=512, temperature=0.0,
                fail_on_error=False, max_retries=0)
    print(json.dumps({"status": logs[0].status, "samples": len(logs[0].samples or [])}))


if __name__ == "__main__":
    main()
