//! Recipients' keys for tests: the fast insecure parameter set.

use omr_core::{keygen, KeySet, INSECURE_TEST};

/// A fresh key set of the insecure test parameter set for at most `kbar` messages per digest.
pub fn insecure_keys(kbar: usize) -> KeySet {
    keygen(&INSECURE_TEST, kbar).expect("keygen for the insecure test set")
}
