"""Capture mode (SPEC §6): ``cabrain capture`` handles Claude Code hook events.

It reads one hook event (JSON) on stdin and, by ``hook_event_name``:

| event              | retains                                                | answers with                     |
|--------------------|--------------------------------------------------------|----------------------------------|
| SessionStart       | -                                                      | the project's most relevant memories |
| UserPromptSubmit   | the prompt                                             | memories relevant to the prompt  |
| PostToolUse        | edits, commands, failures (compactly; reads are skipped) | -                              |
| PreCompact         | a digest of the session so far (from the transcript)   | -                                |
| Stop               | decisions and learnings in the last assistant message  | -                                |

Memories get ``source_kind='claude_code'``, ``source_ref=<session id>``, and the project's
namespace: ``CABRAIN_CAPTURE_NAMESPACE``, else one derived from the git remote (``github.com/acme/api``)
or the directory (``dir/home/me/api``) and bound to the capturing agent by the service (its personal
``@<agent>/github.com/acme/api``, or its own ``github.com/acme/api`` from before), so that another
agent cannot create it first. Memories are injected only from a namespace the agent owns or
accepted a grant on. ``<private>...</private>`` and anything that looks like a secret
are removed before anything is stored or sent.

It must never slow Claude Code. With a service (``CABRAIN_API_URL``) it hands memories over in one
request (``POST /v1/capture``: the service stores them at once and retains them in the background)
and returns; if the service is down it appends them to a local queue (``CABRAIN_HOME/capture-queue.jsonl``),
sent with the next event or by ``cabrain capture --flush``. Without a service it writes straight to
the database (the embedded default).

The modules: :mod:`~cabrain.faces.capture.config`,
:mod:`~cabrain.faces.capture.project` (where memories go), :mod:`~cabrain.faces.capture.events`
(each event's plan: what to send and what to inject, redacted by :mod:`~cabrain.faces.capture.redaction`),
:mod:`~cabrain.faces.capture.transport` (the service, the local queue) and
:mod:`~cabrain.faces.capture.hook` (the entry, :func:`main`). They and this package import only the
standard library, each other, :mod:`cabrain.redact` and :mod:`cabrain.paths` (both standard library
only): the hook's path. :mod:`~cabrain.faces.capture.database`, the path without a service, imports
the rest of CaBrain and is imported only when that path is taken.
"""

from cabrain.faces.capture.config import CaptureConfig, CaptureError
from cabrain.faces.capture.events import (
    EVENTS,
    SOURCE_KIND,
    WITHHELD,
    Plan,
    context_text,
    decisions_and_learnings,
    hook_output,
    plan,
    read_transcript,
    tool_memory,
)
from cabrain.faces.capture.hook import handle_via_service, main, run
from cabrain.faces.capture.project import capture_target, git_remote, namespace_from_remote, origin_url, project_name
from cabrain.faces.capture.redaction import clean
from cabrain.faces.capture.transport import ServiceDown, _Url, enqueue_locally, flush_queue
from cabrain.redact import redact, redact_deep

__all__ = [
    "EVENTS",
    "SOURCE_KIND",
    "WITHHELD",
    "CaptureConfig",
    "CaptureError",
    "Plan",
    "ServiceDown",
    "_Url",
    "capture_target",
    "clean",
    "context_text",
    "decisions_and_learnings",
    "enqueue_locally",
    "flush_queue",
    "git_remote",
    "handle_via_service",
    "hook_output",
    "main",
    "namespace_from_remote",
    "origin_url",
    "plan",
    "project_name",
    "read_transcript",
    "redact",
    "redact_deep",
    "run",
    "tool_memory",
]
