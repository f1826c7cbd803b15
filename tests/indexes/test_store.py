from __future__ import annotations

from pathlib import Path

import pytest

from indexes.store import CURRENT_FILE, IndexNotFoundError, IndexStore
from indexes.vector_index import VectorIndex
from models.testing_embed import HashEmbedder
from tests.repo import ROOT

EMBEDDER = HashEmbedder(dim=16)


def make_index(*texts: str) -> VectorIndex:
    return VectorIndex.build([f"id-{t}" for t in texts], EMBEDDER.embed(texts))


def build_and_publish(store: IndexStore, *texts: str, org: str = "acme") -> str:
    staging = store.new_version(org, "products")
    store.write(staging, make_index(*texts), model=EMBEDDER.name, source_rows=len(texts))
    store.publish(org, "products", staging.name)
    return staging.name


def test_publish_switches_current_and_load_follows(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    assert store.current("acme", "products") is None
    with pytest.raises(IndexNotFoundError):
        store.load("acme", "products")
    v1 = build_and_publish(store, "red shoes", "blue hat")
    assert store.current("acme", "products") == v1
    v2 = build_and_publish(store, "green scarf", "red shoes", "wool socks")
    assert store.current("acme", "products") == v2
    assert store.versions("acme", "products") == [v1, v2]
    assert store.load("acme", "products").count == 3
    assert store.load("acme", "products", v1).count == 2
    meta = store.meta("acme", "products")
    assert (meta.version, meta.dim, meta.count, meta.kind, meta.model, meta.source_rows) == (
        v2,
        16,
        3,
        "flat",
        EMBEDDER.name,
        3,
    )
    hit = store.load("acme", "products").search(EMBEDDER.embed(["wool socks"]), 1)[0][0]
    assert hit.id == "id-wool socks"
    store.publish("acme", "products", v1)  # roll back to an older published version
    assert store.current("acme", "products") == v1
    assert (tmp_path / "acme" / "products" / CURRENT_FILE).read_text().strip() == v1
    assert not list((tmp_path / "acme" / "products").glob(".*.tmp"))


def test_unpublished_staging_is_never_served(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    v1 = build_and_publish(store, "red shoes")
    staging = store.new_version("acme", "products")
    store.write(staging, make_index("half", "built"), model=EMBEDDER.name)
    assert store.current("acme", "products") == v1
    assert store.versions("acme", "products") == [v1]
    assert store.load("acme", "products").count == 1
    with pytest.raises(IndexNotFoundError):
        store.load("acme", "products", staging.name)


def test_incomplete_staging_cannot_be_published(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    staging = store.new_version("acme", "products")
    make_index("only", "files").save(staging)  # no meta.json: a crashed build
    with pytest.raises(ValueError, match="incomplete"):
        store.publish("acme", "products", staging.name)
    assert store.current("acme", "products") is None


@pytest.mark.parametrize(
    "org", ["../etc", "..", "a/b", "", ".hidden", "a" * 65, "acme\n", "/abs", "a b"]
)
def test_bad_org_ids_are_rejected(tmp_path: Path, org: str) -> None:
    store = IndexStore(tmp_path)
    with pytest.raises(ValueError, match="organization id"):
        store.new_version(org, "products")
    with pytest.raises(ValueError, match="organization id"):
        store.current(org, "products")


@pytest.mark.parametrize("collection", ["../products", "users", "products/..", ""])
def test_bad_collections_are_rejected(tmp_path: Path, collection: str) -> None:
    with pytest.raises(ValueError, match="collection"):
        IndexStore(tmp_path).load("acme", collection)


@pytest.mark.parametrize("version", ["../../x", ".staging", "CURRENT", "v1"])
def test_bad_versions_are_rejected(tmp_path: Path, version: str) -> None:
    with pytest.raises(ValueError, match="version"):
        IndexStore(tmp_path).load("acme", "products", version)


def test_orgs_are_isolated(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    build_and_publish(store, "secret plan", org="acme")
    assert store.current("globex", "products") is None
    with pytest.raises(IndexNotFoundError):
        store.load("globex", "products")


def test_publish_prunes_to_keep_and_never_drops_current(tmp_path: Path) -> None:
    store = IndexStore(tmp_path, keep=2)
    versions = [build_and_publish(store, f"doc {i}") for i in range(4)]
    assert store.versions("acme", "products") == versions[-2:]
    store.publish("acme", "products", versions[-2])  # roll back
    assert store.prune("acme", "products", keep=1) == []  # newest kept, current kept
    assert store.versions("acme", "products") == versions[-2:]
    assert list(store.load("acme", "products").ids) == ["id-doc 2"]
    store.publish("acme", "products", versions[-1])
    assert store.prune("acme", "products", keep=1) == [versions[-2]]
    assert store.versions("acme", "products") == versions[-1:]


def test_prune_removes_abandoned_staging(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    abandoned = store.new_version("acme", "products")
    build_and_publish(store, "fresh")
    assert not abandoned.exists()


def test_the_writer_lock_is_exclusive_reentrant_and_times_out(tmp_path: Path) -> None:
    import threading

    from indexes.store import IndexLockTimeout

    store = IndexStore(tmp_path)
    other = IndexStore(str(tmp_path / "." / ""))  # another spelling of the same root
    with store.lock("acme", "products"), other.lock("acme", "products"):  # same thread: re-enters
        got: list[BaseException] = []

        def contender() -> None:
            try:
                with IndexStore(tmp_path).lock("acme", "products", timeout_s=0.2):
                    pass
            except BaseException as exc:
                got.append(exc)

        t = threading.Thread(target=contender)
        t.start()
        t.join(10)
        assert len(got) == 1 and isinstance(got[0], IndexLockTimeout)
        with IndexStore(tmp_path).lock("acme", "patterns", timeout_s=0.2):
            pass  # another collection is not held up
    got.clear()
    t = threading.Thread(target=contender)  # released on exit: now another thread gets it
    t.start()
    t.join(10)
    assert got == []


def test_the_writer_lock_holds_across_processes(tmp_path: Path) -> None:
    import subprocess
    import sys

    from indexes.store import IndexLockTimeout

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from indexes.store import IndexStore\n"
            f"with IndexStore({str(tmp_path)!r}).lock('acme', 'products'):\n"
            "    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
        with (
            pytest.raises(IndexLockTimeout),
            IndexStore(tmp_path).lock("acme", "products", timeout_s=0.2),
        ):
            pass
        holder.kill()  # the kernel drops a dead holder's lock
        holder.wait(10)
        with IndexStore(tmp_path).lock("acme", "products", timeout_s=5):
            pass
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.stdout.close()  # type: ignore[union-attr]
