"""Statements over ``namespace_speakers`` (schema 0012): each namespace's conversation speakers per
writer and visibility, counted on write (:mod:`cabrain.write.threads`) and looked up by a
question's words before recall embeds it (:mod:`cabrain.search.speakers`)."""

from __future__ import annotations

from cabrain.store.access import ACCESS_CTE, READABLE
from cabrain.store.statement import Statement

# The speakers whose name begins with one of :tokens, among those :agent may read of.
NAMED = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT DISTINCT m.key FROM namespace_speakers m
WHERE m.namespace = :namespace AND m.first_token = ANY(:tokens::text[]) AND {READABLE}
"""
)
# New turns counted (columns: namespace, key, owner, visibility, first token, name, turns).
RECORD = """
INSERT INTO namespace_speakers (namespace, key, owner_agent_id, visibility, first_token, name, turns)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])
ORDER BY 1, 2, 3, 4
ON CONFLICT (namespace, key, owner_agent_id, visibility)
DO UPDATE SET turns = namespace_speakers.turns + EXCLUDED.turns
"""
