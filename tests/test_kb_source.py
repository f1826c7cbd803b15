"""Knowledge-base sources: a git repository the test creates, and a plain folder."""

import subprocess

import pytest

from crow import kb_source
from crow.settings import AppSettings


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def kb_repo(tmp_path):
    repo = tmp_path / "kb"
    (repo / "policy").mkdir(parents=True)
    (repo / "policy" / "returns.md").write_text("# Return policy\n\n60 days with a receipt.\n")
    (repo / "about.md").write_text("---\ncontext_type: profile\n---\n# Who we are\nA shop.\n")
    (repo / "notes.txt").write_text("Plain text notes about stores.")
    (repo / "image.png").write_bytes(b"\x89PNG")
    (repo / "empty.md").write_text("   \n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "kb")
    return repo


def test_git_source_reads_markdown_and_records_the_commit(kb_repo):
    loaded = kb_source.load("git", str(kb_repo))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=kb_repo, capture_output=True, text=True)
    assert loaded.revision == head.stdout.strip()
    docs = {d["id"]: d for d in loaded.documents}
    assert set(docs) == {"kb-about.md", "kb-notes.txt", "kb-policy.returns.md"}
    assert docs["kb-policy.returns.md"]["title"] == "Return policy"
    assert docs["kb-policy.returns.md"]["context_type"] == "policy"
    assert docs["kb-about.md"]["context_type"] == "profile"
    assert docs["kb-about.md"]["body"].startswith("# Who we are")
    assert docs["kb-notes.txt"]["title"] == "Notes"


def test_folder_source(kb_repo):
    loaded = kb_source.load("folder", str(kb_repo / "policy"))
    assert loaded.revision is None
    assert [d["id"] for d in loaded.documents] == ["kb-returns.md"]


def test_bad_sources_fail_clearly(tmp_path):
    with pytest.raises(kb_source.SourceError, match="git clone failed"):
        kb_source.load("git", str(tmp_path / "nope"))
    with pytest.raises(kb_source.SourceError, match="does not exist"):
        kb_source.load("folder", str(tmp_path / "nope"))


def test_org_settings_validate_cron_and_source():
    s = AppSettings.from_args({"orgs": {"acme-outdoor": {
        "reindex_cron": "0 3 * * *", "knowledge_source": {"kind": "git", "location": "/kb"}}}})  # fmt: skip
    assert s.orgs["acme-outdoor"].knowledge_source.kind == "git"
    with pytest.raises(ValueError, match="cron"):
        AppSettings.from_args({"orgs": {"acme-outdoor": {"reindex_cron": "every day"}}})
