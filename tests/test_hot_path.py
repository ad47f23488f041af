"""The API run's hot path (issue 36, sixth round): the store's group commit, base64 through pybase64, JSON
encoders made once, and dataset folders resolved once per run.  Each is checked against what it replaces."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import random
import sqlite3
import time

import pytest

from vlmcheck.store.db import GROUP_COMMIT_S, RunStore, StoreError


from conftest import put_call as _put, seen_by_another_process as _seen_by_another_process


# ----------------------------------------------------------------------------- group commit


def test_group_commit_commits_a_lone_write_at_once_and_a_burst_within_its_window(tmp_path):
    store = RunStore(tmp_path, group_commit=0.05)  # 50 ms: wide enough that the test sees the open group

    async def burst() -> list[set[str]]:
        seen = []
        _put(store, "a")  # far from any commit: committed at once, as without group commit
        seen.append(_seen_by_another_process(tmp_path))
        _put(store, "b")  # within 50 ms of that commit: waits for the group's commit
        _put(store, "c")
        seen.append(_seen_by_another_process(tmp_path))
        seen.append({k for k in "abc" if store.get_call(k) is not None})  # this connection sees the group
        await asyncio.sleep(0.12)  # the group's timer has fired
        seen.append(_seen_by_another_process(tmp_path))
        return seen

    first, during, own, after = asyncio.run(burst())
    assert first == {"a"}
    assert during == {"a"}
    assert own == {"a", "b", "c"}
    assert after == {"a", "b", "c"}
    store.close()


def test_without_a_running_loop_or_group_commit_every_write_commits_at_once(tmp_path):
    grouped = RunStore(tmp_path / "g", group_commit=0.05)
    for k in "abc":  # no event loop: nothing could commit a group later, so nothing is grouped
        _put(grouped, k)
        assert k in _seen_by_another_process(tmp_path / "g")
    plain = RunStore(tmp_path / "p")  # the default: no group commit

    async def burst() -> None:
        for k in "abc":
            _put(plain, k)
            assert k in _seen_by_another_process(tmp_path / "p")

    asyncio.run(burst())
    grouped.close()
    plain.close()


def test_close_commits_the_open_group(tmp_path):
    store = RunStore(tmp_path, group_commit=10.0)

    async def burst() -> None:
        _put(store, "a")
        _put(store, "b")  # opens a group whose timer would fire in 10 s
        assert _seen_by_another_process(tmp_path) == {"a"}
        store.close()  # as the runner's finally does, before the loop ends
        assert _seen_by_another_process(tmp_path) == {"a", "b"}

    asyncio.run(burst())


def test_a_group_the_loop_did_not_commit_in_time_is_committed_by_the_next_write(tmp_path):
    store = RunStore(tmp_path, group_commit=0.02)

    async def stalled() -> None:
        _put(store, "a")
        _put(store, "b")  # opens a group
        time.sleep(0.05)  # a long synchronous stretch: the loop does not turn, its timer cannot fire
        _put(store, "c")  # finds the group overdue and commits it with itself
        assert _seen_by_another_process(tmp_path) == {"a", "b", "c"}

    asyncio.run(stalled())
    store.close()


def test_an_explicit_transaction_commits_the_open_group_first(tmp_path):
    store = RunStore(tmp_path, group_commit=10.0)

    async def burst() -> None:
        _put(store, "a")
        _put(store, "b")
        with store.transaction():  # the Ray executor's per-sample transaction: no nested BEGIN
            _put(store, "c")
        assert _seen_by_another_process(tmp_path) == {"a", "b", "c"}

    asyncio.run(burst())
    store.close()


class _FullDisk:
    """The store's connection, whose COMMIT fails as on a full disk."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, *args):
        if sql == "COMMIT":
            raise sqlite3.OperationalError("database or disk is full")
        return self._db.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._db, name)


