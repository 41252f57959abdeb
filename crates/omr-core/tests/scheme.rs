//! End-to-end scheme tests on the fast INSECURE_TEST parameter set: keys, clues, detection,
//! folding, digests and decoding, plus every encoding's rejection of junk input.

use omr_core::{
    keygen, Accumulator, Clue, ClueKey, CompressedDetectionKey, Digest, FoldScratch, KeySet,
    Message, OmrError, SecretKey, INSECURE_TEST,
};
use std::sync::OnceLock;

struct Fixture {
    me: KeySet,
    other: KeySet,
    dk: omr_core::DetectionKey,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let me = keygen(&INSECURE_TEST, 4).expect("keygen");
        let other = keygen(&INSECURE_TEST, 4).expect("keygen");
        let dk = me.detection_key.expand();
        Fixture { me, other, dk }
    })
}

fn payload_for(i: u64) -> Vec<u8> {
    let len = (i as usize * 7) % (INSECURE_TEST.payload_bytes + 1);
    (0..len).map(|k| (i as usize * 31 + k * 17) as u8).collect()
}

/// Build a board of `len` messages starting at `start`; `mine` selects which are ours.
fn run_board(
    f: &Fixture,
    start: u64,
    len: u64,
    mine: impl Fn(u64) -> bool,
) -> (Accumulator, Vec<(u64, Vec<u8>)>) {
    let mut acc = f.dk.new_accumulator(start);
    let mut scratch = FoldScratch::default();
    let mut expected = Vec::new();
    for i in start..start + len {
        let clue = if mine(i) {
            f.me.clue_key.make_clue()
        } else {
            f.other.clue_key.make_clue()
        };
        // Through the wire format, as the service will do.
        let clue = Clue::from_bytes(&clue.to_bytes()).expect("clue round trip");
        let pv = f.dk.detect(&clue).expect("detect");
        let payload = payload_for(i);
        f.dk.fold(&mut acc, i, &pv, &payload, &mut scratch)
            .expect("fold");
        if mine(i) {
            expected.push((i, payload));
        }
    }
    (acc, expected)
}

fn decode(sk: &SecretKey, digest: &Digest) -> Result<Vec<(u64, Vec<u8>)>, OmrError> {
    let wire = Digest::from_bytes(&digest.to_bytes()).expect("digest round trip");
    Ok(sk
        .decode(&wire)?
        .into_iter()
        .map(|r| (r.index, r.payload))
        .collect())
}

#[test]
fn recipient_gets_exactly_its_messages_with_exact_payloads() {
    let f = fixture();
    let (acc, expected) = run_board(f, 1000, 40, |i| [1003, 1017, 1018, 1039].contains(&i));
    let digest = f.dk.digest(&acc).unwrap();
    assert_eq!((digest.start(), digest.end()), (1000, 1040));
    assert_eq!(decode(&f.me.secret, &digest).unwrap(), expected);
}

#[test]
fn empty_range_and_no_pertinent_messages_decode_to_nothing() {
    let f = fixture();
    let empty = f.dk.new_accumulator(5);
    assert_eq!(
        decode(&f.me.secret, &f.dk.digest(&empty).unwrap()).unwrap(),
        vec![]
    );
    let (acc, expected) = run_board(f, 0, 12, |_| false);
    assert!(expected.is_empty());
    assert_eq!(
        decode(&f.me.secret, &f.dk.digest(&acc).unwrap()).unwrap(),
        vec![]
    );
}

#[test]
fn more_than_kbar_pertinent_messages_is_a_clear_overflow() {
    let f = fixture();
    let (acc, expected) = run_board(f, 0, 9, |i| i < 7);
    assert_eq!(expected.len(), 7);
    match decode(&f.me.secret, &f.dk.digest(&acc).unwrap()) {
        Err(OmrError::Overflow { kbar: 4, found }) => assert!(found > 4, "found {found}"),
        other => panic!("expected overflow, got {other:?}"),
    }
}

