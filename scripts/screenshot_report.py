"""Render a run's report.html in headless Chromium and save a full-page PNG next to it.

    python scripts/screenshot_report.py runs/office-quick [--browser chromium] [--check]

``--check`` also prints what the browser drew, as JSON: for each table its rows and rendered height, for each figure
its rendered width and height and how many shapes it holds. Exits 2 with a one-line message when the report or the
browser is missing. Look at the PNG: every figure visible.
"""

from __future__ import annotations

import argparse
import html as html_lib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path


def screenshot(report: Path, out: Path, browser: str, height: int = 5200) -> Path:
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size=1100,{height}",
        f"--screenshot={out}",
        report.resolve().as_uri(),
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return out


# Injected into a copy of the report: once the page has loaded and laid out, record what was drawn in a <pre> that
# --dump-dom then prints (headless Chromium has no other channel back without a driver).
PROBE = """<script>
window.addEventListener('load', () => {
  const box = (el) => el.getBoundingClientRect();
  const tables = [...document.querySelectorAll('table')].map(t => ({rows: t.rows.length, height: box(t).height}));
  const figures = [...document.querySelectorAll('svg')].map(s => ({
    width: box(s).width, height: box(s).height, shapes: s.querySelectorAll('path, rect, text, use, line').length}));
  const out = document.createElement('pre');
  out.id = 'crabrec-probe';
  out.textContent = JSON.stringify({title: document.title, tables, figures});
  document.body.appendChild(out);
});
</script>"""


def rendered(report: Path, browser: str, workdir: Path) -> dict:
    """What Chromium drew of ``report``: its tables (rows, height) and figures (size, shapes), after layout."""
    page = workdir / "probe.html"
    html = report.read_text(encoding="utf-8")
    page.write_text(html.replace("</body>", PROBE + "</body>") if "</body>" in html else html + PROBE, "utf-8")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom"]
    dom = subprocess.run([*cmd, page.resolve().as_uri()], check=True, capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="crabrec-probe">(.*?)</pre>', dom.stdout, re.S)
    if found is None:
        raise RuntimeError(f"{report}: the page did not finish loading in {browser}")
    return json.loads(html_lib.unescape(found.group(1)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--browser", default="chromium")
    ap.add_argument("--height", type=int, default=5200)
    ap.add_argument("--check", action="store_true", help="also print what was drawn, as JSON")
    args = ap.parse_args()
    report = Path(args.run_dir) / "report.html"
    if not report.is_file():
        sys.exit(f"screenshot_report: {report}: not found (run `crabrec report {args.run_dir}` first)")
    browser = shutil.which(args.browser)
    if browser is None:
        sys.exit(f"screenshot_report: {args.browser}: not installed (apt-get install chromium)")
    print(screenshot(report, report.with_suffix(".png"), browser, args.height))
    if args.check:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(rendered(report, browser, Path(tmp))))


if __name__ == "__main__":
    main()
