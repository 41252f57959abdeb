-- The small key that turns accumulators into digests (the down keyswitching key), stored apart
-- from the ~100 MB detection key so serving a digest never reads the detection key.
CREATE TABLE digest_keys (
    key_id TEXT PRIMARY KEY REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    data   BLOB NOT NULL
);
