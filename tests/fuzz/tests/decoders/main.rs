//! Property-based fuzz tests of every decoder that takes bytes from the network or disk (one
//! test binary, with a counting global allocator of its own): random bytes, truncations and bit
//! flips of valid encodings, and huge declared lengths. Each case must decode or be refused
//! with a typed error, never panic, and never allocate more at once than the decoder's bound
//! (`harness.rs`). Each test prints `FUZZ: <decoder>: <n> cases` on stderr; docs/SERVICE.md
//! ("Decoders under fire") lists the counts.

mod alloc;
mod fixtures;
mod harness;
mod light;
mod pir;
mod scheme;
mod sdk;
mod service;

#[global_allocator]
static ALLOCATOR: alloc::PeakAlloc = alloc::PeakAlloc;

/// One test per decoder: `test_name => constructor`. Adding a decoder is one line here (and a
/// constructor returning a `harness::Decoder`).
macro_rules! fuzz {
    ($($test:ident => $decoder:expr,)*) => {
        $(
            #[test]
            fn $test() {
                harness::fuzz($decoder);
            }
        )*
    };
}

fuzz! {
    // omr-core: every encoding that crosses a process boundary.
    clue => scheme::clue(),
    message => scheme::message(),
    clue_key => scheme::clue_key(),
    secret_key => scheme::secret_key(),
    detection_key => scheme::detection_key(),
    detection_key_omr_v1 => scheme::detection_key_omr_v1(),
    detection_key_omr_v2 => scheme::detection_key_omr_v2(),
    accumulator => scheme::accumulator(),
    digest => scheme::digest(),
    digest_decoded => scheme::digest_decoded(),
    digest_key => scheme::digest_key(),
    expanded_key => scheme::expanded_key(),
    message_with_attachment => pir::message_with_attachment(),
    // omr-light: the linear scheme's encodings.
    light_clue => light::clue(),
    light_address => light::address(),
    light_secret_key => light::secret_key(),
    light_detection_key => light::detection_key(),
    light_detection_key_check => light::detection_key_check(),
    light_digest => light::digest(),
    light_digest_decoded => light::digest_decoded(),
    // omrd: request bodies, the registration header, the expanded key files.
    http_message_binary => service::message_binary(),
    http_message_binary_stamped => service::message_binary_stamped(),
    http_message_json => service::message_json(),
    http_message_with_attachment => pir::http_message_with_attachment(),
    pir_query => pir::pir_query(),
    http_batch_binary => service::batch_binary(),
    http_batch_json => service::batch_json(),
    registration_header => service::registration_header(),
    invite_code => service::invite_code(),
    expanded_key_file => service::expanded_key_file(),
    // The SDK: key directory files, omrd's JSON answers.
    clue_key_file => sdk::clue_key_file(),
    secret_key_file => sdk::secret_key_file(),
    registration_file => sdk::registration_file(),
    digest_state_file => sdk::digest_state_file(),
    address => sdk::address(),
    sealed_payload => sdk::sealed_payload(),
    pir_hint => pir::pir_hint(),
    pir_answer => pir::pir_answer(),
    error_body => sdk::error_body(),
    params_body => sdk::params_body(),
    key_status_body => sdk::key_status_body(),
    board_page_body => sdk::board_page_body(),
}
