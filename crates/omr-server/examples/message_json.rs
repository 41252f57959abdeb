//! Print one valid board message as the JSON body of `POST /v1/messages`, for load tests:
//! a fresh clue for a throwaway recipient and a random payload of the set's maximum size.
//!
//! cargo run --release -p omr-server --example message_json -- [omr-v1]

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rand::RngCore;

fn main() {
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "omr-v1".to_string());
    let params = omr_core::ParamSet::by_name(&name).expect("known parameter set");
    let keys = omr_core::keygen(params, 1).expect("keygen");
    let mut payload = vec![0u8; params.payload_bytes];
    rand::rngs::OsRng.fill_bytes(&mut payload);
    let body = serde_json::json!({
        "clue": B64.encode(keys.clue_key.make_clue().to_bytes()),
        "payload": B64.encode(payload),
    });
    println!("{body}");
}
