"""Screenshots of a report, one per section (``make demo`` writes them next to its report).

Needs Playwright and a Chromium on the machine (``vlmcheck[dev]`` and the system browser ``make test``
installs); without them it says so and returns nothing - the report itself never depends on it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

WIDTH, MAX_HEIGHT = 1280, 1800


def browser_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def screenshot_sections(report: str | Path, out_dir: str | Path) -> tuple[list[Path], str | None]:
    """PNG per ``h2`` section of ``report`` (from the heading to the next one, at most MAX_HEIGHT px) into
    ``out_dir``; returns (files, why none were taken)."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        return [], "playwright is not installed (pip install playwright)"
    exe = browser_path()
    if exe is None:
        return [], "no Chromium on this machine (apt-get install chromium)"
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto(Path(report).resolve().as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=30_000)
            page.evaluate("document.querySelectorAll('img').forEach(i => i.loading = 'eager')")
            page.wait_for_function("Array.from(document.images).every(i => i.complete)", timeout=60_000)
            tops = page.evaluate("Array.from(document.querySelectorAll('h2')).map(h => [h.textContent, "
                                 "h.getBoundingClientRect().top + window.scrollY])")
            end = page.evaluate("document.documentElement.scrollHeight")
            for k, (title, top) in enumerate(tops):
                bottom = tops[k + 1][1] if k + 1 < len(tops) else end
                height = max(1, min(bottom - top, MAX_HEIGHT))
                slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60] or "section"
                path = out_dir / f"{k + 1:02d}-{slug}.png"
                page.screenshot(path=str(path), full_page=True,
                                clip={"x": 0, "y": max(0, top - 8), "width": WIDTH, "height": height})
                files.append(path)
            browser.close()
    except Error as exc:
        return files, f"the browser failed ({str(exc).splitlines()[0]})"
    return files, None
