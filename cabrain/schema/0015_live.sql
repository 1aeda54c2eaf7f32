-- Live channels and a voice (issue 22): roles and confirmations, usage and caps, chat channels as a
-- retain source, findings pushed to subscribers through an outbox, and the live agent's issues.

-- 1. Roles. What an agent may do is decided by the server from its role, never by a prompt
--    (cabrain/policy.py): 'member' may do what its grants allow, 'live' may only recall and file
--    issues (forget, share, grants and anything that spends wait for a person's confirmation),
--    'reader' may only read. Admins stay agents.is_admin.
ALTER TABLE agents ADD COLUMN role text NOT NULL DEFAULT 'member' CHECK (role IN ('member', 'live', 'reader'));
CREATE TRIGGER agents_role_cache AFTER UPDATE OF role ON agents
    FOR EACH STATEMENT EXECUTE FUNCTION cabrain_touch_epoch();

-- A call a policy holds for a person: it runs, as the agent that asked, once a person approves it.
CREATE TABLE pending_actions (
    id           uuid PRIMARY KEY,
    agent_id     text NOT NULL REFERENCES agents (id),
    op           text NOT NULL,
    namespace    text REFERENCES namespaces (name),
    args         jsonb NOT NULL DEFAULT '{}',
    policy       text NOT NULL,                  -- the rule that held it, as the 403 named it
    status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'done', 'failed')),
    requested_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    decided_by   text,                           -- an agent id, or 'channel:<name>:<user>' from chat
    decided_at   timestamptz,
    result       jsonb,
    error        text
);
CREATE INDEX pending_actions_open ON pending_actions (requested_at) WHERE status = 'pending';

-- 2. Usage, per agent, namespace, day and operation (memory operations and model calls), and caps.
CREATE TABLE usage_daily (
    day        date NOT NULL,
    agent_id   text NOT NULL,
    namespace  text NOT NULL DEFAULT '',
    op         text NOT NULL,
    calls      bigint NOT NULL DEFAULT 0,
    units      bigint NOT NULL DEFAULT 0,            -- texts embedded, characters sent to a model, ...
    cost_usd   double precision NOT NULL DEFAULT 0,  -- what priced model calls cost (workflows)
    PRIMARY KEY (day, agent_id, namespace, op)
);
CREATE INDEX usage_daily_agent ON usage_daily (agent_id, day);

CREATE TABLE agent_caps (
    agent_id   text NOT NULL REFERENCES agents (id),
    op         text NOT NULL,                        -- an operation, a model call kind, or '*' for all
    per_day    bigint NOT NULL CHECK (per_day >= 0),
    set_by     text,
    set_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, op)
);

-- 3. Outbound: notifiers (how to reach a platform; the credential is named by environment variable,
--    never stored), subscriptions, the events worth telling, and the outbox that delivers each event
--    to each destination once.
CREATE TABLE notifiers (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    kind        text NOT NULL CHECK (kind IN ('slack', 'whatsapp', 'talk', 'webpush', 'webhook')),
    config      jsonb NOT NULL DEFAULT '{}',
    secret_env  text,
    created_by  text NOT NULL REFERENCES agents (id),
    created_at  timestamptz NOT NULL,
    removed_at  timestamptz
);

CREATE TABLE subscriptions (
    id              uuid PRIMARY KEY,
    agent_id        text NOT NULL REFERENCES agents (id),   -- whose view of memory the pushes show
    subscriber      text NOT NULL,                          -- the person or agent told (a label)
    namespace       text REFERENCES namespaces (name),      -- NULL: every namespace the agent reads
    kinds           text[] NOT NULL,
    notifier        text REFERENCES notifiers (name),       -- NULL: the event stream only (/v1/events)
    target          jsonb NOT NULL DEFAULT '{}',
    min_importance  real NOT NULL DEFAULT 0.5 CHECK (min_importance BETWEEN 0 AND 1),
    max_per_hour    integer NOT NULL DEFAULT 6 CHECK (max_per_hour >= 0),
    quiet_start     time,
    quiet_end       time,
    timezone        text NOT NULL DEFAULT 'UTC',
    created_at      timestamptz NOT NULL,
    disabled_at     timestamptz,
    disabled_reason text
);
CREATE INDEX subscriptions_live ON subscriptions (agent_id) WHERE disabled_at IS NULL;

CREATE TABLE notify_events (
    seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind        text NOT NULL CHECK (kind IN ('contradiction', 'stale', 'pattern', 'issue_filed', 'issue_linked',
                                              'action_pending', 'reply')),
    namespace   text REFERENCES namespaces (name),
    finding     text NOT NULL,                 -- the same finding again has the same key (deduplicated)
    importance  real,                          -- filled in when the event is fanned out
    title       text,
    body        text,
    memory_ids  uuid[] NOT NULL DEFAULT '{}',
    judgment_id uuid UNIQUE REFERENCES judgments (id),
    data        jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    fanned_at   timestamptz
);
CREATE INDEX notify_events_new ON notify_events (seq) WHERE fanned_at IS NULL;
CREATE INDEX notify_events_namespace ON notify_events (namespace, seq);

