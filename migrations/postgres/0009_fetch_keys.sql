-- omr-light-v1: the one-time key a recipient uploads so that the server can answer its payload
-- fetches (expansion keys and the S²→S key, ≈ 3.4 MB), stored apart from the detection key and
-- replaced by a new upload.
CREATE TABLE fetch_keys (
    key_id TEXT PRIMARY KEY REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    data   BYTEA NOT NULL
);
