//! The expanded detection key's local-file encoding on the INSECURE_TEST set: a key read back
//! detects and folds bit for bit like the original, and truncation, flipped bits, another
//! parameter set, another format version, trailing bytes and a failing reader are typed errors.
//! One omr-v2 key makes the same round trip (its 32-bit keyswitching key is stored as such).

use std::io::Read;
use std::sync::OnceLock;

use omr_core::{
    keygen, Accumulator, DetectionKey, FoldScratch, KeySet, OmrError, EXPANDED_KEY_VERSION,
    INSECURE_TEST, OMR_V1, OMR_V2,
};

struct Fixture {
    me: KeySet,
    other: KeySet,
    dk: DetectionKey,
    bytes: Vec<u8>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let me = keygen(&INSECURE_TEST, 4).expect("keygen");
        let other = keygen(&INSECURE_TEST, 4).expect("keygen");
        let dk = me.detection_key.expand();
        let mut bytes = Vec::new();
        dk.write_expanded(&mut bytes).expect("writing to a Vec");
        Fixture {
            me,
            other,
            dk,
            bytes,
        }
    })
}

fn read(bytes: &[u8]) -> Result<DetectionKey, OmrError> {
    DetectionKey::from_expanded_bytes(bytes, &INSECURE_TEST)
}

/// Six messages (the even ones ours), each detected and folded with both keys: the two
/// accumulators.
fn fold_both(f: &Fixture, a: &DetectionKey, b: &DetectionKey) -> (Accumulator, Accumulator) {
    let (mut acc_a, mut acc_b) = (a.new_accumulator(0), b.new_accumulator(0));
    let mut scratch = FoldScratch::default();
    for i in 0..6u64 {
        let to = if i % 2 == 0 { &f.me } else { &f.other };
        let clue = to.clue_key.make_clue();
        let payload = [i as u8; 5];
        let pv = a.detect(&clue).expect("detect");
        a.fold(&mut acc_a, i, &pv, &payload, &mut scratch)
            .expect("fold");
        let pv = b.detect(&clue).expect("detect");
        b.fold(&mut acc_b, i, &pv, &payload, &mut scratch)
            .expect("fold");
    }
    (acc_a, acc_b)
}

fn is_malformed(r: Result<DetectionKey, OmrError>, says: &str) -> bool {
    matches!(r, Err(OmrError::Malformed { why, .. }) if why.contains(says))
}

#[test]
fn a_key_read_back_detects_and_folds_exactly_like_the_original() {
    let f = fixture();
    assert_eq!(f.bytes.len() as u64, f.dk.expanded_len());
    let back = read(&f.bytes).expect("the written key reads back");
    assert_eq!(back.kbar(), f.dk.kbar());
    assert_eq!(back.memory_bytes(), f.dk.memory_bytes());
    let (original, read_back) = fold_both(f, &f.dk, &back);
    assert_eq!(original.to_bytes(), read_back.to_bytes());
    let got =
        f.me.secret
            .decode(&back.digest(&read_back).unwrap())
            .unwrap();
    let got: Vec<(u64, Vec<u8>)> = got.into_iter().map(|m| (m.index, m.payload)).collect();
    assert_eq!(got, vec![(0, vec![0; 5]), (2, vec![2; 5]), (4, vec![4; 5])]);
}

#[test]
fn an_omr_v2_key_read_back_detects_exactly_like_the_original() {
    let me = keygen(&OMR_V2, 50).expect("keygen");
    let dk = me.detection_key.expand();
    let mut bytes = Vec::new();
    dk.write_expanded(&mut bytes).expect("writing to a Vec");
    assert_eq!(bytes.len() as u64, dk.expanded_len());
    let back = DetectionKey::from_expanded_bytes(&bytes, &OMR_V2).expect("reads back");
    assert_eq!(back.memory_bytes(), dk.memory_bytes());
    let (mut a, mut b) = (dk.new_accumulator(0), back.new_accumulator(0));
    let mut scratch = FoldScratch::default();
    let clue = me.clue_key.make_clue();
    dk.fold(&mut a, 0, &dk.detect(&clue).unwrap(), b"v2", &mut scratch)
        .unwrap();
    back.fold(&mut b, 0, &back.detect(&clue).unwrap(), b"v2", &mut scratch)
        .unwrap();
    assert_eq!(a.to_bytes(), b.to_bytes());
    let got = me.secret.decode(&back.digest(&b).unwrap()).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].index, got[0].payload.as_slice()), (0, &b"v2"[..]));
}

#[test]
fn a_truncated_file_is_malformed() {
    let b = &fixture().bytes;
    for cut in [0, 3, 6, 13, 60, b.len() / 3, b.len() - 17, b.len() - 1] {
        assert!(
            is_malformed(read(&b[..cut]), "truncated"),
            "truncated to {cut} of {}: {:?}",
            b.len(),
            read(&b[..cut]).err()
        );
    }
}

#[test]
fn a_flipped_bit_anywhere_is_refused() {
    let b = &fixture().bytes;
    let n = b.len();
    // Header, fingerprint, k̄, seed, counts, the containers, the checksum.
    for pos in [
        0,
        3,
        4,
        5,
        7,
        14,
        20,
        60,
        100,
        n / 4,
        n / 2,
        n - 100,
        n - 17,
        n - 1,
    ] {
        for bit in [0u8, 7] {
            let mut bad = b.clone();
            bad[pos] ^= 1 << bit;
            assert!(
                read(&bad).is_err(),
                "bit {bit} of byte {pos} flipped: accepted"
            );
        }
    }
    // In the key material, it is the checksum that notices.
    for pos in [n / 4, n / 2, n - 100, n - 1] {
        let mut bad = b.clone();
        bad[pos] ^= 0x10;
        assert!(is_malformed(read(&bad), "checksum"), "byte {pos}");
    }
}

#[test]
fn another_parameter_set_version_or_trailing_bytes_is_a_typed_error() {
    let b = &fixture().bytes;
    assert!(matches!(
        DetectionKey::from_expanded_bytes(b, &OMR_V1),
        Err(OmrError::ParamMismatch {
            got: "insecure-test",
            expected: "omr-v1",
            ..
        })
    ));
    let mut other_version = b.clone();
    other_version[4] = EXPANDED_KEY_VERSION + 1;
    assert!(is_malformed(read(&other_version), "format version"));
    let mut unknown_set = b.clone();
    unknown_set[5] = 77;
    assert!(matches!(
        read(&unknown_set),
        Err(OmrError::UnknownParamSet(_))
    ));
    let mut longer = b.clone();
    longer.push(0);
    assert!(is_malformed(read(&longer), "trailing"));
    // A compressed key is not an expanded one.
    let compressed = fixture().me.detection_key.to_bytes();
    assert!(is_malformed(read(&compressed), "bad magic or kind"));
}

#[test]
fn a_failing_reader_is_a_read_error() {
    struct Failing(usize);
    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::Error::other("disk on fire"));
            }
            let n = buf.len().min(self.0);
            buf[..n].copy_from_slice(&fixture().bytes[..n]);
            self.0 -= n;
            Ok(n)
        }
    }
    let err = DetectionKey::read_expanded(&mut Failing(6), &INSECURE_TEST).unwrap_err();
    assert!(
        matches!(&err, OmrError::Read { why, .. } if why.contains("disk on fire")),
        "{err}"
    );
}
