//! `uniffi-bindgen` for omr-ffi: the generator at exactly the UniFFI version the library is
//! built with (a mismatch fails the bindings' checksums at load time).
//!
//!     cargo build --release -p omr-ffi
//!     cargo run -p omr-uniffi-bindgen --bin uniffi-bindgen -- generate \
//!         --library target/release/libomr_ffi.so --language kotlin --out-dir bindings/kotlin
//!
//! `bindings/generate.sh` runs it for every language; maturin runs it for the Python package.

fn main() {
    uniffi::uniffi_bindgen_main()
}
