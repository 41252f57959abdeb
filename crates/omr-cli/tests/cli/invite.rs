//! `omr register --invite CODE` against an omrd with `registration = "invite"`: without a code,
//! or with a used one, the error says what to do and nothing is written; a malformed code is
//! refused before anything is sent; the operator's code registers the key.

use crate::common::{keygen, omr_fails, register_with, s};
use omr_test_support::{TestDb, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_needs_the_operators_invite_code() {
    let db = TestDb::sqlite().await;
    let server = TestServer::start_configured(&db, |c| {
        c.registration = omr_server::Registration::Invite;
    })
    .await;
    let code = omr_server::service::invites::mint(db.store(), 1, None)
        .await
        .expect("minted")
        .code;
    let (http, grpc) = (server.url(""), server.grpc_url());
    let tmp = tempfile::tempdir().unwrap();
    let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
    tokio::task::spawn_blocking(move || {
        keygen(&alice, "4");
        keygen(&bob, "4");
        // `omr register --keys DIR … --http … --grpc …`, required to fail: its stderr.
        let refused = |dir: &std::path::Path, more: &[&str]| {
            let mut args = vec![
                "register",
                "--keys",
                s(dir),
                "--http",
                &http,
                "--grpc",
                &grpc,
            ];
            args.extend_from_slice(more);
            omr_fails(&args)
        };

        let e = refused(&alice, &[]);
        assert!(
            e.contains("did not admit") && e.contains("omr register --invite"),
            "{e}"
        );
        assert!(!alice.join("registration.json").exists());

        let e = refused(&alice, &["--invite", "12ab"]);
        assert!(
            e.contains("--invite") && e.contains("32 hexadecimal digits"),
            "{e}"
        );

        let reg = register_with(&alice, &http, &grpc, &["--invite", code.as_str()]);
        assert!(reg["key_id"].is_string(), "{reg}");
        assert!(alice.join("registration.json").exists());

        let e = refused(&bob, &["--invite", code.as_str()]);
        assert!(e.contains("used up"), "{e}");
        assert!(!bob.join("registration.json").exists());
    })
    .await
    .unwrap();
    assert_eq!(db.store().key_count().await.unwrap(), 1);
    server.stop().await;
    db.cleanup().await;
}
