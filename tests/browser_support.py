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


SETTLED = """() => document.getAnimations().every(
  a => a.playState !== "running" || a.effect.getTiming().iterations === Infinity)"""
"""True once the page's finite animations (a card or a row fading in) have ended."""


def settled(page: Any) -> None:
    """Wait until what the page shows has stopped fading or moving in (looping animations,
    like the thinking dots, do not count)."""
    page.wait_for_function(SETTLED)


def shot(target: Any, name: str) -> None:
    """A screenshot of a Playwright page or locator, once the page has settled, as
    var/screenshots/`name`."""
    settled(getattr(target, "page", target))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(SCREENSHOTS / name))