#[test]
fn merged_adjacent_accumulators_equal_one_long_fold() {
    let f = fixture();
    let mine = |i: u64| i % 5 == 2;
    let (mut a, mut expected) = run_board(f, 100, 8, mine);
    let (b, expected_b) = run_board(f, 108, 7, mine);
    expected.extend(expected_b);
    // Not adjacent: refused, nothing changed.
    let before = a.clone();
    let (c, _) = run_board(f, 200, 1, mine);
    assert!(matches!(a.merge(&c), Err(OmrError::NotAdjacent(_))));
    assert_eq!(a, before);
    a.merge(&b).unwrap();
    assert_eq!((a.start(), a.end()), (100, 115));
    let acc = Accumulator::from_bytes(&a.to_bytes()).unwrap();
    assert_eq!(acc, a);
    assert_eq!(
        decode(&f.me.secret, &f.dk.digest(&a).unwrap()).unwrap(),
        expected
    );
}

#[test]
fn fold_refuses_out_of_order_and_oversized_payloads_and_changes_nothing() {
    let f = fixture();
    let mut acc = f.dk.new_accumulator(10);
    let mut scratch = FoldScratch::default();
    let pv = f.dk.detect(&f.me.clue_key.make_clue()).unwrap();
    let before = acc.clone();
    assert!(matches!(
        f.dk.fold(&mut acc, 11, &pv, b"x", &mut scratch),
        Err(OmrError::OutOfOrder {
            index: 11,
            start: 10,
            end: 10
        })
    ));
    let big = vec![0u8; INSECURE_TEST.payload_bytes + 1];
    assert!(matches!(
        f.dk.fold(&mut acc, 10, &pv, &big, &mut scratch),
        Err(OmrError::PayloadTooLarge { .. })
    ));
    assert_eq!(acc, before);
}

#[test]
fn keys_survive_their_encodings() {
    let f = fixture();
    let sk = SecretKey::from_bytes(&f.me.secret.to_bytes()).unwrap();
    let ck = ClueKey::from_bytes(&f.me.clue_key.to_bytes()).unwrap();
    assert_eq!(ck, f.me.clue_key);
    let dk_bytes = f.me.detection_key.to_bytes();
    let cdk = CompressedDetectionKey::from_bytes(&dk_bytes).unwrap();
    assert_eq!(cdk, f.me.detection_key);
    // A key rebuilt from bytes detects and decodes like the original.
    let dk = cdk.expand();
    let mut acc = dk.new_accumulator(0);
    let mut scratch = FoldScratch::default();
    let pv = dk.detect(&ck.make_clue()).unwrap();
    dk.fold(&mut acc, 0, &pv, b"hello", &mut scratch).unwrap();
    let pv = dk.detect(&f.other.clue_key.make_clue()).unwrap();
    dk.fold(&mut acc, 1, &pv, b"not mine", &mut scratch)
        .unwrap();
    let got = sk.decode(&dk.digest(&acc).unwrap()).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].index, got[0].payload.as_slice()),
        (0, &b"hello"[..])
    );
}

