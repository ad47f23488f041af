"""Issue 49 items 1-2: URL inputs confined after normalisation and after every redirect, read to the end
(chunked or not), and bounded by per-read and total deadlines that fail only their own sample.  Every server is
a local one on 127.0.0.1."""

import asyncio
import http.server
import io
import json
import threading
import time

import numpy as np
import pytest
from PIL import Image

from vlmcheck import RunOptions, run_task
from vlmcheck.core import inputs, remote
from vlmcheck.core.data import load_image_dataset
from vlmcheck.core.images import BadImageError
from vlmcheck.methods.describe import DescribeSpec, DescribeTask


def _png(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(buf, "PNG")
    return buf.getvalue()


class Site:
    """A local HTTP server: ``routes[path] = (status, headers, body, mode)``; mode ``chunked`` sends the body in
    small chunks a few ms apart, ``slow`` sends one byte every 0.2 s after the headers, ``mute`` never sends the
    headers.  ``seen`` lists the raw request paths."""

    def __init__(self):
        self.routes: dict[str, tuple] = {}
        self.seen: list[str] = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):  # noqa: N802
                site.seen.append(self.path)
                status, headers, body, mode = site.routes.get(self.path, (404, {}, b"no", None))
                try:
                    if mode == "mute":
                        time.sleep(30)
                        return
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    if mode == "chunked":
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        for i in range(0, len(body), 97):
                            piece = body[i:i + 97]
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                            self.wfile.flush()
                            time.sleep(0.002)
                        self.wfile.write(b"0\r\n\r\n")
                    elif mode == "slow":
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        for b in body[:150]:
                            self.wfile.write(bytes([b]))
                            self.wfile.flush()
                            time.sleep(0.2)
                    else:
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        server_cls = type("Server", (http.server.ThreadingHTTPServer,), {"request_queue_size": 128})
        self.server = server_cls(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, path, body=b"", status=200, headers=None, mode=None):
        self.routes[path] = (status, headers or {}, body, mode)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site():
    s = Site()
    yield s
    s.close()


@pytest.fixture
def other():
    s = Site()
    yield s
    s.close()


def _manifest(rows):
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def test_normalised_urls_and_redirects_never_leave_the_folder_or_the_origin(site, other, tmp_path, fake_server):
    """Issue 49 item 1: before, ``%2e%2e/secret/s.png`` passed the string check and the client read
    ``/secret/s.png``; redirects to another origin or outside the folder were followed (6 of 24 rows escaped, 2
    requests reached another origin).  Now each is refused for its own sample and never requested."""
    site.add("/data/img/a.png", _png(1))
    site.add("/secret/s.png", _png(2))
    other.add("/data/img/a.png", _png(3))
    site.add("/data/img/cross.png", status=302, headers={"Location": f"{other.base}/data/img/a.png"})
    site.add("/data/img/out.png", status=302, headers={"Location": "/secret/s.png"})
    site.add("/data/img/dots.png", status=301, headers={"Location": "/data/img/%2e%2e/%2e%2e/secret/s.png"})
    site.add("/data/img/in.png", status=307, headers={"Location": "a.png"})
    rows = [{"id": "good", "image": "img/a.png"},
            {"id": "enc", "image": "%2e%2e/secret/s.png"},
            {"id": "enc2", "image": "img/%2E%2E/%2e%2e/secret/s.png"},
            {"id": "double", "image": "%252e%252e/secret/s.png"},
            {"id": "slash", "image": "img/..%2f..%2fsecret/s.png"},
            {"id": "cross", "image": "img/cross.png"},
            {"id": "out", "image": "img/out.png"},
            {"id": "dots", "image": "img/dots.png"},
            {"id": "in", "image": "img/in.png"}]
    site.add("/data/manifest.jsonl", _manifest(rows))
    url = f"{site.base}/data/manifest.jsonl"
    res = run_task(DescribeTask(DescribeSpec(vlm=f"openai:fake@{fake_server.base_url}", data=url)),
                   tmp_path / "run", RunOptions(progress=False, report=False, preflight=False))
    got = {r["sample_id"]: r for r in map(json.loads, (tmp_path / "run" / "samples.jsonl").read_text().splitlines())}
    assert got["good"]["status"] == got["in"]["status"] == "done"  # a redirect inside the folder is followed
    for sid in ("enc", "enc2", "double", "slash", "out", "dots"):
        assert got[sid]["status"] == "error", sid
        assert "outside the dataset folder" in got[sid]["error"]["message"], (sid, got[sid]["error"])
    assert "another origin" in got["cross"]["error"]["message"]
    assert res.results["counts"]["done"] == 2
    assert not any("secret" in p.lower() or "%2e" in p.lower() or ".." in p for p in site.seen), site.seen
    assert other.seen == []  # no request reached the other origin