def test_a_commit_that_fails_in_its_timer_stops_the_run_at_the_next_write_with_one_sentence(tmp_path):
    store = RunStore(tmp_path, group_commit=0.01)

    async def burst() -> None:
        _put(store, "a")
        store._db = _FullDisk(store._db)
        _put(store, "b")  # opens a group; its timer's COMMIT fails
        await asyncio.sleep(0.05)
        with pytest.raises(StoreError, match="disk is full"):
            _put(store, "c")

    asyncio.run(burst())
    store._db = store._db._db
    store.close()
    assert _seen_by_another_process(tmp_path) == {"a"}  # the failed group was rolled back, never half-written


def test_a_commit_that_fails_in_the_last_group_is_raised_by_close(tmp_path):
    store = RunStore(tmp_path, group_commit=0.01)

    async def burst() -> None:
        _put(store, "a")
        store._db = _FullDisk(store._db)
        _put(store, "b")
        await asyncio.sleep(0.05)  # the timer's commit fails; no write follows

    asyncio.run(burst())
    real = store._db._db
    store._db = real
    with pytest.raises(StoreError, match="disk is full"):
        store.close()


def test_the_runner_groups_commits_and_a_run_stores_every_answer(tmp_path, fake_server):
    """A describe run through the runner (group commit on, GROUP_COMMIT_S) leaves every call and sample
    committed: another connection sees all of them once the run returns."""
    from PIL import Image

    from vlmcheck import RunOptions, run_task
    from vlmcheck.methods.describe import DescribeSpec, DescribeTask

    assert 0 < GROUP_COMMIT_S <= 0.05  # the bound docs/usage.md states for what a kill -9 loses
    rows = []
    for i in range(40):
        Image.new("RGB", (16, 16), (i, 2 * i, 3 * i)).save(tmp_path / f"{i}.png")
        rows.append(json.dumps({"id": f"s{i}", "image": f"{i}.png"}))
    (tmp_path / "m.jsonl").write_text("\n".join(rows) + "\n")
    task = DescribeTask(DescribeSpec(vlm=f"openai:fake@{fake_server.base_url}", data=str(tmp_path / "m.jsonl")))
    run_task(task, tmp_path / "run", RunOptions(max_concurrency=16, progress=False, report=False))
    con = sqlite3.connect(tmp_path / "run" / "store.sqlite")
    try:
        assert con.execute("SELECT COUNT(*) FROM calls WHERE status = 'ok'").fetchone()[0] == 40
        assert con.execute("SELECT COUNT(*) FROM samples WHERE status = 'done'").fetchone()[0] == 40
    finally:
        con.close()


# ----------------------------------------------------------------------------- base64 and JSON


def test_pybase64_gives_the_standard_librarys_text():
    from vlmcheck.core import messages

    rng = random.Random(5)
    blobs = [bytes(rng.randrange(256) for _ in range(n)) for n in range(0, 70)]
    blobs.append(os.urandom(1 << 20) + b"\x00\xff")
    for data in blobs:
        assert messages._b64_text(data) == base64.b64encode(data).decode("ascii")
    pytest.importorskip("pybase64")
    assert messages._b64_text.__module__.startswith("pybase64")  # the fast one is the one in use


def test_the_png_chunk_check_computes_zlibs_crc32():
    import zlib

    from vlmcheck.core import probe

    rng = random.Random(6)
    for n in (0, 1, 3, 15, 16, 17, 63, 64, 65, 4096, 70_001):
        data = bytes(rng.randrange(256) for _ in range(n))
        assert probe.crc32(memoryview(data)) == zlib.crc32(data)
        assert probe.crc32(memoryview(b"xx" + data)[2:]) == zlib.crc32(data)
    pytest.importorskip("zlib_ng")
    assert probe.crc32.__module__ == "zlib_ng.zlib_ng"  # the fast one is the one in use


