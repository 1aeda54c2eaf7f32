"""Statements over the sleep runs (``sleep_runs``, ``sleep_steps``: schema 0005, 0017) and over what
sleep reads and distils (current memories, ``memory_sources`` and ``sleep_watermarks``: 0005; facts,
entity summaries, sitting summaries, decayed importance): a run's start and end, its steps and its
namespace locks (advisory), the sleep role it runs as (``pg_roles``), a run's control while it runs
(a cancel asked for, why it waits), an admin's cancel, the runs' pages, the doctor's look at the last
run, and the readouts ``cabrain eval facts`` scores."""

from __future__ import annotations

# --- a run and its steps (cabrain.sleep.cycle) ----------------------------------------------------------
NAMESPACES = "SELECT name FROM namespaces ORDER BY name"
MONTHS = """
SELECT to_char(valid_at AT TIME ZONE 'UTC', 'YYYY-MM') AS month, count(*) AS n
FROM memories WHERE namespace = $1 GROUP BY 1 ORDER BY 1
"""
START_RUN = "INSERT INTO sleep_runs (id, status, host, steps, namespaces) VALUES ($1, 'running', $2, $3, $4)"
END_RUN = "UPDATE sleep_runs SET status = $2, finished_at = now(), report = $3::jsonb WHERE id = $1"
FAIL_RUN = "UPDATE sleep_runs SET status = 'failed', finished_at = now() WHERE id = $1 AND status = 'running'"
START_STEP = """
INSERT INTO sleep_steps (run_id, step, namespace, month, status, node_id) VALUES ($1, $2, $3, $4, 'running', $5)
ON CONFLICT (run_id, step, namespace, month) DO UPDATE SET status = 'running', node_id = $5, started_at = now(),
    finished_at = NULL, error = NULL
"""
END_STEP = """
UPDATE sleep_steps SET status = $5, counts = $6::jsonb, changes = $7::jsonb, error = $8, finished_at = now()
WHERE run_id = $1 AND step = $2 AND namespace = $3 AND month = $4
"""
# a namespace's lock for the length of a run ($1: cabrain.sleep.cycle.LOCK_CLASS)
TRY_LOCK = "SELECT pg_try_advisory_lock($1, hashtext($2))"

# --- the role sleep tasks connect as (cabrain.sleep.cycle.sleep_dsn) ---------------------------------------
ROLE_EXISTS = "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)"
CURRENT_USER = "SELECT current_user"

# --- a run while it runs (cabrain.sleep.cycle) ---------------------------------------------------------
CANCEL_REQUESTED = "SELECT cancel_requested_at IS NOT NULL FROM sleep_runs WHERE id = $1"
STEP_STARTED = """
SELECT EXISTS (SELECT 1 FROM sleep_steps WHERE run_id = $1 AND step = $2 AND namespace = $3 AND month = $4)
"""
SET_NOTE = "UPDATE sleep_runs SET note = $2 WHERE id = $1 AND note IS DISTINCT FROM $2"

# --- cancelling (cabrain.sleep.runs) -----------------------------------------------------------------
# A run's driver holds an advisory lock per namespace (cabrain.sleep.cycle.LOCK_CLASS) while it runs:
# none held means the driver is gone (its process died) and nobody will end the run but a cancel.
DRIVER_ALIVE = """
SELECT EXISTS (
    SELECT 1 FROM pg_locks l, unnest($2::text[]) AS n(name)
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
      AND l.classid = $1::bigint::oid AND l.objid = (hashtext(n.name)::bigint & 4294967295)::oid
)
"""
ORPHANED = """
UPDATE sleep_runs SET status = 'cancelled', finished_at = now(), note = $2
WHERE id = $1 AND status = 'running' RETURNING status
"""
CANCEL = """
UPDATE sleep_runs SET cancel_requested_at = coalesce(cancel_requested_at, now())
WHERE id = $1 AND status = 'running' RETURNING cancel_requested_at
"""

