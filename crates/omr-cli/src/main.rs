//! `omr`: the OMR command line. Recipients generate keys, register the detection key with omrd
//! and retrieve their messages; senders post messages, sealed, to a recipient's address.

mod commands;
mod demo;
mod ui;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

const DEFAULT_HTTP: &str = "http://127.0.0.1:8080";
const DEFAULT_GRPC: &str = "http://127.0.0.1:50051";

#[derive(Debug, Parser)]
#[command(
    name = "omr",
    version,
    about = "Oblivious message retrieval: keys, registration, sending and retrieval against omrd",
    long_about = "Oblivious message retrieval: a recipient registers an FHE detection key with an \
omrd server; senders post messages, sealed, to the recipient's public address; the server detects, \
without learning who receives what, which messages are the recipient's and folds them into an \
encrypted digest, which the recipient downloads and decodes.",
    after_help = "A walkthrough (omrd running on 127.0.0.1 with its defaults):
  omr keygen --out alice                       # alice/secret.key, seal.key, address, detection.key
  omr register --keys alice                    # uploads detection.key, writes alice/registration.json
  omr send --to alice/address --message hi     # sealed to alice; prints the board index
  omr digest --keys alice                      # the messages for alice since the last call
  omr demo                                     # all of it in one process, nothing to set up

On an omrd running omr-light-v1 (linear detection; payloads fetched by PIR once their epoch of
4,096 messages closes), the same commands, with `omr keygen --param-set omr-light-v1`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print one JSON object on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// No progress bars (they are also hidden when stderr is not a terminal).
    #[arg(long, short, global = true)]
    quiet: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a recipient's keys into a directory.
    #[command(after_help = "Examples:
  omr keygen --out alice
  omr keygen --out bob --kbar 100     # digests decode up to 100 messages per range
  omr keygen --out carol --param-set omr-light-v1   # for an omrd running the linear lane

Writes DIR/secret.key and DIR/seal.key (mode 0600: keep them; they are never printed), \
DIR/address (the public address senders need: `omr address` prints it), DIR/clue.key (the \
clue key, also inside the address) and DIR/detection.key (uploaded by `omr register`).")]
    Keygen(commands::KeygenArgs),
    /// Print a key directory's address: the one line senders need to send to it.
    #[command(after_help = "Examples:
  omr address --keys alice                 # omr1… (about 3,800 characters for omr-v1)
  omr address --keys alice --json

The address holds the clue key and the public key payloads are sealed to, with a checksum: \
send it to whoever should be able to write to you; `omr send --to ADDRESS` takes it.")]
    Address(commands::AddressArgs),
    /// Upload the detection key to omrd (gRPC) and store the key id and access token.
    #[command(after_help = "Examples:
  omr register --keys alice
  omr register --keys alice --grpc http://omr.example:50051 --http http://omr.example:8080
  omr register --keys alice --start-index 0     # also detect messages already on the board
  omr register --keys alice --invite 3f0c9e5a7d41b2c68e0f1a2b3c4d5e6f   # a server that wants one

Writes DIR/registration.json (mode 0600) with the key id and the access token; the token is \
the only credential for the key's digests and is shown nowhere else.")]
    Register(commands::RegisterArgs),
    /// Post a message to a recipient, given their address: the payload is sealed to them.
    #[command(after_help = "Examples:
  omr send --to alice/address --message 'lunch at noon?'
  omr send --to omr1AQk3…  --payload invoice.bin     # the address as text
  echo hi | omr send --to alice/address --payload -
  omr send --to alice/clue.key --plaintext --message 'for everyone to read'
  omr send --to alice/address --message 'the photo' --attach photo.jpg

The payload is sealed to the recipient (HPKE: X25519, ChaCha20-Poly1305): the public board \
shows only ciphertext, 50 bytes longer than the message (so at most 562 bytes of message for \
omr-v1). --attach adds a file of up to the server's max_attachment_bytes less 50, sealed too; 526 bytes of message fit beside it in omr-v1; \
the recipient fetches it by PIR once its epoch closes (`omr digest --out`). --plaintext posts it unsealed, readable by anyone; a bare clue.key can only do that. \
Prints the message's board index. When the server asks for postage (`postage_bits` in \
GET /v1/params), omr first searches for the message's stamp on every core (a spinner shows \
when it takes over a second) and says on stderr how long it took.")]
    Send(commands::SendArgs),
    /// Retrieve the messages detected for a key since the last call.
    #[command(after_help = "Examples:
  omr digest --keys alice
  omr digest --keys alice --out alice/inbox     # also writes INDEX.bin per message, and
                                                # fetches attachments to INDEX.attachment
  omr digest --keys alice --from 0 --json       # everything from index 0, as JSON
  omr digest --keys alice --follow              # then print each new message as it arrives

