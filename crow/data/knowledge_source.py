"""Where an organization's knowledge base comes from for a full reindex.

A source is a git repository (an ``https://`` URL; ``file://`` for local repositories and
tests; the commit indexed is recorded) or a local folder of markdown / text files. Each file
becomes one document: its first ``# heading`` (or file name) is the title, an optional
front-matter ``context_type:`` line (or its folder name) the context type, and its
``origin`` is ``source:git`` or ``source:folder`` (a source reindex replaces only the
documents of that origin).

What a source can make the job read is bounded, because its contents become searchable:

* Symbolic links are refused (skipped and listed in ``LoadedSource.skipped``), files or
  folders alike, and so is anything that is not a regular file or resolves outside the
  checkout / folder: a repository's link to ``/proc/self/environ`` (the job's settings) or
  to another tenant's Parquet files never becomes a document. Files are opened with
  ``O_NOFOLLOW`` and checked with ``fstat`` on the open descriptor.
* At most ``MAX_FILES`` (5,000) markdown / text files, else the whole load fails (a partial
  source would delete the rest of the source's documents); a file over ``MAX_FILE_BYTES``
  (2 MB) is skipped and listed; at most ``MAX_TOTAL_BYTES`` (200 MB) read in all and
  ``MAX_ENTRIES`` (50,000) directory entries walked.
* git: only ``https://`` and ``file://`` (local host) URLs; every git call runs under
  ``GIT_TIMEOUT_S`` (its whole process group is killed past it), with no terminal prompt,
  only the URL's protocol allowed (no submodule / ``ext::`` transports), no hooks and no
  LFS downloads. Credentials come from git's own credential helpers, never the URL.

These are module constants, not settings: they bound what any configuration can do.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import signal
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

SUFFIXES = (".md", ".markdown", ".txt")
GIT_TIMEOUT_S = 120  # each git call (clone, rev-parse, log)
MAX_FILES = 5_000  # markdown / text files in one source
MAX_FILE_BYTES = 2 * 1024 * 1024  # one file
MAX_TOTAL_BYTES = 200 * 1024 * 1024  # all files together
MAX_ENTRIES = 50_000  # directory entries walked, of any kind
GIT_SCHEMES = ("https", "file")
_REF = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}$")
_FRONT = re.compile(r"\A---\s*\n(?P<meta>.*?)\n---\s*\n", re.S)
_HEADING = re.compile(r"^#\s+(?P<title>.+)$", re.M)


class SourceError(RuntimeError):
    pass


@dataclass(frozen=True)
class LoadedSource:
    documents: list[dict[str, Any]]
    revision: str | None  # the git commit indexed, None for a folder
    skipped: list[str] = field(default_factory=list)  # "relative/path: why"


def _doc_id(rel: Path) -> str:
    flat = "kb-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", rel.as_posix().replace("/", "."))
    return flat if len(flat) <= 120 else "kb-" + hashlib.sha1(rel.as_posix().encode()).hexdigest()


def _document(rel: Path, raw: bytes, updated_at: datetime, origin: str) -> dict[str, Any] | None:
    text = raw.decode("utf-8", errors="replace").strip()
    meta: dict[str, str] = {}
    if m := _FRONT.match(text + "\n"):
        for line in m["meta"].splitlines():
            key, _, value = line.partition(":")
            meta[key.strip().lower()] = value.strip()
        text = text[m.end() :].strip()
    if not text:
        return None
    heading = _HEADING.search(text)
    title = meta.get("title") or (heading["title"].strip() if heading else None)
    folder = rel.parent.name if rel.parent != Path(".") else ""
    return {
        "id": _doc_id(rel),
        "title": (title or rel.stem.replace("-", " ").replace("_", " ").capitalize())[:300],
        "context_type": (meta.get("context_type") or folder or "document")[:64],
        "body": text,
        "updated_at": updated_at,
        "origin": origin,
    }


def _read_regular(path: Path, limit: int) -> tuple[bytes | None, os.stat_result | None, str]:
    """The file's bytes (at most `limit`), refusing links and anything but regular files."""
    try:
        fd = os.open(
            path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        )
    except OSError as exc:  # ELOOP: a symbolic link (swapped in after the walk saw a file)
        return None, None, f"not opened ({exc.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, None, "not a regular file"
        if st.st_size > limit:
            return None, None, f"{st.st_size} bytes, over the {limit}-byte limit"
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:
            return None, None, f"over the {limit}-byte limit"
        return data, st, ""
    finally:
        os.close(fd)


