"""Per-organization Parquet datasets under a data root.

Layout::

    <root>/<org>/org.json                       the organization (its existence = registered)
    <root>/<org>/<collection> -> .<collection>.v<N>   symlink to the current version
    <root>/<org>/.<collection>.v<N>/part-*.parquet

Appends add one part file (written to a temp name, then renamed). Upserts and replaces
write a whole new version directory and switch the symlink with one ``os.replace``, so a
reader sees the old or the new dataset, never a mix. Writers of one collection are
serialized with a file lock (``flock``: across threads and processes, and released by the
kernel when a writer dies); readers (DuckDB, Ray Data, any process) take no lock.

Everything a write decides is decided under the lock: an append's check that its ids are
new, and the next version's number. A writer killed mid-write leaves a staging directory,
a temp part or a version it never published; only a lock holder makes them, so whatever the
next lock holder finds is a dead writer's, and it removes them before writing.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from crow.data import duck
from crow.data.records import COLLECTIONS, get_collection
from crow.ids import is_valid_org_id

WriteMode = Literal["append", "upsert", "replace"]
_Batches = Iterable[list[dict[str, Any]]]  # records, already validated, a batch at a time
_VERSION_RE = re.compile(r"^\.(?P<name>[a-z_]+)\.v(?P<n>\d+)$")
_STAGING_RE = re.compile(r"^\.(?P<name>[a-z_]+)\.v(?P<n>\d+)\.staging$")
_LINK_TMP_RE = re.compile(r"^\.(?P<name>[a-z_]+)\.link-[0-9a-f]{32}$")
_PART_TMP_GLOB = ".part-*.parquet.tmp"
_KEEP_OLD_VERSIONS = 1  # a reader that resolved the previous version can still finish


class UnknownOrganization(LookupError):
    pass


class IdsAlreadyExist(ValueError):
    """An append's ids that the collection already holds; nothing was written."""

    def __init__(self, ids: set[str]) -> None:
        super().__init__(f"{len(ids)} ids already exist; nothing was written")
        self.ids = ids


