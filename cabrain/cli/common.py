"""What the ``cabrain`` commands share: exit codes, the flags several of them take (argparse parent
parsers, each declared here once) and small helpers for the handlers.

Handlers import the machinery they run (database, models, Ray, the HTTP client) when they run, not at
the top of their module: every ``cabrain`` call loads the whole parser, so the parser must load fast.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from cabrain import edge
from cabrain.errors import ConfigError, InputError, NotFound, UsageError
from cabrain.settings import Settings

if TYPE_CHECKING:
    from cabrain.client import Client
    from cabrain.engine import Engine

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

Command: TypeAlias = Callable[[Settings, argparse.Namespace], int]
# what ``add_subparsers`` returns; argparse gives it no public name
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

REMOTE_NOTE = " Talks to the API at CABRAIN_API_URL with CABRAIN_API_KEY."
# the Serve application's import paths (serve_apps/ is a shim over cabrain.serve)
SERVE_APPS = ("serve_apps.app", "cabrain.serve.app")


# --- shared flags, for parents=[...]; a flag whose help differs between commands takes the text ---------
def _parent(*names: str, **options: Any) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(*names, **options)
    return parent


@functools.cache
def json_flag(text: str | None = None) -> argparse.ArgumentParser:
    """``--json``: print the answer as JSON."""
    return _parent("--json", action="store_true", help=text)


@functools.cache
def json_file(text: str = "also write the results as JSON") -> argparse.ArgumentParser:
    """``--json FILE``: also write the results to FILE."""
    return _parent("--json", metavar="FILE", help=text)


@functools.cache
def quiet_flag(text: str | None = "no progress lines on stderr") -> argparse.ArgumentParser:
    """``--quiet``: no progress lines."""
    return _parent("--quiet", action="store_true", help=text)


@functools.cache
def namespace_option(required: bool = True) -> argparse.ArgumentParser:
    """``--namespace/-n NAME``: the namespace the command works in."""
    return _parent("--namespace", "-n", required=required)


@functools.cache
def only_namespaces(short: bool = False) -> argparse.ArgumentParser:
    """``--namespace NAME`` (``-n`` too with ``short``), repeatable: limit the run to these namespaces."""
    names = ("--namespace", "-n") if short else ("--namespace",)
    return _parent(*names, action="append", help="only this namespace (repeatable)")


@functools.cache
def serve_config(text: str) -> argparse.ArgumentParser:
    """``--config FILE``: a Serve config or application args (read by :func:`read_app_config`)."""
    return _parent("--config", metavar="FILE", help=text)


@functools.cache
def synthetic_vectors() -> argparse.ArgumentParser:
    """``--real-vectors N --noise X``: how a synthetic bench corpus gets its vectors."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--real-vectors", type=int, default=2000, help="memories embedded for real (default 2000)")
    parent.add_argument("--noise", type=float, default=0.02, help="per-dimension noise of derived vectors")
    return parent


# the agent a command without a service acts as by default: the first admin, made once per database by
# `cabrain migrate` or `cabrain up` (identity.ensure_admin_key)
FIRST_ADMIN = "admin"


@functools.cache
def acting_as(text: str = "without a service: act as this agent") -> argparse.ArgumentParser:
    """``--as AGENT``: who a command acts as on the hot tier when no service is configured (the
    operator, who owns the database, acting for an agent; by default the first admin)."""
    return _parent(
        "--as", dest="as_agent", default=FIRST_ADMIN, metavar="AGENT", help=f"{text} (default: {FIRST_ADMIN})"
    )


# --- arguments argparse does not know ----------------------------------------------------------------------
PASS_THROUGH = "pass_through"  # set_defaults(pass_through=DEST): arguments argparse does not know go to DEST


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that a command declaring ``pass_through`` gets the arguments
    argparse does not know instead of the usual usage error.

    ``cabrain db shell -c '\\dt'`` needs this: argparse leaves an option it does not know (``-c``) out of
    an ``argparse.REMAINDER`` that starts with it. The unknown ones come first, the remainder after them;
    the ``--`` that opens the remainder (the end of cabrain's own options) is dropped.
    """
    args, extra = parser.parse_known_args(argv)
    dest = getattr(args, PASS_THROUGH, None)
    try:  # the edge guard: every argument as a request's values are checked
        edge.check_arguments({k: v for k, v in vars(args).items() if k not in (dest, PASS_THROUGH)})
    except InputError as exc:
        parser.error(exc.message)
    if dest is None:
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        return args
    rest = list(getattr(args, dest) or [])
    if rest[:1] == ["--"]:
        rest = rest[1:]
    setattr(args, dest, [*extra, *rest])
    return args


# --- helpers -----------------------------------------------------------------------------------------------
def int_list(text: str, flag: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{flag} must be comma-separated integers, got {text!r}") from None


def write_results(path: str | None, text: str) -> None:
    """``--json FILE``: the results, written where asked."""
    if path:
        Path(path).write_text(text)
        print(f"\nresults written to {path}")


def read_app_config(path: str) -> dict:
    """Application args from a Serve config file (its cabrain application) or a bare args file."""
    import yaml  # lazy: only the commands given --config read YAML

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if isinstance(data, dict) and "applications" in data:
        apps = [a for a in data["applications"] if a.get("import_path", "").startswith(SERVE_APPS)]
        if not apps:
            raise UsageError(
                f"{path} has no application with import_path "
                + " or ".join(f"{module}:build_app" for module in SERVE_APPS)
            )
        data = apps[0].get("args") or {}
    if not isinstance(data, dict):
        raise UsageError(f"{path} must hold a mapping of application args")
    return data


def remote(settings: Settings) -> Client:
    """The HTTP client for commands that talk to a running API."""
    from cabrain.client import Client  # lazy: the HTTP client and its types

    if not settings.api_url:
        raise ConfigError(
            "this command talks to a running CaBrain API and CABRAIN_API_URL is not set",
            hint=f"start it (cabrain up), then point this shell at it as cabrain up prints: {api_exports(settings)}",
        )
    key = settings.api_key.get_secret_value() if settings.api_key else None
    return Client(settings.api_url, key)


def api_exports(settings: Settings) -> str:
    """The shell lines that point the commands at this machine's ``cabrain up``: its real port, and
    the first admin's key file."""
    from cabrain import identity  # lazy: an error's words need it, not the parser
    from cabrain.service import api_url

    return f"export CABRAIN_API_URL={api_url(settings)} CABRAIN_API_KEY=$(cat {identity.admin_key_path(settings.home)})"


async def require_acting(engine: Engine, name: str) -> None:
    """Refuse to act as ``name`` on the hot tier (``--as``) unless it is an active agent, naming
    the one command that fixes it."""
    from cabrain import identity  # lazy: start-up time (above)

    async with engine.pool.acquire() as conn:
        agents = {a.id: a for a in await identity.list_agents(conn)}
    found = agents.get(name)
    if found is not None and found.disabled_at is None:
        return
    admins = sorted(a.id for a in agents.values() if a.is_admin and a.disabled_at is None)
    if found is None and name == FIRST_ADMIN and not any(a.is_admin for a in agents.values()):
        raise NotFound(
            f"no agent {name!r} to act as yet: the first admin is made once per database",
            hint="run: cabrain migrate (it makes the first admin, as cabrain up does)",
        )
    state = "unknown" if found is None else "disabled"
    if admins:
        hint = f"act as an active agent: --as {admins[0]} (cabrain agents list shows them all)"
    else:
        hint = "make an admin and act as it: cabrain agents create NAME --admin, then --as NAME"
    raise NotFound(f"cannot act as agent {name!r}: it is {state}", hint=hint)
