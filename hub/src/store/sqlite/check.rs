//! Guarding the database file: what an SQLite error at open means (not a database,
//! corrupt, or only unusable), the integrity check and write probe at open, and the WAL
//! checkpoint at a clean shutdown.

use rusqlite::{Connection, ErrorCode};

use crate::store::StoreError;

/// Names what an error at open says about the file.
pub(super) fn classify(path: &str, source: rusqlite::Error) -> StoreError {
    let corrupt = |problem: String| StoreError::Corrupt {
        path: path.to_owned(),
        problem,
    };
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => corrupt("it is not an SQLite database".into()),
        Some(ErrorCode::DatabaseCorrupt) => corrupt(format!("it is corrupt ({source})")),
        _ => StoreError::Sqlite {
            path: path.to_owned(),
            source,
        },
    }
}

/// Runs `PRAGMA quick_check` (structure, pages and records; every index entry is not
/// matched, which `integrity_check` would add at several times the cost).
pub(super) fn verify(conn: &Connection, path: &str) -> Result<(), StoreError> {
    let err = |source| classify(path, source);
    let mut stmt = conn.prepare("PRAGMA quick_check").map_err(err)?;
    let problems = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    if problems == ["ok"] {
        return Ok(());
    }
    let shown: Vec<String> = problems.iter().take(5).cloned().collect();
    Err(StoreError::Corrupt {
        path: path.to_owned(),
        problem: format!(
            "its integrity check found {} problem(s): {}",
            problems.len(),
            shown.join("; ")
        ),
    })
}

/// Writes one row, so a database that cannot be written (a read-only volume, a full
/// disk) stops the hub at start instead of losing every write after it.
pub(super) fn writable(conn: &Connection, path: &str) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS opened (at TEXT NOT NULL);
         DELETE FROM opened;
         INSERT INTO opened (at) VALUES (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'));",
    )
    .map_err(|source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    })
}

/// Copies every WAL frame into the database file and truncates the WAL, so the state
/// lives in `fleetpulse.db` alone.
pub(super) fn checkpoint(conn: &Connection, path: &str) -> Result<(), StoreError> {
    let (busy, log, done) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
        .map_err(|source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        })?;
    if busy != 0 || done < log {
        return Err(StoreError::Checkpoint {
            path: path.to_owned(),
            problem: format!(
                "{done} of {log} WAL pages copied (busy: another connection holds the database)"
            ),
        });
    }
    Ok(())
}
