-- What the worker that leases a key says about it: 'detecting' (being served now) or 'waiting'
-- (its turn is coming), and when it expects the key to be caught up. Written by that worker at
-- most about once a second; GetKeyStatus reads it (a row older than the lease means nothing).
CREATE TABLE key_schedule (
    key_id     TEXT   PRIMARY KEY REFERENCES detection_keys (key_id) ON DELETE CASCADE,
    state      TEXT   NOT NULL,
    eta_ms     BIGINT,
    updated_ms BIGINT NOT NULL
);
