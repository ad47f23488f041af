"""SIGTERM (SLURM's cancel and time limit) and SIGHUP (a closed terminal) end a run as Ctrl-C does: one sentence
naming the command that goes on, exit 128 + the signal, the finished samples kept; also where SIGINT is ignored
(a job started in the background by a non-interactive shell)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import FakeServer, distinct_images


@pytest.mark.slow  # a CLI process against a fake server with 1 s answers
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_say_what_is_kept_and_how_to_go_on(tmp_path, sig):
    """Before: exit 143 (SIGTERM) or 129 (SIGHUP) and nothing said after the last progress line."""
    server = FakeServer(1.0, tmp_path)
    try:
        data = distinct_images(tmp_path / "imgs", 24)
        out = tmp_path / "run"
        args = ["describe", "--vlm", f"openai:m@{server.base_url}", "--data", str(data), "--out", str(out),
                "--max-concurrency", "2"]
        proc = subprocess.Popen([sys.executable, "-m", "vlmcheck.cli", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "500"},
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        deadline = time.monotonic() + 120
        while not any(r.get("path", "").endswith("/chat/completions") for r in server.requests()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(1.5)  # the first answers (1 s each) are in; most of the 24 are not
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, err[-1500:]
        last = [line for line in err.splitlines() if line.strip()][-1]
        assert last == (f"error: stopped by {signal.Signals(sig).name}; the samples that finished are kept: "
                        f"`vlmcheck resume {out}` goes on from there"), err[-1500:]
        assert "Traceback" not in err
        again = subprocess.run([sys.executable, "-m", "vlmcheck.cli", "resume", str(out)], capture_output=True,
                               text=True, timeout=300)
        assert again.returncode == 0, again.stderr[-1500:]
        counts = json.loads((out / "results.json").read_text())["counts"]
        assert counts["done"] == 24 and counts["failed"] == 0
    finally:
        server.stop()
