"""Versioned on-disk index store: ``<root>/<org>/<collection>/<version>/``.

A version directory holds ``index.faiss``, ``ids.npy`` and ``meta.json``. New versions are
written under ``<collection>/.staging/<version>/`` and only ``publish`` moves them next to
the others (one ``os.rename``) and then points ``CURRENT`` at them (temp file +
``os.replace``). Readers follow ``CURRENT`` only, so an unpublished or half-written version
is never served, and a failed build leaves the previous version serving: a process killed
anywhere in ``publish`` (even after the rename, before ``CURRENT`` moves) leaves the old
version serving and at worst an unreferenced version directory that ``prune`` removes later.

Writers of one (org, collection) serialize on :meth:`IndexStore.lock`, a ``flock`` on
``<collection>/.lock``: it holds across threads and processes (the app's single-document
adds, the reindex Ray Job) and the kernel drops it when its holder dies, so a killed writer
never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from indexes.vector_index import IDS_FILE, INDEX_FILE, IndexParams, VectorIndex

IndexCollection = Literal["products", "interactions", "patterns", "org_context"]
"""The searchable collections (org_context is built from the documents dataset)."""
COLLECTIONS: tuple[str, ...] = get_args(IndexCollection)
ORG_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
VERSION_RE = re.compile(r"^v\d{8}T\d{6}\d{6}Z-[0-9a-f]{6}$")
META_FILE = "meta.json"
CURRENT_FILE = "CURRENT"
STAGING_DIR = ".staging"
LOCK_FILE = ".lock"
LOCK_TIMEOUT_S = 300.0

fault_hook: Callable[[str], None] | None = None
"""Tests only: called at named points of a write ("publish:staged", "publish:renamed") so
a test can kill the process there."""


def fault_point(point: str) -> None:
    if fault_hook is not None:
        fault_hook(point)


class IndexLockTimeout(TimeoutError):
    """Another writer held the (org, collection) lock for longer than the timeout."""


# Re-entrancy: the thread that holds a collection's flock may take it again (an add inside a
# caller's critical section). Keyed by lock path; value: (thread id, depth).
_held: dict[str, tuple[int, int]] = {}
_held_guard = threading.Lock()


class IndexNotFoundError(LookupError):
    """No published index (or no such version) for this org and collection."""


@dataclass(frozen=True)
class IndexMeta:
    """Contents of ``meta.json``."""

    version: str
    dim: int
    model: str
    count: int
    kind: str
    created_at: str
    source_rows: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def validate_org(org: str) -> str:
    if not isinstance(org, str) or not ORG_ID_RE.fullmatch(org):
        raise ValueError("organization id must be 1-64 letters, digits, '_' or '-'")
    return org


def validate_collection(collection: str) -> str:
    if collection not in COLLECTIONS:
        raise ValueError(f"collection must be one of {sorted(COLLECTIONS)}")
    return collection


def validate_version(version: str) -> str:
    if not isinstance(version, str) or not VERSION_RE.fullmatch(version):
        raise ValueError(f"malformed index version {version!r}")
    return version


def _new_version_name() -> str:
    now = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    return f"v{now}Z-{secrets.token_hex(3)}"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class IndexStore:
    """Versions of FAISS indexes per (org, collection) under ``root``.

    ``keep`` is how many published versions ``publish`` retains (the current one always
    stays). Writers that read the current version and publish a successor hold
    :meth:`lock` from the read to the publish, so none publishes over another's rows.
    """

    def __init__(self, root: str | Path, *, keep: int = 3) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.root = Path(root)
        self.keep = keep

    def collection_dir(self, org: str, collection: str) -> Path:
        return self.root / validate_org(org) / validate_collection(collection)

    # -- writing ---------------------------------------------------------------------------
    @contextmanager
    def lock(
        self, org: str, collection: str, *, timeout_s: float = LOCK_TIMEOUT_S
    ) -> Iterator[None]:
        """Exclusive writer lock of one (org, collection), across threads and processes.

        Re-entrant in the thread that holds it. Raises IndexLockTimeout after `timeout_s`."""
        cdir = self.collection_dir(org, collection)
        cdir.mkdir(parents=True, exist_ok=True)
        path = str(cdir.resolve() / LOCK_FILE)
        me = threading.get_ident()
        with _held_guard:
            owner, depth = _held.get(path, (None, 0))
            if owner == me:
                _held[path] = (me, depth + 1)
                reentered = True
            else:
                reentered = False
        if reentered:
            try:
                yield
            finally:
                with _held_guard:
                    owner, depth = _held[path]
                    _held[path] = (owner, depth - 1)
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            deadline, pause = time.monotonic() + timeout_s, 0.001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise IndexLockTimeout(
                            f"the {org}/{collection} index is being written by another job "
                            f"(waited {timeout_s:.0f}s)"
                        ) from None
                    time.sleep(pause)
                    pause = min(pause * 2, 0.05)
            with _held_guard:
                _held[path] = (me, 1)
            try:
                yield
            finally:
                with _held_guard:
                    del _held[path]
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def new_version(self, org: str, collection: str) -> Path:
        """Create and return an empty staging directory; its name is the version."""
        staging = self.collection_dir(org, collection) / STAGING_DIR / _new_version_name()
        staging.mkdir(parents=True)
        return staging

    def write(
        self,
        staging: Path,
        index: VectorIndex,
        *,
        model: str,
        source_rows: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> IndexMeta:
        """Save ``index`` and its ``meta.json`` into a staging directory."""
        if staging.parent.name != STAGING_DIR:
            raise ValueError(f"{staging} is not a staging directory from new_version()")
        meta = IndexMeta(
            version=validate_version(staging.name),
            dim=index.dim,
            model=model,
            count=index.count,
            kind=index.kind,
            created_at=datetime.now(UTC).isoformat(),
            source_rows=source_rows,
            extra=dict(extra or {}),
        )
        index.save(staging)
        _write_atomic(staging / META_FILE, json.dumps(asdict(meta), indent=2))
        return meta

    def publish(self, org: str, collection: str, version: str) -> None:
        """Make a staged (or an older published) ``version`` current, then prune."""
        cdir = self.collection_dir(org, collection)
        validate_version(version)
        target = cdir / version
        staging = cdir / STAGING_DIR / version
        if staging.is_dir():
            missing = [f for f in (INDEX_FILE, IDS_FILE, META_FILE) if not (staging / f).is_file()]
            if missing:
                raise ValueError(f"version {version} is incomplete: missing {missing}")
            fault_point("publish:staged")
            os.rename(staging, target)
            fault_point("publish:renamed")
        elif not (target / META_FILE).is_file():
            raise IndexNotFoundError(f"no staged or published version {version}")
        _write_atomic(cdir / CURRENT_FILE, version + "\n")
        self.prune(org, collection)

    # -- reading ---------------------------------------------------------------------------
    def current(self, org: str, collection: str) -> str | None:
        """The published version readers should serve, or ``None``."""
        try:
            text = (self.collection_dir(org, collection) / CURRENT_FILE).read_text("utf-8")
        except FileNotFoundError:
            return None
        return validate_version(text.strip())

    def versions(self, org: str, collection: str) -> list[str]:
        """Published versions, oldest first."""
        cdir = self.collection_dir(org, collection)
        if not cdir.is_dir():
            return []
        return sorted(p.name for p in cdir.iterdir() if p.is_dir() and VERSION_RE.fullmatch(p.name))

    def _version_dir(self, org: str, collection: str, version: str | None) -> Path:
        chosen = version if version is not None else self.current(org, collection)
        if chosen is None:
            raise IndexNotFoundError(f"no published {collection} index")
        path = self.collection_dir(org, collection) / validate_version(chosen)
        if not (path / META_FILE).is_file():
            raise IndexNotFoundError(f"no published {collection} index version {chosen}")
        return path

    def meta(self, org: str, collection: str, version: str | None = None) -> IndexMeta:
        path = self._version_dir(org, collection, version)
        return IndexMeta(**json.loads((path / META_FILE).read_text("utf-8")))

    def load(
        self,
        org: str,
        collection: str,
        version: str | None = None,
        *,
        params: IndexParams | None = None,
    ) -> VectorIndex:
        """Load a published version (default: ``CURRENT``)."""
        return VectorIndex.load(self._version_dir(org, collection, version), params=params)

    # -- cleanup ---------------------------------------------------------------------------
    def prune(self, org: str, collection: str, keep: int | None = None) -> list[str]:
        """Delete all but the newest ``keep`` published versions (never ``CURRENT``) and any
        abandoned staging directories older than the newest published version. Returns
        the removed version names."""
        keep = self.keep if keep is None else keep
        cdir = self.collection_dir(org, collection)
        current = self.current(org, collection)
        published = self.versions(org, collection)
        retained = set(published[-keep:]) | {current}
        removed = [v for v in published if v not in retained]
        for version in removed:
            shutil.rmtree(cdir / version, ignore_errors=True)
        staging_root = cdir / STAGING_DIR
        if published and staging_root.is_dir():
            for stale in staging_root.iterdir():
                if stale.name < published[-1]:
                    shutil.rmtree(stale, ignore_errors=True)
                    removed.append(stale.name)
        return removed