Remembers where it stopped in DIR/digest-state.json: the next call asks only for what is new, \
and messages already retrieved are not shown again. A range holding more than k̄ messages is \
split and asked for again. With --follow it then waits (a long-poll that also tells the server \
you are online, so your key is detected first) and prints each new message as it is detected, \
until Ctrl-C; with --json each new message is one JSON line. A letter that names an \
attachment is remembered; with --out, each call fetches one attachment per closed epoch by PIR \
(the server cannot tell which) and the rest on later calls.

On omr-light-v1 the digest names the messages and their payloads (with any attachment) come by \
PIR: every call makes 8 queries of each epoch it covers that has closed (dummies where you have \
fewer messages there), so the server learns nothing from the count; a message whose epoch is \
still open is listed as detected, and a later call fetches its payload.")]
    Digest(commands::DigestArgs),
    /// Show where detection stands for a registered key (cursor, board head, lag).
    #[command(after_help = "Example:\n  omr status --keys alice")]
    Status(commands::KeyArgs),
    /// Delete a registered key from omrd, and its registration file.
    #[command(after_help = "Example:\n  omr delete --keys alice")]
    Delete(commands::KeyArgs),
    /// Measure detection, folding, digest and decoding on this machine (no server needed).
    #[command(after_help = "Examples:
  omr bench --json
  omr bench --threads 2 --messages 32 --batch 4

Also times one tfhe-rs KS+PBS (PARAM_MESSAGE_2_CARRY_2 class) as a yardstick of machine speed.")]
    Bench(commands::BenchArgs),
    /// Measure how one node serves many keys through a memory budget that holds few: an
    /// embedded omrd, one online recipient among --keys, a slow board (no server needed).
    #[command(after_help = "Examples:
  omr bench-capacity --insecure-test-params --keys 12 --memory-keys 2 --interval-ms 200 --duration-secs 30
  omr bench-capacity --keys 50 --memory-keys 4 --interval-ms 4000 --duration-secs 600 --json
  omr bench-capacity --param-set omr-light-v1 --keys 200 --memory-keys 200 --interval-ms 1000

Reports the online recipient's freshness (post to detected) against the same node with its key
alone, how long every other key took to cover each message, and key load time against detection
time (from /metrics). On omr-light-v1 a key that is not online is detected a whole batch of 4,096
messages at a time: the other keys' coverage counts up to the last full batch.")]
    BenchCapacity(commands::CapacityArgs),
    /// Measure postage: the time to solve stamps at several numbers of bits, on one thread and
    /// on every core, and the cost of omrd's check (no server needed).
    #[command(after_help = "Examples:
  omr bench-postage
  omr bench-postage --bits 16,20,24 --runs 20 --threads 1,0 --json

Each number of bits solves stamps for --runs random messages (omr-v1 clues, full payloads) on \
each thread count (0: every core); the smallest nonce does not depend on the thread count, so \
every count does the same search. Reports mean, median, min and max solve time, the hash rate \
and 2^bits / rate (the expected time), then the microseconds omrd's check takes per message.")]
    BenchPostage(commands::PostageBenchArgs),
    /// Measure fetching an attachment by PIR (omr-pir): the server's preprocessing of one
    /// epoch's attachments, then fetches of random records (no server needed).
    #[command(after_help = "Examples:
  omr bench-pir                                     # one epoch: 4,096 attachments of 64 KiB
  omr bench-pir --records 256 --fetches 5 --json
  omr bench-pir --records 1048576 --record-bytes 1024 --chunks 1   # FrodoPIR's shape (1 GiB)

