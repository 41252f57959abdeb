-- The bulletin board, detection keys, registrations, detection state and worker leases.

-- Next board index to assign. The row lock taken by UPDATE serialises appenders until they
-- commit, so indices commit in order and a reader that sees index i has seen every index below.
CREATE TABLE board_head (
    id         SMALLINT PRIMARY KEY CHECK (id = 1),
    next_index BIGINT NOT NULL
);
INSERT INTO board_head (id, next_index) VALUES (1, 0);

CREATE TABLE board (
    idx         BIGINT PRIMARY KEY,
    clue        BYTEA  NOT NULL,
    payload     BYTEA  NOT NULL,
    received_ms BIGINT NOT NULL
);

CREATE TABLE detection_keys (
    key_id        TEXT PRIMARY KEY,
    param_set     TEXT    NOT NULL,
    kbar          INTEGER NOT NULL,
    start_index   BIGINT  NOT NULL,
    key_bytes     BIGINT  NOT NULL,
    chunk_count   INTEGER NOT NULL,
    registered_ms BIGINT  NOT NULL
);

-- The key in chunks (no single 100 MB value).
CREATE TABLE detection_key_chunks (
    key_id TEXT    NOT NULL REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    data   BYTEA   NOT NULL,
    PRIMARY KEY (key_id, seq)
);

-- Access tokens, stored only as SHA-256 hashes.
CREATE TABLE registrations (
    key_id     TEXT PRIMARY KEY REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    token_hash BYTEA NOT NULL
);

-- Next board index to detect per key (the detection worker advances it with its accumulator).
CREATE TABLE key_cursors (
    key_id     TEXT PRIMARY KEY REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    next_index BIGINT NOT NULL
);

-- Digest accumulators per key and epoch [epoch_start, epoch_end).
CREATE TABLE accumulators (
    key_id      TEXT   NOT NULL REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    epoch_start BIGINT NOT NULL,
    epoch_end   BIGINT NOT NULL,
    data        BYTEA  NOT NULL,
    PRIMARY KEY (key_id, epoch_start)
);

-- Which worker holds which key, until when.
CREATE TABLE worker_leases (
    key_id     TEXT PRIMARY KEY REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    owner      TEXT   NOT NULL,
    expires_ms BIGINT NOT NULL
);
