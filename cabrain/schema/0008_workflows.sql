-- Workflow learning (issue: workflow learning; design: ../shared/seeds/003, "Workflow Learning Loop").
--
-- Tasks a frontier model does become references; cheaper local chains are tried against them
-- offline; a kind of task (a cluster of task embeddings, per namespace) whose best local chain is
-- trusted is then routed to it. Tasks, references, attempts and clusters belong to a namespace and
-- follow its access rules (cabrain/workflows/); the model registry is the installation's.

-- The models CaBrain can hand tasks to. API keys are never stored: api_key_env names the
-- environment variable that holds one where the dispatcher and workers run.
CREATE TABLE llm_agents (
    name            text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$'),
    layer           text NOT NULL CHECK (layer IN ('frontier', 'local')),
    provider        text NOT NULL CHECK (provider IN ('openai', 'anthropic')),
    model           text NOT NULL CHECK (model <> ''),
    endpoint        text NOT NULL CHECK (endpoint ~ '^https?://'),
    api_key_env     text CHECK (api_key_env ~ '^[A-Za-z_][A-Za-z0-9_]*$'),
    capabilities    text[] NOT NULL DEFAULT '{}',
    cost_in_per_1k  numeric(14, 8) CHECK (cost_in_per_1k >= 0),   -- NULL: CABRAIN_WORKFLOW_PRICES
    cost_out_per_1k numeric(14, 8) CHECK (cost_out_per_1k >= 0),
    latency_ms      real,                                        -- measured, moving average
    calls           bigint NOT NULL DEFAULT 0,
    failures        bigint NOT NULL DEFAULT 0,
    active          boolean NOT NULL DEFAULT true,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- A kind of task: tasks whose embeddings lie close together, in one namespace. Its best local
-- chain, that chain's mean score over its current samples, and a confidence that grows with
-- samples and falls with every routed output that failed validation.
CREATE TABLE task_clusters (
    id           bigserial PRIMARY KEY,
    namespace    text NOT NULL REFERENCES namespaces (name),
    centroid     vector({{embedding_dim}}) NOT NULL,
    members      integer NOT NULL DEFAULT 0,
    best_chain   jsonb,
    avg_accuracy real,
    samples      integer NOT NULL DEFAULT 0,
    failures     integer NOT NULL DEFAULT 0,
    confidence   real NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX task_clusters_namespace ON task_clusters (namespace);

-- Every task dispatched, how it was routed and what came back.
CREATE TABLE workflow_tasks (
    id           uuid PRIMARY KEY,
    namespace    text NOT NULL REFERENCES namespaces (name),
    submitted_by text NOT NULL REFERENCES agents (id),
    task_hash    bytea NOT NULL,
    description  text NOT NULL CHECK (description <> ''),
    context      text NOT NULL DEFAULT '',
    task_type    text NOT NULL CHECK (task_type IN ('text', 'json', 'code')),
    destructive  boolean NOT NULL DEFAULT false,
    needs_review boolean NOT NULL DEFAULT false,
    embedding    vector({{embedding_dim}}) NOT NULL,
    cluster_id   bigint REFERENCES task_clusters (id),
    route        text CHECK (route IN ('frontier', 'local', 'fallback')),
    route_reason text,
    chain        jsonb,            -- the local chain tried, when routed locally
    output       text,
    status       text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'failed')),
    error        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
CREATE INDEX workflow_tasks_namespace ON workflow_tasks (namespace, created_at);
CREATE INDEX workflow_tasks_hash ON workflow_tasks (namespace, task_hash);
CREATE INDEX workflow_tasks_cluster ON workflow_tasks (cluster_id);

-- Every model call: who, what for, tokens, cost (NULL: unknown - no price or no token counts),
-- time, and the error when it failed.
CREATE TABLE llm_calls (
    id          bigserial PRIMARY KEY,
    task_id     uuid REFERENCES workflow_tasks (id),
    agent       text NOT NULL REFERENCES llm_agents (name),
    purpose     text NOT NULL CHECK (purpose IN ('frontier', 'local', 'learn', 'judge')),
    model       text NOT NULL,
    tokens_in   integer,
    tokens_out  integer,
    cost_usd    numeric(16, 8),
    duration_ms real NOT NULL,
    attempts    integer NOT NULL DEFAULT 1,
    error       text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX llm_calls_task ON llm_calls (task_id);
CREATE INDEX llm_calls_agent ON llm_calls (agent, created_at);

-- A frontier model's answer to a task: the reference local chains are scored against. A newer
-- reference for the same task (same namespace and hash) supersedes it, and its attempts with it.
CREATE TABLE frontier_runs (
    id            uuid PRIMARY KEY,
    task_id       uuid NOT NULL REFERENCES workflow_tasks (id),
    namespace     text NOT NULL REFERENCES namespaces (name),
    agent         text NOT NULL REFERENCES llm_agents (name),
    output        text NOT NULL,
    tokens_in     integer,
    tokens_out    integer,
    cost_usd      numeric(16, 8),
    duration_ms   real NOT NULL,
    memory_id     uuid,           -- the solved task, retained as a memory (examples for prompts)
    superseded_at timestamptz,
    learned_at    timestamptz,    -- learning iterations done
    learn_error   text,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX frontier_runs_to_learn ON frontier_runs (namespace, created_at)
    WHERE learned_at IS NULL AND superseded_at IS NULL;
CREATE INDEX frontier_runs_task ON frontier_runs (task_id);

-- A local chain tried against a reference.
CREATE TABLE chain_attempts (
    id              uuid PRIMARY KEY,
    frontier_run_id uuid NOT NULL REFERENCES frontier_runs (id),
    task_id         uuid NOT NULL REFERENCES workflow_tasks (id),
    cluster_id      bigint REFERENCES task_clusters (id),
    chain_kind      text NOT NULL CHECK (chain_kind IN ('single', 'enhanced', 'decompose', 'plan_verify')),
    chain_key       text NOT NULL,  -- kind and agents, e.g. "single:qwen3"
    chain           jsonb NOT NULL, -- its steps: role, agent, model, output
    output          text,
    score           real,           -- NULL: the chain failed to answer
    score_parts     jsonb NOT NULL DEFAULT '{}',
    complete        boolean NOT NULL DEFAULT false,  -- every part of the score was measured
    tokens_in       integer,
    tokens_out      integer,
    cost_usd        numeric(16, 8),
    duration_ms     real NOT NULL,
    error           text,
    superseded_at   timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chain_attempts_cluster ON chain_attempts (cluster_id) WHERE superseded_at IS NULL;
CREATE INDEX chain_attempts_run ON chain_attempts (frontier_run_id);

-- Tasks waiting for a worker. Workers claim with FOR UPDATE SKIP LOCKED; a claim not finished
-- within CABRAIN_WORKFLOW_LEASE_S goes back to pending (its worker died), at most
-- CABRAIN_WORKFLOW_MAX_TRIES times.
CREATE TABLE dispatch_queue (
    id           uuid PRIMARY KEY,
    namespace    text NOT NULL REFERENCES namespaces (name),
    submitted_by text NOT NULL REFERENCES agents (id),
    priority     integer NOT NULL DEFAULT 5,
    status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'picked', 'done', 'failed')),
    request      jsonb NOT NULL,
    task_id      uuid REFERENCES workflow_tasks (id),
    result       jsonb,
    error        text,
    tries        integer NOT NULL DEFAULT 0,
    picked_by    text,
    picked_at    timestamptz,
    finished_at  timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dispatch_queue_pending ON dispatch_queue (priority DESC, created_at) WHERE status = 'pending';
CREATE INDEX dispatch_queue_picked ON dispatch_queue (picked_at) WHERE status = 'picked';
