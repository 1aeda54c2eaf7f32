-- The local models CaBrain serves itself (issue 38: CABRAIN_LOCAL_MODELS, llama.cpp on loopback) are
-- registered as model agents with their measured speed: output tokens per second of a short answer
-- (latency_ms holds its whole time, then the moving average of real calls), and where their weights
-- came from (a .gguf path or package:<distribution>). NULL source: an agent registered by hand, which
-- a served model never replaces.
ALTER TABLE llm_agents
    ADD COLUMN tokens_per_s real CHECK (tokens_per_s >= 0),
    ADD COLUMN source text;
