"""The one settings model of the app.

Filled from the application ``args`` of ``serve_config.yaml`` (or any dict). The environment
may override only paths and addresses, e.g. ``CROW_VAR_DIR=/srv/crow``; any other ``CROW_*``
variable fails the construction (the allowlist and the rule: :mod:`crow.settings_env`).
Nothing here is built at import time: call :meth:`AppSettings.from_args`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from crow.settings_env import AllowlistedEnvSource


def read_secret(env: str | None, file: Path | None) -> str | None:
    """A secret from the environment variable `env`, else from `file` (a mounted Kubernetes
    Secret); never from the application args, which Ray's dashboard shows to anyone."""
    if env and (value := os.environ.get(env, "").strip()):
        return value
    if file is not None and Path(file).is_file():
        return Path(file).read_text().strip() or None
    return None


def serve_config_args(path: Path | str, app: str = "crow") -> dict[str, Any]:
    import yaml

    config = yaml.safe_load(Path(path).read_text())
    for application in config.get("applications", []):
        if application.get("name") == app:
            return dict(application.get("args") or {})
    raise KeyError(f"{path} has no application named {app!r}")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Limits(_Section):
    max_message_chars: int = Field(4000, gt=0, description="Longest chat message accepted.")
    max_body_bytes: int = Field(256_000, gt=0, description="Largest JSON request body.")
    max_ingest_bytes: int = Field(64 * 1024 * 1024, gt=0, description="Largest ingest upload.")
    max_ingest_rows: int = Field(500_000, gt=0, description="Most rows in one ingest batch.")
    max_row_errors: int = Field(100, gt=0, description="Row errors reported per rejected batch.")
    history_messages: int = Field(10, gt=0, description="Session messages given to the model.")
    max_iterations: int = Field(5, gt=0, description="Agent loop iterations before fallback.")
    a2a_task_retention_h: float = Field(
        24.0, gt=0, description="Finished A2A tasks are kept this long, then deleted."
    )


class Quotas(_Section):
    """Per key and per organization; the GPU profile sets production values."""

    chat_per_minute: float = Field(
        20, gt=0, description="Chat, Q&A, A2A and /v1 messages per key and minute."
    )
    chat_burst: int = Field(10, gt=0, description="Messages a key may send at once.")
    search_per_minute: float = Field(
        120, gt=0, description="Searches (REST and MCP tool calls) per key and minute."
    )
    search_burst: int = Field(30, gt=0, description="Searches a key may send at once.")
    daily_tokens: int = Field(
        2_000_000, ge=0, description="Model tokens per organization and UTC day (0: no quota)."
    )
    max_sessions: int = Field(10_000, gt=0, description="Chat and Q&A sessions per organization.")


class AuthSettings(_Section):
    mode: Literal["keys", "off"] = Field(
        "keys",
        description="'keys': every request but /health, /ready, /docs, the page and the agent "
        "card carries an API key. 'off': local development only; then only loopback clients "
        "of a loopback-bound server are answered.",
    )
    operator_token_env: str = Field(
        "ASK_CROW_OPERATOR_TOKEN",
        description="The environment variable with the platform operator's token.",
    )
    operator_token_file: Path | None = Field(
        None, description="A file with the operator token (a mounted Secret)."
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host header values served (e.g. 'crow.example.com'); empty: any.",
    )
    key_cache_s: float = Field(
        5.0,
        ge=0,
        description="How long an Ingress replica trusts a looked-up key (revocation lag).",
    )


class Timeouts(_Section):
    model_s: float = Field(90.0, gt=0, description="One model call.")
    tool_s: float = Field(15.0, gt=0, description="One tool call.")
    embed_s: float = Field(15.0, gt=0, description="One embedding call of a route (search, index).")


