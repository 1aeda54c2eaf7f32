"""The one gate: every operation of every facade is declared once, and one function enforces the
declaration before the operation runs.

A facade method says what it is with :func:`operation`::

    @operation(Op.FORGET, namespace=memory_namespace("memory_id"), reads=Read.MEMORIES, held=True)
    async def forget(self, agent: str, memory_id: ..., *, reason: str | None = None) -> ...:

- its **kind** (:class:`cabrain.policy.Op`), which the agent's role allows, refuses or holds;
- **who acts**: the parameter ``agent``, on every operation of every facade (the agent an operation
  acts on, where there is one, is ``agent_id``); ``operator=True`` lets the command line on the
  database (which holds the database itself) pass None;
- the **namespace** it touches (a parameter, or a function of the arguments), which the usage is
  counted under and a held action is decided for;
- whether it **reads** memories, and so which read filter its queries apply (:class:`Read`);
- whether it is **admin only**;
- whether a ``live`` agent's call is **held** for a person (the method and its arguments are kept
  and run again, as the agent, once a person approves: :mod:`cabrain.actions`);
- what it is **metered** as (its kind by default), which caps are checked against;
- how the **faces** expose it (:class:`Faces`): its HTTP routes, the typed client's methods, the
  MCP tools, the memory backend's methods and the CLI commands that call it.

:func:`enforce` decides, in this order: the agent exists and is active; an admin-only operation is
an admin's; the role allows it (or holds it, or refuses it); the namespace is a name CaBrain can
keep; the caps allow it; then the task acts for the agent (its model calls are metered to it). The
operation runs in one of the agent's slots (:mod:`cabrain.limits`: at most
``CABRAIN_MAX_CONCURRENT_PER_AGENT`` at once, a bounded number waiting, 429 beyond) and is counted
once it ran, unless its input was refused (:class:`InputError`): a bad request is never counted.
Nothing in a facade, a route, an MCP tool or a console page checks any of this itself:
``tests/unit/test_gate.py`` enumerates every public facade method, route, MCP tool and console
action and fails when one is undeclared or reaches the store around the gate.

``tests/unit/test_faces.py`` holds every face to these declarations: each route of the API, each
method of the clients and of the memory backend and each MCP tool is declared by exactly one
operation and calls it; the sync client mirrors the async one; names and parameters match.

Operations no agent calls (the server's own loops, a channel authenticated by its platform's
signature, a key being authenticated) are declared with :func:`system`, which says why.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar, cast

from cabrain import actions
from cabrain.edge import check_value
from cabrain.errors import AccessDenied, InputError
from cabrain.policy import ACTING, APPROVED, Op, Role, Verdict, decide, refuse

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
G = TypeVar("G", bound=Callable[..., Any])
Namespace = str | Callable[[Mapping[str, Any]], str | None] | None


class Read(StrEnum):
    """What an operation reads, and so which filter its queries apply."""

    NONE = "none"  # no memory, namespace or other agent's row
    MEMORIES = "memories"  # memories: access.READABLE / RECALL_FILTER / readable_id in every statement
    NAMESPACE = "namespace"  # the namespace as a whole (entities, grants): access.require_team_read / owner
    OWN = "own"  # the caller's own rows (its usage, subscriptions, actions, keys); an admin's: everyone's


def _names(value: str | Sequence[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@dataclass(frozen=True)
class Faces:
    """Where an operation is exposed (checked against each face by ``tests/unit/test_faces.py``)."""

    http: tuple[str, ...] = ()  # its routes, "METHOD /path" as the app declares them
    client: tuple[str, ...] = ()  # the methods of Client and AsyncClient that call it
    mcp: tuple[str, ...] = ()  # the MCP tools that call it
    backend: tuple[str, ...] = ()  # the methods of the memory backend (MCP's and capture's) that call it
    cli: tuple[str, ...] = ()  # the commands ("namespaces create") that call it, in process or through the client

    @classmethod
    def of(
        cls,
        http: str | Sequence[str] = (),
        client: str | Sequence[str] = (),
        mcp: str | Sequence[str] = (),
        backend: str | Sequence[str] = (),
        cli: str | Sequence[str] = (),
    ) -> Faces:
        return cls(_names(http), _names(client), _names(mcp), _names(backend), _names(cli))


@dataclass(frozen=True)
class Operation:
    """One operation's declaration (read by :func:`enforce`, the structure test and the docs)."""

    name: str  # Class.method
    kind: Op | None
    caller: str | None  # the parameter naming the agent that acts; None: no agent acts (system)
    namespace: Namespace
    reads: Read
    admin: bool
    held: bool
    meter: str | None
    operator: bool
    system: str | None  # why no agent acts
    faces: Faces = Faces()

    def namespace_of(self, args: Mapping[str, Any]) -> str | None:
        if self.namespace is None:
            return None
        found = args.get(self.namespace) if isinstance(self.namespace, str) else self.namespace(args)
        return found if isinstance(found, str) else None


