import json

from crow.data.lake import DataLake
from jobs.ingest import main


def test_cli_ingests_rejects_and_registers_orgs(tmp_path, capsys):
    root = tmp_path / "data"
    good = tmp_path / "docs.jsonl"
    good.write_text(
        json.dumps(
            {
                "id": "d1",
                "title": "Returns",
                "context_type": "policy",
                "body": "60 days",
                "updated_at": "2026-01-01",
            }
        )
    )
    args = ["--org", "new-shop", "--collection", "documents", "--data-root", str(root)]
    assert main([str(good), *args]) == 2  # unknown org
    assert main([str(good), *args, "--create-org", "New Shop"]) == 0
    assert DataLake(root).count("new-shop", "documents") == 1
    bad = tmp_path / "bad.csv"
    bad.write_text("id,title,context_type,body,updated_at\nd2,T,policy,,yesterday\n")
    assert main([str(bad), *args]) == 2
    err = capsys.readouterr().err
    assert "row 1: body" in err and "row 1: updated_at" in err
    assert DataLake(root).count("new-shop", "documents") == 1
