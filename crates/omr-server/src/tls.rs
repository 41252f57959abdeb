//! TLS on omrd's listeners (rustls, with ring): HTTPS for the HTTP API and TLS for gRPC, from
//! the PEM files `tls_cert` (the certificate chain, leaf first) and `tls_key` (its private key:
//! PKCS#8, PKCS#1 or SEC1).
//!
//! [`Tls::load`] reads both at start: a missing file, a file with no certificate or key, or a key
//! that is not the certificate's stops omrd with the reason. Afterwards [`Tls::reload`] reads
//! them again — on SIGHUP, and when either file's modification time changes ([`Tls::watch`]
//! checks every [`RELOAD_CHECK`]) — and new handshakes use the new certificate; connections
//! already open keep theirs. A reload that fails is logged and counted
//! (`omr_tls_reloads_total{result="error"}`) and the running certificate stays.
//!
//! The handshakes happen in omrd's own accept loops (`http::serve`, `connections`), bounded by
//! the header-read timeout, so a client that connects and never finishes its handshake holds a
//! connection permit only that long. HTTP offers ALPN `http/1.1`, gRPC `h2`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::signal::unix::{Signal, SignalKind};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// How often [`Tls::watch`] looks at the files' modification times.
pub const RELOAD_CHECK: Duration = Duration::from_secs(5);

/// The acceptors of both listeners and the certificate they share.
#[derive(Clone)]
pub struct Tls {
    /// For the HTTP listener (ALPN `http/1.1`).
    pub http: TlsAcceptor,
    /// For the gRPC listener (ALPN `h2`).
    pub grpc: TlsAcceptor,
    certificate: Arc<Certificate>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("cert", &self.certificate.cert_path)
            .field("key", &self.certificate.key_path)
            .finish_non_exhaustive()
    }
}

/// The certificate and key in use, and the files they came from.
#[derive(Debug)]
struct Certificate {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The files' modification times when they were last read.
    read_at: Mutex<Option<(SystemTime, SystemTime)>>,
}

impl ResolvesServerCert for Certificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().expect("certificate lock").clone())
    }
}

impl Tls {
    /// Read `cert_path` and `key_path` and build both acceptors; an error says which file is
    /// wrong and how.
    pub fn load(cert_path: &Path, key_path: &Path) -> anyhow::Result<Tls> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let read_at = modified(cert_path, key_path);
        let key = read_certified_key(&provider, cert_path, key_path)?;
        let certificate = Arc::new(Certificate {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            provider: provider.clone(),
            current: RwLock::new(Arc::new(key)),
            read_at: Mutex::new(read_at),
        });
        let acceptor = |alpn: &[u8]| -> anyhow::Result<TlsAcceptor> {
            let mut config = ServerConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .context("TLS protocol versions")?
                .with_no_client_auth()
                .with_cert_resolver(certificate.clone());
            config.alpn_protocols = vec![alpn.to_vec()];
            Ok(TlsAcceptor::from(Arc::new(config)))
        };
        Ok(Tls {
            http: acceptor(b"http/1.1")?,
            grpc: acceptor(b"h2")?,
            certificate,
        })
    }

    /// Read the files again and, if they hold a valid certificate and matching key, use them
    /// for new handshakes; otherwise keep the current ones and return why.
    pub fn reload(&self) -> anyhow::Result<()> {
        let c = &self.certificate;
        *c.read_at.lock().expect("lock") = modified(&c.cert_path, &c.key_path);
        let key = read_certified_key(&c.provider, &c.cert_path, &c.key_path)?;
        *c.current.write().expect("certificate lock") = Arc::new(key);
        Ok(())
    }

    /// Whether either file's modification time differs from when it was last read.
    fn changed(&self) -> bool {
        let c = &self.certificate;
        let now = modified(&c.cert_path, &c.key_path);
        now.is_some() && now != *c.read_at.lock().expect("lock")
    }

    /// Listen for SIGHUP from now on (before the address file is written, so that a SIGHUP
    /// sent once omrd is up never meets the default action, which ends the process).
    pub fn listen_for_hangup() -> Option<Signal> {
        match tokio::signal::unix::signal(SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP: TLS reloads only when the files change");
                None
            }
        }
    }

    /// Reload on `hangup` (from [`Tls::listen_for_hangup`]) and when the files change, until
    /// `cancel` fires.
    pub async fn watch(
        self,
        mut hangup: Option<Signal>,
        metrics: Metrics,
        cancel: CancellationToken,
    ) {
        loop {
            let cause = tokio::select! {
                _ = cancel.cancelled() => return,
                Some(()) = async { match hangup.as_mut() { Some(h) => h.recv().await, None => None } } => "SIGHUP",
                _ = tokio::time::sleep(RELOAD_CHECK) => {
                    if !self.changed() {
                        continue;
                    }
                    "file change"
                }
            };
            let c = &self.certificate;
            match self.reload() {
                Ok(()) => {
                    metrics
                        .admission
                        .tls_reloads
                        .with_label_values(&["ok"])
                        .inc();
                    tracing::info!(cause, cert = %c.cert_path.display(), "TLS certificate reloaded");
                }
                Err(e) => {
                    metrics
                        .admission
                        .tls_reloads
                        .with_label_values(&["error"])
                        .inc();
                    tracing::error!(cause, error = %format!("{e:#}"), "TLS certificate reload failed: still serving the previous certificate");
                }
            }
        }
    }
}

