//! The scheme end to end: every record of small databases comes back byte-exact, queries do not
//! depend on the record, and every encoding round-trips and refuses junk.

use omr_pir::{Answer, Database, Hint, PirError, Query, Shape, PIR_V1};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn random_records(rng: &mut ChaCha20Rng, shape: Shape) -> Vec<Vec<u8>> {
    (0..shape.records)
        .map(|_| {
            let len = rng.gen_range(0..=shape.record_bytes);
            (0..len).map(|_| rng.gen()).collect()
        })
        .collect()
}

fn padded(record: &[u8], size: usize) -> Vec<u8> {
    let mut out = record.to_vec();
    out.resize(size, 0);
    out
}

#[test]
fn every_record_comes_back() {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    for (records, record_bytes) in [(24, 4096), (7, 1000), (5, 100), (1, 256)] {
        let shape = Shape::for_records(records, record_bytes).unwrap();
        let data = random_records(&mut rng, shape);
        let db = Database::from_records(&PIR_V1, shape, data.iter().map(|r| &r[..])).unwrap();
        let hint = Hint::from_bytes(&db.preprocess(rng.gen()).to_bytes()).unwrap();
        for (i, record) in data.iter().enumerate() {
            let (query, fetch) = hint.query(i, &mut rng).unwrap();
            let query = Query::from_bytes(&query.to_bytes()).unwrap();
            let answer = Answer::from_bytes(&db.answer(&query).unwrap().to_bytes()).unwrap();
            let got = hint.decode(&fetch, &answer).unwrap();
            assert_eq!(
                got,
                padded(record, shape.record_bytes),
                "record {i} of {shape:?}"
            );
        }
    }
}

#[test]
fn a_dummy_fetch_decodes_some_record() {
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let shape = Shape::for_records(9, 512).unwrap();
    let data = random_records(&mut rng, shape);
    let db = Database::from_records(&PIR_V1, shape, data.iter().map(|r| &r[..])).unwrap();
    let hint = db.preprocess(rng.gen());
    let (query, fetch) = hint.dummy_query(&mut rng);
    let got = hint.decode(&fetch, &db.answer(&query).unwrap()).unwrap();
    assert_eq!(got, padded(&data[fetch.record()], 512));
}

#[test]
fn queries_do_not_depend_on_the_record() {
    let mut rng = ChaCha20Rng::seed_from_u64(13);
    let shape = Shape::for_records(8, 512).unwrap();
    let db = Database::new(&PIR_V1, shape).unwrap();
    let hint = db.preprocess(rng.gen());
    let lengths: Vec<usize> = (0..8)
        .map(|i| hint.query(i, &mut rng).unwrap().0.to_bytes().len())
        .collect();
    assert!(
        lengths.iter().all(|&l| l == shape.query_bytes()),
        "{lengths:?}"
    );

    // The coordinate that carries Δ is as uniform as any other: the top four bits of the
    // selected coordinate and of an unselected one, over 4,000 fresh queries, pass a chi-square
    // test (15 degrees of freedom; the 99.99% point is 42.3).
    let chunks = shape.chunks;
    let mut selected = [0f64; 16];
    let mut other = [0f64; 16];
    let trials = 4000;
    for _ in 0..trials {
        let bytes = hint.query(3, &mut rng).unwrap().0.to_bytes();
        let coordinate = |c: usize| {
            let at = bytes.len() - shape.columns() * chunks * 4 + 4 * c;
            u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
        };
        selected[(coordinate(3 * chunks) >> 28) as usize] += 1.0;
        other[(coordinate(5 * chunks) >> 28) as usize] += 1.0;
    }
    for (name, hist) in [("selected", selected), ("other", other)] {
        let expected = trials as f64 / 16.0;
        let chi2: f64 = hist.iter().map(|o| (o - expected).powi(2) / expected).sum();
        assert!(
            chi2 < 42.3,
            "{name} coordinate: chi-square {chi2}, {hist:?}"
        );
    }
}

#[test]
fn mismatched_queries_and_records_are_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(14);
    let small = Database::new(&PIR_V1, Shape::for_records(4, 512).unwrap()).unwrap();
    let other = Database::new(&PIR_V1, Shape::for_records(5, 512).unwrap()).unwrap();
    let hint = small.preprocess(rng.gen());
    assert!(matches!(
        hint.query(4, &mut rng),
        Err(PirError::NoSuchRecord {
            index: 4,
            records: 4
        })
    ));
    let (query, _) = hint.query(0, &mut rng).unwrap();
    assert!(matches!(
        other.answer(&query),
        Err(PirError::Mismatch { .. })
    ));

    let other_hint = other.preprocess(rng.gen());
    let (_, fetch) = hint.query(1, &mut rng).unwrap();
    let (other_query, _) = other_hint.query(1, &mut rng).unwrap();
    let answer = other.answer(&other_query).unwrap();
    assert!(matches!(
        other_hint.decode(&fetch, &answer),
        Err(PirError::Mismatch { .. })
    ));

    let mut db = Database::new(&PIR_V1, Shape::for_records(2, 256).unwrap()).unwrap();
    assert!(matches!(
        db.set_record(2, b"x"),
        Err(PirError::NoSuchRecord { .. })
    ));
    assert!(matches!(
        db.set_record(0, &[0; 257]),
        Err(PirError::RecordTooLarge { .. })
    ));
}

#[test]
fn encodings_refuse_junk() {
    let mut rng = ChaCha20Rng::seed_from_u64(15);
    let shape = Shape::for_records(3, 512).unwrap();
    let db = Database::new(&PIR_V1, shape).unwrap();
    let hint = db.preprocess(rng.gen());
    let (query, _) = hint.query(2, &mut rng).unwrap();
    let answer = db.answer(&query).unwrap();
    let encodings = [hint.to_bytes(), query.to_bytes(), answer.to_bytes()];
    assert_eq!(encodings[0].len(), shape.hint_bytes(&PIR_V1));
    assert_eq!(encodings[1].len(), shape.query_bytes());
    assert_eq!(encodings[2].len(), shape.answer_bytes(&PIR_V1));
    assert_eq!(Hint::from_bytes(&encodings[0]).unwrap(), hint);
    assert_eq!(Query::from_bytes(&encodings[1]).unwrap(), query);
    assert_eq!(Answer::from_bytes(&encodings[2]).unwrap(), answer);

    type Decoder = fn(&[u8]) -> Result<(), PirError>;
    let decoders: [Decoder; 3] = [
        |b| Hint::from_bytes(b).map(drop),
        |b| Query::from_bytes(b).map(drop),
        |b| Answer::from_bytes(b).map(drop),
    ];
    for (bytes, decode) in encodings.iter().zip(decoders) {
        for cut in [0, 3, 10, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
        let mut magic = bytes.clone();
        magic[0] ^= 1;
        assert!(decode(&magic).is_err());
        let mut version = bytes.clone();
        version[3] = 2;
        assert!(decode(&version).is_err());
        let mut set = bytes.clone();
        set[4] = 99;
        assert_eq!(decode(&set), Err(PirError::UnknownParams(99)));
    }
    // The wrong kind of message, and a header that claims a huge database.
    assert!(Query::from_bytes(&encodings[0]).is_err());
    let mut huge = encodings[1][..21].to_vec();
    huge[5..9].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        Query::from_bytes(&huge),
        Err(PirError::BadShape(_))
    ));
    let mut no_queries = encodings[1][..21].to_vec();
    no_queries[17..21].copy_from_slice(&0u32.to_le_bytes());
    assert!(Query::from_bytes(&no_queries).is_err());
}
