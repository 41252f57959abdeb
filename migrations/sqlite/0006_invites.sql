-- Invite codes for registration = "invite". Only the SHA-256 of a code is stored (a code is 128
-- random bits, shown once when it is minted). A registration that names a code takes one use
-- in the transaction that stores its key (UPDATE ... WHERE uses_left > 0 AND not expired), so a
-- refused or failed registration consumes nothing.
CREATE TABLE invites (
    code_hash  BLOB    PRIMARY KEY,
    uses       INTEGER NOT NULL CHECK (uses > 0),
    uses_left  INTEGER NOT NULL CHECK (uses_left >= 0 AND uses_left <= uses),
    -- Milliseconds since the Unix epoch; NULL: never expires.
    expires_ms INTEGER,
    created_ms INTEGER NOT NULL
);
