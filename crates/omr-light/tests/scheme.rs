//! omr-light-v1 end to end: keys, clues at chosen slots, one shared preparation, every key's
//! pass, digests through their encoding, decoding; every encoding round-tripped (a key also into
//! the kernel's layout and a worker's local file) and refused by
//! the TFHE decoders (and theirs here); the noise and the false-positive rate
//! measured against the prediction.

use omr_light::{Batch, Digest, DigestPart, ExpandedKey, SecretKey, OMR_LIGHT_V1};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

const P: &omr_light::LightParams = &OMR_LIGHT_V1;

fn key(seed: u8) -> SecretKey {
    SecretKey::from_seed(P, [seed; 32])
}

/// Digests of `batch` for `keys`, through their encoding, as a recipient receives them.
fn digests(batch: &Batch, first: u64, keys: &[&ExpandedKey]) -> Vec<Digest> {
    batch
        .detect_many(keys)
        .into_iter()
        .map(|own| {
            let d = Digest::new(
                P,
                vec![DigestPart {
                    first,
                    own,
                    shared: batch.shared().clone(),
                }],
            );
            Digest::from_bytes(&d.to_bytes()).expect("a digest decodes")
        })
        .collect()
}

/// `count` clues: message i to `mine` where `is_mine(i)`, else to `other`.
fn clues_to(
    mine: &omr_light::Address,
    other: &omr_light::Address,
    count: usize,
    is_mine: impl Fn(usize) -> bool,
    rng: &mut ChaCha20Rng,
) -> Vec<omr_light::Clue> {
    (0..count)
        .map(|i| if is_mine(i) { mine } else { other }.clue_with(rng))
        .collect()
}

#[test]
fn three_recipients_find_exactly_their_messages_in_a_full_batch() {
    let mut rng = ChaCha20Rng::seed_from_u64(10);
    let recipients: Vec<SecretKey> = (1..=3).map(key).collect();
    // A fourth address receives messages too but registers no key; 60 more strangers.
    let strangers: Vec<SecretKey> = (4..=64).map(key).collect();
    let addresses: Vec<_> = recipients.iter().map(SecretKey::address).collect();
    let stranger_addresses: Vec<_> = strangers.iter().map(SecretKey::address).collect();

    // Slot → owner: first and last slot to recipients 0 and 2, 30 more each at random slots.
    let d = P.batch;
    let mut owner: Vec<Option<usize>> = vec![None; d];
    owner[0] = Some(0);
    owner[d - 1] = Some(2);
    let mut slots: Vec<usize> = (1..d - 1).collect();
    slots.shuffle(&mut rng);
    for (n, &slot) in slots.iter().take(90).enumerate() {
        owner[slot] = Some(n % 3);
    }
    let clues: Vec<_> = owner
        .iter()
        .map(|o| match o {
            Some(r) => addresses[*r].clue_with(&mut rng),
            None => stranger_addresses[rng.gen_range(0..strangers.len())].clue_with(&mut rng),
        })
        .map(|c| omr_light::Clue::from_bytes(&c.to_bytes()).expect("a clue decodes"))
        .collect();
    let refs: Vec<_> = clues.iter().collect();

    let first = 7 * d as u64;
    let batch = Batch::prepare(P, &refs);
    let keys: Vec<ExpandedKey> = recipients
        .iter()
        .map(|k| ExpandedKey::from_bytes(&k.detection_key().to_bytes()).expect("key decodes"))
        .collect();
    let key_refs: Vec<_> = keys.iter().collect();
    for (r, digest) in digests(&batch, first, &key_refs).iter().enumerate() {
        let want: Vec<u64> = (0..d)
            .filter(|&i| owner[i] == Some(r))
            .map(|i| first + i as u64)
            .collect();
        assert_eq!(recipients[r].pertinent(digest), want, "recipient {r}");
    }
    // One key alone gives the same digest as in the group.
    let alone = batch.detect(&keys[1]);
    assert_eq!(alone, batch.detect_many(&key_refs)[1]);
}

#[test]
fn a_partial_batch_is_decoded_to_its_own_length() {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let me = key(70);
    let other = key(71).address();
    let mine = me.address();
    let clues = clues_to(&mine, &other, 100, |i| i % 7 == 3, &mut rng);
    let refs: Vec<_> = clues.iter().collect();
    let batch = Batch::prepare(P, &refs);
    let digest = &digests(&batch, 0, &[&me.detection_key().expand()])[0];
    assert_eq!(digest.messages(), 100);
    let want: Vec<u64> = (0..100).filter(|i| i % 7 == 3).collect();
    assert_eq!(me.pertinent(digest), want);
}

