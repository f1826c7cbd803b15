"""Debian's Chromium for the browser tests (Playwright drives it; nothing downloads a browser),
and where their screenshots go (var/screenshots/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.repo import ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
SCREENSHOTS = ROOT / "var" / "screenshots"


def shot(target: Any, name: str) -> None:
    """A screenshot of a Playwright page or locator, as var/screenshots/`name`."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(SCREENSHOTS / name))
