-- Sittings found from time (issue 34). A conversation is one `metadata.thread` (a chat, a channel,
-- a session), or, for turns with a `metadata.speaker` and no thread, one writer's turns. Its turns
-- are numbered in `thread_turn` as before; each turn's sitting (`metadata.sitting`: given by the
-- source, or found by the write path from the gap to the turn before it in time) is what context
-- turns, recall's cohesion and sleep's sitting summaries group by. These find a conversation's
-- turns by time (the turn before a turn) and its last number.
CREATE INDEX memories_thread_time ON memories (namespace, (metadata ->> 'thread'), valid_at DESC, thread_turn DESC)
    WHERE metadata ? 'thread' AND thread_turn IS NOT NULL;
CREATE INDEX memories_writer_time ON memories (namespace, owner_agent_id, valid_at DESC, thread_turn DESC)
    WHERE thread_turn IS NOT NULL AND NOT metadata ? 'thread';
CREATE INDEX memories_writer_turns ON memories (namespace, owner_agent_id, thread_turn DESC)
    WHERE thread_turn IS NOT NULL AND NOT metadata ? 'thread';