#[test]
fn a_batch_prepared_in_a_spent_one_equals_a_fresh_one() {
    let mut rng = ChaCha20Rng::seed_from_u64(13);
    let me = key(75);
    let (mine, other) = (me.address(), key(76).address());
    let expanded = me.detection_key().expand();
    // A full batch of strangers' clues, then, in its buffers, a partial batch of 50 whose
    // every fifth message is mine: nothing of the first may show in the second.
    let full: Vec<_> = (0..P.batch).map(|_| other.clue_with(&mut rng)).collect();
    let part = clues_to(&mine, &other, 50, |i| i % 5 == 0, &mut rng);
    let spent = Batch::prepare(P, &full.iter().collect::<Vec<_>>());
    drop(spent.detect(&expanded));
    let refs: Vec<_> = part.iter().collect();
    let reused = Batch::prepare_reusing(P, &refs, spent);
    let fresh = Batch::prepare(P, &refs);
    assert_eq!(reused.len(), 50);
    assert_eq!(reused.shared(), fresh.shared());
    assert_eq!(reused.detect(&expanded), fresh.detect(&expanded));
    let digest = &digests(&reused, 0, &[&expanded])[0];
    assert_eq!(
        me.pertinent(digest),
        (0..50).filter(|i| i % 5 == 0).collect::<Vec<u64>>()
    );
}

#[test]
fn clue_noise_and_decryption_error_match_the_prediction() {
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let me = key(80);
    let address = me.address();
    let clues: Vec<_> = (0..P.batch).map(|_| address.clue_with(&mut rng)).collect();

    // The clue noise, in the clear: ℓ·D values of predicted variance 768.5.
    let values: Vec<i64> = clues.iter().flat_map(|c| me.clue_values(c)).collect();
    let var = values.iter().map(|&v| (v * v) as f64).sum::<f64>() / values.len() as f64;
    let predicted = P.clue_noise_variance();
    assert!(
        (var / predicted - 1.0).abs() < 0.05,
        "clue noise variance {var:.1}, predicted {predicted:.1}"
    );
    assert!(values
        .iter()
        .all(|v| v.unsigned_abs() <= u64::from(P.range)));

    // The decryption error of the digest, as a fraction of q1: predicted variance
    // `digest_noise_variance`.
    let refs: Vec<_> = clues.iter().collect();
    let batch = Batch::prepare(P, &refs);
    let part = DigestPart {
        first: 0,
        own: batch.detect(&me.detection_key().expand()),
        shared: batch.shared().clone(),
    };
    let phases = me.phases(&part);
    let shift = P.log_q1 - P.log_t;
    let q1 = 1i64 << P.log_q1;
    let mut sum = 0.0;
    for (i, clue) in clues.iter().enumerate() {
        for (k, v) in me.clue_values(clue).into_iter().enumerate() {
            let expected = (v << shift).rem_euclid(q1);
            let mut err = phases[k * P.batch + i] as i64 - expected;
            if err > q1 / 2 {
                err -= q1;
            } else if err < -q1 / 2 {
                err += q1;
            }
            sum += (err as f64 / q1 as f64).powi(2);
        }
    }
    let measured = sum / (P.ell * P.batch) as f64;
    let predicted = P.digest_noise_variance();
    assert!(
        (measured / predicted - 1.0).abs() < 0.1,
        "decryption error variance {measured:e}, predicted {predicted:e}"
    );
}