def _walk(root: Path, skipped: list[str]) -> list[Path]:
    """Candidate files under `root` (relative), never entering or returning links."""
    found: list[Path] = []
    entries = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        entries += len(dirnames) + len(filenames)
        if entries > MAX_ENTRIES:
            raise SourceError(f"the source has more than {MAX_ENTRIES} files and folders")
        keep = []
        for name in sorted(dirnames):
            if name == ".git":
                continue
            if (here / name).is_symlink():
                skipped.append(f"{(here / name).relative_to(root).as_posix()}: a symbolic link")
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            path = here / name
            if path.suffix.lower() not in SUFFIXES:
                continue
            rel = path.relative_to(root)
            if path.is_symlink():
                skipped.append(f"{rel.as_posix()}: a symbolic link")
                continue
            found.append(rel)
            if len(found) > MAX_FILES:
                raise SourceError(
                    f"the source has more than {MAX_FILES} files ({', '.join(SUFFIXES)}); "
                    "split it or index a subfolder"
                )
    return sorted(found)


def read_folder(
    root: Path,
    *,
    updated_at: datetime | None = None,
    origin: str = "source:folder",
    skipped: list[str] | None = None,
) -> list[dict[str, Any]]:
    """One document per markdown / text file under `root` (see the module's limits).

    `root` itself may be a link (the configured path); nothing inside it may be."""
    skipped = [] if skipped is None else skipped
    root = Path(root)
    if not root.is_dir():
        raise SourceError(f"knowledge-base folder {root} does not exist")
    root = root.resolve()
    docs, total = [], 0
    for rel in _walk(root, skipped):
        path = root / rel
        if not path.resolve().is_relative_to(root):  # a linked parent swapped in meanwhile
            skipped.append(f"{rel.as_posix()}: resolves outside the source")
            continue
        data, st, why = _read_regular(path, MAX_FILE_BYTES)
        if data is None or st is None:
            skipped.append(f"{rel.as_posix()}: {why}")
            continue
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            raise SourceError(f"the source holds more than {MAX_TOTAL_BYTES} bytes of text")
        stamp = updated_at or datetime.fromtimestamp(st.st_mtime, UTC)
        if (doc := _document(rel, data, stamp, origin)) is not None:
            docs.append(doc)
    for line in skipped:
        log.warning("knowledge source %s: skipped %s", root, line)
    return docs


def check_git_location(location: str) -> str:
    """The URL's scheme, or SourceError unless it is an https:// (or local file://) URL."""
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    if (
        scheme not in GIT_SCHEMES
        or location.startswith("-")
        or (scheme == "https" and not parts.hostname)
        or (scheme == "file" and (parts.netloc or not parts.path))
    ):
        raise SourceError(
            "a git knowledge source must be an https:// URL (file:// for a repository on this "
            f"machine); got {location[:200]!r}. A local folder is kind 'folder'."
        )
    return scheme


def _git(*args: str, cwd: Path | None = None, scheme: str = "https") -> str:
    """Run git with a timeout over its whole process group, no prompts, no hooks and only
    the `scheme` protocol allowed."""
    command = [
        "git",
        "-c",
        "protocol.allow=never",
        "-c",
        f"protocol.{scheme}.allow=always",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "submodule.recurse=false",
        "-c",
        "core.fsmonitor=false",
        *args,
    ]
    env = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",  # a missing credential fails, never waits for a prompt
        "GIT_LFS_SKIP_SMUDGE": "1",
        "GIT_PROTOCOL_FROM_USER": "0",
    }
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise SourceError(f"git {args[0]} took longer than {GIT_TIMEOUT_S}s") from None
    except BaseException:
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        raise SourceError(f"git {args[0]} failed: {err.strip()[:500]}")
    return out.strip()


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # git, git-remote-https, index-pack, ...
    proc.kill()
    proc.communicate()


def read_git(location: str, *, ref: str | None = None) -> LoadedSource:
    scheme = check_git_location(location)
    if ref is not None and not _REF.fullmatch(ref):
        raise SourceError(f"not a git branch or tag name: ref {ref[:100]!r}")
    with tempfile.TemporaryDirectory(prefix="crow-kb-") as tmp:
        checkout = Path(tmp) / "repo"
        branch = ["--branch", ref] if ref else []
        _git(
            "clone",
            "--quiet",
            "--depth",
            "1",
            "--no-recurse-submodules",
            "--template=",
            *branch,
            "--",
            location,
            str(checkout),
            scheme=scheme,
        )
        revision = _git("rev-parse", "HEAD", cwd=checkout, scheme=scheme)
        committed = datetime.fromisoformat(
            _git("log", "-1", "--format=%cI", cwd=checkout, scheme=scheme)
        )
        skipped: list[str] = []
        docs = read_folder(
            checkout, updated_at=committed.astimezone(UTC), origin="source:git", skipped=skipped
        )
        return LoadedSource(docs, revision, skipped)


def load(kind: Literal["git", "folder"], location: str, *, ref: str | None = None) -> LoadedSource:
    if kind == "git":
        return read_git(location, ref=ref)
    skipped: list[str] = []
    return LoadedSource(read_folder(Path(location), skipped=skipped), None, skipped)
