//! Valid encodings to mutate, made once per test binary: a key set of the insecure test set with
//! clues, messages, an accumulator that folded real detections, its digest and the expanded
//! key's file; and one omr-v1 and one omr-v2 key set (seconds each) for the production sizes,
//! their detection keys (107 MB, 60 MB) included.

use std::sync::OnceLock;

use omr_core::{
    keygen, Accumulator, Clue, DetectionKey, FoldScratch, KeySet, Message, ParamSet, SecretKey,
    INSECURE_TEST, OMR_V1, OMR_V2,
};

/// k̄ of the fixtures' keys.
pub const KBAR: usize = 4;

/// One key set's encodings.
pub struct Fixture {
    pub params: &'static ParamSet,
    pub secret: SecretKey,
    pub secret_key: Vec<u8>,
    pub clue_key: Vec<u8>,
    pub detection_key: Vec<u8>,
    pub digest_key: Vec<u8>,
    pub clues: Vec<Vec<u8>>,
    /// Message encodings with empty, short and largest payloads.
    pub messages: Vec<Vec<u8>>,
    /// The same messages with a postage stamp of [`STAMP_BITS`] (encoding version 2).
    pub stamped: Vec<Vec<u8>>,
    pub accumulators: Vec<Vec<u8>>,
    pub digests: Vec<Vec<u8>>,
    /// The expanded detection key's file (insecure set only: omr-v1's is 362 MB).
    pub expanded: Option<Vec<u8>>,
}

impl std::fmt::Debug for Fixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fixture")
            .field("params", &self.params.name)
            .finish_non_exhaustive()
    }
}

/// The postage the stamped fixtures carry: 256 hashes on average to find.
pub const STAMP_BITS: u32 = 8;

/// `m` with a stamp of [`STAMP_BITS`], encoded.
fn stamp(m: &Message) -> Vec<u8> {
    let postage = omr_core::postage::Postage::new(m.params(), &m.clue.to_bytes(), &m.payload);
    let nonce = postage.search(STAMP_BITS, 0..u64::MAX).expect("a stamp");
    let stamped = Message {
        nonce: Some(nonce),
        ..m.clone()
    };
    stamped.to_bytes()
}

/// Payloads of the fixture's messages: empty, short, the set's largest.
fn payloads(p: &ParamSet) -> Vec<Vec<u8>> {
    vec![
        Vec::new(),
        b"lunch at noon?".to_vec(),
        vec![0xA5; p.payload_bytes],
    ]
}

fn encodings(params: &'static ParamSet, keys: KeySet, expanded: Option<&DetectionKey>) -> Fixture {
    let clues: Vec<Clue> = (0..3).map(|_| keys.clue_key.make_clue()).collect();
    let messages: Vec<Message> = clues
        .iter()
        .zip(payloads(params))
        .map(|(c, p)| Message::new(c.clone(), p).expect("a valid payload"))
        .collect();
    let digest_key = keys.detection_key.digest_key();
    // Folded detections where the key is expanded; an empty accumulator in any case, far up
    // the board.
    let mut accs = vec![Accumulator::new(params, KBAR, 1 << 40)];
    if let Some(dk) = expanded {
        let mut acc = dk.new_accumulator(0);
        let mut scratch = FoldScratch::default();
        for (i, m) in messages.iter().enumerate() {
            let pv = dk.detect(&m.clue).expect("detection");
            dk.fold(&mut acc, i as u64, &pv, &m.payload, &mut scratch)
                .expect("fold");
        }
        accs.push(acc);
    }
    let digests = accs
        .iter()
        .map(|a| digest_key.digest(a).expect("digest").to_bytes())
        .collect();
    Fixture {
        params,
        secret_key: keys.secret.to_bytes(),
        clue_key: keys.clue_key.to_bytes(),
        detection_key: keys.detection_key.to_bytes(),
        digest_key: digest_key.to_bytes(),
        clues: clues.iter().map(Clue::to_bytes).collect(),
        messages: messages.iter().map(Message::to_bytes).collect(),
        stamped: messages.iter().map(stamp).collect(),
        accumulators: accs.iter().map(Accumulator::to_bytes).collect(),
        digests,
        expanded: expanded.map(|dk| {
            let mut out = Vec::new();
            dk.write_expanded(&mut out).expect("writing to memory");
            out
        }),
        secret: keys.secret,
    }
}

/// The insecure test set's fixture.
pub fn insecure() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let keys = omr_test_support::insecure_keys(KBAR);
        let dk = keys.detection_key.expand();
        encodings(&INSECURE_TEST, keys, Some(&dk))
    })
}

/// One omr-v1 key set's fixture (its detection key is not expanded: that takes 362 MB and seconds).
pub fn omr_v1() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| encodings(&OMR_V1, keygen(&OMR_V1, KBAR).expect("keygen"), None))
}

/// One omr-v2 key set's fixture (not expanded either).
pub fn omr_v2() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| encodings(&OMR_V2, keygen(&OMR_V2, KBAR).expect("keygen"), None))
}

/// Every fixture's encodings of one kind: the insecure set's, then omr-v1's and omr-v2's.
pub fn both(kind: impl Fn(&Fixture) -> Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut v = kind(insecure());
    v.extend(kind(omr_v1()));
    v.extend(kind(omr_v2()));
    v
}

/// The insecure set's decrypting secret key (for digest decoding).
pub fn insecure_secret() -> &'static SecretKey {
    &insecure().secret
}
