//! Whether the last stop was clean. A clean shutdown writes the `clean_stop` row after its
//! last write and checkpoints the WAL; opening reads the row, deletes it and checkpoints,
//! so the database file alone says whether the stop after this start is clean too: a
//! crash, a kill or a lost `-wal` file leaves no row. The `created` row, written at the
//! first open, tells a store that ran before from a new one (which lost nothing); a store
//! written by a hub from before these rows counts as new at its first open.

use rusqlite::{Connection, OptionalExtension};

use super::check;
use crate::store::{PositionsKept, StoreError};

/// At open: what the last stop kept, after which the next stop counts as unclean until
/// [`mark_clean`] says otherwise.
pub(super) fn opened(conn: &Connection, path: &str) -> Result<PositionsKept, StoreError> {
    let err = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    )
    .map_err(err)?;
    let row = |key: &str| {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| {
            r.get::<_, String>(0)
        })
        .optional()
        .map_err(err)
    };
    let (created, clean) = (row("created")?, row("clean_stop")?);
    conn.execute_batch(
        "INSERT OR IGNORE INTO meta (key, value)
             VALUES ('created', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'));
         DELETE FROM meta WHERE key = 'clean_stop';",
    )
    .map_err(err)?;
    // Into the database file at once: a WAL lost later must not bring the row back.
    check::checkpoint(conn, path)?;
    Ok(match (created, clean) {
        (Some(_), None) => PositionsKept::UntilLastFlush,
        _ => PositionsKept::All,
    })
}

/// At a clean shutdown, after the last write: the mark [`opened`] looks for.
pub(super) fn mark_clean(conn: &Connection, path: &str) -> Result<(), StoreError> {
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value)
             VALUES ('clean_stop', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
        [],
    )
    .map_err(|source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    })?;
    Ok(())
}