REGISTRY: dict[str, Operation] = {}

# Public methods of facades that are not operations: opening and closing them, their settings and
# engine, and formatting what an operation answered.
NOT_OPERATIONS = frozenset(
    {"open", "close", "settings", "caches", "ping", "riding_out", "get_brain", "render_report", "to_json", "workflows"}
)

# The agent the current call of a gated operation acts for: an operation that calls another for the
# same agent (capture_namespace creates the namespace) is checked again but counted once.
_INSIDE: contextvars.ContextVar[str | None] = contextvars.ContextVar("cabrain_gate_inside", default=None)


def operation(
    kind: Op,
    *,
    namespace: Namespace = None,
    reads: Read = Read.NONE,
    admin: bool = False,
    held: bool = False,
    meter: str | None = "",
    operator: bool = False,
    http: str | Sequence[str] = (),
    client: str | Sequence[str] = (),
    mcp: str | Sequence[str] = (),
    backend: str | Sequence[str] = (),
    cli: str | Sequence[str] = (),
) -> Callable[[F], F]:
    """Declare a facade method an operation (module docstring); the returned method enforces it.
    ``http``, ``client``, ``mcp``, ``backend`` and ``cli`` name where the faces expose it."""

    def wrap(fn: F) -> F:
        spec = Operation(
            fn.__qualname__,
            kind,
            "agent",
            namespace,
            reads,
            admin,
            held,
            kind.value if meter == "" else meter,
            operator,
            None,
            Faces.of(http, client, mcp, backend, cli),
        )
        return _gated(fn, spec)

    return wrap


def system(why: str, *, http: str | Sequence[str] = ()) -> Callable[[G], G]:
    """Declare a method that no agent calls: CaBrain's own loops, or a caller authenticated another
    way (``why`` says which). No role, cap or count applies; faces may call one only where the
    structure test allows it. ``http``: the routes that call it."""

    def wrap(fn: G) -> G:
        spec = Operation(
            fn.__qualname__, None, None, None, Read.NONE, False, False, None, False, why, Faces.of(http=http)
        )
        REGISTRY[spec.name] = spec
        cast(Any, fn).__operation__ = spec
        return fn

    return wrap