# --- the runs' pages (cabrain.sleep.runs) ------------------------------------------------------------
RUNS = """
SELECT id, started_at, finished_at, status, host, steps, namespaces, note, cancel_requested_at FROM sleep_runs
WHERE $1::boolean OR namespaces && $2::text[]
ORDER BY started_at DESC LIMIT $3
"""
RUN = """
SELECT id, started_at, finished_at, status, host, steps, namespaces, note, cancel_requested_at, report FROM sleep_runs
WHERE id = $1
"""
RUN_STEPS = """
SELECT run_id, step, namespace, month, status, counts, node_id, started_at, finished_at, error FROM sleep_steps
WHERE run_id = ANY($1::uuid[]) AND ($2::boolean OR namespace = ANY($3::text[]))
ORDER BY started_at, step, namespace, month
"""
RUN_JUDGMENTS = "SELECT * FROM judgments WHERE run_id = $1 ORDER BY created_at, id LIMIT $2"
RUN_EXISTS = "SELECT EXISTS (SELECT 1 FROM sleep_runs WHERE id = $1)"
KNOWN_NAMESPACES = "SELECT name FROM namespaces WHERE name = ANY($1::text[])"

# --- the doctor ----------------------------------------------------------------------------------------
LAST_SLEEP = """
SELECT id, status, note, started_at, finished_at, now() - coalesce(finished_at, started_at) AS age,
       (SELECT count(*) FROM cold_batches WHERE state <> 'done' AND created_at < now() - interval '1 hour') AS open_batches
FROM sleep_runs ORDER BY started_at DESC LIMIT 1
"""

# --- what the knowledge steps share (cabrain.sleep.rows) -------------------------------------------------
ADD_SOURCES = """
INSERT INTO memory_sources (memory_id, source_id, relation, run_id)
SELECT $1, s, $3, $4 FROM unnest($2::uuid[]) AS s
ON CONFLICT DO NOTHING
RETURNING source_id
"""
CURRENT = """
SELECT m.id, m.namespace, m.owner_agent_id, m.visibility, m.network, m.memory_type, m.content, m.embedding,
       m.importance, m.access_count, m.valid_at, m.created_at, m.pinned, m.source_kind, m.source_ref, m.metadata
FROM memories m
WHERE m.namespace = $1 AND m.tier = 'hot' AND m.invalid_at IS NULL AND m.embedding IS NOT NULL
  AND ($2::text[] IS NULL OR m.network = ANY($2::text[]))
ORDER BY m.created_at, m.id
"""
WATERMARK = "SELECT upto FROM sleep_watermarks WHERE namespace = $1 AND step = $2"
SET_WATERMARK = """
INSERT INTO sleep_watermarks (namespace, step, upto) VALUES ($1, $2, $3)
ON CONFLICT (namespace, step) DO UPDATE SET upto = greatest(sleep_watermarks.upto, EXCLUDED.upto)
"""

# --- consolidate (cabrain.sleep.consolidate) -------------------------------------------------------------
EPISODES = """
SELECT m.id, m.owner_agent_id, m.visibility, m.content, m.embedding, m.importance, m.valid_at, m.created_at,
       m.metadata ->> 'speaker' AS speaker, m.metadata ->> 'thread' AS thread, coalesce(m.metadata ->> 'sitting', m.metadata ->> 'thread') AS sitting
FROM memories m
WHERE m.namespace = $1 AND m.tier = 'hot' AND m.invalid_at IS NULL AND m.memory_type = 'episodic'
  AND m.consolidated_at IS NULL AND m.embedding IS NOT NULL
  AND m.created_at > $4::timestamptz - make_interval(secs => $2)
ORDER BY m.created_at DESC, m.id
LIMIT $3
"""
ENTITY_FACTS = """
SELECT e.id AS entity_id, e.name, m.id, m.content, m.importance, m.embedding
FROM entities e
JOIN memory_entities me ON me.entity_id = e.id
JOIN memory_ids i ON i.id = me.memory_id AND i.tier = 'hot'
JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE e.id = ANY($1::uuid[]) AND m.invalid_at IS NULL AND m.network = 'fact' AND m.visibility <> 'private'
ORDER BY e.id, m.importance DESC, m.valid_at DESC, m.content, m.id
"""
SET_SUMMARY = """
UPDATE entities SET summary = $2, summary_sources = $3, summarized_at = now(), updated_at = now(), embedding = $4
WHERE id = $1
"""

