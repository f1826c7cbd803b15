"""Knowledge-base sources: a git repository the test creates, and a plain folder."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from crow.data import knowledge_source as kb_source
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
    loaded = kb_source.load("git", kb_repo.as_uri())
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
        kb_source.load("git", (tmp_path / "nope").as_uri())
    with pytest.raises(kb_source.SourceError, match="does not exist"):
        kb_source.load("folder", str(tmp_path / "nope"))


def test_org_settings_validate_cron_and_source():
    s = AppSettings.from_args(
        {
            "orgs": {
                "acme-outdoor": {
                    "reindex_cron": "0 3 * * *",
                    "knowledge_source": {"kind": "git", "location": "/kb"},
                }
            }
        }
    )
    assert s.orgs["acme-outdoor"].knowledge_source.kind == "git"
    with pytest.raises(ValueError, match="cron"):
        AppSettings.from_args({"orgs": {"acme-outdoor": {"reindex_cron": "every day"}}})


def _commit(repo, message="kb"):
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", message)


def test_symlinks_never_read_the_host_or_other_tenants(tmp_path):
    """A committed link to /proc/self/environ (the job's settings) or to another tenant's
    data is refused, whether the link is a file or a folder."""
    tenant = tmp_path / "data" / "other-org"
    tenant.mkdir(parents=True)
    (tenant / "secret.md").write_text("# Other tenant\nTheir private margins.\n")
    repo = tmp_path / "kb"
    repo.mkdir()
    (repo / "ok.md").write_text("# Fine\nA normal page.\n")
    (repo / "environ.md").symlink_to("/proc/self/environ")
    (repo / "tenant.md").symlink_to(tenant / "secret.md")
    (repo / "up.md").symlink_to("../data/other-org/secret.md")
    (repo / "docs").symlink_to(tenant)  # a linked folder
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo)
    for loaded in (kb_source.load("git", repo.as_uri()), kb_source.load("folder", str(repo))):
        assert [d["id"] for d in loaded.documents] == ["kb-ok.md"]
        assert {s.split(":")[0] for s in loaded.skipped} >= {"environ.md", "tenant.md", "up.md"}
        bodies = " ".join(d["body"] for d in loaded.documents)
        assert "margins" not in bodies and "PATH=" not in bodies


def test_a_folder_source_that_is_itself_a_link_is_followed_once(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.md").write_text("# A\nbody\n")
    (tmp_path / "link").symlink_to(real)  # the operator's configured path may be a link
    assert [d["id"] for d in kb_source.load("folder", str(tmp_path / "link")).documents] == [
        "kb-a.md"
    ]


def test_file_count_and_size_are_capped(tmp_path, monkeypatch):
    folder = tmp_path / "kb"
    folder.mkdir()
    for i in range(4):
        (folder / f"p{i}.md").write_text(f"# Page {i}\ntext\n")
    (folder / "big.md").write_text("# Big\n" + "x" * 5000)
    monkeypatch.setattr(kb_source, "MAX_FILE_BYTES", 1000)
    loaded = kb_source.load("folder", str(folder))
    assert sorted(d["id"] for d in loaded.documents) == [f"kb-p{i}.md" for i in range(4)]
    assert any(s.startswith("big.md:") and "1000" in s for s in loaded.skipped)
    monkeypatch.setattr(kb_source, "MAX_FILES", 3)
    with pytest.raises(kb_source.SourceError, match="more than 3 files"):
        kb_source.load("folder", str(folder))
    assert kb_source.MAX_FILES and kb_source.MAX_FILE_BYTES  # documented defaults exist


@pytest.mark.parametrize(
    "location",
    [
        "http://example.com/kb.git",
        "ssh://git@example.com/kb.git",
        "git://example.com/kb",
        "git@example.com:kb.git",
        "ext::sh -c touch% /tmp/pwned",
        "/srv/kb",
        "-uhoh",
        "https://",
        "file://remote-host/srv/kb",
    ],
)
def test_git_sources_are_https_urls(location):
    with pytest.raises(kb_source.SourceError, match="https://"):
        kb_source.load("git", location)


def test_a_bad_ref_is_refused(kb_repo):
    with pytest.raises(kb_source.SourceError, match="ref"):
        kb_source.load("git", kb_repo.as_uri(), ref="--upload-pack=touch /tmp/x")


def test_every_git_call_has_a_timeout_no_prompt_and_only_its_protocol(tmp_path, monkeypatch):
    """A git that hangs (and leaves a child holding its output) is killed with its children."""
    bindir, log = tmp_path / "bin", tmp_path / "calls.log"
    bindir.mkdir()
    fake = bindir / "git"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$GIT_TERMINAL_PROMPT $*" >> {log}\n'
        f"sleep 30 &\necho $! > {tmp_path}/child.pid\nwait\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setattr(kb_source, "GIT_TIMEOUT_S", 1)
    started = time.monotonic()
    with pytest.raises(kb_source.SourceError, match="longer than 1s"):
        kb_source.load("git", "https://example.com/kb.git")
    assert time.monotonic() - started < 10
    call = log.read_text().splitlines()[0]
    assert call.startswith("0 ") and "protocol.allow=never" in call
    assert "protocol.https.allow=always" in call and "core.hooksPath=/dev/null" in call
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the hung git's child outlived the timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead: it only waits for its parent to reap it
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def test_documents_carry_their_source_as_origin(kb_repo):
    assert {d["origin"] for d in kb_source.load("git", kb_repo.as_uri()).documents} == {
        "source:git"
    }
    assert {d["origin"] for d in kb_source.load("folder", str(kb_repo)).documents} == {
        "source:folder"
    }
