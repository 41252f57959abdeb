//! The commands other than `demo`, one module per concern: `keys` (keygen, register, status,
//! delete), `messages` (send, digest), `bench`, `capacity` (`omr bench-capacity`), `postage`
//! (`omr bench-postage`), `pir` (`omr bench-pir`).

mod attachments;
mod bench;
mod capacity;
mod keys;
mod letters;
mod messages;
mod pir;
mod postage;

pub use bench::{bench, BenchArgs};
pub use capacity::{bench_capacity, CapacityArgs};
pub use keys::{
    address, delete, keygen, known_set, register, status, AddressArgs, KeyArgs, KeygenArgs,
    RegisterArgs,
};
pub use messages::{digest, send, DigestArgs, SendArgs};
pub use pir::{bench_pir, PirBenchArgs};
pub use postage::{bench_postage, PostageBenchArgs};
