"""Kinds of task: clusters of task embeddings, one set per namespace (not regexes).

A task joins the nearest cluster of its namespace when its embedding is within
``CABRAIN_WORKFLOW_CLUSTER_SIMILARITY`` of the centroid (the centroid moves to the members' mean),
else it starts a cluster of its own. Each cluster keeps its best local chain, learned from the
scored attempts against current (not superseded) references:

- a chain's evidence-weighted accuracy is ``mean * n / (n + prior)`` over its ``n`` complete scores
  (every part measured, the judge included); the best chain has the highest;
- ``avg_accuracy`` is that chain's mean, ``samples`` its ``n``;
- ``confidence = n / (n + prior + failure_weight * failures)`` grows with samples and falls with
  every routed output of that chain that failed validation (``failures``).

A kind is trusted - routed locally - when its confidence and accuracy both reach the routing
thresholds (``CABRAIN_WORKFLOW_ROUTE_CONFIDENCE`` 0.95, ``CABRAIN_WORKFLOW_ROUTE_ACCURACY`` 0.90).
A chain whose live accuracy fell (:mod:`cabrain.workflows.audit`) is demoted: left out of the choice
until the demotion's judgment is reverted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import asyncpg
import numpy as np

from cabrain.settings import Settings
from cabrain.store import workflow_clusters as sql


@dataclass(frozen=True)
class Cluster:
    id: int
    namespace: str
    members: int
    best_chain: dict[str, Any] | None
    avg_accuracy: float | None
    samples: int
    failures: int
    confidence: float
    demoted: tuple[str, ...] = ()  # chains demoted on live accuracy (cabrain.workflows.audit)
    latency_ms: float | None = None  # the best chain's mean time an answer
    structure: float | None = None  # the mean structural part of its scores (scoring.structural)

    @classmethod
    def from_row(cls, row: asyncpg.Record) -> Cluster:
        chain = row["best_chain"]
        return cls(
            row["id"],
            row["namespace"],
            row["members"],
            json.loads(chain) if isinstance(chain, str) else chain,
            row["avg_accuracy"],
            row["samples"],
            row["failures"],
            float(row["confidence"]),
            tuple(row["demoted"] or ()),
            row["latency_ms"],
            row["structure"],
        )

    def trusted(self, min_confidence: float, min_accuracy: float, max_ms: float | None = None) -> bool:
        return self.why_not(min_confidence, min_accuracy, max_ms) is None

    def why_not(self, min_confidence: float, min_accuracy: float, max_ms: float | None = None) -> str | None:
        """Why this kind is not routed locally (None: it is): no chain yet, or its best chain's
        accuracy (with the structural part of its scores when that is low too: the answers' fields,
        labels, blocks or syntax against the references'), its latency over ``max_ms`` (None or 0: no
        limit), its confidence."""
        if self.best_chain is None:
            return (
                f"its local chains were demoted on live accuracy ({', '.join(self.demoted)})"
                if self.demoted
                else "no local chain learned for this kind of task yet"
            )
        low = []
        accuracy = self.avg_accuracy or 0.0
        if accuracy < min_accuracy:
            low.append(f"accuracy {accuracy:.2f} of {min_accuracy}")
            if self.structure is not None and self.structure < min_accuracy:
                low.append(f"structural match {self.structure:.2f}")
        if max_ms and self.latency_ms is not None and self.latency_ms > max_ms:
            low.append(f"latency {self.latency_ms:.0f} ms over {max_ms:.0f}")
        if self.confidence < min_confidence:
            low.append(f"confidence {self.confidence:.2f} of {min_confidence}")
        if not low:
            return None
        why = f"this kind of task is not trusted locally yet ({self.best_chain['key']}: {', '.join(low)})"
        return why + (f"; demoted on live accuracy: {', '.join(self.demoted)}" if self.demoted else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "members": self.members,
            "best_chain": self.best_chain,
            "avg_accuracy": None if self.avg_accuracy is None else round(self.avg_accuracy, 4),
            "samples": self.samples,
            "failures": self.failures,
            "confidence": round(self.confidence, 4),
            "demoted": list(self.demoted),
            "latency_ms": None if self.latency_ms is None else round(self.latency_ms, 1),
            "structure": None if self.structure is None else round(self.structure, 4),
        }


def _unit(v: Any) -> np.ndarray:
    x = np.asarray(v, dtype=np.float32)
    norm = float(np.linalg.norm(x))
    return x / norm if norm else x


async def assign(conn: asyncpg.Connection, namespace: str, embedding: Any, similarity: float) -> int:
    """The id of the cluster ``embedding`` belongs to in ``namespace`` (made when none is near);
    inside the caller's transaction, serialised per namespace."""
    await conn.execute(sql.LOCK, namespace)
    vec = _unit(embedding)
    row = await conn.fetchrow(sql.NEAREST, namespace, vec)
    if row is None or row["similarity"] < similarity:
        return await conn.fetchval(sql.CREATE, namespace, vec)
    members, previous = row["members"], row["centroid"]
    previous = _unit(previous.to_numpy() if hasattr(previous, "to_numpy") else previous)
    centroid = _unit((previous * members + vec) / (members + 1))
    await conn.execute(sql.MOVE, row["id"], centroid)
    return row["id"]


async def get(conn: asyncpg.Connection, cluster_id: int) -> Cluster:
    return Cluster.from_row(await conn.fetchrow(sql.GET, cluster_id))


async def recompute(conn: asyncpg.Connection, cluster_id: int, settings: Settings) -> Cluster:
    """The cluster's best chain, accuracy, samples, failures and confidence, recomputed from its
    current attempts (its demoted chains left out) and saved, by ``settings``' confidence prior and
    failure weight; inside the caller's transaction."""
    await sql.recompute(
        conn, cluster_id, prior=settings.workflow_confidence_prior, failure_weight=settings.workflow_failure_weight
    )
    return await get(conn, cluster_id)


async def overview(conn: asyncpg.Connection, namespaces: list[str] | None, limit: int) -> list[dict[str, Any]]:
    """The task clusters of ``namespaces`` (None: all), most recently changed first, with their trusted
    chains."""
    out = []
    for r in await conn.fetch(sql.OVERVIEW, namespaces, limit):
        row = dict(r)
        if isinstance(row["best_chain"], str):
            row["best_chain"] = json.loads(row["best_chain"])
        out.append(row)
    return out
