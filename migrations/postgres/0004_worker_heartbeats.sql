-- Live detection workers. Each worker renews its row with its leases (same expiry); a row that
-- expired belongs to a dead worker. The live workers share the keys: each holds at most
-- ceil(keys / live workers).
CREATE TABLE worker_heartbeats (
    worker_id  TEXT PRIMARY KEY,
    renewed_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);