class VLLMSettings(_Section):
    """GPU profile: vLLM through Ray Serve LLM (deployments/llm_vllm.py makes the LLMConfig)."""

    model_source: str = Field("meta-llama/Llama-3.3-70B-Instruct", description="HF id or path.")
    accelerator_type: str | None = Field(
        None,
        description="e.g. 'H100': every GPU bundle then asks for `accelerator_type:<X>`. Set it "
        "only if every GPU node advertises the `accelerator_type:<X>` resource in rayStartParams "
        "(the KubeRay autoscaler cannot see it on a node not yet started); unset, the pods' "
        "nodeSelector picks the GPU nodes.",
    )
    tensor_parallel_size: int = Field(4, gt=0, description="GPUs one replica shards across.")
    pipeline_parallel_size: int = Field(1, gt=0)
    placement_strategy: Literal["STRICT_PACK", "PACK", "SPREAD", "STRICT_SPREAD"] = Field(
        "STRICT_PACK",
        description="A replica's TP x PP GPU bundles: STRICT_PACK on one node, or the replica "
        "waits; PACK only for a pipeline-parallel replica meant to span nodes.",
    )
    quantization: str | None = Field("fp8", description="vLLM quantization (fp8 for 70B).")
    max_model_len: int = Field(16384, gt=0)
    gpu_memory_utilization: float = Field(0.90, gt=0, le=1)
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(2, ge=1)
    target_ongoing_requests: int = Field(16, gt=0)
    max_ongoing_requests: int = Field(64, gt=0)
    tool_call_parser: str | None = Field(
        "llama3_json", description="vLLM's tool-call parser; None: tool calls read from the text."
    )
    chat_template: str | None = Field(
        "tool_chat_template_llama3.1_json.jinja",
        description="A file name in deployments/chat_templates/, or an absolute path that exists "
        "on every node; None: the model's own template.",
    )
    engine_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="More vLLM engine or frontend args but those above."
    )

    @field_validator("chat_template")
    @classmethod
    def _file_name_or_absolute_path(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).is_absolute() and Path(value).name != value:
            raise ValueError(f"chat_template {value!r}: a file name or an absolute path")
        return value

    @field_validator("engine_kwargs")
    @classmethod
    def _not_set_twice(cls, value: dict[str, Any]) -> dict[str, Any]:
        owned = {
            "model": "model_source",
            "served_model_name": "(llm.model)",
            "enable_auto_tool_choice": "tool_call_parser",
            **{
                k: k
                for k in (
                    "tensor_parallel_size",
                    "pipeline_parallel_size",
                    "quantization",
                    "max_model_len",
                    "gpu_memory_utilization",
                    "tool_call_parser",
                    "chat_template",
                )
            },
        }
        if clash := sorted(set(value) & set(owned)):
            raise ValueError(f"engine_kwargs {clash}: set {[owned[k] for k in clash]} instead")
        return value


CpuDtype = Literal["auto", "bfloat16", "float32"]
"""A CPU model's weight dtype; "auto": bfloat16 where the CPU has bfloat16 kernels."""


class LLMSettings(_Section):
    backend: Literal["local", "vllm", "openai", "custom"] = "local"
    model: str = Field(
        "qwen2.5-coder-1.5b-instruct-q4_k_m",
        description="Model id; local: a GGUF of models.gguf_assembly.MODELS (selects the weights).",
    )
    base_url: str | None = Field(None, description="openai backend: endpoint base URL.")
    api_key_env: str = Field(
        "OPENAI_API_KEY", description="openai backend: the environment variable with the API key."
    )
    api_key_file: Path | None = Field(
        None, description="openai backend: a file with the API key (a mounted Secret)."
    )
    factory: str | None = Field(
        None, description="custom backend: 'module:callable' returning a ChatModel."
    )
    max_tokens: int = Field(
        512, gt=0, description="Cap on generated tokens per request, on every route."
    )
    max_prompt_tokens: int = Field(
        3072, gt=0, description="local: longest prompt; a longer one is refused before prefill."
    )
    max_waiting: int = Field(8, ge=0, description="local: requests waiting for a free slot.")
    slots: int = Field(2, gt=0, description="local: sequences decoded together (llama.cpp).")
    threads: int = Field(
        1, gt=0, description="local: threads that generate (1 holds up on a busy machine)."
    )
    batch_threads: int = Field(2, gt=0, description="local: threads that read the prompt.")
    batch_tokens: int = Field(
        128,
        gt=0,
        description=(
            "local: prompt tokens per step; other slots decode, and a stop or deadline takes "
            "effect, in between (128: as fast as 256 on 2 AVX2 cores, half the wait)."
        ),
    )
    cache_entries: int = Field(256, ge=0, description="Response cache size (0: off).")
    vllm: VLLMSettings = VLLMSettings()


class EmbedderSettings(_Section):
    model: str = Field("all-MiniLM-L6-v2", description="Model id or path; CPU default bundled.")
    device: str = "cpu"
    fp16: bool = False
    dtype: CpuDtype = Field("auto", description="CPU: weight dtype (models/dtypes.py).")
    batch_size: int = Field(64, gt=0, description="Texts per forward pass.")
    threads: int | None = Field(None, gt=0, description="CPU: torch threads; default all cores.")
    max_seq_length: int | None = Field(
        None,
        gt=0,
        description="Tokens of a text the model reads (the rest is cut); default the model's "
        "own limit (bge-m3: 8192), which this may lower but not raise.",
    )
    dim: int | None = Field(
        None,
        gt=0,
        description="The model's output dimension; lets jobs size indexes without loading "
        "the model (default: read from its files); the embedder and reindexes fail on a mismatch.",
    )
    max_batch_size: int = Field(32, gt=0, description="Serve dynamic batching: most requests.")
    batch_wait_timeout_s: float = Field(
        0.0,
        ge=0,
        description="Serve batching: the longest a query waits for others. 0: a lone query is "
        "encoded at once, and queries arriving during an encode form the next batch.",
    )


class KnowledgeSource(_Section):
    """Where a full org_context reindex reads the organization's documents from."""

    kind: Literal["git", "folder"]
    location: str = Field(description="git URL or path, or a folder of .md/.txt files.")
    ref: str | None = Field(None, description="git branch or tag; default the remote HEAD.")

    @field_validator("location")
    @classmethod
    def _no_credentials(cls, value: str) -> str:
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        if parts.scheme and (parts.username or parts.password):
            raise ValueError(
                "no credentials in the URL (the Ray dashboard shows these args): give git a "
                "credential helper or token file from a Secret, e.g. GIT_ASKPASS"
            )
        return value


