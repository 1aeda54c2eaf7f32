"""The facades a face asks its replica for that hold no state of the replica's own: one place, so the
service's replica and the benchmarks' in-process one answer the same."""

from __future__ import annotations

from cabrain.brain import Brain
from cabrain.notify.facade import Notify
from cabrain.portable.facade import Portable
from cabrain.sleep.runs import SleepRuns
from cabrain.workflows.facade import Workflows


class Facades:
    """Export and import, workflows, sleep runs and notifiers of a brain, each behind the gate."""

    def portable(self, brain: Brain) -> Portable:
        return Portable(brain.engine)

    def workflows(self, brain: Brain) -> Workflows:
        return Workflows(brain.engine)

    def sleep_runs(self, brain: Brain) -> SleepRuns:
        return SleepRuns(brain.engine)

    def notify(self, brain: Brain) -> Notify:
        return Notify(brain.engine)
