//! The key directory's files: written, read back, protected, refused when wrong.

use super::*;

#[test]
fn keys_round_trip_and_the_secret_key_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let keys = omr_core::keygen(&omr_core::INSECURE_TEST, 4).unwrap();
    let kd = KeyDir::create(dir.path().join("alice"), &keys, false).unwrap();
    assert_eq!(kd.secret_key().unwrap().kbar(), 4);
    assert_eq!(kd.clue_key().unwrap().to_bytes(), keys.clue_key.to_bytes());
    assert_eq!(
        kd.detection_key_bytes().unwrap(),
        keys.detection_key.to_bytes()
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |n: &str| std::fs::metadata(kd.file(n)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(SECRET_KEY_FILE), 0o600);
        assert_eq!(mode(CLUE_KEY_FILE), 0o644);
        let dmode = std::fs::metadata(kd.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(dmode, 0o700);
    }
    // A second keygen into the same directory is refused, and changes nothing.
    let other = omr_core::keygen(&omr_core::INSECURE_TEST, 4).unwrap();
    let e = KeyDir::create(kd.path(), &other, false).unwrap_err();
    assert!(e.to_string().contains("already there"), "{e}");
    assert_eq!(kd.clue_key().unwrap().to_bytes(), keys.clue_key.to_bytes());
}

#[test]
fn registration_is_private_and_never_debug_printed() {
    let dir = tempfile::tempdir().unwrap();
    let kd = KeyDir::new(dir.path());
    assert!(kd.registration().unwrap().is_none());
    assert!(kd
        .require_registration()
        .unwrap_err()
        .to_string()
        .contains("omr register"));
    let reg = Registration {
        key_id: "k1".into(),
        access_token: "s3cr3t-token".into(),
        start_index: 7,
        param_set: "insecure-test".into(),
        kbar: 4,
        grpc_url: "http://127.0.0.1:1".into(),
        http_url: None,
        registered_at: "2026-11-22T00:00:00Z".into(),
    };
    kd.save_registration(&reg).unwrap();
    assert_eq!(kd.registration().unwrap(), Some(reg.clone()));
    assert!(!format!("{reg:?}").contains("s3cr3t"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::metadata(kd.file(REGISTRATION_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(m & 0o777, 0o600);
    }
    let mut st = kd.digest_state(&reg).unwrap();
    assert_eq!(st.next_from, 7);
    st.next_from = 40;
    st.seen.insert(39);
    kd.save_digest_state(&st).unwrap();
    assert_eq!(kd.digest_state(&reg).unwrap(), st);
    // State of another key is ignored.
    let other = Registration {
        key_id: "k2".into(),
        ..reg
    };
    assert_eq!(kd.digest_state(&other).unwrap().next_from, 7);
    std::fs::write(kd.file(REGISTRATION_FILE), b"{not json").unwrap();
    let e = kd.registration().unwrap_err().to_string();
    assert!(
        e.contains("registration.json") && e.contains("not valid"),
        "{e}"
    );
}