class DataLake:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # --- organizations -------------------------------------------------------------
    def org_dir(self, org_id: str) -> Path:
        if not is_valid_org_id(org_id):
            raise ValueError(f"invalid organization id {org_id!r}")
        return self.root / org_id

    def register_org(self, org_id: str, name: str) -> None:
        path = self.org_dir(org_id)
        path.mkdir(parents=True, exist_ok=True)
        _atomic_write_bytes(path / "org.json", json.dumps({"id": org_id, "name": name}).encode())

    def org_exists(self, org_id: str) -> bool:
        return is_valid_org_id(org_id) and (self.root / org_id / "org.json").is_file()

    def list_orgs(self) -> list[dict[str, str]]:
        if not self.root.is_dir():
            return []
        found = [json.loads(p.read_text()) for p in sorted(self.root.glob("*/org.json"))]
        return [o for o in found if is_valid_org_id(o.get("id", ""))]

    def _require_org(self, org_id: str) -> Path:
        if not self.org_exists(org_id):
            raise UnknownOrganization(org_id)
        return self.org_dir(org_id)

    # --- reading -------------------------------------------------------------------
    def dataset_dir(self, org_id: str, collection: str) -> Path:
        get_collection(collection)
        return self._require_org(org_id) / collection

    def parquet_glob(self, org_id: str, collection: str) -> str | None:
        """Glob of the current parts, or None when the collection has no data yet."""
        path = self.dataset_dir(org_id, collection)
        if not path.exists() or not any(path.glob("part-*.parquet")):
            return None
        return str(path.resolve() / "part-*.parquet")

    def read_table(self, org_id: str, collection: str) -> pa.Table:
        schema = get_collection(collection).schema_
        glob = self.parquet_glob(org_id, collection)
        if glob is None:
            return schema.empty_table()
        return pq.read_table(str(Path(glob).parent), schema=schema)

    def count(self, org_id: str, collection: str) -> int:
        glob = self.parquet_glob(org_id, collection)
        if glob is None:
            return 0
        with duck.cursor() as con:
            row = con.execute("SELECT count(*) FROM read_parquet(?)", [glob]).fetchone()
        return int(row[0]) if row is not None else 0  # an aggregate: always one row

    def existing_ids(self, org_id: str, collection: str, ids: list[str]) -> set[str]:
        glob = self.parquet_glob(org_id, collection)
        if glob is None or not ids:
            return set()
        with duck.cursor() as con:
            con.register("wanted", pa.table({"id": ids}))
            rows = con.execute(
                "SELECT DISTINCT p.id FROM read_parquet(?) p JOIN wanted USING (id)", [glob]
            ).fetchall()
        return {r[0] for r in rows}

    # --- writing -------------------------------------------------------------------
    def write(
        self,
        org_id: str,
        collection: str,
        batches: _Batches,
        mode: WriteMode = "append",
    ) -> int:
        """Write already-validated records; returns the number of rows written.

        An append of an id the collection holds raises IdsAlreadyExist and writes nothing
        (upsert replaces rows by id). The check is made under the collection's lock, so two
        appends of the same rows at once write them once.
        """
        schema = get_collection(collection).schema_
        org_dir = self._require_org(org_id)
        with self._lock(org_dir, collection):
            self._recover(org_dir, collection)
            if mode == "append":
                return self._append(org_dir, collection, schema, batches)
            return self._new_version(org_id, org_dir, collection, schema, batches, mode)

    def _append(self, org_dir: Path, collection: str, schema: pa.Schema, batches: _Batches) -> int:
        link = org_dir / collection
        if not link.exists():
            target = self._next_version_dir(org_dir, collection)
            target.mkdir()
            _switch_link(link, target)
        target = link.resolve()
        # One part file for the whole append: its rename is the only step that publishes.
        tmp = target / f".part-{uuid.uuid4().hex}.parquet.tmp"
        try:
            written, ids = _write_parts(tmp, schema, batches)
            if not written:
                return 0
            clashes = self._ids_in(target, ids)
            if clashes:
                raise IdsAlreadyExist(clashes)
            os.replace(tmp, tmp.with_name(tmp.name[1:].removesuffix(".tmp")))
        finally:
            tmp.unlink(missing_ok=True)
        return written

    @staticmethod
    def _ids_in(version_dir: Path, ids: list[str]) -> set[str]:
        if not ids or not any(version_dir.glob("part-*.parquet")):
            return set()
        with duck.cursor() as con:
            con.register("wanted", pa.table({"id": ids}))
            rows = con.execute(
                "SELECT DISTINCT p.id FROM read_parquet(?) p JOIN wanted USING (id)",
                [str(version_dir / "part-*.parquet")],
            ).fetchall()
        return {r[0] for r in rows}

    def _new_version(
        self,
        org_id: str,
        org_dir: Path,
        collection: str,
        schema: pa.Schema,
        batches: _Batches,
        mode: WriteMode,
    ) -> int:
        target = self._next_version_dir(org_dir, collection)
        staging = target.with_name(target.name + ".staging")
        staging.mkdir()
        try:
            written, new_ids = _write_parts(staging / "part-00000.parquet", schema, batches)
            if mode == "upsert":
                old = self.read_table(org_id, collection)
                if old.num_rows:
                    keep = pc.invert(pc.is_in(old["id"], value_set=pa.array(new_ids, pa.string())))
                    pq.write_table(old.filter(keep), staging / "part-base.parquet")
            os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _switch_link(org_dir / collection, target)
        self._prune(org_dir, collection)
        return written

    def _next_version_dir(self, org_dir: Path, collection: str) -> Path:
        versions = [int(m["n"]) for m in self._versions(org_dir, collection)]
        return org_dir / f".{collection}.v{max(versions, default=0) + 1}"

    @staticmethod
    def _versions(org_dir: Path, collection: str) -> Iterator[re.Match[str]]:
        for p in org_dir.iterdir():
            m = _VERSION_RE.match(p.name)
            if m and m["name"] == collection:
                yield m

    def _prune(self, org_dir: Path, collection: str) -> None:
        old = sorted((int(m["n"]) for m in self._versions(org_dir, collection)), reverse=True)[
            1 + _KEEP_OLD_VERSIONS :
        ]
        for n in old:
            shutil.rmtree(org_dir / f".{collection}.v{n}", ignore_errors=True)

    def recover(self) -> None:
        """At start: clean what writers killed mid-write left in every org and collection
        (each under its lock, so a live writer is waited for, never disturbed). Writes do
        the same for their collection before they start."""
        for org in self.list_orgs():
            org_dir = self.org_dir(org["id"])
            for collection in COLLECTIONS:
                with self._lock(org_dir, collection):
                    self._recover(org_dir, collection)

    def _recover(self, org_dir: Path, collection: str) -> None:
        """Remove what a writer killed mid-write left. Call it holding the collection's lock:
        then no other writer is running, and all it finds is a dead writer's."""
        link = org_dir / collection
        # The published version; 0: none yet, None: unknown (keep all versions).
        current: int | None = 0
        if link.is_symlink():
            m = _VERSION_RE.match(os.readlink(link))
            current = int(m["n"]) if m and m["name"] == collection else None
        elif link.exists():
            current = None
        for p in org_dir.iterdir():
            if (m := _STAGING_RE.match(p.name)) and m["name"] == collection:
                shutil.rmtree(p)  # an upsert or replace that never published
            elif (m := _LINK_TMP_RE.match(p.name)) and m["name"] == collection:
                p.unlink(missing_ok=True)
            elif (
                (m := _VERSION_RE.match(p.name))
                and m["name"] == collection
                and current is not None
                and int(m["n"]) > current
            ):
                shutil.rmtree(p)  # renamed from staging, then killed before the link switched
        if current and link.is_dir():
            for tmp in link.resolve().glob(_PART_TMP_GLOB):  # an append that never published
                tmp.unlink(missing_ok=True)

    @contextmanager
    def _lock(self, org_dir: Path, collection: str) -> Iterator[None]:
        with open(org_dir / f".{collection}.lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _write_parts(path: Path, schema: pa.Schema, batches: _Batches) -> tuple[int, list[str]]:
    """Write the batches into one Parquet file (none when there are no rows): rows, ids."""
    written, writer = 0, None
    ids: list[str] = []
    try:
        for batch in batches:
            if not batch:
                continue
            if writer is None:
                writer = pq.ParquetWriter(path, schema)
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            written += len(batch)
            ids.extend(r["id"] for r in batch)
    finally:
        if writer is not None:
            writer.close()
    return written, ids


def _switch_link(link: Path, target: Path) -> None:
    tmp = link.with_name(f".{link.name}.link-{uuid.uuid4().hex}")
    os.symlink(target.name, tmp)
    os.replace(tmp, link)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


__all__ = ["COLLECTIONS", "DataLake", "IdsAlreadyExist", "UnknownOrganization", "WriteMode"]
