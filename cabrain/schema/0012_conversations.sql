-- Conversations: a memory that is a turn of a conversation names its sitting in `metadata.thread`
-- (a chat thread, a Claude Code session, a meeting). The write path numbers the turns of a thread
-- in the order they are retained (`thread_turn`), so that each new turn is keyword-indexed with the
-- text of the turns before it (by the same writer, with the same visibility): the memory stays the
-- turn, and what it can be found by grows by its context. Recall groups candidates by thread.
ALTER TABLE memories ADD COLUMN thread_turn integer;
CREATE INDEX memories_thread ON memories (namespace, (metadata ->> 'thread'), thread_turn DESC)
    WHERE metadata ? 'thread';

-- The speakers of a namespace's conversations (`metadata.speaker`), per writer and visibility, so
-- that recall can tell a person a question names before it embeds the question: the name is matched
-- by the speaker field (and the keyword side), and left out of the query's embedding, where a small
-- model lets it outweigh what is asked about. Read under the same visibility rules as the memories.
CREATE TABLE namespace_speakers (
    namespace      text   NOT NULL REFERENCES namespaces (name),
    key            text   NOT NULL,  -- the name's keyword tokens (cabrain.search.tokenizer), space-separated
    owner_agent_id text   NOT NULL,
    visibility     text   NOT NULL,
    first_token    text   NOT NULL,
    name           text   NOT NULL,  -- as first written
    turns          bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, key, owner_agent_id, visibility)
);
CREATE INDEX namespace_speakers_token ON namespace_speakers (namespace, first_token);
