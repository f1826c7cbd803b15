"""Where an organization's knowledge base comes from for a full reindex.

A source is a git repository (URL or path; the commit indexed is recorded) or a local folder
of markdown / text files. Each file becomes one document: its first ``# heading`` (or file
name) is the title, an optional front-matter ``context_type:`` line (or its folder name) the
context type.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

SUFFIXES = (".md", ".markdown", ".txt")
GIT_TIMEOUT_S = 120
_FRONT = re.compile(r"\A---\s*\n(?P<meta>.*?)\n---\s*\n", re.S)
_HEADING = re.compile(r"^#\s+(?P<title>.+)$", re.M)


class SourceError(RuntimeError):
    pass


@dataclass(frozen=True)
class LoadedSource:
    documents: list[dict[str, Any]]
    revision: str | None  # the git commit indexed, None for a folder


def _doc_id(rel: Path) -> str:
    flat = "kb-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", rel.as_posix().replace("/", "."))
    return flat if len(flat) <= 120 else "kb-" + hashlib.sha1(rel.as_posix().encode()).hexdigest()


def _document(root: Path, path: Path, updated_at: datetime) -> dict[str, Any] | None:
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    meta: dict[str, str] = {}
    if m := _FRONT.match(text + "\n"):
        for line in m["meta"].splitlines():
            key, _, value = line.partition(":")
            meta[key.strip().lower()] = value.strip()
        text = text[m.end() :].strip()
    if not text:
        return None
    rel = path.relative_to(root)
    heading = _HEADING.search(text)
    title = meta.get("title") or (heading["title"].strip() if heading else None)
    folder = rel.parent.name if rel.parent != Path(".") else ""
    return {
        "id": _doc_id(rel),
        "title": (title or path.stem.replace("-", " ").replace("_", " ").capitalize())[:300],
        "context_type": (meta.get("context_type") or folder or "document")[:64],
        "body": text,
        "updated_at": updated_at,
    }


def read_folder(root: Path, *, updated_at: datetime | None = None) -> list[dict[str, Any]]:
    root = Path(root)
    if not root.is_dir():
        raise SourceError(f"knowledge-base folder {root} does not exist")
    docs = []
    for path in sorted(root.rglob("*")):
        if ".git" in path.parts or not path.is_file() or path.suffix.lower() not in SUFFIXES:
            continue
        stamp = updated_at or datetime.fromtimestamp(path.stat().st_mtime, UTC)
        if (doc := _document(root, path, stamp)) is not None:
            docs.append(doc)
    return docs


def _git(*args: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
            check=True,
        )  # fmt: skip
    except subprocess.CalledProcessError as exc:
        raise SourceError(f"git {args[0]} failed: {exc.stderr.strip()[:500]}") from None
    except subprocess.TimeoutExpired:
        raise SourceError(f"git {args[0]} took longer than {GIT_TIMEOUT_S}s") from None
    return done.stdout.strip()


def read_git(location: str, *, ref: str | None = None) -> LoadedSource:
    with tempfile.TemporaryDirectory(prefix="crow-kb-") as tmp:
        checkout = Path(tmp) / "repo"
        branch = ["--branch", ref] if ref else []
        _git("clone", "--quiet", "--depth", "1", *branch, location, str(checkout))
        revision = _git("rev-parse", "HEAD", cwd=checkout)
        committed = datetime.fromisoformat(_git("log", "-1", "--format=%cI", cwd=checkout))
        return LoadedSource(read_folder(checkout, updated_at=committed.astimezone(UTC)), revision)


def load(kind: Literal["git", "folder"], location: str, *, ref: str | None = None) -> LoadedSource:
    if kind == "git":
        return read_git(location, ref=ref)
    return LoadedSource(read_folder(Path(location)), None)
