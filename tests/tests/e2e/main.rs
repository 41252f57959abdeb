//! One test binary for the end-to-end tests (each file below is a module), so that the
//! heavy dependencies are linked once rather than once per file.

mod admission;
mod attachments;
mod board;
mod capacity;
mod contract;
mod cors;
mod detection;
mod docs;
mod gpu;
mod http_registry;
mod layers;
mod light;
mod light_asks;
mod light_fetch;
mod light_refresh;
mod limits;
mod param_sets;
mod pir_limits;
mod postage;
mod registry;
mod replays;
mod retention;
mod roles;
mod routes;
mod supervise;
mod tidy;
mod tls;
mod waiting;
