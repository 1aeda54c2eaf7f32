"""The steps of the sleep cycle, by name (STEP_FUNCTIONS), each over one namespace (and, for decay
and demote, one month): *consolidate*, *dedup*, *reconsolidate* (the knowledge steps), *decay*,
*demote*, *purge* and *maintain*, each in its own module.

Every knowledge step only ever adds rows and supersedes rows (``invalid_at`` + ``superseded_by``,
with the reason in ``metadata``); nothing is deleted. Each step is idempotent: a re-run after a
crash finds the work it committed done and does the rest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from cabrain.sleep.consolidate import central_statements, consolidate, star_clusters
from cabrain.sleep.context import StepContext, StepResult
from cabrain.sleep.decay import decay
from cabrain.sleep.dedup import dedup
from cabrain.sleep.demote import demote
from cabrain.sleep.maintain import maintain
from cabrain.sleep.purge import purge
from cabrain.sleep.reconsolidate import reconsolidate

# A step: (context, namespace, month) -> what it did.
Step = Callable[[StepContext, str, str], Awaitable[StepResult]]

STEP_FUNCTIONS: dict[str, Step] = {
    "consolidate": consolidate,
    "dedup": dedup,
    "reconsolidate": reconsolidate,
    "decay": decay,
    "demote": demote,
    "purge": purge,
    "maintain": maintain,
}

__all__ = ["STEP_FUNCTIONS", "Step", "central_statements", "consolidate", "dedup", "reconsolidate", "star_clusters"]
