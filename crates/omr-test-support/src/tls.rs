//! A self-signed TLS certificate for `localhost` and 127.0.0.1 (rcgen), written as PEM files
//! for omrd's `tls_cert` / `tls_key` and trusted by clients as their own CA (`--ca-cert`).

use std::path::PathBuf;

/// A certificate and its key in a temporary directory (removed on drop).
#[derive(Debug)]
pub struct TestCert {
    _dir: tempfile::TempDir,
    /// The certificate (PEM), also the clients' CA.
    pub cert: PathBuf,
    /// Its private key (PEM, PKCS#8).
    pub key: PathBuf,
}

impl TestCert {
    /// A new key pair and self-signed certificate for `localhost` and 127.0.0.1.
    pub fn localhost() -> TestCert {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cert = TestCert {
            cert: dir.path().join("cert.pem"),
            key: dir.path().join("key.pem"),
            _dir: dir,
        };
        cert.renew();
        cert
    }

    /// Write a new key pair and certificate over the same files (a renewal: clients that
    /// trusted the old certificate do not trust the new one).
    pub fn renew(&self) {
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let rcgen::CertifiedKey { cert, key_pair } =
            rcgen::generate_simple_self_signed(names).expect("a self-signed certificate");
        std::fs::write(&self.key, key_pair.serialize_pem()).expect("write the key");
        std::fs::write(&self.cert, cert.pem()).expect("write the certificate");
    }

    /// The certificate's PEM text.
    pub fn pem(&self) -> Vec<u8> {
        std::fs::read(&self.cert).expect("read the certificate")
    }
}