class OrgSettings(_Section):
    knowledge_source: KnowledgeSource | None = None
    reindex_cron: str | None = Field(None, description="Cron expression of scheduled reindexes.")

    @field_validator("reindex_cron")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        if value is not None:
            from croniter import croniter

            if not croniter.is_valid(value):
                raise ValueError(f"not a valid cron expression: {value!r}")
        return value


class AgentSettings(_Section):
    guidance: Literal["none", "hints"] | None = Field(
        None,
        description="Help the model reads, never decisions made for it: 'hints' adds a routing "
        "hint from the intent router (crow.chat.agent.intent) for small models, 'none' gives the "
        "model the prompt and tools only. Default: from llm.backend ('local': hints, else none).",
    )


class SearchSettings(_Section):
    """FAISS searches on the CPU in every profile (why not faiss-gpu: README, "Running on a
    GPU cluster")."""

    exact_threshold: int = Field(50_000, gt=0, description="Rows below which search is exact.")
    nprobe: int = Field(32, gt=0, description="IVF lists scanned per query (approximate).")


class ReindexSettings(_Section):
    index_missing_on_start: bool = Field(
        True, description="At app start, submit a reindex job for every org without indexes."
    )
    batch_size: int = Field(256, gt=0, description="Rows per embedding batch in the Ray Job.")
    pool_size: int = Field(1, gt=0, description="Embedding actors in the Ray Data pool.")
    num_cpus: float = Field(1.0, ge=0, description="CPUs per embedding actor.")
    num_gpus: float = Field(
        0.0,
        ge=0,
        description="GPUs per embedding actor; a fraction (e.g. 0.5) lets actors share a GPU.",
    )
    in_process_max_rows: int = Field(
        50_000,
        ge=0,
        description="A full reindex of at most this many rows runs in the ReindexControl "
        "replica, embedding through the Embedder deployment, without a Ray Job's start-up "
        "(same build and publish); larger ones, and incremental ones, are Ray Jobs. 0: always "
        "a Ray Job.",
    )
    driver_num_cpus: float = Field(
        0.0,
        ge=0,
        description="CPUs reserved for the job's driver (it gathers the vectors and builds "
        "FAISS): 0 runs it on the head node; 1 on a cluster whose head has no CPUs for Ray.",
    )


class AppSettings(BaseSettings):
    """Everything the app and its jobs read; documented where declared."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    var_dir: Path = Field(Path("var"), description="Root of all local state.")
    data_root: Path | None = Field(None, description="Parquet data; default <var_dir>/data.")
    index_root: Path | None = Field(None, description="FAISS indexes; default <var_dir>/indexes.")
    chat_db: Path | None = Field(
        None, description="Chat-state DuckDB; default <var_dir>/chat.duckdb"
    )
    model_cache: Path | None = Field(
        None, description="Assembled models; default <var_dir>/models."
    )
    limits: Limits = Limits()
    quotas: Quotas = Quotas()
    auth: AuthSettings = AuthSettings()
    timeouts: Timeouts = Timeouts()
    llm: LLMSettings = LLMSettings()
    embedder: EmbedderSettings = EmbedderSettings()
    search: SearchSettings = SearchSettings()
    agent: AgentSettings = AgentSettings()
    reindex: ReindexSettings = ReindexSettings()
    orgs: dict[str, OrgSettings] = Field(
        default_factory=dict, description="Per-organization knowledge source and schedule."
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment first, but only the allowlisted CROW_* paths and addresses override the
        # args; any other CROW_* variable raises (crow.settings_env.ENV_SETTINGS).
        return AllowlistedEnvSource(settings_cls), init_settings

    @classmethod
    def from_args(cls, args: dict[str, Any] | None = None) -> AppSettings:
        return cls(**(args or {}))

    @classmethod
    def from_serve_config(cls, path: Path | str, app: str = "crow") -> AppSettings:
        """The settings of one application of a serve_config.yaml (what jobs run with)."""
        return cls.from_args(serve_config_args(path, app))

    @property
    def data_dir(self) -> Path:
        return self.data_root or self.var_dir / "data"

    @property
    def index_dir(self) -> Path:
        return self.index_root or self.var_dir / "indexes"

    @property
    def chat_db_path(self) -> Path:
        return self.chat_db or self.var_dir / "chat.duckdb"

    @property
    def agent_guidance(self) -> Literal["none", "hints"]:
        """The guidance in force: as set, else derived from the backend (small local model:
        hints; vLLM, OpenAI or custom: none), so no config turns small-model help on for a
        large model by leaving the setting out."""
        if self.agent.guidance is not None:
            return self.agent.guidance
        return "hints" if self.llm.backend == "local" else "none"

    @property
    def model_cache_dir(self) -> Path:
        return self.model_cache or self.var_dir / "models"
