"""MCP tools (SPEC §5.1): ``memory_retain``, ``memory_recall``, ``memory_recall_archive``,
``memory_get``, ``memory_forget``, ``memory_share``, ``memory_reconsolidate``, ``memory_namespaces``,
``memory_create_namespace``, ``memory_entities``, ``memory_entity``, ``memory_entity_rename``,
``memory_entity_merge``, ``memory_judgments``,
``memory_revert``, ``memory_correct``, ``memory_restore``; and workflow learning's
``workflow_dispatch``.

One tool set, two transports:

- stdio: ``cabrain mcp`` acts as the agent whose key it is given (``CABRAIN_API_KEY``), through a
  running service (``CABRAIN_API_URL``) or straight on the database when none is configured;
- streamable HTTP at ``/mcp`` in the Serve ingress, stateless, the API key as bearer token.

Failures are raised as tool errors (``isError``), never returned as text, their fix worded as the
tools to call (:mod:`cabrain.fixes`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from cabrain import __version__, edge
from cabrain.errors import CabrainError, ConfigError
from cabrain.faces.backend import BrainBackend, HttpBackend, MemoryBackend
from cabrain.faces.mcp_fields import (
    AsOf,
    HowMany,
    MemoryId,
    Mode,
    Namespace,
    Query,
    Turns,
    entity_json,
    memory_json,
    namespace_json,
    when,
)
from cabrain.types import (
    ArchiveQuery,
    MemoryInput,
    MemoryType,
    Network,
    RecallMode,
    RecallQuery,
    Visibility,
)

if TYPE_CHECKING:
    from cabrain.settings import Settings

INSTRUCTIONS = """CaBrain is a long-term memory shared by agents. Recall before you answer questions about
past work, decisions, people or preferences (memory_recall); retain what is worth knowing later -
decisions with their reasons, facts, lessons, preferences - as short self-contained statements
(memory_retain). When a memory turns out wrong, correct it with memory_reconsolidate rather than
writing a contradicting one. Memories live in namespaces (usually one per project): memory_namespaces
lists yours, memory_create_namespace makes a new one. memory_entities and memory_entity show what is
known about the people, projects and tools your memories mention. Old raw events
and superseded facts move to an archive over time; search it with memory_recall_archive when
memory_recall does not have what you need."""

BackendFor = Callable[[Context], Awaitable[MemoryBackend]]


class GuardedServer(MCPServer):
    """The MCP server whose every tool call's arguments pass the edge guard (:mod:`cabrain.edge`)
    first: a bad value is a tool error before the tool runs."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            edge.check_value(arguments, where="arguments", names=True)
        except CabrainError as exc:
            raise ToolError(exc.message) from exc
        return await super().call_tool(name, arguments, context)


