"""Text from datasets, servers and file names reaches the terminal and logs inert: no escape sequence of theirs
(OSC 52 clipboard writes, OSC 0 window titles, OSC 8 links, colours) and no bidi override is ever written raw, to a
terminal or to a pipe; JSON output keeps the values (its own escapes)."""

from __future__ import annotations

import base64
import io
import json
import logging
import os

from PIL import Image

from conftest import run_cli
from vlmcheck.core.printable import inert, inert_obj, json_inert

CLIP = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # OSC 52: write the clipboard
TITLE = "\x1b]0;owned\x07"  # OSC 0: the window title
LINK = "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"  # OSC 8: a hyperlink
RED = "\x1b[31m"
RLO = "\u202e"  # right-to-left override
C1 = "\x9b31m"  # the 8-bit CSI
HOSTILE = f"Which{CLIP} one{TITLE}?{LINK}{RED}{RLO}gnp.exe{C1}"
RAW = ("\x1b", "\x07", "\x9b", RLO)


def test_inert_writes_every_control_and_bidi_character_as_a_visible_escape():
    out = inert(HOSTILE + "\r\b\x00\u2066\u2069")
    assert not any(c in out for c in (*RAW, "\r", "\b", "\x00", "\u2066", "\u2069"))
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in out and "\\u202egnp.exe" in out and "\\x9b31m" in out
    assert "\\x0d\\x08\\x00\\u2066\\u2069" in out
    assert inert("a line\nand\ttab, é, 猫, [bold]") == "a line\nand\ttab, é, 猫, [bold]"  # text as it is
    assert inert_obj({"k" + RLO: [HOSTILE, 1]}) == {"k\\u202e": [inert(HOSTILE), 1]}
    text = json_inert(json.dumps({"q": HOSTILE}, ensure_ascii=False))
    assert not any(c in text for c in RAW) and json.loads(text) == {"q": HOSTILE}  # the same value


def _tsv(path, rows):
    head = ["index", "question", "A", "B", "answer", "image", "category"]
    path.write_text("\n".join("\t".join(map(str, r)) for r in [head, *rows]) + "\n", encoding="utf-8")
    return path


def _b64png() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


def _cli(*args, tmp_path):
    env = {**os.environ, "VLMCHECK_CACHE": str(tmp_path / "cache"), "COLUMNS": "120"}
    return run_cli(*args, env=env)


def test_data_inspect_prints_a_hostile_dataset_inert_to_a_pipe_and_as_json(tmp_path):
    """Before: the question, options and category were printed with their raw escapes (and a category
    '[link=...]' became a rich link)."""
    tsv = _tsv(tmp_path / "MMBench_DEV_EN.tsv",
               [[1, HOSTILE, f"yes{TITLE}", f"no{RLO}", "A", _b64png(), f"cat{CLIP}[link=http://evil.example/]x"]])
    proc = _cli("data", "inspect", str(tsv), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout + proc.stderr
    assert not any(c in shown for c in RAW), shown
    assert "\\x1b]52;c;" in shown and "[link=http://evil.example/]" in shown  # visible, as text
    proc = _cli("data", "inspect", str(tsv), "--json", tmp_path=tmp_path)
    assert proc.returncode == 0 and not any(c in proc.stdout for c in RAW)
    texts = [r.get("text", "") for r in json.loads(proc.stdout)["rows"]]
    assert any(HOSTILE in t for t in texts), texts  # the values kept


def test_a_failure_line_and_a_log_line_are_inert(tmp_path, caplog):
    """Before: a run's failure line printed a manifest's id and path with their escapes."""
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({"id": f"x{CLIP}{RLO}", "image": f"missing{TITLE}.png"}) + "\n")
    proc = _cli("describe", "--vlm", "ref:photo", "--data", str(manifest), "--out", str(tmp_path / "run"),
                tmp_path=tmp_path)
    shown = proc.stdout + proc.stderr
    assert "missing" in shown and not any(c in shown for c in RAW), shown

    from vlmcheck.core.secrets import install_log_redaction

    log = logging.getLogger("vlmcheck.test_printable")
    install_log_redaction(log)
    with caplog.at_level(logging.WARNING, logger="vlmcheck.test_printable"):
        log.warning("server said %s", HOSTILE)
    assert caplog.records and not any(c in caplog.records[-1].getMessage() for c in RAW)
