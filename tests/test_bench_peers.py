"""bench/api_throughput.py (``make bench-peers``): a contender that fails, measures nothing or exits 0 without
results stops the bench with one sentence, never a NaN figure (issue 51, item 6). Fake peer commands, no venvs."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "api_throughput.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("api_throughput_under_test", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _log(tmp_path, n):
    log = tmp_path / "server.jsonl"
    log.write_text("".join(json.dumps({"path": "/v1/models", "t": 0.0}) + "\n" for _ in range(n)))
    return log


def _one_sentence(msg: str) -> None:
    assert msg.startswith("bench failed: ") and msg.endswith(".") and "\n" not in msg and "nan" not in msg.lower()


def test_peer_that_exits_0_without_calls_fails_the_bench(bench, tmp_path):
    # lmms-eval 0.7.3 with filelock 4: crashes on filelock._api, prints a traceback, exits 0, asks nothing
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", "import sys; print('ModuleNotFoundError: filelock._api', file=sys.stderr)"]
    with pytest.raises(SystemExit) as e:
        bench.measure_run("lmms-eval", cmd, _log(tmp_path, 1), 0.05, None, 10, out)
    msg = str(e.value.code)
    _one_sentence(msg)
    assert "lmms-eval" in msg and "0 of 10 answers" in msg


def test_peer_that_exits_nonzero_fails_with_its_last_stderr_line(bench, tmp_path):
    cmd = [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); print('last words', file=sys.stderr); "
           "sys.exit(3)"]
    with pytest.raises(SystemExit) as e:
        bench.measure_run("inspect_ai", cmd, _log(tmp_path, 0), 0.05, None, 10, tmp_path / "out")
    msg = str(e.value.code)
    _one_sentence(msg)
    assert "inspect_ai" in msg and "status 3" in msg and "last words" in msg


def test_peer_that_cannot_start_fails_the_bench(bench, tmp_path):
    with pytest.raises(SystemExit) as e:
        bench.measure_run("lmms-eval", [str(tmp_path / "no-venv" / "bin" / "python")], _log(tmp_path, 0), 0.05,
                          None, 10, tmp_path / "out")
    msg = str(e.value.code)
    _one_sentence(msg)
    assert "lmms-eval could not be started" in msg


def _calls(log: Path, n: int) -> str:
    """a child that appends ``n`` chat-completion lines to the fake server's log, as a real client's calls would"""
    return (f"import json; f = open({str(log)!r}, 'a'); "
            f"[f.write(json.dumps({{'path': '/v1/chat/completions', 't': float(i)}}) + '\\n') for i in range({n})]")


def test_peer_that_calls_but_writes_no_results_fails_the_bench(bench, tmp_path):
    log = _log(tmp_path, 0)
    with pytest.raises(SystemExit) as e:
        bench.measure_run("lmms-eval", [sys.executable, "-c", _calls(log, 10)], log, 0.05, None, 10,
                          tmp_path / "out")
    msg = str(e.value.code)
    _one_sentence(msg)
    assert "wrote no results" in msg


def test_peer_that_calls_and_writes_results_is_measured(bench, tmp_path):
    log = _log(tmp_path, 0)
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", _calls(log, 10) + f"; import pathlib; p = pathlib.Path({str(out)!r}) / 'results'; "
           "p.mkdir(parents=True); (p / 'r.json').write_text('{}')"]
    row = bench.measure_run("lmms-eval", cmd, log, 0.05, None, 10, out)
    assert row["requests"] == 10
    assert row["api_phase"] == pytest.approx(9 + 0.05)  # first call at t=0, last at t=9, plus the latency


def test_vlmcheck_contender_is_the_default_command(bench, tmp_path):
    # issue 51: the figures are those of the command a user types; no flag the user does not pass
    from vlmcheck.run.runner import RunOptions

    default = RunOptions().max_concurrency
    assert bench.default_concurrency() == default
    cmd = bench._vlmcheck_command("http://127.0.0.1:1/v1", tmp_path / "m.jsonl", tmp_path / "out", default, True)
    assert cmd[1:] == ["describe", "--vlm", "openai:fake@http://127.0.0.1:1/v1", "--data", str(tmp_path / "m.jsonl"),
                       "--out", str(tmp_path / "out")]
    other = bench._vlmcheck_command("http://127.0.0.1:1/v1", tmp_path / "m.jsonl", tmp_path / "out", default * 4,
                                    False)
    assert other[-3:] == ["--max-concurrency", str(default * 4), "--no-report"]