def test_a_parts_data_url_is_made_once_and_is_the_files_bytes(tmp_path):
    from PIL import Image

    from vlmcheck.core.messages import ImagePart
    from vlmcheck.core.probe import probe

    Image.new("RGB", (8, 8), (9, 8, 7)).save(tmp_path / "x.png")
    data = (tmp_path / "x.png").read_bytes()
    part = ImagePart.from_file(data, probe(data, "x.png"))
    url = part.data_url()
    assert url == "data:image/png;base64," + base64.b64encode(data).decode()
    assert part.data_url() is url and part._data_url is url  # kept where pydantic keeps private attributes


def test_json_encoder_gives_json_dumps_text_for_every_argument_set():
    from vlmcheck.core.printable import json_encoder, json_text

    objs = [{"b": 1, "a": [1.5, None, True, "é\u2028", -0.0, 1e-05, 1e16, 10 ** 30], "c": {"z": "x", "y": float("inf")}},
            [], "s\"\\\x00", 3, 2.5, None, {1: 2, "1": 3}, ("t", [("u",)]), {"k": ["\x1f\ud800"]}, {"n": float("nan")}]
    kwargs = [{}, {"sort_keys": True, "separators": (",", ":")}, {"ensure_ascii": False, "indent": 2},
              {"ensure_ascii": False, "sort_keys": True, "separators": (",", ":")},
              {"separators": [",", ":"]},  # unhashable: json.dumps itself
              {"default": str, "sort_keys": True}, {"skipkeys": True}, {"allow_nan": False}]
    for kw in kwargs:
        for obj in objs:
            try:
                want = json.dumps(obj, **kw)
            except (ValueError, TypeError) as exc:  # NaN with allow_nan=False, keys 1 and "1" sorted: the same
                with pytest.raises(type(exc)):
                    json_encoder(**kw)(obj)
                continue
            assert json_encoder(**kw)(obj) == want, (obj, kw)
    assert json_encoder(skipkeys=True)({object(): 1}) == "{}"
    with pytest.raises(TypeError):
        json_encoder()({"x": object()})
    # json_text: non-ASCII as is, a lone surrogate escaped (no UTF-8 text can hold it)
    assert json_text({"a": "é"}) == '{"a": "é"}'
    assert json_text({"a": "\udcff", "b": "é"}) == '{"a": "\\udcff", "b": "\\u00e9"}'


