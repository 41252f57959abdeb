//! The `omrd` executable as a child process: started on ephemeral ports, found through its
//! address file, and killed when the handle is dropped (also when a test fails).

use std::path::Path;
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::raw::RawClient;
use crate::wait::{wait_for_blocking, wait_until_blocking};

/// How long omrd may take to write its address file, or to exit after SIGTERM.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `omrd` process and the addresses it bound. Dropping it kills the process.
#[derive(Debug)]
pub struct Omrd {
    child: Child,
    /// `host:port` of the HTTP and gRPC listeners (no gRPC for `role = "worker"`).
    pub http: String,
    pub grpc: Option<String>,
}

impl Omrd {
    /// Start the executable `binary` (inside omr-server's tests,
    /// `env!("CARGO_BIN_EXE_omrd")`) on 127.0.0.1:0 for HTTP and gRPC with its data in
    /// `data_dir`, never inheriting `OMR_DATABASE_URL`, without rate limits (every test
    /// request comes from one address; a test of the limits sets them), its output discarded;
    /// `configure` adds arguments and environment or changes stdio. Returns once `data_dir/omrd.addr` names the
    /// bound addresses.
    pub fn spawn(
        binary: impl AsRef<Path>,
        data_dir: &Path,
        configure: impl FnOnce(&mut Command),
    ) -> Omrd {
        let addr_file = data_dir.join("omrd.addr");
        let _ = std::fs::remove_file(&addr_file);
        let mut cmd = Command::new(binary.as_ref());
        cmd.args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
            .arg("--data-dir")
            .arg(data_dir)
            .env_remove("OMR_DATABASE_URL")
            .env("OMR_RATE_LIMIT_PER_SECOND", "0")
            .env("OMR_READ_RATE_LIMIT_PER_SECOND", "0")
            .env("OMR_DIGEST_RATE_LIMIT_PER_SECOND", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        configure(&mut cmd);
        let child = cmd.spawn().expect("omrd starts");
        // From here on, a panic kills the child through `Drop`.
        let mut omrd = Omrd {
            child,
            http: String::new(),
            grpc: None,
        };
        let addr: serde_json::Value =
            wait_for_blocking(PROCESS_TIMEOUT, "omrd writes omrd.addr", || {
                let bytes = std::fs::read(&addr_file).ok()?;
                serde_json::from_slice(&bytes).ok()
            });
        omrd.http = addr["http"].as_str().expect("an HTTP address").into();
        omrd.grpc = addr["grpc"].as_str().map(String::from);
        omrd
    }

    /// A client of this process's HTTP and gRPC APIs.
    pub fn client(&self) -> RawClient {
        RawClient::new(&self.http, self.grpc.as_ref())
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its stderr, when `configure` piped it.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// SIGKILL, and wait for the exit.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL omrd");
        self.child.wait().expect("wait for omrd");
    }

    /// SIGTERM, and wait (at most 30 s) for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {}", self.child.id());
        let mut status = None;
        wait_until_blocking(PROCESS_TIMEOUT, "omrd exits after SIGTERM", || {
            status = self.child.try_wait().expect("poll omrd");
            status.is_some()
        });
        status.expect("exited")
    }
}

impl Drop for Omrd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
