"""The embedder's GPU-profile settings, and how jobs read their --config: 'none' means the
defaults (with the environment's paths), 'env' the app args in CROW_APP_ARGS, a file that file,
and anything else stops the job (no silent CPU defaults)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from crow.config_source import ConfigError, settings_from_config_arg
from crow.settings import AppSettings, EmbedderSettings
from tests.repo import ROOT

CONFIG = (
    "applications:\n  - name: crow\n    args:\n      var_dir: {var}\n"
    "      embedder: {{model: BAAI/bge-m3, device: cuda, fp16: true, dim: 1024, "
    "max_seq_length: 512}}\n"
)


def test_embedder_dim_and_max_seq_length() -> None:
    assert EmbedderSettings().dim is None and EmbedderSettings().max_seq_length is None
    for bad in ({"dim": 0}, {"max_seq_length": -1}):
        with pytest.raises(ValidationError):
            EmbedderSettings(**bad)
    assert AppSettings.from_args({"reindex": {"num_gpus": 0.25}}).reindex.num_gpus == 0.25


def test_config_arg_none_a_file_or_an_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CROW_VAR_DIR", str(tmp_path / "from-env"))
    assert settings_from_config_arg("none").var_dir == tmp_path / "from-env"
    assert settings_from_config_arg(Path("none")).embedder.model == "all-MiniLM-L6-v2"
    monkeypatch.delenv("CROW_VAR_DIR")
    config = tmp_path / "gpu.yaml"
    config.write_text(CONFIG.format(var=tmp_path / "gpu-var"))
    loaded = settings_from_config_arg(str(config))
    assert loaded.var_dir == tmp_path / "gpu-var"
    assert (loaded.embedder.dim, loaded.embedder.max_seq_length) == (1024, 512)
    missing = tmp_path / "serve_config.gpu.yml"  # a typo
    with pytest.raises(ConfigError, match=r"--config .*serve_config\.gpu\.yml: no such file"):
        settings_from_config_arg(missing)
    with pytest.raises(ConfigError, match="no such file"):
        settings_from_config_arg(tmp_path)  # a directory is no config either


def _refused(main, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code not in (0, None)
    return capsys.readouterr().err


@pytest.mark.parametrize("job", ["reindex", "eval", "keys"])
def test_each_job_refuses_a_missing_config(job, tmp_path, capsys, monkeypatch) -> None:
    import importlib

    module = importlib.import_module(f"jobs.{job}")

    def no_work(*args, **kwargs):
        raise AssertionError("the job went on past a missing --config")

    for name in ("DataLake", "real_models", "StoreAccess"):  # what each does next
        if hasattr(module, name):
            monkeypatch.setattr(module, name, no_work)
    missing = tmp_path / "cluster" / "serve_config.gpu.yaml"
    argv = {
        "reindex": ["--org", "acme-outdoor", "--config", str(missing)],
        "eval": ["--config", str(missing)],
        "keys": ["--config", str(missing), "list"],
    }[job]
    err = _refused(module.main, argv, capsys)
    assert f"error: --config {missing}: no such file" in err


def test_jobs_take_config_none_from_the_environment(tmp_path, capsys, monkeypatch) -> None:
    from jobs import keys, reindex

    monkeypatch.setenv("CROW_VAR_DIR", str(tmp_path / "var"))
    # reindex: gets as far as the (empty) data lake of the CROW_VAR_DIR
    assert reindex.main(["--org", "nobody", "--config", "none"]) == 2
    assert "unknown organization 'nobody'" in capsys.readouterr().err
    assert keys.main(["--config", "none", "list"]) == 0
    assert (tmp_path / "var" / "chat.duckdb").exists()  # the store of CROW_VAR_DIR


def test_jobs_refuse_a_setting_in_the_environment(tmp_path, capsys, monkeypatch) -> None:
    """A CROW_* variable that is no path or address stops a job with the reason, not a
    traceback and not a job on other settings than the ones configured."""
    from jobs import reindex

    monkeypatch.setenv("CROW_EMBEDDER__DEVICE", "cuda")
    err = _refused(reindex.main, ["--org", "nobody", "--config", "none"], capsys)
    assert "error: environment variable CROW_EMBEDDER__DEVICE:" in err
    assert "Set embedder.device in the serve config's application args" in err


@pytest.fixture()
def dashboard():
    """A local HTTP server answering GET /api/serve/applications/ as Ray's dashboard does
    (ray.serve.schema.ServeInstanceDetails: applications -> name -> deployed_app_config)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import yaml

    gpu = ROOT / "cluster" / "serve_config.gpu.yaml"
    (app,) = yaml.safe_load(gpu.read_text())["applications"]
    body = json.dumps({"applications": {"crow": {"deployed_app_config": app}}}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == "/api/serve/applications/"
            self.send_response(200 if found else 404)
            self.end_headers()
            self.wfile.write(body if found else b"{}")

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", gpu
    finally:
        server.shutdown()
        server.server_close()


def test_config_from_the_dashboard_is_what_is_served(dashboard, capsys) -> None:
    """--config http://HOST:8265: the served args, equal to the file they were deployed from;
    an application that is not deployed, or no dashboard, stops the job."""
    from jobs import reindex

    url, gpu = dashboard
    assert settings_from_config_arg(url) == settings_from_config_arg(gpu)
    assert settings_from_config_arg(url + "/").llm.backend == "vllm"
    with pytest.raises(
        ConfigError, match=r"no application 'other' is deployed there \(deployed: \['crow'\]\)"
    ):
        settings_from_config_arg(url, app="other")
    closed = "http://127.0.0.1:9"  # discard port: nothing listens
    with pytest.raises(ConfigError, match="cannot read"):
        settings_from_config_arg(closed, timeout_s=2)
    err = _refused(reindex.main, ["--org", "acme-outdoor", "--config", closed], capsys)
    assert f"error: --config {closed}: cannot read" in err