CREATE TABLE outbox (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event_id        uuid NOT NULL REFERENCES notify_events (id),
    destination     text NOT NULL,              -- 'sub:<subscription id>' or 'thread:<channel>:<thread>'
    subscription_id uuid REFERENCES subscriptions (id),
    notifier        text REFERENCES notifiers (name),
    target          jsonb NOT NULL DEFAULT '{}',
    status          text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'suppressed', 'streamed')),
    reason          text,                       -- why the gate suppressed or held it
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    message_ref     text,                       -- the platform's id of the message sent
    created_at      timestamptz NOT NULL,
    delivered_at    timestamptz,
    UNIQUE (event_id, destination)
);
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'pending';
CREATE INDEX outbox_subscription ON outbox (subscription_id, delivered_at);

-- Every judgment a write or a sleep step makes that a person may want to hear of becomes an event:
-- a contradiction resolved (a write's INVALIDATE, sleep's reconsolidation) or a memory gone stale
-- after a newer fact (a write's UPDATE). SECURITY DEFINER: the sleep role records judgments and
-- may not write events itself.
CREATE FUNCTION cabrain_judgment_event() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    event_kind text;
BEGIN
    event_kind := CASE
        WHEN NEW.origin = 'reconsolidate' THEN 'contradiction'
        WHEN NEW.origin = 'write' AND NEW.kind = 'invalidate' THEN 'contradiction'
        WHEN NEW.origin = 'write' AND NEW.kind = 'supersede' THEN 'stale'
        ELSE NULL
    END;
    IF event_kind IS NOT NULL THEN
        INSERT INTO public.notify_events (kind, namespace, finding, memory_ids, judgment_id, data, created_at)
        VALUES (event_kind, NEW.namespace,
                event_kind || ':' || array_to_string(ARRAY(SELECT unnest(NEW.memory_ids)::text ORDER BY 1), ','),
                NEW.memory_ids, NEW.id,
                jsonb_build_object('reason', NEW.reason, 'origin', NEW.origin, 'judgment', NEW.kind,
                                   'agent', NEW.agent_id, 'inputs', NEW.inputs),
                NEW.created_at);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER judgments_event AFTER INSERT ON judgments
    FOR EACH ROW EXECUTE FUNCTION cabrain_judgment_event();

-- 4. Inbound: chat channels. Each maps one platform endpoint to a namespace and the agent its
--    messages are retained as; its signing secret is named by environment variable.
CREATE TABLE channels (
    name             text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    kind             text NOT NULL CHECK (kind IN ('slack', 'whatsapp', 'talk', 'webhook')),
    namespace        text NOT NULL REFERENCES namespaces (name),
    visibility       text NOT NULL CHECK (visibility IN ('private', 'team', 'global')),
    agent_id         text NOT NULL REFERENCES agents (id),
    secret_env       text NOT NULL,
    verify_token_env text,
    notifier         text REFERENCES notifiers (name),   -- how replies reach this channel's threads
    live_agent       text REFERENCES agents (id),        -- the live agent that answers it, if any
    tracker          text,                               -- the connector whose project takes its issues
    options          jsonb NOT NULL DEFAULT '{}',
    created_by       text NOT NULL REFERENCES agents (id),
    created_at       timestamptz NOT NULL,
    removed_at       timestamptz
);

-- One row per platform event accepted: a replay or a platform's retry finds it and stores nothing.
CREATE TABLE channel_receipts (
    channel     text NOT NULL REFERENCES channels (name),
    event_id    text NOT NULL,
    received_at timestamptz NOT NULL,
    memory_ids  uuid[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (channel, event_id)
);

-- Issues the live agent filed, and the thread that asked: when one gets a merge request, the thread
-- is told.
CREATE TABLE live_issues (
    id          uuid PRIMARY KEY,
    channel     text NOT NULL REFERENCES channels (name),
    thread      text NOT NULL,
    reply_to    jsonb NOT NULL,
    tracker     text NOT NULL,
    kind        text NOT NULL,
    project     text NOT NULL,
    ref         text NOT NULL,
    url         text NOT NULL,
    title       text NOT NULL,
    filed_by    text NOT NULL REFERENCES agents (id),
    memory_ids  uuid[] NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL,
    checked_at  timestamptz,
    linked_at   timestamptz,
    links       jsonb NOT NULL DEFAULT '[]',
    UNIQUE (tracker, ref)
);
CREATE INDEX live_issues_open ON live_issues (checked_at) WHERE linked_at IS NULL;
