//! The JSON batch's limit on messages, checked while it is parsed.

use super::*;
use omr_core::INSECURE_TEST;

fn json_batch(body: &str, max: usize) -> Result<Vec<NewMessage>, ErrorCode> {
    let rules = Rules {
        set: crate::set::Set::Tfhe(&INSECURE_TEST),
        postage_bits: 0,
        max_attachment_bytes: 0,
    };
    batch(rules, BodyKind::Json, body.as_bytes(), max).map_err(|e| e.code)
}

#[test]
fn a_json_batch_is_refused_at_one_message_past_the_limit_and_otherwise_as_before() {
    let batch_of = |n: usize| {
        let m = vec![r#"{"clue":"","payload":""}"#; n].join(",");
        format!(r#"{{"messages":[{m}]}}"#)
    };
    assert_eq!(
        json_batch(&batch_of(4), 3).unwrap_err(),
        ErrorCode::BatchTooLarge
    );
    assert_eq!(
        json_batch(&batch_of(100_000), 3).unwrap_err(),
        ErrorCode::BatchTooLarge
    );
    // Within the limit, the messages are parsed and checked (an empty clue is malformed).
    assert_eq!(
        json_batch(&batch_of(3), 3).unwrap_err(),
        ErrorCode::MalformedClue
    );
    assert_eq!(json_batch(&batch_of(0), 3).unwrap().len(), 0);
    for bad in [
        r#"{"messages":[],"extra":1}"#,
        r#"{"messages":[],"messages":[]}"#,
        r#"{}"#,
        r#"{"messages":[]} trailing"#,
        r#"{"messages":[{"clue":"","payload":"","x":1}]}"#,
        r#"[]"#,
    ] {
        assert_eq!(
            json_batch(bad, 3).unwrap_err(),
            ErrorCode::MalformedJson,
            "{bad}"
        );
    }
}
