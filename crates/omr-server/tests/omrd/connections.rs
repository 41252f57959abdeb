//! Connections against the `omrd` executable: 500 clients that send half a request's headers
//! and then nothing neither stop a well-behaved client from posting at once nor stay open past
//! the header timeout (per backend); a `role = "worker"` process binds no gRPC port.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use omr_test_support::{insecure_keys, test_each_backend, wait_until, Omrd, TestDb};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::crash::{data_dir, start};

/// Idle clients the test opens.
const IDLE: usize = 500;
/// The header timeout these tests configure.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);

test_each_backend!(half_sent_requests_neither_block_posting_nor_outlive_the_header_timeout);

async fn half_sent_requests_neither_block_posting_nor_outlive_the_header_timeout(db: &TestDb) {
    let (dir, _tmp) = data_dir(db);
    let secs = HEADER_TIMEOUT.as_secs().to_string();
    let o = start(&dir, db, &[("OMR_HEADER_READ_TIMEOUT_SECS", &secs)]);
    // Each request on a new connection: a pooled one idle past the header timeout is closed
    // by the server, and a request sent on it as it closes fails.
    let api = o.client().unpooled();
    let keys = insecure_keys(4);
    // Warm up: the store and the first connection.
    api.post(&keys.clue_key, b"before").await;

    let opened = Instant::now();
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        let mut s = TcpStream::connect(&o.http).await.expect("connect");
        s.write_all(b"POST /v1/messages HTTP/1.1\r\nhost: omrd\r\ncontent-type: appl")
            .await
            .expect("send half the headers");
        idle.push(s);
    }
    let all_open = opened.elapsed();

    // A well-behaved client, on a connection of its own, posts within a second.
    let posting = Instant::now();
    api.post(&keys.clue_key, b"while 500 clients hang").await;
    let took = posting.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "posting took {took:?} with {IDLE} half-sent requests open"
    );
    println!("{IDLE} idle connections opened in {all_open:?}; a post took {took:?}");

    // Each idle connection is closed by the server (EOF) once the header timeout has passed
    // since its connection, and not before.
    let closed = futures::future::join_all(idle.into_iter().map(|mut s| async move {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut rest)).await;
        (read, Instant::now())
    }))
    .await;
    for (i, (read, at)) in closed.into_iter().enumerate() {
        match read {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("idle connection {i}: {e} instead of EOF"),
            Err(_) => panic!("idle connection {i} still open after 30 s"),
        }
        assert!(
            at.duration_since(opened) >= HEADER_TIMEOUT - Duration::from_millis(100),
            "idle connection {i} closed after {:?}, before the header timeout",
            at.duration_since(opened)
        );
    }
    // Only the connection asking remains.
    wait_until(
        Duration::from_secs(10),
        "one connection is open",
        || async { api.metric("omr_open_connections").await == Some(1.0) },
    )
    .await;
    assert_eq!(api.board(0, 10).await["head"], 2);
}

/// The listening TCP ports of process `pid`: its socket inodes matched against the kernel's
/// tables of listening sockets.
fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read the process's descriptors")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address, state (0A: LISTEN), inode.
            if f.len() > 9 && f[3] == "0A" && inodes.contains(f[9]) {
                let port = f[1].rsplit(':').next().unwrap();
                ports.push(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports
}

#[test]
fn a_worker_process_binds_no_grpc_port() {
    let dir = tempfile::tempdir().unwrap();
    let binary = env!("CARGO_BIN_EXE_omrd");
    let both = Omrd::spawn(binary, dir.path(), |cmd| {
        cmd.env("RUST_LOG", "warn");
    });
    let grpc_port = |o: &Omrd| {
        let a = o.grpc.as_ref().expect("a gRPC address");
        a.rsplit(':').next().unwrap().parse::<u16>().unwrap()
    };
    let http_port = |o: &Omrd| o.http.rsplit(':').next().unwrap().parse::<u16>().unwrap();
    // The control: a process with both roles listens on both ports.
    let mut ports = listening_ports(both.pid());
    ports.sort_unstable();
    let mut want = vec![http_port(&both), grpc_port(&both)];
    want.sort_unstable();
    assert_eq!(ports, want);
    drop(both);

    let worker = Omrd::spawn(binary, dir.path(), |cmd| {
        cmd.env("OMR_ROLE", "worker").env("RUST_LOG", "warn");
    });
    assert_eq!(worker.grpc, None, "omrd.addr names a gRPC address");
    let addr: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("omrd.addr")).unwrap()).unwrap();
    assert_eq!(addr["grpc"], serde_json::Value::Null);
    assert_eq!(listening_ports(worker.pid()), [http_port(&worker)]);
}