def test_call_key_is_the_sha256_of_the_sorted_compact_json_of_role_model_request_and_template():
    from vlmcheck.run.calls import call_key

    request = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Qué ves?"}]}], "config": {"b": 1}}
    # by hand: keys sorted, no spaces, non-ASCII as is, UTF-8
    text = ('{"model":"openai:m","request":{"config":{"b":1},"messages":[{"content":[{"text":"Qué ves?",'
            '"type":"text"}],"role":"user"}]},"role":"vlm","template":"t1"}')
    assert call_key("vlm", "openai:m", request, "t1") == hashlib.sha256(text.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- folders resolved once per run


def test_a_run_resolves_its_dataset_folders_once_and_still_checks_each_file(tmp_path, monkeypatch):
    from vlmcheck.core import inputs
    from vlmcheck.core.images import BadImageError

    data = tmp_path / "data"
    (data / "imgs").mkdir(parents=True)
    for i in range(3):
        (data / "imgs" / f"{i}.png").write_bytes(b"x")
    (tmp_path / "secret.png").write_bytes(b"s")
    (data / "imgs" / "link.png").symlink_to(tmp_path / "secret.png")
    resolved = []
    real = os.path.realpath
    monkeypatch.setattr(inputs, "_real_root", lambda root, dev, ino: resolved.append(root) or real(root))
    dirs: dict[str, str] = {}
    for i in range(3):
        inputs.confine(str(data / "imgs" / f"{i}.png"), data, False, dirs)
    assert sorted(resolved) == sorted([str(data), str(data / "imgs")])  # each folder once, not once per file
    with pytest.raises(BadImageError, match="outside the dataset folder"):  # each file's own link still checked
        inputs.confine(str(data / "imgs" / "link.png"), data, False, dirs)
    resolved.clear()
    for i in range(2):  # without a run's cache (outside a run): resolved on every read, as before
        inputs.confine(str(data / "imgs" / f"{i}.png"), data, False, None)
    assert len(resolved) == 4


def test_read_file_bytes_checks_the_stat_it_is_given(tmp_path):
    from vlmcheck.core.images import BadImageError, read_file_bytes

    (tmp_path / "a.png").write_bytes(b"abc")
    assert read_file_bytes(tmp_path / "a.png", st=os.stat(tmp_path / "a.png")) == b"abc"
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(BadImageError, match="not a regular file"):
        read_file_bytes(tmp_path / "fifo", st=os.stat(tmp_path / "fifo"))
    with pytest.raises(BadImageError, match="exceeds the image file size limit"):
        read_file_bytes(tmp_path / "a.png", max_bytes=2, st=os.stat(tmp_path / "a.png"))


def test_a_miss_returns_the_generation_a_hit_returns(tmp_path):
    """A sample's own call keeps the model's Generation (not validated again from its JSON); a later hit reads
    the stored JSON: both give the same answer, reasoning split off as always."""
    from vlmcheck.core.messages import Message
    from vlmcheck.core.roles import Capabilities, Generation, TokenLogprob, Usage
    from vlmcheck.run.calls import Session

    class Model:
        model_id = "openai:m"
        capabilities = Capabilities()

        def __init__(self, logprobs) -> None:
            self.logprobs = logprobs

        async def generate(self, messages, config):
            return Generation(text="<think>hm</think> a cat", finish_reason="stop", logprobs=self.logprobs,
                              usage=Usage(input_tokens=3, output_tokens=4), endpoint="http://a")

    for logprobs in (None, [TokenLogprob(token="a", logprob=-0.5)]):
        store = RunStore(tmp_path / str(bool(logprobs)))
        session = Session(store)

        async def twice():
            vlm = session.vlm(Model(logprobs))
            return await vlm.generate([Message.user("q")]), await vlm.generate([Message.user("q")])

        miss, hit = asyncio.run(twice())
        assert (session.counters.calls, session.counters.hits) == (1, 1)
        assert miss == hit and miss.text == "a cat" and miss.reasoning == "hm"
        store.close()


def test_a_calls_request_is_encoded_once_for_its_key_and_its_store_row(tmp_path):
    """call_key with the request's JSON put in place gives the key of the whole payload encoded at once, and
    put_call keeps that JSON as _dumps would write it: plain, non-ASCII, a secret (redacted), a lone surrogate."""
    from vlmcheck.core.secrets import register_secret
    from vlmcheck.run.calls import call_key, request_json
    from vlmcheck.store.db import _dumps

    register_secret("sk-hotpath-secret-0123456789")
    requests = [{"messages": [{"content": [{"text": "Describe.", "type": "text"}]}], "config": {"t": 0.0}},
                {"messages": [{"content": [{"text": "Qué ves? 猫", "type": "text"}]}]},
                {"messages": [{"content": [{"text": "key sk-hotpath-secret-0123456789", "type": "text"}]}]},
                {"messages": [{"content": [{"text": "bad \udcff name", "type": "text"}]}]}]
    store = RunStore(tmp_path)
    for i, request in enumerate(requests):
        text = request_json(request)
        for template in (None, "v2"):
            assert call_key("vlm", "openai:m", request, template, text) == call_key("vlm", "openai:m", request, template)
        store.put_call(f"k{i}", role="vlm", model="m", request=request, response={"a": 1}, attempts=1,
                       request_text=text)
        stored = store._rows("SELECT request FROM calls WHERE key = ?", (f"k{i}",))[0][0]
        assert stored == _dumps(request)
        assert "sk-hotpath-secret" not in stored
    store.close()
