//! Response headers of `GET /v1/digests/{key_id}` (the gRPC `DigestHeader` carries the same),
//! and the request headers of `PUT /v1/keys` (the gRPC `RegistrationHeader`'s fields; its
//! `total_bytes` is the request's `Content-Length`).

/// First board index the digest covers.
pub const RANGE_START: &str = "omr-range-start";
/// One past the last board index the digest covers.
pub const RANGE_END: &str = "omr-range-end";
/// The next board index to be assigned.
pub const BOARD_HEAD: &str = "omr-board-head";
/// Messages on the board not yet detected for the key.
pub const LAG: &str = "omr-lag";
/// The server's accumulator epoch length (digests start on epoch boundaries).
pub const EPOCH_LENGTH: &str = "omr-epoch-length";
/// Present when the key's detected range continues past this digest: ask again from here.
pub const NEXT_FROM: &str = "omr-next-from";
/// Every board message below this index has been detected for the key (its cursor).
pub const DETECTED_UP_TO: &str = "omr-detected-up-to";
/// omr-light-v1: the board index whose arrival makes the key's open batch due for its next
/// detection (refresh) when its recipient asks; absent on the TFHE sets.
pub const REFRESH_AT: &str = "omr-refresh-at";

/// `PUT /v1/keys`: the key's parameter set, e.g. `omr-light-v1`.
pub const PARAM_SET: &str = "omr-param-set";
/// `PUT /v1/keys`: k̄, the most messages a digest of the key carries (1 on omr-light-v1).
pub const KBAR: &str = "omr-kbar";
/// `PUT /v1/keys`: where detection starts, `now` (the board head when the key is stored) or a
/// board index.
pub const START: &str = "omr-start";
/// `PUT /v1/keys`: an invite code, on a server with `registration = "invite"`.
pub const INVITE_CODE: &str = "omr-invite-code";