# --- decay (cabrain.sleep.decay; a month's bounds: cabrain.store.demote.MONTH_BOUNDS) ----------------------
DECAY = """
WITH aged AS (
    SELECT m.id, m.valid_at, m.importance,
           extract(epoch FROM $9::timestamptz - greatest(m.decayed_at, m.last_accessed_at, m.created_at)) / 86400.0 AS days
    FROM memories m
    WHERE m.namespace = $1 AND m.valid_at >= $2 AND m.valid_at < $3
      AND m.invalid_at IS NULL AND m.tier = 'hot' AND m.importance > (CASE WHEN m.pinned THEN $8::real ELSE $6::real END)
),
next AS (
    SELECT id, valid_at, importance AS before, floor,
           greatest(floor, importance * power(2.0, -days / ($4 * (1 + $5 * importance))))::real AS after
    FROM (SELECT a.*, CASE WHEN m.pinned THEN greatest($6::real, $8::real) ELSE $6::real END AS floor
          FROM aged a JOIN memories m ON m.id = a.id AND m.valid_at = a.valid_at) f
    WHERE days > 0
)
UPDATE memories m SET importance = n.after, decayed_at = $9
FROM next n
WHERE m.id = n.id AND m.valid_at = n.valid_at AND (n.before - n.after >= $7 OR n.after <= n.floor)
RETURNING m.id, m.valid_at, n.before, n.after
"""

# --- writing what sleep distils (cabrain.sleep.writing; NOW also dedup's and reconsolidate's) ----------
NOW = "SELECT now()"
EXISTING_FACT = """
SELECT id FROM memories WHERE namespace = $1 AND content_hash = $2 AND invalid_at IS NULL AND tier = 'hot'
  AND network = $5 AND owner_agent_id IS NOT DISTINCT FROM $3 AND visibility = $4
LIMIT 1
"""
MARK_CONSOLIDATED = """
UPDATE memories m SET consolidated_at = now()
FROM memory_ids i WHERE i.id = ANY($1::uuid[]) AND m.id = i.id AND m.valid_at = i.valid_at
"""
ENTITY_LINKS = """
SELECT me.memory_id, me.entity_id FROM memory_entities me WHERE me.memory_id = ANY($1::uuid[])
"""
LINK = """
INSERT INTO memory_entities (memory_id, entity_id) SELECT $1, e FROM unnest($2::uuid[]) AS e ON CONFLICT DO NOTHING
"""

# --- a sitting's summary (cabrain.sleep.turns) --------------------------------------------------------
# A readership group's rows: a private row is its owner's, a shared or public one anybody's of the group.
_READERSHIP = "m.visibility = $4 AND ($4 <> 'private' OR m.owner_agent_id IS NOT DISTINCT FROM $3)"
# the current facts sleep distilled from these sittings (a fact written before sittings were found names
# its sitting in metadata.thread), in the order they were said (turns of one
# moment by their text: a batch stores its rows at one time, and a summary must not depend on ids)
SITTING_FACTS = f"""
SELECT m.id, m.owner_agent_id, m.content, m.importance, m.valid_at, m.created_at,
       m.metadata ->> 'thread' AS thread, coalesce(m.metadata ->> 'sitting', m.metadata ->> 'thread') AS sitting, m.metadata ->> 'said_by' AS speaker
FROM memories m
WHERE m.namespace = $1 AND m.tier = 'hot' AND m.invalid_at IS NULL AND m.network = 'fact'
  AND m.source_kind = 'sleep' AND coalesce(m.metadata ->> 'sitting', m.metadata ->> 'thread') = ANY($2::text[]) AND {_READERSHIP}
ORDER BY m.valid_at, m.created_at, m.content, m.id
"""
# who spoke in these sittings, and when
SITTING_SPEAKERS = f"""
SELECT coalesce(m.metadata ->> 'sitting', m.metadata ->> 'thread') AS sitting, btrim(m.metadata ->> 'speaker') AS speaker,
       min(m.valid_at) AS first, max(m.valid_at) AS last, min(m.created_at) AS since
FROM memories m
WHERE m.namespace = $1 AND m.invalid_at IS NULL AND m.memory_type = 'episodic'
  AND coalesce(m.metadata ->> 'sitting', m.metadata ->> 'thread') = ANY($2::text[]) AND btrim(m.metadata ->> 'speaker') <> ''
  AND {_READERSHIP}
GROUP BY 1, 2
ORDER BY 1, min(m.valid_at), min(m.created_at), 2
"""
# the current summaries of these sittings
SITTING_SUMMARIES = f"""
SELECT m.id, m.content, m.metadata ->> 'sitting' AS sitting
FROM memories m
WHERE m.namespace = $1 AND m.tier = 'hot' AND m.invalid_at IS NULL AND m.network = 'observation'
  AND m.source_kind = 'sleep' AND m.metadata ->> 'sitting' = ANY($2::text[]) AND {_READERSHIP}
"""

