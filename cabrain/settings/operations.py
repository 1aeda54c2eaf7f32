"""Settings of the offline and serving planes: the cold tier, sleep, the HTTP service, capture and
workflow learning. Part of :class:`cabrain.settings.Settings`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import NoDecode


class OperationsSettings(BaseModel):
    """Fields of :class:`cabrain.settings.Settings`: cold tier, sleep, service, capture, workflows."""

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
    cold_index_probes: int = Field(default=32, ge=0, description="Index clusters an archive recall reads; 0: all.")
    cold_index_min_rows: int = Field(default=100_000, ge=1, description="Cold rows before a namespace is indexed.")
    cold_index_stale_ratio: float = Field(default=0.1, gt=0, description="Reindex at this share demoted since.")
    cold_index_word_rows: int = Field(
        default=1000, ge=1, le=1_000_000, description="Rows the index keeps per word: a hybrid recall's keyword list."
    )
    cold_index_code_bits: int = Field(default=16, ge=8, le=16, multiple_of=8, description="Bits a dimension coded.")
    cold_index_warm: bool = Field(default=True, description="Page in an index's probed columns at its first use.")
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
    sleep_distiller: Literal["auto", "deterministic", "chat"] = Field(
        default="auto",
        description="How sleep makes facts of conversation turns: the chat model (chat; auto when CABRAIN_LLM_URL "
        "is set) or without a model (deterministic; auto otherwise). cabrain/sleep/distillers.py.",
    )
    sleep_chat_turns: int = Field(
        default=8, ge=1, le=100, description="Turns of one sitting per request to the chat distiller."
    )
    sleep_summary_facts: int = Field(
        default=5, ge=1, le=50, description="Facts an entity's summary is written from (each cited as [n])."
    )
    sleep_sitting_summary_facts: int = Field(
        default=8,
        ge=1,
        le=50,
        description="Facts a conversation sitting's summary is written from: its richest, in the order said.",
    )
    sleep_turn_min_words: int = Field(
        default=12,
        ge=1,
        le=200,
        description="Content words a conversation turn's own claims need to become a fact (cabrain/sleep/sittings.py).",
    )
    sleep_claim_min_words: int = Field(
        default=8,
        ge=1,
        le=200,
        description="The same when one of the turn's statements opens with the speaker as its subject (I ..., My "
        "...): a claim about the speaker even when short.",
    )
    sleep_consolidate_window_days: float = Field(
        default=30.0, gt=0, description="Episodes stored within this many days are candidates for consolidation."
    )
    sleep_consolidate_batch: int = Field(
        default=5000, ge=10, description="Unconsolidated episodes one consolidate task reads (oldest first)."
    )
    sleep_reconsolidate_neighbours: int = Field(
        default=32,
        ge=1,
        le=10_000,
        description="Older facts reconsolidate weighs against each fact: its nearest ones above the revision "
        "similarity minus the retraction margin (a contradiction is about the same subject, so it sits among them).",
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
    sleep_step_cpus: float | None = Field(
        default=None,
        ge=0,
        le=256,
        description="CPUs each sleep step asks Ray for. Unset: one, or the most a node has free when less (the "
        "Serve replicas hold the rest); none free: steps run one at a time beside the replicas (cabrain/sleep/room.py).",
    )
    sleep_wait_note_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="After this many seconds a step has not started, its run says why it waits (sleep_runs.note).",
    )
    sleep_stuck_after_s: float = Field(
        default=6 * 3600,
        gt=0,
        description="cabrain doctor reports a run still running after this many seconds as stuck.",
    )
    sleep_at: str = Field(
        default="03:00",
        pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
        description="When the sleep scheduler (cabrain sleep --schedule, cabrain.jobs.sleep_scheduler) runs the cycle, HH:MM UTC.",
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
    console_session_ttl_s: int = Field(
        default=12 * 3600,
        ge=60,
        le=30 * 24 * 3600,
        description="How long a console sign-in lasts (its session ends sooner when the key is revoked or the agent disabled).",
    )
    api_docs: bool = Field(
        default=False,
        description="Serve the API's interactive docs (/docs, /redoc) from the package, under a CSP; off: only /openapi.json.",
    )
    api_server_timing: bool = Field(
        default=False,
        description="Answer every API request with a Server-Timing header: the milliseconds its stages took (the "
        "ingress, the key check, the route's work, the JSON encoding; Serve's proxy adds its own), as `cabrain bench "
        "http` reads them; off: no header and nothing timed.",
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
    ray_metrics_export: bool = Field(
        default=False,
        description="Let the local Ray open its Prometheus metrics port (on loopback, without a key: any local user "
        "may read it), which GET /metrics gathers from. Unset: the port is not opened and GET /metrics is empty.",
    )
    serve_proxy_location: str = Field(
        default="EveryNode",
        pattern="^(EveryNode|HeadOnly)$",
        description="Where Serve runs HTTP proxies: EveryNode (any node's address serves the API) or HeadOnly.",
    )
    serve_direct_ingress: bool = Field(
        False,
        description="Each node's ingress replica answers on CABRAIN_API_PORT itself: no proxy hop (README).",
    )
    serve_ready_timeout_s: float = Field(
        default=300.0, gt=0, description="How long cabrain up waits for the models and the API to be ready."
    )
    serve_stop_timeout_s: float = Field(
        default=0.5,
        ge=0,
        description="How long Ctrl-C of cabrain up lets the Serve application finish its requests before the "
        "local Ray stops.",
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
    workflow_max_attempts: int = Field(default=12, ge=1, le=100, description="Chains tried per reference, at most.")
    workflow_examples: int = Field(
        default=3, ge=0, le=20, description="Solved tasks recalled into the enhanced prompt."
    )
    workflow_lease_s: float = Field(
        default=600.0, gt=0, description="A queued task claimed this long ago without a result goes back to pending."
    )
    workflow_max_tries: int = Field(default=3, ge=1, le=100, description="Claims of a queued task before it fails.")
    workflow_poll_s: float = Field(default=1.0, gt=0, description="How often an idle worker looks for queued tasks.")

    # --- backups ------------------------------------------------------------------------------------
    backup_dir: Path | None = Field(
        default=None,
        description="Where backups started through the API (POST /v1/backups) are written, one folder each. "
        "Unset: home/backups.",
    )

    # --- egress: where the server may send requests, and which secrets it may send -----------------
    egress_allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Hosts and networks outbound requests (notifiers, subscription targets, connectors, trackers, "
        "workflow models) may reach besides public addresses, comma-separated: host names, CIDRs and host:port "
        "(that port only), e.g. gitlab.internal,10.20.0.0/16,127.0.0.1:11434. Unset: loopback, private, link-local, shared and "
        "unspecified addresses are refused.",
    )
    secret_env_allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Environment variables a notifier, channel, connector, tracker or workflow model may name as "
        "its credential, comma-separated, e.g. GITLAB_TOKEN,SLACK_BOT_TOKEN. Unset: none (CABRAIN_* never).",
    )
    secrets_dir: Path | None = Field(
        default=None,
        description="A folder of credential files, each named as the credential (read without following links), "
        "that notifiers, channels, connectors and models may name besides CABRAIN_SECRET_ENV_ALLOW's variables.",
    )

    @field_validator("egress_allow", "secret_env_allow", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("egress_allow")
    @classmethod
    def _check_egress(cls, value: list[str]) -> list[str]:
        from cabrain.egress import allowed_entry

        for entry in value:
            allowed_entry(entry)
        return value

    @field_validator("secret_env_allow")
    @classmethod
    def _check_secret_names(cls, value: list[str]) -> list[str]:
        from cabrain.egress import secret_name

        return [secret_name(entry) for entry in value]

    # --- connectors ----------------------------------------------------------------------------------
    connector_roots: list[str] = Field(
        default_factory=list,
        description="Folders that local connectors (folder, slack-export, whatsapp) added through the API may read, "
        'as JSON, e.g. ["/srv/docs"]. Unset: the API refuses local connectors (the command line may add any path).',
    )
    connector_batch: int = Field(default=32, ge=1, le=1000, description="Changed items staged and indexed together.")
    connector_retries: int = Field(
        default=5, ge=1, le=20, description="Tries of one source request on 429, 5xx and lost connections."
    )
    connector_retry_backoff_s: float = Field(
        default=0.5, ge=0, description="First retry's wait (doubled each time, jittered; Retry-After wins)."
    )
    connector_retry_max_s: float = Field(default=30.0, ge=0, description="Longest wait between two tries.")
    connector_max_file_bytes: int = Field(
        default=20_000_000, ge=1, description="Largest file a connector converts to text; larger ones are skipped."
    )
    archive_max_members: int = Field(
        default=200_000, ge=1, description="Most members one ZIP (an export, an office file) may hold; more: refused."
    )
    archive_max_member_bytes: int = Field(
        default=256 << 20,
        ge=1,
        description="Most bytes one ZIP member may unpack to, counted while it unpacks; more: refused (413).",
    )
    archive_max_total_bytes: int = Field(
        default=2 << 30, ge=1, description="Most bytes one ZIP (or gzip) may unpack to in all; more: refused (413)."
    )
    archive_max_ratio: int = Field(
        default=200,
        ge=1,
        description="Most times a member over 1 MiB may unpack to its stored size (zip bombs); more: refused (413).",
    )
    connector_part_chars: int = Field(
        default=2000,
        ge=200,
        le=20_000,
        description="A long section of a document is cut into parts of about this size.",
    )
    connector_fan_out_items: int = Field(
        default=2000,
        ge=1,
        description="A sync run on Ray (the connector_sync job, --ray) splits its changed items into shards of this many, "
        "one Ray task each.",
    )

    # --- usage, channels and pushes (issue 22) ------------------------------------------------------
    usage_flush_s: float = Field(
        default=5.0, gt=0, description="How often each process writes the usage it counted (one upsert each time)."
    )
    public_url: str | None = Field(
        default=None,
        description="The address people reach this CaBrain at (e.g. https://brain.example.com): pushes link to "
        "its console pages. Unset: pushes carry memory ids only.",
    )
    channel_max_skew_s: float = Field(
        default=300.0, gt=0, description="A signed channel request whose timestamp is further off than this is refused."
    )
    notify_poll_s: float = Field(default=2.0, gt=0, description="How often a replica looks for events and due pushes.")
    notify_retry_backoff_s: float = Field(
        default=5.0, ge=0, description="First retry's wait for a failed push (doubled each time, Retry-After wins)."
    )
    notify_retry_max_s: float = Field(default=900.0, ge=0, description="Longest wait between two tries of a push.")
    notify_max_attempts: int = Field(default=12, ge=1, le=100, description="Tries of one push before it is failed.")
    notify_dedup_hours: float = Field(
        default=24.0, ge=0, description="The same finding is pushed to a subscriber at most once in this many hours."
    )
    pattern_min_sessions: int = Field(
        default=3, ge=2, description="A problem seen in this many sessions (threads) is a pattern worth a push."
    )
    pattern_similarity: float = Field(
        default=0.8, gt=0, le=1, description="How similar two memories must be to count as the same problem."
    )
    live_watch_s: float = Field(
        default=60.0,
        gt=0,
        description="How often the live agent asks the tracker whether its issues got a merge request.",
    )
    action_ttl_s: float = Field(
        default=7 * 86400.0, gt=0, description="A pending action no person decided on expires after this long."
    )

    # --- limits per agent (issue 31) ----------------------------------------------------------------
    max_streams_per_agent: int = Field(
        default=4,
        ge=1,
        le=1000,
        description="Event streams (GET /v1/events, the console's live findings) one agent may hold open on one "
        "ingress replica; another gets 429.",
    )
    events_max_seconds: float = Field(
        default=600.0,
        gt=0,
        le=3600,
        description="The longest an event stream may be asked to stay open (GET /v1/events?seconds=); clients "
        "reconnect with Last-Event-ID.",
    )
    max_concurrent_per_agent: int = Field(
        default=4,
        ge=1,
        le=10_000,
        description="Operations one agent may run at once in one process (each holds a database connection at "
        "most); keep it below CABRAIN_DB_POOL_MAX so others always get one.",
    )
    max_queued_per_agent: int = Field(
        default=128,
        ge=0,
        le=100_000,
        description="Operations of one agent that may wait for one of its running slots in one process; "
        "another gets 429.",
    )
    channel_max_body_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="Largest request a chat platform may post to /v1/channels/NAME/events (larger: 413, read no "
        "further).",
    )

    @field_validator("workflow_prices")
    @classmethod
    def _check_prices(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for model, (price_in, price_out) in value.items():
            if price_in < 0 or price_out < 0:
                raise ValueError(f"prices of {model!r} must be 0 or more")
        return value
