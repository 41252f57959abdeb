//! The start-up check that a store holds only the configured parameter set: a server switched
//! from `omr-v1` to `omr-v2` on a database that still holds omr-v1 keys or messages would accept
//! them and never detect them (docs/operations.md, "Moving to omr-v2").

use crate::set::Set;
use anyhow::bail;
use omr_store::Store;

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
             on a database of its own (docs/operations.md, \"Moving to omr-v2\")",
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
                         new set on a database of its own (docs/operations.md, \"Moving to \
                         omr-v2\")",
                        m.index,
                        set.name(),
                    );
                }
            }
        }
    }
    Ok(())
}