def _gated(fn: F, spec: Operation) -> F:
    signature = inspect.signature(fn)
    if spec.caller not in signature.parameters:
        raise TypeError(f"{spec.name} declares caller {spec.caller!r}, which is not one of its parameters")
    if isinstance(spec.namespace, str) and spec.namespace not in signature.parameters:
        raise TypeError(f"{spec.name} declares namespace {spec.namespace!r}, which is not one of its parameters")
    method = fn.__name__

    @functools.wraps(fn)
    async def gated(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arguments = bound.arguments
        engine = await engine_of(self)
        agent = await enforce(engine, spec, arguments, method=method)
        if agent is None:
            return await fn(self, *args, **kwargs)
        if _INSIDE.get() == agent:  # inside another of the agent's operations: its slot and its count
            return await fn(self, *args, **kwargs)
        async with engine.running.hold(agent):
            token = _INSIDE.set(agent)
            try:
                found = await fn(self, *args, **kwargs)
            except InputError:  # its input refused: not counted
                raise
            except BaseException:
                _count(engine, spec, agent, arguments)
                raise
            finally:
                _INSIDE.reset(token)
            _count(engine, spec, agent, arguments)
            return found

    cast(Any, gated).__operation__ = spec
    REGISTRY[spec.name] = spec
    return cast(F, gated)


async def engine_of(facade: Any) -> Any:
    """The engine a facade runs on (a service's replica: once its brain is open)."""
    engine = getattr(facade, "engine", None)
    if engine is not None:
        return engine
    return (await facade.get_brain()).engine


async def enforce(engine: Any, spec: Operation, args: Mapping[str, Any], *, method: str) -> str | None:
    """Let the operation through, or raise why not (module docstring). Returns the agent it acts
    for (None: the operator)."""
    assert spec.caller is not None and spec.kind is not None
    agent = args.get(spec.caller)
    if agent is None:
        if spec.operator:
            return None
        raise AccessDenied(f"{spec.name} needs the agent it acts for", hint="call it with an agent's key")
    if not isinstance(agent, str) or not agent:
        raise InputError(f"the agent must be a name, got {agent!r}")
    governor = engine.governor
    profile = await governor.profile(agent)
    if profile is None or profile["disabled"]:
        raise AccessDenied(f"agent {agent!r} is unknown or disabled", hint="use an active agent's key")
    if spec.admin and not profile["is_admin"]:
        raise AccessDenied(f"agent {agent!r} is not an admin: {_what(spec)} is an admin's", hint="use an admin key")
    namespace = spec.namespace_of(args)
    if not profile["is_admin"]:
        role = Role(profile["role"])
        verdict = decide(role, spec.kind)
        approved = APPROVED.get()
        if verdict is not Verdict.ALLOW and not (approved and approved[1] == agent and approved[2] == spec.kind):
            if verdict is Verdict.CONFIRM and spec.held:
                held_args = {k: _plain(v) for k, v in args.items() if k not in ("self", spec.caller)}
                raise await actions.hold(engine, agent, role, spec.kind, namespace, method, held_args)
            raise refuse(agent, role, spec.kind)
    if namespace is not None:  # what it is counted under and its model calls are metered to: a name a row holds
        try:
            check_value(namespace)
        except InputError as exc:
            raise InputError(f"the namespace name is not one CaBrain keeps: {exc.message}") from None
    nested = _INSIDE.get() == agent
    if spec.meter is not None and not nested and profile["caps"]:
        await governor.within_caps(agent, spec.meter, profile["caps"])
    ACTING.set((agent, namespace or ""))
    return agent


def _count(engine: Any, spec: Operation, agent: str, args: Mapping[str, Any]) -> None:
    """Count an operation once it ran (or failed for another reason than its input): a request
    refused as bad input is not counted (finding 7 of issue 31)."""
    if spec.meter is not None:
        engine.governor.count(agent, spec.namespace_of(args) or "", spec.meter)


def _what(spec: Operation) -> str:
    return spec.name.split(".")[-1].replace("_", " ")


def _plain(value: Any) -> Any:
    """An argument as the JSON a held action keeps (ids as text)."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value


def declared(method: Any) -> Operation | None:
    """The declaration of a facade method (None: undeclared)."""
    return getattr(method, "__operation__", None)


def meters() -> frozenset[str]:
    """Every name an operation is metered as (what a cap may name, with the model call kinds)."""
    return frozenset(spec.meter for spec in REGISTRY.values() if spec.meter)


def first_namespace(name: str) -> Callable[[Mapping[str, Any]], str | None]:
    """The namespace of the first item of the parameter ``name`` (one item, or a sequence of them)."""

    def of(args: Mapping[str, Any]) -> str | None:
        items = args.get(name)
        if isinstance(items, Sequence) and not isinstance(items, str):
            items = items[0] if items else None
        return getattr(items, "namespace", None)

    return of


def field(name: str, key: str) -> Callable[[Mapping[str, Any]], str | None]:
    """The ``key`` of the parameter ``name`` (an object's attribute or a mapping's key)."""

    def of(args: Mapping[str, Any]) -> str | None:
        value = args.get(name)
        found = value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)
        return found if isinstance(found, str) else None

    return of


__all__ = [
    "NOT_OPERATIONS",
    "REGISTRY",
    "Faces",
    "Operation",
    "Read",
    "declared",
    "enforce",
    "field",
    "first_namespace",
    "meters",
    "operation",
    "system",
]