def build_server(
    backend_for: BackendFor,
    *,
    name: str = "cabrain",
    lifespan: Callable[[MCPServer[Any]], AbstractAsyncContextManager[Any]] | None = None,
) -> MCPServer:
    """The MCP server; ``backend_for(ctx)`` gives the calling agent's backend."""
    server = GuardedServer(name, instructions=INSTRUCTIONS, version=__version__, lifespan=lifespan, log_level="WARNING")

    async def run(ctx: Context, op: Callable[[MemoryBackend], Awaitable[Any]]) -> Any:
        try:
            backend = await backend_for(ctx)
            return await op(backend)
        except CabrainError as exc:
            hint = exc.hint_for("mcp")
            raise ToolError(exc.message + (f" (fix: {hint})" if hint else "")) from exc
        except Exception as exc:
            refused = edge.bad_value(exc)  # the edge guard's last line: a value only a bad value causes
            if refused is None:
                raise
            raise ToolError(refused.message) from exc

    @server.tool(annotations=ToolAnnotations(title="Remember something", destructive_hint=False))
    async def memory_retain(
        content: Annotated[
            str,
            Field(
                min_length=1,
                max_length=32000,
                description="One self-contained statement worth remembering, e.g. "
                "'We chose pgvector over Qdrant because one database is simpler to run.'",
            ),
        ],
        namespace: Namespace,
        ctx: Context,
        visibility: Annotated[
            Visibility, Field(description="private: only you; team: agents granted the namespace; global: every agent")
        ] = Visibility.PRIVATE,
        network: Annotated[
            Network, Field(description="fact (objective), experience (what happened), observation, belief (an opinion)")
        ] = Network.EXPERIENCE,
        memory_type: Annotated[
            MemoryType,
            Field(
                description="episodic (an event), semantic (a lasting fact), procedural (how to do something), working"
            ),
        ] = MemoryType.EPISODIC,
        source_ref: Annotated[
            str | None, Field(max_length=2000, description="Where it came from: a file, URL, ticket or message id")
        ] = None,
        important: Annotated[bool, Field(description="Flag memories that must not be forgotten")] = False,
        thread: Annotated[
            str | None,
            Field(
                max_length=200,
                description="The conversation this is a turn of (a chat thread, a session, a meeting): it is "
                "then also found by the turns before it",
            ),
        ] = None,
        speaker: Annotated[
            str | None, Field(max_length=200, description="Who said it, for a conversation turn")
        ] = None,
    ) -> dict[str, Any]:
        """Store a memory. CaBrain compares it with what it already knows: a duplicate is not stored
        twice (NOOP), a revision supersedes the old memory (UPDATE), a retraction invalidates it."""
        item = MemoryInput(
            content,
            namespace,
            visibility=visibility,
            network=network,
            memory_type=memory_type,
            source_kind="mcp",
            source_ref=source_ref,
            important=important,
            metadata={k: v for k, v in (("thread", thread), ("speaker", speaker)) if v},
        )
        result = await run(ctx, lambda b: b.retain(item))
        return {
            "decision": result.decision.value,
            "memory_id": str(result.memory_id) if result.memory_id else None,
            "importance": round(result.importance, 3),
            "superseded": [str(s) for s in result.superseded],
            "reason": result.reason,
        }

    @server.tool(annotations=ToolAnnotations(title="Recall memories", read_only_hint=True))
    async def memory_recall(
        query: Query,
        namespace: Namespace,
        ctx: Context,
        k: HowMany = 8,
        mode: Mode = RecallMode.HYBRID,
        include_history: Annotated[bool, Field(description="Also return forgotten and superseded memories")] = False,
        as_of: AsOf = None,
        context: Turns = None,
    ) -> dict[str, Any]:
        """Find the memories most relevant to a query (meaning and keywords, ranked), each with its
        provenance (who, when, where from), plus memories related through shared entities and what
        is known about the entities the hits mention (their summaries). In a conversation, pass its
        earlier turns as context; as_of asks what was true at a past moment."""
        q = RecallQuery(
            query,
            namespace,
            k=k,
            mode=mode,
            include_invalid=include_history,
            as_of=as_of,
            context=tuple(context or ()),
        )
        result = await run(ctx, lambda b: b.recall(q))
        return {
            "hits": [{**memory_json(h.memory), "score": round(h.score, 4)} for h in result.hits],
            "related": [memory_json(m) for m in result.related],
            "entities": [
                {
                    "name": e.name,
                    "summary": e.summary,
                    "summarized_at": when(e.summarized_at),
                    "memory_ids": [str(i) for i in e.memory_ids],
                }
                for e in result.entities
            ],
        }

    @server.tool(annotations=ToolAnnotations(title="Search the memory archive", read_only_hint=True))
    async def memory_recall_archive(
        query: Query,
        namespace: Namespace,
        ctx: Context,
        k: HowMany = 8,
        mode: Mode = RecallMode.HYBRID,
        valid_from: Annotated[
            datetime | None,
            Field(description="Only what was true from this moment on (ISO 8601, e.g. 2026-01-01T00:00:00Z)"),
        ] = None,
        valid_to: Annotated[
            datetime | None, Field(description="Only what was true before this moment (ISO 8601)")
        ] = None,
        include_history: Annotated[bool, Field(description="Also return superseded and forgotten memories")] = True,
    ) -> dict[str, Any]:
        """Search the archive: old raw events and superseded facts that sleep moved out of everyday
        recall. Slower than memory_recall; use it for history, or when memory_recall comes up empty.
        Each hit carries its provenance and the memories distilled from it."""
        q = ArchiveQuery(
            query, namespace, k=k, mode=mode, include_invalid=include_history, valid_from=valid_from, valid_to=valid_to
        )
        result = await run(ctx, lambda b: b.recall_archive(q))
        return {
            "hits": [
                {
                    **memory_json(h.memory),
                    "score": round(h.score, 4),
                    "archived_at": h.demoted_at.isoformat(),
                    "distilled_into": [str(x.memory_id) for x in h.derived if x.relation == "distilled_from"],
                    "merged_into": [str(x.memory_id) for x in h.derived if x.relation == "merged"],
                    "sources": [str(x.memory_id) for x in h.sources],
                }
                for h in result.hits
            ],
            "scanned": result.scanned,
        }

    @server.tool(annotations=ToolAnnotations(title="Get a memory with its history", read_only_hint=True))
    async def memory_get(memory_id: MemoryId, ctx: Context, as_of: AsOf = None) -> dict[str, Any]:
        """One memory with its provenance, the versions it replaced and the ones that replaced it;
        with as_of, the version of it that was current at that moment."""
        h = await run(ctx, lambda b: b.get(memory_id, as_of=as_of))
        return {
            "memory": memory_json(h.memory),
            "previous": [memory_json(m) for m in h.previous],
            "next": [memory_json(m) for m in h.next],
            "entities": list(h.entities),
        }

    @server.tool(annotations=ToolAnnotations(title="Forget a memory", destructive_hint=True, idempotent_hint=True))
    async def memory_forget(
        memory_id: MemoryId,
        ctx: Context,
        reason: Annotated[str | None, Field(max_length=2000, description="Why it should be forgotten")] = None,
    ) -> dict[str, Any]:
        """Take a memory out of recall. Nothing is deleted: memory_get still shows it, marked invalid."""
        h = await run(ctx, lambda b: b.forget(memory_id, reason=reason))
        return {"forgotten": str(h.memory.id), "invalid_at": h.memory.invalid_at.isoformat()}

    @server.tool(annotations=ToolAnnotations(title="Share a namespace", destructive_hint=False, idempotent_hint=True))
    async def memory_share(
        namespace: Namespace,
        agent: Annotated[str, Field(min_length=1, max_length=128, description="The agent to share with")],
        ctx: Context,
        can_write: Annotated[bool, Field(description="Also let it write into the namespace")] = False,
    ) -> dict[str, Any]:
        """Offer another agent access to this namespace's team memories (only its owner or an admin may).
        It can read them at once; it can write, and its capture hooks use them, only after its operator
        accepts the grant (an agent never accepts grants through these tools)."""
        accepted = await run(ctx, lambda b: b.share(namespace, agent, can_write=can_write))
        return {"namespace": namespace, "agent": agent, "can_read": True, "can_write": can_write, "accepted": accepted}

    @server.tool(annotations=ToolAnnotations(title="List your namespaces", read_only_hint=True))
    async def memory_namespaces(ctx: Context) -> dict[str, Any]:
        """The namespaces you own or were granted, each with your access (owner, write or read), and
        grants offered to you that are not accepted yet (you read those at once; writing waits until
        your operator accepts: cabrain namespaces --accept NAME)."""

        async def op(b: MemoryBackend) -> list[dict[str, Any]]:
            return [namespace_json(r, b.agent) for r in await b.namespaces()]

        return {"namespaces": await run(ctx, op)}

    @server.tool(annotations=ToolAnnotations(title="Create a namespace", destructive_hint=False, idempotent_hint=True))
    async def memory_create_namespace(namespace: Namespace, ctx: Context) -> dict[str, Any]:
        """Create a namespace you own (one per project, say). A name starting with '@<another agent>/'
        is that agent's alone; one another agent owns already is refused. Creating one you own
        again changes nothing (created: false)."""
        created = await run(ctx, lambda b: b.create_namespace(namespace))
        return {"namespace": namespace, "created": created, "access": "owner"}

    @server.tool(annotations=ToolAnnotations(title="What is known about whom", read_only_hint=True))
    async def memory_entities(
        namespace: Namespace,
        ctx: Context,
        query: Annotated[str | None, Field(max_length=200, description="Only names containing this (any case)")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="How many entities to return")] = 50,
        cursor: Annotated[str | None, Field(max_length=1000, description="next_cursor of the page before")] = None,
    ) -> dict[str, Any]:
        """The entities (people, projects, tools, files ...) this namespace's memories mention, in name
        order, each with what sleep summarised of it (summary null: none yet, or made from memories
        you may not read). Open one with memory_entity."""
        page = await run(ctx, lambda b: b.entities(namespace, query=query, limit=limit, cursor=cursor))
        return {"entities": [entity_json(e) for e in page.entities], "next_cursor": page.next_cursor}

    @server.tool(annotations=ToolAnnotations(title="Everything about one entity", read_only_hint=True))
    async def memory_entity(
        namespace: Namespace,
        name: Annotated[
            str,
            Field(
                min_length=1,
                max_length=2000,
                description="The entity's name (any case) or id, e.g. from memory_entities or memory_recall's entities",
            ),
        ],
        ctx: Context,
        include_history: Annotated[bool, Field(description="Also forgotten and superseded memories")] = False,
        limit: Annotated[int, Field(ge=1, le=200, description="How many memories to return")] = 20,
    ) -> dict[str, Any]:
        """One entity: its summary, and the memories that mention it, newest first."""
        found = await run(ctx, lambda b: b.entity(namespace, name, history=include_history, limit=limit))
        return {"entity": entity_json(found.entity), "memories": [memory_json(m) for m in found.memories]}

    @server.tool(annotations=ToolAnnotations(title="Rename an entity", destructive_hint=False))
    async def memory_entity_rename(
        namespace: Namespace,
        name: Annotated[str, Field(min_length=1, max_length=200, description="The entity's name (any case) or id")],
        new_name: Annotated[str, Field(min_length=1, max_length=200, description="Its new name")],
        ctx: Context,
        reason: Annotated[str | None, Field(max_length=2000, description="Why (kept with the judgment)")] = None,
    ) -> dict[str, Any]:
        """Rename an entity (writers of the namespace). A name another entity has is refused: merge
        them with memory_entity_merge instead. Returns the judgment; memory_revert with its id undoes it."""
        return await run(ctx, lambda b: b.rename_entity(namespace, name, new_name, reason=reason))

    @server.tool(annotations=ToolAnnotations(title="Merge an entity into another", destructive_hint=False))
    async def memory_entity_merge(
        namespace: Namespace,
        name: Annotated[str, Field(min_length=1, max_length=200, description="The entity merged away (name or id)")],
        into: Annotated[str, Field(min_length=1, max_length=200, description="The entity it becomes (name or id)")],
        ctx: Context,
        reason: Annotated[str | None, Field(max_length=2000, description="Why (kept with the judgment)")] = None,
    ) -> dict[str, Any]:
        """Merge two names for the same thing (writers of the namespace): every memory that mentions
        `name` mentions `into` instead. Returns the judgment; memory_revert with its id undoes it exactly."""
        return await run(ctx, lambda b: b.merge_entity(namespace, name, into, reason=reason))

    @server.tool(annotations=ToolAnnotations(title="Correct a memory", destructive_hint=False))
    async def memory_reconsolidate(
        memory_id: MemoryId,
        corrected_content: Annotated[
            str, Field(min_length=1, max_length=32000, description="The corrected statement, complete on its own")
        ],
        ctx: Context,
        reason: Annotated[str | None, Field(max_length=2000, description="Why it changed")] = None,
    ) -> dict[str, Any]:
        """Replace a wrong or outdated memory with a corrected one. The old one is kept, marked
        superseded by the new one, so its history stays queryable."""
        result = await run(ctx, lambda b: b.reconsolidate(memory_id, corrected_content, reason=reason))
        return {
            "decision": result.decision.value,
            "memory_id": str(result.memory_id),
            "superseded": [str(s) for s in result.superseded],
        }

    @server.tool(annotations=ToolAnnotations(title="Correct a memory for a person", destructive_hint=False))
    async def memory_correct(
        memory_id: MemoryId,
        content: Annotated[
            str, Field(min_length=1, max_length=32000, description="The memory's corrected text, complete on its own")
        ],
        ctx: Context,
        reason: Annotated[str | None, Field(max_length=2000, description="Why it is corrected")] = None,
    ) -> dict[str, Any]:
        """Correct a memory as a person asked: the text becomes a new version and the old one is
        superseded (kept). Recorded as a correction; memory_revert undoes it (the old one current
        again, the new one out of recall)."""
        result = await run(ctx, lambda b: b.correct(memory_id, content, reason=reason))
        return {"memory_id": str(result.memory_id), "superseded": [str(s) for s in result.superseded]}

    @server.tool(annotations=ToolAnnotations(title="Bring a forgotten memory back", destructive_hint=False))
    async def memory_restore(
        memory_id: MemoryId,
        ctx: Context,
        reason: Annotated[str | None, Field(max_length=2000, description="Why it comes back")] = None,
    ) -> dict[str, Any]:
        """Bring a forgotten memory back to recall (its forget undone). Returns the judgment that did,
        which memory_revert undoes (forgetting it again)."""
        return await run(ctx, lambda b: b.restore(memory_id, reason=reason))

    @server.tool(annotations=ToolAnnotations(title="Why a memory changed", read_only_hint=True))
    async def memory_judgments(memory_id: MemoryId, ctx: Context) -> dict[str, Any]:
        """The judgments that changed a memory, newest first: CaBrain's own decisions (a revision
        that superseded it on write, a duplicate merged or a contradiction resolved in sleep), a
        caller's corrections, and reverts, each with its reason, what it was based on and the
        memory's state before and after. Use memory_revert to undo one."""
        return {"judgments": await run(ctx, lambda b: b.judgments(memory_id))}

    @server.tool(annotations=ToolAnnotations(title="Undo a judgment", destructive_hint=False))
    async def memory_revert(
        ctx: Context,
        memory_id: Annotated[str | None, Field(description="Undo the latest judgment that changed this memory")] = None,
        judgment_id: Annotated[str | None, Field(description="Or undo this judgment (from memory_judgments)")] = None,
        reason: Annotated[str | None, Field(max_length=2000, description="Why it is undone")] = None,
        run_id: Annotated[
            str | None, Field(description="Or undo everything this sleep run did (its facts, summaries, merges, decay)")
        ] = None,
    ) -> dict[str, Any]:
        """Undo a supersession, invalidation or merge: the memories it changed get back exactly their
        state before it (a superseded memory is current again); or, with run_id, a whole sleep run,
        one revert per namespace you may write. The revert is recorded and can itself be reverted.
        Give one of memory_id, judgment_id or run_id. Needs write access to the namespace."""
        if run_id is not None:
            if memory_id is not None or judgment_id is not None:
                raise ToolError("give one of memory_id, judgment_id or run_id")
            return {"reverts": await run(ctx, lambda b: b.revert_run(run_id, reason=reason))}
        return await run(ctx, lambda b: b.revert(memory_id=memory_id, judgment_id=judgment_id, reason=reason))

    @server.tool(
        annotations=ToolAnnotations(title="Hand a task to a model", destructive_hint=False, open_world_hint=True)
    )
    async def workflow_dispatch(
        description: Annotated[
            str,
            Field(
                min_length=1,
                max_length=20000,
                description="The task, as you would "
                "give it to a model, e.g. 'Extract the invoice number and total as JSON: ...'",
            ),
        ],
        namespace: Namespace,
        ctx: Context,
        context: Annotated[str, Field(max_length=20000, description="Material the task works on")] = "",
        task_type: Annotated[
            str, Field(pattern="^(text|json|code)$", description="text, json or code: how the answer is checked")
        ] = "text",
        destructive: Annotated[
            bool, Field(description="It changes or deletes something: always the frontier model")
        ] = False,
        needs_review: Annotated[bool, Field(description="Flag it for review: always the frontier model")] = False,
    ) -> dict[str, Any]:
        """Run a task on the cheapest model trusted for its kind: a local model chain once CaBrain has
        learned that it matches the frontier model on such tasks, the frontier model otherwise. The
        answer says which (route), why (reason), and what it cost."""
        task = {
            "namespace": namespace,
            "description": description,
            "context": context,
            "task_type": task_type,
            "destructive": destructive,
            "needs_review": needs_review,
        }
        return await run(ctx, lambda b: b.dispatch(task))

    return server


async def run_stdio(settings: Settings) -> None:
    """``cabrain mcp``: the tools over stdio, as the agent whose key is ``CABRAIN_API_KEY``."""
    if settings.api_key is None:
        raise ConfigError(
            "cabrain mcp acts as an agent and needs its API key",
            hint="set CABRAIN_API_KEY (cabrain agents create NAME makes one); with CABRAIN_API_URL it talks "
            "to that service, otherwise straight to the database",
        )
    key = settings.api_key.get_secret_value()
    if settings.api_url:
        from cabrain.client import AsyncClient  # through a service: the database stack never loads

        async with AsyncClient(settings.api_url, key) as client:
            backend = HttpBackend(client, (await client.whoami())["agent_id"])
            await _serve_stdio(backend)
        return
    from cabrain.brain import Brain  # straight on the database: only this mode loads it

    async with await Brain.open(settings) as brain:
        principal = await brain.authenticate(key)
        await _serve_stdio(BrainBackend(brain, principal.agent_id))


async def _serve_stdio(backend: MemoryBackend) -> None:
    async def backend_for(ctx: Context) -> MemoryBackend:
        return backend

    await build_server(backend_for).run_stdio_async()
