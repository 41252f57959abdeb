-- When each key's recipient was last seen online (a digest, status or wait call), for the
-- detection scheduler. Written at most every few seconds per key.
CREATE TABLE key_presence (
    key_id       TEXT PRIMARY KEY REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    last_seen_ms INTEGER NOT NULL
);
