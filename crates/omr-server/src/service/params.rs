//! What the server says about itself (`GET /v1/params`, gRPC `GetParams`): the parameter set,
//! its sizes, and this server's limits, written once for both transports.

use omr_api::http::Params;

use super::Service;
use crate::config::Registration;

/// The parameter set and limits of this server, with the board at `board_head`.
pub fn params(svc: &Service, board_head: u64) -> Params {
    let (set, config) = (svc.set, &svc.config);
    Params {
        param_set: set.name().to_string(),
        clue_bytes: set.clue_bytes(),
        max_payload_bytes: set.payload_bytes(),
        max_kbar: set.max_kbar(),
        max_range: set.max_range(),
        max_key_bytes: config.max_key_bytes,
        max_batch_messages: config.max_batch_messages,
        board_head,
        postage_bits: config.postage_bits,
        invite_required: config.registration == Registration::Invite,
        max_attachment_bytes: config.attachment_limit(),
        epoch_len: svc.epochs.size(),
        pir_params: (config.attachment_limit() > 0 || set.batch().is_some())
            .then(|| omr_pir::PIR_V1.name.to_string()),
    }
}