#[test]
fn junk_input_is_a_typed_error_never_a_panic() {
    let f = fixture();
    let clue = f.me.clue_key.make_clue().to_bytes();
    let dk = f.me.detection_key.to_bytes();
    let digest = f.dk.digest(&f.dk.new_accumulator(0)).unwrap().to_bytes();
    let sk = f.me.secret.to_bytes();
    let ck = f.me.clue_key.to_bytes();
    let msg = Message::new(f.me.clue_key.make_clue(), b"payload".to_vec()).unwrap();
    assert_eq!(Message::from_bytes(&msg.to_bytes()).unwrap(), msg);
    let msg = msg.to_bytes();
    let samples: Vec<(&str, Vec<u8>)> = vec![
        ("message", msg),
        ("clue", clue),
        ("detection key", dk),
        ("digest", digest),
        ("secret key", sk),
        ("clue key", ck),
    ];
    type Decoder = fn(&[u8]) -> bool;
    let decoders: Vec<(&str, Decoder)> = vec![
        ("message", |b| Message::from_bytes(b).is_ok()),
        ("clue", |b| Clue::from_bytes(b).is_ok()),
        ("detection key", |b| {
            CompressedDetectionKey::from_bytes(b).is_ok()
        }),
        ("digest", |b| Digest::from_bytes(b).is_ok()),
        ("secret key", |b| SecretKey::from_bytes(b).is_ok()),
        ("clue key", |b| ClueKey::from_bytes(b).is_ok()),
    ];
    for (name, bytes) in &samples {
        let decode = decoders.iter().find(|(n, _)| n == name).unwrap().1;
        assert!(decode(bytes), "{name} must decode");
        // Truncations, a trailing byte, a wrong kind, a wrong version, an unknown set, garbage.
        for cut in [0, 1, 5, 6, bytes.len() / 2, bytes.len() - 1] {
            assert!(!decode(&bytes[..cut]), "{name} truncated to {cut} accepted");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(!decode(&longer), "{name} with a trailing byte accepted");
        for (pos, val) in [(0usize, b'X'), (3, 99), (4, 9), (5, 77)] {
            let mut bad = bytes.clone();
            bad[pos] = val;
            assert!(!decode(&bad), "{name} with byte {pos} = {val} accepted");
        }
        // Every other kind's bytes are refused.
        for (other, ob) in &samples {
            if other != name {
                assert!(!decode(ob), "{name} decoder accepted a {other}");
            }
        }
    }
    let garbage: Vec<u8> = (0..5000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    for (_, decode) in &decoders {
        assert!(!decode(&garbage));
    }
    let too_long = vec![1u8; INSECURE_TEST.payload_bytes + 1];
    assert!(matches!(
        Message::new(f.me.clue_key.make_clue(), too_long),
        Err(OmrError::PayloadTooLarge { .. })
    ));
    assert!(matches!(
        omr_core::ParamSet::by_name("omr-v0"),
        Err(OmrError::UnknownParamSet(_))
    ));
}

#[test]
fn a_stamped_message_round_trips_as_version_2_and_an_unstamped_one_stays_version_1() {
    let f = fixture();
    let plain = Message::new(f.me.clue_key.make_clue(), b"payload".to_vec()).unwrap();
    assert_eq!(plain.nonce, None);
    let v1 = plain.to_bytes();
    assert_eq!(v1[4], 1, "the version byte");
    assert_eq!(Message::from_bytes(&v1).unwrap(), plain);

    let mut stamped = plain.clone();
    stamped.nonce = stamped.postage().search(8, 0..u64::MAX);
    let v2 = stamped.to_bytes();
    assert_eq!((v2[4], v2.len()), (2, v1.len() + 8));
    assert_eq!(&v2[6..14], &stamped.nonce.unwrap().to_le_bytes());
    let back = Message::from_bytes(&v2).unwrap();
    assert_eq!(back, stamped);
    assert_eq!(back.postage().check(8, back.nonce), Ok(()));
    // The stamp covers the clue's encoding as posted: the decoded message hashes alike.
    assert_eq!(back.postage().digest(7), stamped.postage().digest(7));

    // Each version's bytes under the other's version byte, an unknown version, truncations and
    // a trailing byte: typed errors.
    for (bytes, other) in [(&v1, 2u8), (&v2, 1), (&v2, 3)] {
        let mut bad = bytes.clone();
        bad[4] = other;
        assert!(
            Message::from_bytes(&bad).is_err(),
            "version {} bytes read as version {other}",
            bytes[4]
        );
    }
    for cut in [6, 10, 14, 15, v2.len() - 1] {
        assert!(Message::from_bytes(&v2[..cut]).is_err(), "cut at {cut}");
    }
    let mut longer = v2.clone();
    longer.push(0);
    assert!(Message::from_bytes(&longer).is_err());
}

#[test]
fn a_message_with_an_attachment_round_trips_as_version_3() {
    let f = fixture();
    let plain = Message::new(f.me.clue_key.make_clue(), b"payload".to_vec()).unwrap();
    let v1 = plain.to_bytes();
    let attached = plain.clone().with_attachment(vec![7u8; 5000]).unwrap();
    let v3 = attached.to_bytes();
    assert_eq!((v3[4], v3.len()), (3, v1.len() + 1 + 4 + 5000));
    assert_eq!(Message::from_bytes(&v3).unwrap(), attached);

    // Stamped too; the stamp covers the attachment.
    let mut stamped = attached.clone();
    stamped.nonce = stamped.postage().search(8, 0..u64::MAX);
    let bytes = stamped.to_bytes();
    assert_eq!((bytes[4], bytes.len()), (3, v3.len() + 8));
    let back = Message::from_bytes(&bytes).unwrap();
    assert_eq!(back, stamped);
    assert_eq!(back.postage().check(8, back.nonce), Ok(()));
    assert_ne!(back.postage().digest(1), plain.postage().digest(1));
    let mut swapped = back.clone();
    swapped.attachment[0] ^= 1;
    assert_ne!(swapped.postage().digest(1), back.postage().digest(1));
    // Without an attachment the stamp hashes what it always did.
    let none = plain.clone().with_attachment(Vec::new()).unwrap();
    assert_eq!(plain.postage().digest(1), none.postage().digest(1));

    // Refused: an empty attachment under version 3, a bad flag, a truncated attachment, an
    // attachment over the limit.
    let empty = [&v3[..6], &[0; 5], &v1[6..]].concat();
    assert!(Message::from_bytes(&empty).is_err());
    let mut flag = v3.clone();
    flag[6] = 2;
    assert!(Message::from_bytes(&flag).is_err());
    for cut in [7, 11, 12, 5000, v3.len() - 1] {
        assert!(Message::from_bytes(&v3[..cut]).is_err(), "cut at {cut}");
    }
    let limit = omr_core::message::MAX_ATTACHMENT_BYTES;
    assert!(plain.clone().with_attachment(vec![0; limit + 1]).is_err());
    let largest = plain.with_attachment(vec![1; limit]).unwrap();
    assert_eq!(Message::from_bytes(&largest.to_bytes()).unwrap(), largest);
}

#[test]
fn detection_is_safe_to_share_across_threads() {
    use rayon::prelude::*;
    let f = fixture();
    let clues: Vec<Clue> = (0..8)
        .map(|i| {
            if i % 2 == 0 {
                f.me.clue_key.make_clue()
            } else {
                f.other.clue_key.make_clue()
            }
        })
        .collect();
    let pvs: Vec<_> = clues.par_iter().map(|c| f.dk.detect(c).unwrap()).collect();
    let mut acc = f.dk.new_accumulator(0);
    let mut scratch = FoldScratch::default();
    for (i, pv) in pvs.iter().enumerate() {
        f.dk.fold(&mut acc, i as u64, pv, &[i as u8], &mut scratch)
            .unwrap();
    }
    let got: Vec<u64> =
        f.me.secret
            .decode(&f.dk.digest(&acc).unwrap())
            .unwrap()
            .iter()
            .map(|r| r.index)
            .collect();
    assert_eq!(got, vec![0, 2, 4, 6]);
}

#[test]
fn batched_detection_equals_one_at_a_time() {
    let f = fixture();
    let clues: Vec<Clue> = (0..5)
        .map(|i| {
            if i == 1 || i == 4 {
                f.me.clue_key.make_clue()
            } else {
                f.other.clue_key.make_clue()
            }
        })
        .collect();
    let refs: Vec<&Clue> = clues.iter().collect();
    let pvs = f.dk.detect_batch(&refs).unwrap();
    assert_eq!(pvs.len(), 5);
    let mut acc = f.dk.new_accumulator(0);
    let mut scratch = FoldScratch::default();
    for (i, pv) in pvs.iter().enumerate() {
        f.dk.fold(&mut acc, i as u64, pv, &[7, i as u8], &mut scratch)
            .unwrap();
    }
    let got: Vec<(u64, Vec<u8>)> = decode(&f.me.secret, &f.dk.digest(&acc).unwrap()).unwrap();
    assert_eq!(got, vec![(1, vec![7, 1]), (4, vec![7, 4])]);
    assert!(f.dk.detect_batch(&[]).unwrap().is_empty());
}

#[test]
fn a_clue_of_another_parameter_set_is_refused() {
    let f = fixture();
    // A production clue (the production key generation takes a few seconds).
    let clue = omr_core::keygen(&omr_core::OMR_V1, 1)
        .unwrap()
        .clue_key
        .make_clue();
    assert!(matches!(
        f.dk.detect(&clue),
        Err(OmrError::ParamMismatch { .. })
    ));
}
