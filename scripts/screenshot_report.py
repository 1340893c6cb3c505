"""Render a run's report.html in headless Chromium and save a full-page PNG next to it.

    python scripts/screenshot_report.py runs/office-quick [--browser chromium]

Exits 2 with a one-line message when the report or the browser is missing. Look at the PNG: every figure visible.
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--browser", default="chromium")
    ap.add_argument("--height", type=int, default=5200)
    args = ap.parse_args()
    report = Path(args.run_dir) / "report.html"
    if not report.is_file():
        sys.exit(f"screenshot_report: {report}: not found (run `crabrec report {args.run_dir}` first)")
    browser = shutil.which(args.browser)
    if browser is None:
        sys.exit(f"screenshot_report: {args.browser}: not installed (apt-get install chromium)")
    print(screenshot(report, report.with_suffix(".png"), browser, args.height))


if __name__ == "__main__":
    main()