Fills a database with random records, times the hint's computation once, then each fetch: the \
client's queries, the server's answer and the client's decoding, checked byte for byte. \
Reports the bytes of the hint, a query and an answer, wall and CPU time, peak memory and the \
predicted failure probability per record.")]
    BenchPir(commands::PirBenchArgs),
    /// Run the whole flow in one process: an embedded omrd, recipients, a board, digests.
    #[command(after_help = "Examples:
  omr demo
  omr demo --recipients 2 --messages 16
  omr demo --insecure-test-params --messages 200    # fast, NOT secure
  omr demo --param-set omr-light-v1                 # the linear lane, payloads by PIR

Starts omrd in-process on a temporary SQLite store and ephemeral ports, creates recipients, \
posts a board (a few messages to each recipient, the rest to an outsider), waits for \
detection, retrieves every recipient's digest and checks it against what was sent. Exits \
non-zero if anything differs.")]
    Demo(demo::DemoArgs),
}

/// Server URLs: flag, then environment, then the key's registration.json, then localhost.
#[derive(Debug, Args, Clone, Default)]
pub struct Servers {
    /// omrd's HTTP base URL [default: from registration.json, else http://127.0.0.1:8080]
    #[arg(long, env = "OMR_HTTP_URL")]
    pub http: Option<String>,
    /// omrd's gRPC URL [default: from registration.json, else http://127.0.0.1:50051]
    #[arg(long, env = "OMR_GRPC_URL")]
    pub grpc: Option<String>,
    /// For https:// URLs: trust the CA certificates in this PEM file (e.g. a self-signed
    /// server certificate) instead of the system's [default: the system's trusted roots]
    #[arg(long, env = "OMR_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<std::path::PathBuf>,
}

impl Servers {
    pub fn client(
        &self,
        reg: Option<&omr_client::Registration>,
    ) -> anyhow::Result<omr_client::Client> {
        self.client_with(reg, omr_client::ClientOptions::default())
    }

    pub fn client_with(
        &self,
        reg: Option<&omr_client::Registration>,
        mut options: omr_client::ClientOptions,
    ) -> anyhow::Result<omr_client::Client> {
        if let Some(path) = &self.ca_cert {
            let pem = std::fs::read(path)
                .with_context(|| format!("reading --ca-cert {}", path.display()))?;
            options.ca_cert = Some(pem);
        }
        let http = self
            .http
            .clone()
            .or_else(|| reg.and_then(|r| r.http_url.clone()))
            .unwrap_or_else(|| DEFAULT_HTTP.to_string());
        let grpc = self
            .grpc
            .clone()
            .or_else(|| reg.map(|r| r.grpc_url.clone()))
            .unwrap_or_else(|| DEFAULT_GRPC.to_string());
        Ok(omr_client::Client::with_options(&http, &grpc, options)?)
    }
}

/// The key directory argument shared by most commands.
#[derive(Debug, Args, Clone)]
pub struct KeysDir {
    /// The recipient's key directory (written by `omr keygen`).
    #[arg(long, value_name = "DIR")]
    pub keys: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ui = ui::Ui {
        quiet: cli.quiet || cli.json,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async {
        // `RUST_LOG=debug omr …` shows the SDK's (and an embedded omrd's) logs on stderr.
        let _logs = match std::env::var_os("RUST_LOG") {
            Some(_) => omr_server::telemetry::init(omr_server::LogFormat::Human).ok(),
            None => None,
        };
        match cli.command {
            Command::Keygen(a) => commands::keygen(a, ui, cli.json).await,
            Command::Address(a) => commands::address(a, cli.json).await,
            Command::Register(a) => commands::register(a, ui, cli.json).await,
            Command::Send(a) => commands::send(a, ui, cli.json).await,
            Command::Digest(a) => commands::digest(a, ui, cli.json).await,
            Command::Status(a) => commands::status(a, cli.json).await,
            Command::Delete(a) => commands::delete(a, cli.json).await,
            Command::Bench(a) => commands::bench(a, ui, cli.json).await,
            Command::BenchCapacity(a) => commands::bench_capacity(a, ui, cli.json).await,
            Command::BenchPostage(a) => commands::bench_postage(a, ui, cli.json).await,
            Command::BenchPir(a) => commands::bench_pir(a, ui, cli.json).await,
            Command::Demo(a) => demo::run(a, ui, cli.json).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Print `value` as one JSON line on stdout.
pub fn print_json(value: &serde_json::Value) {
    println!("{value}");
}
