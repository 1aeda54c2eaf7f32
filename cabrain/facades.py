"""The one composition root: every facade of a brain, built one way, for the service's replicas and
the benchmarks' in-process replica (a command of the command line builds the one facade it needs
the same way: on an engine, with the environment).

Every facade takes the engine it runs on, and (where it reaches outside) the environment its
credentials are read from: the variables connectors, channels and notifiers name, read once at the
entry point and never stored. Each facade's operations take the agent that acts as ``agent`` and
are declared with :func:`cabrain.gate.operation` (which enforces them); the facades themselves hold
no state but the engine's, so building one per call is cheap.
"""

from __future__ import annotations

from collections.abc import Mapping

from cabrain.brain import Brain
from cabrain.channels.facade import Channels
from cabrain.connectors.facade import Connectors
from cabrain.notify.facade import Notify
from cabrain.notify.outbox import Outbox
from cabrain.portable.facade import Portable
from cabrain.settings import Settings
from cabrain.sleep.runs import SleepRuns
from cabrain.workflows.facade import Workflows


class Facades:
    """The facades of a brain: memory (the :class:`Brain` itself), export and import, workflows,
    sleep runs, pushes, connectors and chat channels, and the outbox that delivers pushes."""

    def __init__(self, settings: Settings, environ: Mapping[str, str]) -> None:
        self.settings = settings
        self.environ = environ
        self._outbox: Outbox | None = None

    def portable(self, brain: Brain) -> Portable:
        return Portable(brain.engine)

    def workflows(self, brain: Brain) -> Workflows:
        return Workflows(brain.engine)

    def sleep_runs(self, brain: Brain) -> SleepRuns:
        return SleepRuns(brain.engine)

    def notify(self, brain: Brain) -> Notify:
        return Notify(brain.engine)

    def connectors(self, brain: Brain) -> Connectors:
        return Connectors(brain.engine, environ=self.environ, local_roots=self.settings.connector_roots)

    def channels(self, brain: Brain) -> Channels:
        return Channels(brain.engine, self.environ)

    def outbox(self, brain: Brain) -> Outbox:
        """The outbox of ``brain``'s engine (one per engine: it keeps its senders' connections)."""
        if self._outbox is None or self._outbox.engine is not brain.engine:
            self._outbox = Outbox(brain.engine, self.environ)
        return self._outbox


__all__ = ["Facades"]
