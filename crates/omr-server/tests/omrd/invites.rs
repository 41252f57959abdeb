//! `omrd invite create` against the store of a running `omrd` (with `registration = "invite"`),
//! on each backend: the code it prints is accepted by the server exactly as many times as it
//! was minted for; a bad `--uses` or `--expires`, or a data directory holding no store, is
//! refused with a message and mints nothing.

use std::path::Path;
use std::process::{Command, Output};

use omr_proto::v1::registration_header::Start;
use omr_test_support::{insecure_keys, test_each_backend, Omrd, TestDb};
use tonic::Code;

const OMRD: &str = env!("CARGO_BIN_EXE_omrd");

/// `omrd [--database-url URL] --data-dir DIR invite create ARGS…` on `db`'s store.
fn invite_create(dir: &Path, db: &TestDb, args: &[&str]) -> Output {
    let mut cmd = Command::new(OMRD);
    cmd.env_remove("OMR_DATABASE_URL")
        .arg("--data-dir")
        .arg(dir);
    if db.data_dir().is_none() {
        cmd.arg("--database-url").arg(db.url());
    }
    cmd.args(["invite", "create"]).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

test_each_backend!(a_code_from_omrd_invite_create_is_accepted_by_the_running_server);

async fn a_code_from_omrd_invite_create_is_accepted_by_the_running_server(db: &TestDb) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = db.data_dir().unwrap_or(tmp.path()).to_path_buf();
    let omrd = Omrd::spawn(OMRD, &dir, |cmd| {
        cmd.args(["--param-set", "insecure-test", "--allow-insecure-params"])
            .env("OMR_REGISTRATION", "invite");
        if db.data_dir().is_none() {
            cmd.arg("--database-url").arg(db.url());
        }
    });
    let api = omrd.client();
    let refused = api
        .try_register(insecure_keys(4), Start::FromNow(true), None)
        .await
        .expect_err("no code");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");

    let out = invite_create(&dir, db, &["--uses", "2", "--expires", "1h"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let code = stdout.trim();
    assert_eq!(
        stdout.lines().count(),
        1,
        "only the code on stdout: {stdout}"
    );
    assert_eq!(code.len(), 32, "{code}");
    let note = text(&out.stderr);
    assert!(
        note.contains("2 registrations") && note.contains("expires") && !note.contains(code),
        "{note}"
    );

    for _ in 0..2 {
        api.try_register(insecure_keys(4), Start::FromNow(true), Some(code))
            .await
            .expect("the minted code admits a registration");
    }
    let used_up = api
        .try_register(insecure_keys(4), Start::FromNow(true), Some(code))
        .await
        .expect_err("both uses are taken");
    assert_eq!(used_up.code(), Code::PermissionDenied, "{used_up:?}");
    assert!(used_up.message().contains("used up"), "{used_up:?}");
    assert_eq!(db.store().key_count().await.unwrap(), 2);

    // Refusals mint nothing and say why.
    for (args, why) in [
        (&["--uses", "0"][..], "--uses"),
        (&["--expires", "soon"][..], "--expires"),
    ] {
        let out = invite_create(&dir, db, args);
        assert!(!out.status.success(), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            text(&out.stderr).contains(why),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn invite_create_refuses_a_data_directory_without_a_store() {
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(OMRD)
        .env_remove("OMR_DATABASE_URL")
        .arg("--data-dir")
        .arg(empty.path())
        .args(["invite", "create"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(
        err.contains("no store") && err.contains("--data-dir"),
        "{err}"
    );
    assert!(
        !empty.path().join("omr.sqlite3").exists(),
        "no empty store was created"
    );
}
