//! `omr send` against an omrd that asks for postage: it solves the stamp, posts, and reports
//! what the stamp cost (JSON, or a line on stderr); `omr bench-postage` measures solving and
//! checking.

use crate::common::{keygen, omr, omr_json, s};
use omr_test_support::{TestDb, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_solves_the_postage_the_server_asks_for() {
    let db = TestDb::sqlite().await;
    let server = TestServer::start_configured(&db, |c| c.postage_bits = 12).await;
    let http = server.url("");
    let tmp = tempfile::tempdir().unwrap();
    let alice = tmp.path().join("alice");
    let address = alice.join("address");
    tokio::task::spawn_blocking(move || {
        keygen(&alice, "4");
        let sent = omr_json(&[
            "send",
            "--to",
            s(&address),
            "--message",
            "paid",
            "--http",
            &http,
            "--json",
        ]);
        assert_eq!(sent["index"], 0, "{sent}");
        let postage = &sent["postage"];
        assert_eq!(postage["bits"], 12, "{sent}");
        assert!(postage["hashes"].as_u64().unwrap() > postage["nonce"].as_u64().unwrap());
        assert!(postage["solve_ms"].as_f64().unwrap() >= 0.0, "{sent}");

        // Text: the index alone on stdout (scripts read it), the cost on stderr.
        let out = omr(&[
            "send",
            "--to",
            s(&address),
            "--message",
            "paid again",
            "--http",
            &http,
            "--postage-threads",
            "1",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
        assert!(
            stderr.contains("postage: 12 bits in") && stderr.contains("on 1 thread"),
            "{stderr}"
        );
    })
    .await
    .unwrap();
    assert_eq!(
        server.client().board(0, 10).await["head"],
        2,
        "both messages are on the board"
    );
    server.stop().await;
    db.cleanup().await;
}

/// `omr bench-postage --json`: a series per (bits, threads), the same nonces whatever the
/// thread count, and the check's cost.
#[test]
fn bench_postage_reports_solve_times_and_the_check() {
    let r = omr_json(&[
        "bench-postage",
        "--param-set",
        "insecure-test",
        "--bits",
        "4,10",
        "--runs",
        "3",
        "--threads",
        "1,2",
        "--checks",
        "1000",
        "--json",
    ]);
    let solves = r["solves"].as_array().unwrap();
    let series: Vec<(u64, u64)> = solves
        .iter()
        .map(|s| (s["bits"].as_u64().unwrap(), s["threads"].as_u64().unwrap()))
        .collect();
    assert_eq!(series, [(4, 1), (4, 2), (10, 1), (10, 2)], "{r}");
    for s in solves {
        for k in ["mean_s", "hashes_per_s", "expected_s", "mean_hashes"] {
            assert!(s[k].as_f64().unwrap() > 0.0, "{k}: {s}");
        }
    }
    // The same smallest nonces whatever the threads: one thread hashes exactly up to each, two
    // threads at least that (the other thread finishes the chunk it is in).
    let hashes = |i: usize| solves[i]["mean_hashes"].as_f64().unwrap();
    assert!(hashes(1) >= hashes(0) && hashes(3) >= hashes(2), "{r}");
    assert!(r["check_us"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["checks"], 1000);
}
