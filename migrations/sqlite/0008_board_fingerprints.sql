-- Replay protection: the BLAKE3 hash of every board message (clue, payload and attachment, each
-- with its length) with its index. The append transaction looks a new message up here after it
-- has the board head (the write lock), so two posts of the same bytes can never both be
-- appended: the second is answered with the first one's index. Rows leave with their board
-- message (retention), so a replay older than the board's retention is not recognised.
CREATE TABLE board_fingerprints (
    fingerprint BLOB    PRIMARY KEY,
    idx         INTEGER NOT NULL
);
CREATE INDEX board_fingerprints_idx ON board_fingerprints (idx);
