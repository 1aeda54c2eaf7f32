"""The people a question names, when they are speakers of the namespace's conversations.

A conversation turn carries its speaker in ``metadata.speaker``; the write path records each
namespace's speakers (per writer and visibility) in ``namespace_speakers``. Before recall embeds a
question it looks up which of those speakers the question names (one indexed lookup by the
question's words, under the same visibility rules as the memories) and embeds the question
without their names: with a small embedding model a name that half the namespace's turns carry
outweighs what is asked about ("What did Melanie paint?" then finds Melanie's turns about anything
before anyone's turns about painting). The name still counts where it discriminates: the keyword
side matches it, and fusion nudges the turns *by* the one speaker named
(:func:`cabrain.search.fusion.conversation`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import asyncpg

from cabrain.store import speakers as sql
from cabrain.text.tokenizer import name_tokens, tokenize

_WORD = re.compile(r"[^\W_]+(?:['\u2019][sS])?")


async def named(conn: asyncpg.Connection, query: str, namespace: str, agent: str) -> list[tuple[str, ...]]:
    """The speakers ``query`` names (each as its name's tokens) among those ``agent`` may read of."""
    words = name_tokens(query)
    if not words:
        return []
    rows = await conn.fetch(sql.NAMED.sql, *sql.NAMED.args(namespace=namespace, agent=agent, tokens=sorted(set(words))))
    present = set(words)
    return [tuple(r["key"].split()) for r in rows if set(r["key"].split()) <= present]


def without_names(query: str, names: Sequence[tuple[str, ...]]) -> str:
    """``query`` with the words of ``names`` (and their possessive 's) left out; ``query`` itself
    when nothing else would be left."""
    drop = {token for name in names for token in name}
    if not drop:
        return query
    kept = _WORD.sub(lambda m: "" if (t := name_tokens(m.group(0))) and set(t) <= drop else m.group(0), query)
    kept = re.sub(r"\s+", " ", kept).strip()
    return kept if tokenize(kept) else query


async def record(conn: asyncpg.Connection, turns: Sequence[tuple[str, str, str, str]]) -> None:
    """Count new turns ``(namespace, owner, visibility, speaker)`` in ``namespace_speakers``."""
    counts: dict[tuple[str, str, str, str], list] = {}
    for namespace, owner, visibility, speaker in turns:
        tokens = tokenize(speaker)
        if not tokens:
            continue
        key = (namespace, " ".join(tokens), owner, visibility)
        entry = counts.setdefault(key, [tokens[0], speaker, 0])
        entry[2] += 1
    if not counts:
        return
    keys = sorted(counts)
    columns = [[k[i] for k in keys] for i in range(4)]
    await conn.execute(
        sql.RECORD,
        columns[0],
        columns[1],
        columns[2],
        columns[3],
        [counts[k][0] for k in keys],
        [counts[k][1] for k in keys],
        [counts[k][2] for k in keys],
    )
