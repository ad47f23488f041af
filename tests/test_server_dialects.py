"""Issue 47 items 2-7 against the fake server taught what real servers do (``--dialect transformers``,
``--no-usage``, ``--sampling``): every warning and summary here fails without the code that makes it."""

from __future__ import annotations

import json
import os

import pytest

from conftest import FakeServer, distinct_images, run_cli
from vlmcheck.models._http_errors import body_message, status_error, unknown_fields_sentence


# ------------------------------------------------------------------ unit: the dialect sentences

def test_fastapi_detail_is_the_servers_message():
    assert body_message({"detail": "Unexpected fields in the request: {'prompt_logprobs'}"}) == \
        "Unexpected fields in the request: {'prompt_logprobs'}"
    listed = {"detail": [{"loc": ["body", "prompt_logprobs"], "msg": "Extra inputs are not permitted",
                          "type": "extra_forbidden"}]}
    assert body_message(listed) == "prompt_logprobs: Extra inputs are not permitted"
    assert body_message({"error": {"message": "plain"}}) == "plain"


@pytest.mark.parametrize("status,message,option", [
    (422, "Unexpected fields in the request: {'prompt_logprobs', 'continue_final_message'}", "?prompt_logprobs=1"),
    (400, "Unrecognized request argument supplied: max_completion_tokens", "?max_tokens_param=max_tokens"),
    (400, "prompt_logprobs: Extra inputs are not permitted", "?prompt_logprobs=1"),
    (422, "Unexpected fields in the request: {'chat_template_kwargs'}", "?enable_thinking="),
])
def test_an_unknown_field_names_the_option_that_sent_it(status, message, option):
    sentence = unknown_fields_sentence(status, message)
    assert sentence is not None and option in sentence and "\n" not in sentence
    err = status_error(status, {}, message)
    assert option in str(err) and err.kind == "bad_request" and err.status == status
    # "logprobs" inside "prompt_logprobs" is not a field of its own
    assert "'logprobs'" not in (unknown_fields_sentence(422, "Unexpected fields in the request: "
                                                             "{'prompt_logprobs'}") or "")


def test_other_errors_keep_their_own_words():
    assert unknown_fields_sentence(400, "injected bad request") is None
    assert unknown_fields_sentence(401, "unknown field api_key") is None
    assert unknown_fields_sentence(500, "Unexpected fields in the request: {'seed'}") is None
    assert str(status_error(400, {}, "Server is pinned to 'a'; requested 'b'.")).endswith("requested 'b'.")


# ------------------------------------------------------------------ the CLI against the fake server

def _cli(*args, cwd, check=None):
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    out = run_cli(*args, cwd=cwd, env=env)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    if check is not None:
        assert out.returncode == check, out.stderr[-3000:]
    return out


@pytest.fixture
def server(tmp_path, request):
    extra = getattr(request, "param", ())
    s = FakeServer(0.0, tmp_path, *extra)
    yield s
    s.stop()


def _cases(tmp_path, n=3):
    folder = distinct_images(tmp_path / "cases", n)
    with open(folder / "cases.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"image": f"img{i}.png", "question": "Is there a cat?",
                                "answer": "yes" if i % 2 else "no"}) + "\n")
    return folder / "cases.jsonl"


@pytest.mark.slow
def test_vhx_unread_share_is_shown_and_warned_and_tables_go_to_stdout(server, tmp_path):
    """The fake server answers "Answer <digest>": no yes/no word, so every answer is unread (and scored yes)."""
    out = tmp_path / "vhx"
    run = _cli("vhx", "run", "--vlm", f"openai:m@{server.base_url}", "--cases", _cases(tmp_path), "--out", out,
               "--perturb", "", "--negator", "", "--no-progress", cwd=tmp_path, check=0)
    v = json.loads((out / "results.json").read_text())["metrics"]["variants"]["original"]
    assert v["unread"] == 3 and v["n_answers"] == 3 and v["unread_share"] == 1.0
    assert v["yes_ratio"] == 1.0  # POPE's rule still scores them, as the paper defines
    assert "held no yes/no word" in run.stderr and "3 of 3 answers" in run.stderr
    # the table on stdout (with the unread column), progress and warnings on stderr
    assert "unread" in run.stdout and "original" in run.stdout and "┏" not in run.stderr
    assert "done 3/3" in run.stderr and "done" not in run.stdout
    as_json = _cli("vhx", "run", "--vlm", f"openai:m@{server.base_url}", "--cases", tmp_path / "cases" / "cases.jsonl",
                   "--out", tmp_path / "vhx2", "--perturb", "", "--negator", "", "--no-progress", "--json",
                   cwd=tmp_path, check=0)
    printed = json.loads(as_json.stdout)
    assert printed["metrics"]["variants"]["original"]["unread_share"] == 1.0 and printed["folder"]


@pytest.mark.slow
@pytest.mark.parametrize("server", [(), ("--sampling",)], indirect=True, ids=["ignores", "samples"])
def test_an_ignored_temperature_is_measured_and_said(server, tmp_path, request):
    out = tmp_path / "vhx"
    run = _cli("vhx", "run", "--vlm", f"openai:m@{server.base_url}", "--cases", _cases(tmp_path), "--out", out,
               "--perturb", "", "--negator", "", "--no-progress", "--repeats", "2", "--temperature", "0.7",
               cwd=tmp_path, check=0)
    checks = json.loads((out / "results.json").read_text())["server_checks"]
    ignores = "samples" not in request.node.callspec.id
    assert checks["sampling"]["requests_compared"] == 3
    assert checks["sampling"]["identical_across_seeds"] == (3 if ignores else 0)
    assert checks["sampling"].get("ignored", False) is ignores
    assert ("ignore the temperature" in run.stderr) is ignores


