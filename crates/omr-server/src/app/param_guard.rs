//! The parameter set at start-up: an unset `param_set` takes the set the store already holds
//! (or the default on a new store), and a store holding another set than the configured one is
//! refused: a server switched from `omr-v1` to `omr-v2` on a database that still holds omr-v1
//! keys or messages would accept them and never detect them (docs/running.md, "Moving to
//! another parameter set").

use crate::config::Config;
use crate::set::Set;
use anyhow::bail;
use omr_store::Store;

/// What a store holds: its keys' parameter sets, and the index and set of its newest message
/// when its clue reads as a clue of some set.
struct Held {
    keys: Vec<String>,
    newest: Option<(u64, &'static str)>,
}

impl Held {
    /// Read from `store`; `reader` is the set a clue is decoded under first.
    async fn read(store: &Store, reader: Set) -> anyhow::Result<Held> {
        let keys = store.key_param_sets().await?;
        let head = store.board_head().await?;
        let newest = match head {
            0 => None,
            // A clue the current code cannot read at all is a store problem for the worker to
            // report; only a readable clue of some set is this check's business.
            _ => (store.read(head - 1, 1).await?.first())
                .and_then(|m| Some((m.index, reader.clue_set(&m.clue).ok()?))),
        };
        Ok(Held { keys, newest })
    }
}

/// The set this server runs: `param_set`, or when it is unset the set the store holds (its
/// keys', else its newest message's) or the default on a new store, written into `config`.
/// `configured` is `config`'s set as validated before the store was opened. Refused when the
/// store holds keys, or a newest message, of another set.
pub(crate) async fn settle_param_set(
    store: &Store,
    config: &mut Config,
    configured: Set,
) -> anyhow::Result<Set> {
    let held = Held::read(store, configured).await?;
    if config.param_set.is_none() {
        let stored = held.keys.first().map(String::as_str);
        let name = stored.or(held.newest.map(|(_, s)| s));
        let name = name.unwrap_or(configured.name()).to_string();
        tracing::info!(param_set = %name, "param_set not configured: running the store's set (or the default on a new store)");
        config.param_set = Some(name);
    }
    let set = config.validate()?;
    refuse_other_param_sets(&held, set)?;
    Ok(set)
}

/// Refuse to start when the store holds keys, or a newest message, of another parameter set.
fn refuse_other_param_sets(held: &Held, set: Set) -> anyhow::Result<()> {
    let others: Vec<&String> = held.keys.iter().filter(|s| *s != set.name()).collect();
    if let Some(first) = others.first() {
        bail!(
            "the store holds detection keys of parameter set {} but param_set = {}: those keys \
             would never be detected. Keep param_set = {first} for this database, or run the new \
             set on a database of its own (docs/running.md, \"Moving to another parameter set\")",
            others
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            set.name(),
        );
    }
    if let Some((index, theirs)) = held.newest.filter(|(_, theirs)| *theirs != set.name()) {
        bail!(
            "the board's newest message (index {index}) is for parameter set {theirs} but \
             param_set = {}: keep param_set = {theirs} for this database, or run the new set on \
             a database of its own (docs/running.md, \"Moving to another parameter set\")",
            set.name(),
        );
    }
    Ok(())
}