#[test]
fn no_stranger_passes_in_two_to_the_sixteen_trials_and_a_weakened_range_matches_the_prediction() {
    // 16 keys against one full batch of clues to strangers: 2^16 (message, key) trials.
    let mut rng = ChaCha20Rng::seed_from_u64(13);
    let stranger = key(90).address();
    let clues: Vec<_> = (0..P.batch).map(|_| stranger.clue_with(&mut rng)).collect();
    let refs: Vec<_> = clues.iter().collect();
    let batch = Batch::prepare(P, &refs);
    let keys: Vec<SecretKey> = (100..116).map(key).collect();
    let weak = 1u32 << 20;
    let (passed, passed_weak): (usize, usize) = keys
        .par_iter()
        .map(|k| {
            let part = DigestPart {
                first: 0,
                own: batch.detect(&k.detection_key().expand()),
                shared: batch.shared().clone(),
            };
            (
                k.pertinent_in_with_range(&part, P.range).len(),
                k.pertinent_in_with_range(&part, weak).len(),
            )
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert_eq!(passed, 0, "a stranger's clue passed the range check");
    // At r = 2^20 a stranger passes with probability ((2r + 1)/t)^ℓ ≈ 1/64: 1,024 expected of
    // 65,536, standard deviation ≈ 31.7; allow five of them.
    let trials = (keys.len() * P.batch) as f64;
    let expected = trials * P.false_positive_log2_at(weak).exp2();
    let sd = (expected * (1.0 - expected / trials)).sqrt();
    assert!(
        (passed_weak as f64 - expected).abs() < 5.0 * sd,
        "{passed_weak} passed at r = 2^20, {expected:.0} ± {sd:.1} predicted"
    );
}

#[test]
fn every_encoding_round_trips_and_the_other_scheme_refuses_it() {
    let mut rng = ChaCha20Rng::seed_from_u64(14);
    let sk = key(120);
    let again = SecretKey::from_bytes(&sk.to_bytes()).unwrap();
    assert_eq!(again.to_bytes(), sk.to_bytes());
    let address = sk.address();
    assert_eq!(again.address(), address);
    assert_eq!(
        omr_light::Address::from_bytes(&address.to_bytes()).unwrap(),
        address
    );
    let clue = address.clue_with(&mut rng);
    let bytes = clue.to_bytes();
    assert_eq!(bytes.len(), P.clue_bytes());
    assert_eq!(omr_light::Clue::from_bytes(&bytes).unwrap(), clue);
    let dk = sk.detection_key();
    let encoded = dk.to_bytes();
    assert_eq!(encoded.len(), P.detection_key_bytes());
    assert_eq!(omr_light::DetectionKey::from_bytes(&encoded).unwrap(), dk);
    // The check a server makes without decoding agrees with decoding: the key, a residue at
    // or above Q (the first one, all ones), a key cut short, a byte more.
    let check = omr_light::DetectionKey::check_bytes;
    assert_eq!(check(&encoded).unwrap().name, P.name);
    let header = encoded.len() - (P.n * P.batch * P.q_bits() as usize).div_ceil(8);
    let mut above = encoded.clone();
    above[header..header + 8].fill(0xff);
    for bad in [
        &above[..],
        &encoded[..encoded.len() - 1],
        &[&encoded[..], &[0]].concat(),
    ] {
        let (checked, decoded) = (check(bad), omr_light::DetectionKey::from_bytes(bad));
        let expanded = ExpandedKey::from_bytes(bad).map(|_| ()).unwrap_err();
        let refused = decoded.unwrap_err().to_string();
        assert_eq!(checked.unwrap_err().to_string(), refused);
        assert_eq!(expanded.to_string(), refused);
    }
    // Decoding straight into the kernel's layout gives the layout of the decoded key, and a
    // worker's local file reads back to it; a word of that file at or above Q is refused.
    let expanded = ExpandedKey::from_bytes(&encoded).unwrap();
    assert_eq!(expanded.blocks(), dk.expand().blocks());
    let mut local = Vec::new();
    expanded.write_local(&mut local).unwrap();
    let read = ExpandedKey::read_local(P, &mut &local[..]).unwrap();
    assert_eq!(read.blocks(), expanded.blocks());
    let last = local.len() - 8;
    local[last..].fill(0xff);
    let refused = ExpandedKey::read_local(P, &mut &local[..])
        .map(|_| ())
        .unwrap_err();
    assert!(refused.to_string().contains("modulus"), "{refused}");
    assert!(ExpandedKey::read_local(P, &mut &local[..last]).is_err());

    // A light clue is not a TFHE clue, and a TFHE clue names its set when refused here.
    assert!(omr_core::Clue::from_bytes(&bytes).is_err());
    let tfhe = omr_core::keygen(&omr_core::INSECURE_TEST, 4).unwrap();
    let tfhe_clue = tfhe.clue_key.make_clue().to_bytes();
    let refused = omr_light::Clue::from_bytes(&tfhe_clue)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("clue"), "{refused}");
    // The same header with a TFHE set's id.
    let mut relabelled = bytes.clone();
    relabelled[5] = omr_core::OMR_V1.id;
    let refused = omr_light::Clue::from_bytes(&relabelled)
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("omr-v1") && refused.contains("omr-light-v1"),
        "{refused}"
    );
}

/// The shared work and a key's pass spread over the threads of a rayon pool give, word for
/// word, what one thread gives (the two take different paths: a pool of one runs the rows and
/// the blocks in order), for a full batch and for a partial one whose length does not divide
/// among the threads.
#[test]
fn one_thread_and_several_give_the_same_batch_and_digests() {
    let (me, other) = (key(41), key(42));
    let expanded = ExpandedKey::from_bytes(&me.detection_key().to_bytes()).expect("key decodes");
    let mut rng = ChaCha20Rng::seed_from_u64(41);
    for count in [P.batch, 1001] {
        let (mine, others) = (me.address(), other.address());
        let clues = clues_to(&mine, &others, count, |i| i % 97 == 0, &mut rng);
        let refs: Vec<_> = clues.iter().collect();
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a pool");
            pool.install(|| {
                let batch = Batch::prepare(P, &refs);
                (batch.shared().clone(), batch.detect(&expanded))
            })
        };
        let one = on(1);
        assert!(one == on(3), "{count} messages: 3 threads differ from 1");
        assert!(one == on(2), "{count} messages: 2 threads differ from 1");
    }
}