@pytest.mark.slow
@pytest.mark.parametrize("server", [("--no-usage",)], indirect=True)
def test_a_server_without_usage_is_said(server, tmp_path, image_folder):
    out = tmp_path / "d"
    run = _cli("describe", "--vlm", f"openai:m@{server.base_url}", "--data", image_folder, "--out", out,
               "--limit", "2", "--no-progress", cwd=tmp_path, check=0)
    checks = json.loads((out / "results.json").read_text())["server_checks"]
    assert checks["usage"] == {"calls": 2, "without_usage": 2}
    assert "reported token usage" in run.stderr
    # a resume that makes no call keeps what the calls behind its answers showed (kept in the store)
    again = _cli("describe", "--vlm", f"openai:m@{server.base_url}", "--data", image_folder, "--out", out,
                 "--limit", "2", "--no-progress", "--resume", cwd=tmp_path, check=0)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "results.json").read_text())["server_checks"] == checks


@pytest.mark.slow
def test_failure_kinds_with_counts_and_a_redacted_example(server, tmp_path, image_folder):
    out = tmp_path / "d"
    run = _cli("describe", "--vlm", f"openai:m@{server.base_url}", "--data", image_folder, "--out", out,
               "--limit", "3", "--no-progress", "--prompt", "[fault=401echo] Describe.", "--api-key", "sk-SECRET123",
               "--no-preflight", cwd=tmp_path, check=1)  # else its first requests' 401 refuse the run
    kinds = json.loads((out / "results.json").read_text())["counts"]["failure_kinds"]
    assert kinds["model_call:auth"]["count"] == 3
    assert "3 x model_call:auth" in run.stderr and "Incorrect API key provided" in run.stderr
    assert "sk-SECRET123" not in run.stderr and "sk-SECRET123" not in json.dumps(kinds)
    html = (out / "report.html").read_text()
    assert "failure kind" in html and "sk-SECRET123" not in html


@pytest.mark.slow
@pytest.mark.parametrize("server", [("--models", "served", "--dialect", "transformers")], indirect=True)
def test_a_refused_preflight_leaves_nothing_and_names_no_preflight(server, tmp_path, image_folder):
    out = tmp_path / "d"
    run = _cli("describe", "--vlm", f"openai:typo@{server.base_url}", "--data", image_folder, "--out", out,
               "--limit", "1", "--no-progress", cwd=tmp_path, check=2)
    assert "--no-preflight" in run.stderr and "'typo'" in run.stderr
    assert not out.exists()
    _cli("describe", "--vlm", f"openai:served@{server.base_url}", "--data", image_folder, "--out", out,
         "--limit", "1", "--no-progress", cwd=tmp_path, check=0)
    # the same with a folder the user made beforehand: it stays, empty
    made = tmp_path / "made"
    made.mkdir()
    _cli("describe", "--vlm", f"openai:typo@{server.base_url}", "--data", image_folder, "--out", made,
         "--limit", "1", "--no-progress", cwd=tmp_path, check=2)
    assert made.is_dir() and not any(made.iterdir())


@pytest.mark.parametrize("server", [("--models", "served", "--dialect", "transformers")], indirect=True)
def test_the_transformers_dialect_of_the_fake_server(server, caplog):
    """What transformers serve does (tests/test_real_server.py measures it), in the fake server: 422 naming the
    unknown field, which vlmcheck turns into the option's name; logprobs accepted and none returned."""
    import asyncio

    from vlmcheck.core.errors import ModelCallError
    from vlmcheck.core.messages import Message
    from vlmcheck.core.roles import GenerationConfig
    from vlmcheck.core.spec import load_model

    ppl = load_model(f"openai:served@{server.base_url}?prompt_logprobs=1", "vlm")
    with pytest.raises(ModelCallError) as bad:
        asyncio.run(ppl.loglikelihood([Message.user("Describe.")], ["yes"]))
    assert bad.value.status == 422 and "?prompt_logprobs=1" in str(bad.value)
    vlm = load_model(f"openai:served@{server.base_url}", "vlm")
    with caplog.at_level("WARNING", logger="vlmcheck"):
        gen = asyncio.run(vlm.generate([Message.user("Describe.")], GenerationConfig(max_tokens=4, logprobs=True)))
    assert gen.text and gen.logprobs is None
    assert not vlm.capabilities.logprobs and "token log-probabilities" in caplog.text
    with pytest.raises(ModelCallError) as pinned:
        asyncio.run(load_model(f"openai:other@{server.base_url}", "vlm").generate([Message.user("Describe.")],
                                                                                     GenerationConfig(max_tokens=4)))
    assert pinned.value.status == 400 and "Server is pinned" in str(pinned.value)


@pytest.mark.slow
def test_cast_says_in_one_line_why_its_matrix_is_empty(server, tmp_path):
    """The fake server's answers ("Answer <digest>") hold no numbered statement: nothing to validate."""
    assert _cli("world", "pairs", tmp_path / "pairs", "--n", "1", cwd=tmp_path).returncode == 0
    out = tmp_path / "cast"
    run = _cli("cast", "run", "--vlm", f"openai:m@{server.base_url}", "--pairs", tmp_path / "pairs" / "pairs.jsonl",
               "--out", out, "--no-progress", cwd=tmp_path, check=0)
    m = json.loads((out / "results.json").read_text())["metrics"]
    assert m["statements_written"] == 0 and "wrote no statements in any of the 1 pairs" in m["empty_reason"]
    lines = [x for x in run.stderr.splitlines() if "wrote no statements" in x]
    assert len(lines) == 1 and "every matrix is empty" in lines[0]
    assert "wrote no statements" in (out / "report.html").read_text()