# --- what sleep distilled, as cabrain eval facts reads it ----------------------------------------------
# the facts sleep wrote in these namespaces, each with the source_ref of the turns it was distilled from
DISTILLED_FACTS = """
SELECT m.id, m.namespace, m.content, array_agg(src.source_ref) FILTER (WHERE src.source_ref IS NOT NULL) AS turns
FROM memories m
LEFT JOIN memory_sources s ON s.memory_id = m.id AND s.relation = 'distilled_from'
LEFT JOIN memory_ids si ON si.id = s.source_id
LEFT JOIN memories src ON src.id = si.id AND src.valid_at = si.valid_at
WHERE m.namespace = ANY($1::text[]) AND m.network = 'fact' AND m.source_kind = 'sleep' AND m.invalid_at IS NULL
GROUP BY m.id, m.namespace, m.content
"""
# each sitting summary with the source_refs of the turns behind the facts it summarizes
SITTING_SUMMARY_SOURCES = """
SELECT m.id, m.namespace, m.content AS summary, array_agg(DISTINCT src.source_ref) AS turns
FROM memories m
JOIN memory_sources s ON s.memory_id = m.id AND s.relation = 'summarizes'
JOIN memory_sources t ON t.memory_id = s.source_id AND t.relation = 'distilled_from'
JOIN memory_ids si ON si.id = t.source_id
JOIN memories src ON src.id = si.id AND src.valid_at = si.valid_at
WHERE m.namespace = ANY($1::text[]) AND m.network = 'observation' AND m.source_kind = 'sleep'
  AND m.invalid_at IS NULL AND m.metadata ? 'sitting'
GROUP BY m.id, m.namespace, m.content
"""

# --- reverting a run (cabrain.sleep.revert) ------------------------------------------------------------
RUN_NAMESPACES = "SELECT namespaces, status FROM sleep_runs WHERE id = $1"
# the namespaces where a run has judgments not reverted yet
RUN_JOURNALED = """
SELECT DISTINCT namespace FROM judgments WHERE run_id = $1 AND reverted_by IS NULL ORDER BY namespace
"""
STILL_ARCHIVED = """
SELECT id FROM memory_ids WHERE id = ANY($1::uuid[]) AND tier = 'cold' AND forgotten_at IS NULL
"""
# what a run's page shows of the memories its judgments name: hot ones the caller may read
RUN_MEMORY_TEXTS = """
SELECT m.id, m.content, m.network, m.source_ref, m.invalid_at IS NULL AS current
FROM memory_ids i JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE i.id = ANY($1::uuid[])
"""
# the reverts of a run (and whether each was reverted in turn)
RUN_REVERTS = """
SELECT * FROM judgments WHERE kind = 'revert' AND inputs ->> 'run' = $1 ORDER BY created_at, id
"""
