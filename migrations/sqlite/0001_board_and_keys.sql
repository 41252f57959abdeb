-- The bulletin board, detection keys, registrations, detection state and worker leases.

-- Next board index to assign. SQLite has one writer at a time, so appends are serialised and
-- indices commit in order.
CREATE TABLE board_head (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    next_index INTEGER NOT NULL
);
INSERT INTO board_head (id, next_index) VALUES (1, 0);

CREATE TABLE board (
    idx         INTEGER PRIMARY KEY,
    clue        BLOB  NOT NULL,
    payload     BLOB  NOT NULL,
    received_ms INTEGER NOT NULL
);

CREATE TABLE detection_keys (
    key_id        TEXT PRIMARY KEY,
    param_set     TEXT    NOT NULL,
    kbar          INTEGER NOT NULL,
    start_index   INTEGER  NOT NULL,
    key_bytes     INTEGER  NOT NULL,
    chunk_count   INTEGER NOT NULL,
    registered_ms INTEGER  NOT NULL
);

-- The key in chunks (no single 100 MB value).
CREATE TABLE detection_key_chunks (
    key_id TEXT    NOT NULL REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    data   BLOB   NOT NULL,
    PRIMARY KEY (key_id, seq)
);

-- Access tokens, stored only as SHA-256 hashes.
CREATE TABLE registrations (
    key_id     TEXT PRIMARY KEY REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    token_hash BLOB NOT NULL
);

-- Next board index to detect per key (the detection worker advances it with its accumulator).
CREATE TABLE key_cursors (
    key_id     TEXT PRIMARY KEY REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    next_index INTEGER NOT NULL
);

-- Digest accumulators per key and epoch [epoch_start, epoch_end).
CREATE TABLE accumulators (
    key_id      TEXT   NOT NULL REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    epoch_start INTEGER NOT NULL,
    epoch_end   INTEGER NOT NULL,
    data        BLOB  NOT NULL,
    PRIMARY KEY (key_id, epoch_start)
);

-- Which worker holds which key, until when.
CREATE TABLE worker_leases (
    key_id     TEXT PRIMARY KEY REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    owner      TEXT   NOT NULL,
    expires_ms INTEGER NOT NULL
);
