-- Attachments: stored with the board (in the transaction that appends their message) but apart
-- from it, because they outlive board retention: a recipient fetches them by PIR from its
-- epoch's database long after every key has detected the message. They are deleted a whole
-- epoch at a time, once that epoch's digests are gone (`delete_attachments_before`).
CREATE TABLE attachments (
    idx   INTEGER PRIMARY KEY,
    bytes BLOB    NOT NULL
);

-- The seed of each attachment epoch's PIR matrix, chosen once (the first process to build the
-- epoch inserts it; every other reads it), so every process of a fleet serves the same hint.
CREATE TABLE pir_epochs (
    epoch      INTEGER PRIMARY KEY,
    seed       BLOB    NOT NULL,
    created_ms INTEGER NOT NULL
);
