"""A seeded, indexed demo data set (hash embedder) for tests that need real tool results:
the app in this process (crow.app.LocalApp) over it, with no chat store of its own (each
test hands ``services`` its own)."""

from __future__ import annotations

from pathlib import Path

from crow.app import LocalApp, open_local_app
from crow.settings import AppSettings
from jobs.seed_demo import main as seed
from models.testing_embed import HashEmbedder

ORGS = ("acme-outdoor", "fresh-mart")


END = "2026-11-29"  # the seeded data's last day: every test sees the same data


def seed_demo(var: Path, org: str | None = None, interactions: int | None = None) -> None:
    """The demo data under `var`/data: one organization or both, the generator's default
    number of interactions unless `interactions` says."""
    args = ["--data-root", str(var / "data"), "--end", END]
    if org is not None:
        args += ["--org", org]
    if interactions is not None:
        args += ["--interactions", str(interactions)]
    seed(args)


def build_demo_env(var: Path, *, interactions: int = 3000) -> LocalApp:
    seed_demo(var, interactions=interactions)
    # The tests hand it scripted models: a custom backend, so no small-model guidance.
    settings = AppSettings.from_args({"var_dir": str(var), "llm": {"backend": "custom"}})
    app = open_local_app(settings, HashEmbedder())
    for org in ORGS:
        app.build_missing_indexes(org)
    return app