/// Count a failed TLS handshake on `listener` (`http`, `grpc`) for `reason` (`plain_http`,
/// `timeout`, `error`).
pub fn count_failure(metrics: &Metrics, listener: &str, reason: &str) {
    metrics
        .admission
        .tls_handshake_failures
        .with_label_values(&[listener, reason])
        .inc();
}

/// The TLS handshake of `acceptor` on `io`, by `deadline`; `None` when it fails or runs out of
/// time, logged and counted (see [`count_failure`]).
pub async fn handshake<IO: AsyncRead + AsyncWrite + Unpin>(
    acceptor: &TlsAcceptor,
    io: IO,
    deadline: tokio::time::Instant,
    listener: &str,
    peer: SocketAddr,
    metrics: &Metrics,
) -> Option<TlsStream<IO>> {
    let reason = match tokio::time::timeout_at(deadline, acceptor.accept(io)).await {
        Ok(Ok(tls)) => return Some(tls),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, %peer, listener, "TLS handshake failed");
            "error"
        }
        Err(_) => "timeout",
    };
    count_failure(metrics, listener, reason);
    None
}

/// Both files' modification times; `None` if either cannot be read.
fn modified(cert: &Path, key: &Path) -> Option<(SystemTime, SystemTime)> {
    let m = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    Some((m(cert)?, m(key)?))
}

fn read_certified_key(
    provider: &CryptoProvider,
    cert_path: &Path,
    key_path: &Path,
) -> anyhow::Result<CertifiedKey> {
    let chain = CertificateDer::pem_file_iter(cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| {
            format!(
                "reading the TLS certificate tls_cert = {}",
                cert_path.display()
            )
        })?;
    if chain.is_empty() {
        anyhow::bail!(
            "tls_cert = {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            cert_path.display()
        );
    }
    let key = PrivateKeyDer::from_pem_file(key_path).with_context(|| {
        format!(
            "reading the TLS private key tls_key = {} (PEM: PKCS#8, PKCS#1 or SEC1)",
            key_path.display()
        )
    })?;
    CertifiedKey::from_der(chain, key, provider).with_context(|| {
        format!(
            "tls_key = {} is not a usable private key for tls_cert = {}",
            key_path.display(),
            cert_path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate and its key, as PEM.
    fn pair() -> (String, String) {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        (c.cert.pem(), c.key_pair.serialize_pem())
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn refusal(cert: &Path, key: &Path) -> String {
        format!("{:#}", Tls::load(cert, key).unwrap_err())
    }

    #[test]
    fn a_matching_pair_loads_and_a_bad_reload_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = pair();
        let (cert, key) = (
            write(dir.path(), "cert.pem", &cert),
            write(dir.path(), "key.pem", &key),
        );
        let tls = Tls::load(&cert, &key).unwrap();
        let before = tls.certificate.current.read().unwrap().clone();
        std::fs::write(&key, "not a key").unwrap();
        let e = format!("{:#}", tls.reload().unwrap_err());
        assert!(e.contains("tls_key"), "{e}");
        let after = tls.certificate.current.read().unwrap().clone();
        assert!(Arc::ptr_eq(&before, &after));
        assert!(!tls.changed(), "a failed reload still records what it read");
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ((cert, _), (_, other_key)) = (pair(), pair());
        let e = refusal(
            &write(dir.path(), "cert.pem", &cert),
            &write(dir.path(), "key.pem", &other_key),
        );
        assert!(e.contains("is not a usable private key"), "{e}");
    }

    #[test]
    fn missing_or_empty_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let (_, key) = pair();
        let key = write(dir.path(), "key.pem", &key);
        let e = refusal(&write(dir.path(), "cert.pem", "hello"), &key);
        assert!(e.contains("holds no PEM certificate"), "{e}");
        let e = refusal(&dir.path().join("absent.pem"), &key);
        assert!(e.contains("absent.pem"), "{e}");
    }
}
