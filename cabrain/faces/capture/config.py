"""What capture is configured with: :class:`CaptureConfig`, read from the ``CABRAIN_*`` variables,
and :class:`CaptureError`. Standard library only (the hook's path)."""

from __future__ import annotations

import os

from cabrain.paths import default_home_dir

TYPE_CHECKING = False  # typing itself costs the hook a few milliseconds to import
if TYPE_CHECKING:
    from pathlib import Path


class CaptureError(Exception):
    pass


class CaptureConfig:
    """The settings capture uses, read from the same ``CABRAIN_*`` variables as
    :class:`cabrain.settings.Settings` (which the hook's fast path does not import)."""

    def __init__(
        self,
        api_url: str | None,
        api_key: str | None,
        home: str | Path,
        namespace: str | None = None,
        agent: str = "claude-code",
        timeout_s: float = 2.0,
        context_k: int = 6,
        visibility: str = "private",
    ) -> None:
        self.api_url, self.api_key, self.namespace = api_url, api_key, namespace
        self.home = os.fspath(home)
        self.agent, self.timeout_s, self.context_k, self.visibility = agent, timeout_s, context_k, visibility

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> CaptureConfig:
        values = dict(os.environ if env is None else env)

        def get(name: str) -> str | None:
            return (values.get(f"CABRAIN_{name}") or "").strip() or None

        try:
            timeout = float(get("CAPTURE_TIMEOUT_S") or 2.0)
            k = int(get("CAPTURE_CONTEXT_K") or 6)
        except ValueError as exc:
            raise CaptureError(f"CABRAIN_CAPTURE_TIMEOUT_S / CABRAIN_CAPTURE_CONTEXT_K: {exc}") from None
        visibility = get("CAPTURE_VISIBILITY") or "private"
        if visibility not in ("private", "team", "global"):
            raise CaptureError(f"CABRAIN_CAPTURE_VISIBILITY must be private, team or global, got {visibility!r}")
        return cls(
            api_url=get("API_URL"),
            api_key=get("API_KEY"),
            home=get("HOME") or default_home_dir(),
            namespace=get("CAPTURE_NAMESPACE"),
            agent=get("CAPTURE_AGENT") or "claude-code",
            timeout_s=timeout,
            context_k=max(1, min(k, 50)),
            visibility=visibility,
        )

    @property
    def queue_path(self) -> str:
        return os.path.join(self.home, "capture-queue.jsonl")

    def beside_queue(self, suffix: str) -> str:
        """A file next to the queue: ``capture-queue<suffix>`` (its lock, its rejected batches)."""
        return os.path.join(self.home, f"capture-queue{suffix}")
