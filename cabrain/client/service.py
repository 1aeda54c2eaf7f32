"""The async client's calls of the service's own operations: governance (roles, held actions, usage,
caps), chat channels and issues, pushes, connectors. Each is declared by the operation it calls
(``tests/unit/test_faces.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import IO, Any

from cabrain.client.base import Transport


class ServiceCalls(Transport):
    """Governance, channels, pushes and connectors, as the key's agent."""

    # governance (roles, held actions, usage, caps)
    async def set_role(self, agent_id: str, role: str) -> dict[str, Any]:
        """Give an agent a role (admin)."""
        return await self.request("PUT", f"/v1/agents/{agent_id}/role", json={"role": role})

    async def pending_actions(self, *, status: str | None = "pending") -> list[dict[str, Any]]:
        """Held actions you may see (yours, and those on namespaces you own); ``status`` None: all."""
        params = {"status": status} if status is not None else {"status": "all"}
        return (await self.request("GET", "/v1/actions", params=params))["actions"]

    async def decide_action(self, action_id: uuid.UUID | str, *, approve: bool) -> dict[str, Any]:
        """Approve (it runs, as the agent that asked) or deny a held action; what it became."""
        if approve:
            return await self.request("POST", f"/v1/actions/{action_id}/approve")
        return await self.request("POST", f"/v1/actions/{action_id}/deny")

    async def usage(
        self,
        *,
        since: date | str | None = None,
        until: date | str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Usage by day, agent, namespace and kind (yours; an admin's: everyone's, or ``agent_id``'s)."""
        given = (("since", since), ("until", until), ("agent", agent_id), ("namespace", namespace))
        return await self.request("GET", "/v1/usage", params={k: str(v) for k, v in given if v})

    async def set_cap(self, agent_id: str, op: str, per_day: int | None) -> list[dict[str, Any]]:
        """Cap agent ``agent_id``'s calls of kind ``op`` per day, or (None) remove the cap (admin); its caps."""
        path = f"/v1/agents/{agent_id}/caps/{op}"
        if per_day is None:
            return (await self.request("DELETE", path))["caps"]
        return (await self.request("PUT", path, json={"per_day": per_day}))["caps"]

    # chat channels and issues (admin)
    async def add_channel(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Register a chat channel (its fields as ``POST /v1/channels`` documents them)."""
        return await self.request("POST", "/v1/channels", json=spec)

    async def channels(self) -> list[dict[str, Any]]:
        """Every chat channel, without its secrets."""
        return (await self.request("GET", "/v1/channels"))["channels"]

    async def remove_channel(self, name: str) -> bool:
        """Remove a chat channel; True if there was one."""
        return (await self.request("DELETE", f"/v1/channels/{name}"))["removed"]

    async def file_issue(
        self,
        connector_name: str,
        title: str,
        description: str,
        *,
        labels: list[str] | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """File an issue through a tracker connector (``key``: the same key again files nothing new)."""
        body: dict[str, Any] = {
            "tracker": connector_name,
            "title": title,
            "description": description,
            "labels": labels or [],
        }
        if key:
            body["key"] = key
        return await self.request("POST", "/v1/issues", json=body)

    # pushes: notifiers, subscriptions, the outbox
    async def add_notifier(
        self, name: str, kind: str, config: dict[str, Any], secret_env: str | None
    ) -> dict[str, Any]:
        """Register a notifier (admin); its secret is read from the service's environment."""
        body = {"name": name, "kind": kind, "config": config, "secret_env": secret_env}
        return await self.request("POST", "/v1/notifiers", json=body)

    async def notifiers(self) -> list[dict[str, Any]]:
        """The notifiers, without their secrets."""
        return (await self.request("GET", "/v1/notifiers"))["notifiers"]

    async def remove_notifier(self, name: str) -> bool:
        """Remove a notifier (admin); True if there was one."""
        return (await self.request("DELETE", f"/v1/notifiers/{name}"))["removed"]

    async def subscribe(
        self,
        *,
        subscriber: str,
        kinds: list[str],
        namespace: str | None = None,
        notifier: str | None = None,
        target: dict[str, Any] | None = None,
        min_importance: float = 0.5,
        max_per_hour: int = 6,
        quiet_start: str | None = None,
        quiet_end: str | None = None,
        timezone: str = "UTC",
    ) -> dict[str, Any]:
        """Subscribe to pushes of events of a namespace you may read."""
        body = {
            "subscriber": subscriber,
            "kinds": kinds,
            "namespace": namespace,
            "notifier": notifier,
            "target": target or {},
            "min_importance": min_importance,
            "max_per_hour": max_per_hour,
            "quiet_start": quiet_start,
            "quiet_end": quiet_end,
            "timezone": timezone,
        }
        return await self.request("POST", "/v1/subscriptions", json=body)

    async def subscriptions(self, *, everyone: bool = False) -> list[dict[str, Any]]:
        """Your subscriptions (``everyone``: all of them, admin)."""
        return (await self.request("GET", "/v1/subscriptions", params={"all": everyone}))["subscriptions"]

    async def unsubscribe(self, sub_id: uuid.UUID | str) -> bool:
        """Stop a subscription; True if it was running."""
        return (await self.request("DELETE", f"/v1/subscriptions/{sub_id}"))["removed"]

    async def outbox(self, *, status: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """Pushes and the gate's decisions (yours; an admin's: all), newest first."""
        params: dict[str, Any] = {"limit": limit, **({"status": status} if status else {})}
        return (await self.request("GET", "/v1/outbox", params=params))["pushes"]

    async def release(self, outbox_id: uuid.UUID | str) -> bool:
        """Send a suppressed or failed push after all; True if it goes out now."""
        return (await self.request("POST", f"/v1/outbox/{outbox_id}/release"))["released"]

    # export and import
    async def export(self, namespaces: Sequence[str], out: IO[str], *, with_embeddings: bool = False) -> None:
        """Stream the namespaces (you own) as CaBrain's portable JSON Lines export into ``out``."""
        params = {"namespace": list(namespaces), "with_embeddings": with_embeddings}
        await self.download("/v1/export", out, params=params)

    async def import_file(
        self,
        fmt: str,
        path: Path,
        namespace: str | None = None,
        *,
        visibility: str = "team",
        decide: bool = True,
        source: str | None = None,
        mirror: bool = False,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Import one file: a CaBrain export (admin), or mem0, claude-mem, letta or markdown; the report.
        Its records' keys are scoped by ``source`` (default: the file's real path here), so a second
        import of the file revises what changed; ``mirror`` forgets the records it no longer holds;
        ``dry_run`` says what would be done, writing nothing."""
        path = Path(path)
        params: dict[str, Any] = {
            "format": fmt,
            "visibility": visibility,
            "decide": decide,
            "filename": str(path.resolve()),
            "mirror": mirror,
            "dry_run": dry_run,
        }
        if source is not None:
            params["source"] = source
        if namespace:
            params["namespace"] = namespace
        return await self.request("POST", "/v1/import", params=params, content=path.read_bytes())

    # connectors
    async def add_connector(
        self,
        name: str,
        kind: str,
        namespace: str,
        config: dict[str, Any],
        *,
        visibility: str = "team",
        every_s: int | None = None,
        check: bool = True,
    ) -> dict[str, Any]:
        """Register a connector: a source synced into a namespace you may write. The service reaches
        the source first and refuses a wrong path or credential; ``check`` false skips that."""
        body = {
            "name": name,
            "kind": kind,
            "namespace": namespace,
            "config": config,
            "visibility": visibility,
            "every_s": every_s,
            "check": check,
        }
        return await self.request("POST", "/v1/connectors", json=body)

    async def connectors(self) -> list[dict[str, Any]]:
        """Your connectors (an admin's: everyone's)."""
        return (await self.request("GET", "/v1/connectors"))["connectors"]

    async def connector(self, name: str) -> dict[str, Any]:
        """One connector, with its last sync."""
        return await self.request("GET", f"/v1/connectors/{name}")

    async def remove_connector(self, name: str) -> dict[str, Any]:
        """Remove a connector: it syncs no more; what it synced stays."""
        return await self.request("DELETE", f"/v1/connectors/{name}")

    async def sync_connector(self, name: str) -> uuid.UUID:
        """Start a sync in the service; its run's id (follow it with :meth:`connector_run`)."""
        return uuid.UUID((await self.request("POST", f"/v1/connectors/{name}/sync"))["run_id"])

    async def dry_run_connector(self, name: str) -> dict[str, Any]:
        """What a sync would do now, writing nothing: the parts it would add, revise, keep and forget."""
        return await self.request("POST", f"/v1/connectors/{name}/dry-run")

    async def connector_runs(self, name: str, *, limit: int = 20) -> list[dict[str, Any]]:
        """A connector's sync runs, newest first."""
        return (await self.request("GET", f"/v1/connectors/{name}/runs", params={"limit": limit}))["runs"]

    async def connector_run(self, name: str, run_id: uuid.UUID | str) -> dict[str, Any]:
        """One sync run: its status, counts and progress."""
        return await self.request("GET", f"/v1/connectors/{name}/runs/{run_id}")
