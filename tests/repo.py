"""The repository's root, for tests that read its files."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
