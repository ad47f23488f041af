"""Screenshots of a report at a desk's and a phone's size (``make screenshots``, docs/usage.md "Reports"), each
at most :data:`MAX_HEIGHT` px tall.  Needs Playwright and a Chromium; without them it says so and returns nothing
(the report itself never depends on them).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

SIZES = {"desktop": (1440, 900), "phone": (390, 844)}
MAX_HEIGHT = 1800
# scrolls a section to the window's top and returns its box there, or null where it has none (hidden)
_SCROLL_TO = """(e) => {
    if (!e.getClientRects().length) return null;
    window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 8);
    const r = e.getBoundingClientRect();
    return {y: r.top, height: r.height};
}"""


def browser_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def screenshot_sections(report: str | Path, out_dir: str | Path) -> tuple[list[Path], str | None]:
    """PNGs of ``report``'s first screen, each samples table and each GenCeption chain list, at desktop and
    phone size, into ``out_dir``; returns (files, why none were taken)."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        return [], "playwright is not installed (pip install playwright)"
    exe = browser_path()
    if exe is None:
        return [], "no Chromium on this machine (apt-get install chromium)"
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []

    def element(page, locator, path: Path) -> None:
        # scrolled to, then shot from a window MAX_HEIGHT tall: a full-page shot of a long report lays out and
        # paints the whole page each time (seconds a shot), where the window is a fraction of that; a hidden
        # section (no box) is skipped
        box = locator.evaluate(_SCROLL_TO)
        if box is None:
            return
        top = max(0, box["y"] - 8)
        width, height = page.viewport_size["width"], page.viewport_size["height"]
        page.screenshot(path=str(path), clip={
            "x": 0, "y": top, "width": width, "height": min(box["height"] + 16, MAX_HEIGHT, height - top)})
        files.append(path)

    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
            for size, (width, height) in SIZES.items():
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(Path(report).resolve().as_uri())
                page.wait_for_selector("body[data-ready='1']", timeout=30_000)
                page.evaluate("document.querySelectorAll('img').forEach(i => i.loading = 'eager')")
                page.wait_for_function("Array.from(document.images).every(i => i.complete)", timeout=60_000)
                path = out_dir / f"{size}-first-screen.png"
                page.screenshot(path=str(path))  # the window as it opens
                files.append(path)
                page.set_viewport_size({"width": width, "height": MAX_HEIGHT})
                runs = page.locator("section.run")
                for k in range(runs.count()):
                    run = runs.nth(k)
                    title = run.locator("h2").first.inner_text()
                    method = re.sub(r"[^a-z0-9]+", "-", title.split(":")[0].lower()).strip("-")[:40] or "run"
                    element(page, run.locator("table.samples"), out_dir / f"{size}-samples-{k:02d}-{method}.png")
                    chains = run.locator("div.chains")
                    if chains.count():
                        element(page, chains.first, out_dir / f"{size}-chains-{k:02d}.png")
                page.close()
            browser.close()
    except Error as exc:
        return files, f"the browser failed ({str(exc).splitlines()[0]})"
    return files, None
