//! A build script, so that cargo also unifies the features of build dependencies through this
//! crate (hakari's layout).

fn main() {}
