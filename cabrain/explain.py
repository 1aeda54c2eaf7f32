"""Recall as a debugger: the same recall, never counted as a use, with every list's rank and score,
each boost's formula, and why a given memory was not returned: operations of
:class:`cabrain.brain.Brain`."""

from __future__ import annotations

import uuid

from cabrain.engine import Engine
from cabrain.gate import Read, field, operation
from cabrain.membership import as_uuid
from cabrain.policy import Op
from cabrain.search import explain as explaining
from cabrain.search import recall as recall_pipeline
from cabrain.search.explain import Explanation
from cabrain.types import RecallQuery


class Explaining:
    """A part of the Brain facade (it runs on the Brain's engine)."""

    engine: Engine

    @operation(
        Op.RECALL,
        namespace=field("query", "namespace"),
        reads=Read.MEMORIES,
        http="POST /v1/recall/explain",
        client="explain_recall",
        cli="recall",
    )
    async def explain_recall(
        self, agent: str, query: RecallQuery, *, why_not: uuid.UUID | str | None = None
    ) -> Explanation:
        """The recall ``query`` as :meth:`cabrain.brain.Brain.recall` runs it, but looked at, not used:
        no hit's use is counted, no recall event is written (use feeds importance and demotion), the
        L1 cache is neither read nor written. Each hit comes with its rank and score in the vector
        list, the keyword list and after fusion, and each term of its score with its formula.
        ``why_not``: a memory id, to say where it stood in each list and what cut it (a memory the
        agent may not read is "not found", as an unknown one is)."""
        settings = self.engine.settings
        recall_pipeline.validate(query, max_k=settings.recall_max_k, max_chars=settings.max_query_chars)
        memory_id = as_uuid(why_not) if why_not is not None else None
        return await explaining.explain(self.engine, agent, query, why_not=memory_id)


__all__ = ["Explaining"]
