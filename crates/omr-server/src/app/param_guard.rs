//! The parameter set at start-up: an unset `param_set` takes the set the store already holds
//! (or the default on a new store), and a store holding another set than the configured one is
//! refused: a server switched from `omr-v1` to `omr-v2` on a database that still holds omr-v1
//! keys or messages would accept them and never detect them (docs/running.md, "Moving to
//! another parameter set").

use crate::config::Config;
use crate::set::Set;
use anyhow::bail;
use omr_store::Store;

/// Fill an unset `param_set` with the set the store holds: its keys' set, else the set of the
/// board's newest message; a new store keeps the default. A named set is left as it is.
pub(crate) async fn settle_param_set(store: &Store, config: &mut Config) -> anyhow::Result<()> {
    if config.param_set.is_some() {
        return Ok(());
    }
    let mut held = store.key_param_sets().await?.into_iter().next();
    if held.is_none() {
        let head = store.board_head().await?;
        if head > 0 {
            if let Some(m) = store.read(head - 1, 1).await?.first() {
                let any = Set::by_name(config.param_set_name()).expect("the default set exists");
                held = any.clue_set(&m.clue).ok().map(str::to_string);
            }
        }
    }
    let name = held.unwrap_or_else(|| config.param_set_name().to_string());
    tracing::info!(param_set = %name, "param_set not configured: running the store's set (or the default on a new store)");
    config.param_set = Some(name);
    Ok(())
}

/// Refuse to start when the store holds keys, or a newest message, of another parameter set.
pub(crate) async fn refuse_other_param_sets(store: &Store, set: Set) -> anyhow::Result<()> {
    let others: Vec<String> = store
        .key_param_sets()
        .await?
        .into_iter()
        .filter(|s| s != set.name())
        .collect();
    if !others.is_empty() {
        bail!(
            "the store holds detection keys of parameter set {} but param_set = {}: those keys \
             would never be detected. Keep param_set = {} for this database, or run the new set \
             on a database of its own (docs/running.md, \"Moving to another parameter set\")",
            others.join(", "),
            set.name(),
            others[0],
        );
    }
    let head = store.board_head().await?;
    if head > 0 {
        if let Some(m) = store.read(head - 1, 1).await?.first() {
            // A clue the current code cannot read at all is a store problem for the worker to
            // report; only a readable clue of another set is this check's business.
            if let Ok(theirs) = set.clue_set(&m.clue) {
                if theirs != set.name() {
                    bail!(
                        "the board's newest message (index {}) is for parameter set {theirs} but \
                         param_set = {}: keep param_set = {theirs} for this database, or run the \
                         new set on a database of its own (docs/running.md, \"Moving to \
                         another parameter set\")",
                        m.index,
                        set.name(),
                    );
                }
            }
        }
    }
    Ok(())
}