def test_the_confinement_check_compares_what_the_server_sees():
    root = "http://Host:80/data"
    assert remote.inside("http://host/data/img/a.png", root)
    assert not remote.inside("http://host/data/%2e%2e/secret.png", root)
    assert not remote.inside("http://host/data/%252e%252e/secret.png", root)
    assert not remote.inside("http://host:8080/data/a.png", root)  # another port: another origin
    assert not remote.inside("https://host/data/a.png", root)
    assert not remote.inside("http://host/database/a.png", root)
    assert remote.normalize("HTTP://Host:80/data/img/%2e%2e/a.png#x") == "http://host/data/a.png"
    assert remote.join("http://host/data", "%2e%2e/x.png") == "http://host/x.png"


def test_a_chunked_manifest_and_chunked_images_are_read_to_their_end(site, tmp_path, fake_server):
    """Issue 49 item 2: before, a 30-row manifest sent chunked became an 8-sample run (exit 0) and 10 of 10
    chunked images failed as truncated.  Now all 30 rows load and every chunked image is read whole."""
    rows = [{"id": f"r{i:02d}", "image": f"img/{i % 10}.png", "note": "x" * 40} for i in range(30)]
    site.add("/data/manifest.jsonl", _manifest(rows), mode="chunked")
    for i in range(10):
        site.add(f"/data/img/{i}.png", _png(10 + i), mode="chunked")
    url = f"{site.base}/data/manifest.jsonl"
    assert len(load_image_dataset(url)) == 30
    assert remote.read_bytes(f"{site.base}/data/img/3.png", 1 << 20) == _png(13)
    res = run_task(DescribeTask(DescribeSpec(vlm=f"openai:fake@{fake_server.base_url}", data=url)),
                   tmp_path / "run", RunOptions(progress=False, report=False, preflight=False))
    assert res.results["counts"]["done"] == 30


def test_a_chunked_body_over_the_cap_is_refused(site):
    site.add("/big.bin", b"x" * 5000, mode="chunked")
    with pytest.raises(BadImageError, match="size limit"):
        remote.read_bytes(f"{site.base}/big.bin", 1000)


def test_slow_servers_fail_their_own_sample_and_hold_no_reader(site):
    """Issue 49 item 2: before, 3 slow-loris image URLs among 20 good ones held both reader threads (fsspec's
    hidden 300-s timeout): no good sample finished for 301 s.  Now the slow ones fail at the total deadline and
    the good ones finish meanwhile."""
    for i in range(20):
        site.add(f"/d/g{i}.png", _png(i))
    for i in range(3):
        site.add(f"/d/slow{i}.png", _png(100 + i), mode="slow")
    site.add("/d/mute.png", _png(7), mode="mute")
    policy = inputs.InputPolicy(url_read_timeout_s=0.5, url_total_timeout_s=1.5)

    async def main():
        token = inputs.active_policy.set(policy)
        started = time.monotonic()
        done: dict[str, float] = {}

        async def one(name):
            try:
                await inputs.read_image_part(f"{site.base}/d/{name}.png", root=f"{site.base}/d")
                done[name] = time.monotonic() - started
                return None
            except BadImageError as exc:
                done[name] = time.monotonic() - started
                return str(exc)
        try:
            names = [f"slow{i}" for i in range(3)] + ["mute"] + [f"g{i}" for i in range(20)]
            errors = dict(zip(names, await asyncio.gather(*(one(n) for n in names))))
        finally:
            inputs.active_policy.reset(token)
        return errors, done

    errors, done = asyncio.run(main())
    for name in ("slow0", "slow1", "slow2", "mute"):
        assert "deadline" in errors[name], errors[name]
        assert done[name] < 4.0  # total 1.5 s, per-read 0.5 s (mute: no headers at all)
    assert [errors[f"g{i}"] for i in range(20)] == [None] * 20
    assert max(done[f"g{i}"] for i in range(20)) < 1.0  # never waited behind the slow ones


def test_url_deadlines_are_run_options():
    with pytest.raises(Exception):
        RunOptions(url_read_timeout_s=0)
    assert RunOptions().url_total_timeout_s == remote.TOTAL_TIMEOUT_S
