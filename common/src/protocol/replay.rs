//! The rules on what a signed request claims, as pure functions, one per rule: a request
//! is admitted only if it is addressed to this hub and to the cluster in the URL
//! ([`check_addressee`]), is fresh ([`check_fresh`]), and, for a heartbeat, its
//! `(incarnation, seq)` is above the last one accepted for its key ([`check_sequence`])
//! and, after a start that may have lost accepted positions, comes from an incarnation
//! above the hub's start ([`check_floor`]). Heartbeats and config requests share them
//! through [`Claims`].

use serde::{Deserialize, Serialize};

use super::errors::{ErrorBody, RejectCode};
use super::report::{ClusterId, ConfigRequest, HeartbeatReport};

/// A point in a key's report sequence, ordered by incarnation, then seq.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Position {
    /// Agent boot id.
    pub incarnation: u64,
    /// Sequence number within the incarnation.
    pub seq: u64,
}

/// How fresh a report must be. Clocks differ; this only bounds how long a captured report
/// could be replayed against a hub that lost its sequence state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freshness {
    /// Tolerated difference between agent and hub clocks, in seconds (default 120).
    pub max_clock_skew_secs: i64,
    /// Longest allowed `exp - iat`, in seconds (default 600).
    pub max_lifetime_secs: i64,
}

impl Default for Freshness {
    fn default() -> Self {
        Self {
            max_clock_skew_secs: 120,
            max_lifetime_secs: 600,
        }
    }
}

/// A request refused by these rules: the same body the hub answers with.
pub type Rejection = ErrorBody;

fn reject(code: RejectCode, message: String) -> Rejection {
    Rejection {
        code,
        message,
        last_accepted: None,
    }
}

/// What every signed agent request claims: whom it is addressed to, which cluster it is
/// about, and when it was issued and expires.
pub trait Claims {
    /// The hub's identity the request is addressed to.
    fn aud(&self) -> &str;
    /// The cluster the request is about.
    fn cluster(&self) -> &ClusterId;
    /// Issued at, seconds since the epoch.
    fn iat(&self) -> i64;
    /// Expires at, seconds since the epoch.
    fn exp(&self) -> i64;
    /// What the request is, for messages (`report`, `request`).
    const WHAT: &'static str;
}

/// Both signed agent requests carry the claims under the same field names (a report
/// however its check results are held).
macro_rules! claims_of {
    ($type:ty, $what:literal $(, $generic:ident)?) => {
        impl$(<$generic>)? Claims for $type {
            fn aud(&self) -> &str {
                &self.aud
            }
            fn cluster(&self) -> &ClusterId {
                &self.cluster
            }
            fn iat(&self) -> i64 {
                self.iat
            }
            fn exp(&self) -> i64 {
                self.exp
            }
            const WHAT: &'static str = $what;
        }
    };
}

claims_of!(HeartbeatReport<C>, "report", C);
claims_of!(ConfigRequest, "request");

/// Admits `report` for `cluster` on the hub named `audience` at `now_unix` (hub clock),
/// given the `last` accepted position for the signing key: [`check_addressee`], then
/// [`check_fresh`], then [`check_sequence`]. Returns the position to record.
pub fn admit(
    report: &HeartbeatReport,
    audience: &str,
    cluster: &ClusterId,
    last: Option<Position>,
    now_unix: i64,
    freshness: Freshness,
) -> Result<Position, Rejection> {
    check_addressee(report, audience, cluster)?;
    check_fresh(report.iat, report.exp, now_unix, freshness)?;
    check_sequence(
        Position {
            incarnation: report.incarnation,
            seq: report.seq,
        },
        last,
    )
}

/// The audience rule: a request must be addressed to this hub (`aud`) and be about the
/// cluster in its URL.
pub fn check_addressee<C: Claims>(
    claims: &C,
    audience: &str,
    cluster: &ClusterId,
) -> Result<(), Rejection> {
    let what = C::WHAT;
    if claims.aud() != audience {
        return Err(reject(
            RejectCode::WrongAudience,
            format!(
                "{what} is addressed to hub {:?}, this hub is {audience:?}; set the agent's \
                 --audience to this hub's",
                claims.aud()
            ),
        ));
    }
    if claims.cluster() != cluster {
        return Err(reject(
            RejectCode::ClusterMismatch,
            format!(
                "{what} is about {} but was sent for {cluster}",
                claims.cluster()
            ),
        ));
    }
    Ok(())
}

/// The replay rule: `pos` must be above the `last` position accepted for the same key.
pub fn check_sequence(pos: Position, last: Option<Position>) -> Result<Position, Rejection> {
    match last {
        Some(last) if pos == last => Err(Rejection {
            code: RejectCode::Replayed,
            message: format!(
                "report (incarnation {}, seq {}) was already accepted",
                pos.incarnation, pos.seq
            ),
            last_accepted: Some(last),
        }),
        Some(last) if pos < last => Err(Rejection {
            code: RejectCode::StaleSequence,
            message: format!(
                "report (incarnation {}, seq {}) is older than the last accepted (incarnation \
                 {}, seq {}); an agent restarts with a higher incarnation",
                pos.incarnation, pos.seq, last.incarnation, last.seq
            ),
            last_accepted: Some(last),
        }),
        _ => Ok(pos),
    }
}

/// The restart rule: after a start that may have lost positions it had accepted (a crash,
/// or a store that keeps none), the hub accepts only incarnations above `floor`, its start
/// in milliseconds since the epoch. Every report captured before the start is then refused,
/// whatever position was lost; an agent running since before it restarts its sequence
/// above the floor once, as after any `stale_sequence`.
pub fn check_floor(pos: Position, floor: Option<u64>) -> Result<(), Rejection> {
    match floor {
        Some(floor) if pos.incarnation <= floor => Err(Rejection {
            code: RejectCode::StaleSequence,
            message: format!(
                "report (incarnation {}, seq {}) is from an agent incarnation older than this \
                 hub's start ({floor}), which may have lost the positions it had accepted; an \
                 agent restarts with a higher incarnation",
                pos.incarnation, pos.seq
            ),
            last_accepted: Some(Position {
                incarnation: floor,
                seq: 0,
            }),
        }),
        _ => Ok(()),
    }
}

/// The freshness rule on `iat`/`exp` at `now_unix` (hub clock).
pub fn check_fresh(iat: i64, exp: i64, now_unix: i64, f: Freshness) -> Result<(), Rejection> {
    let expired = |why: String| reject(RejectCode::ReportExpired, why);
    // `iat` and `exp` are whatever the agent signed: compute in i128 so that extreme values
    // cannot overflow (a panic in debug builds, a wrapped and accepted window in release).
    let (iat, exp, now_unix) = (i128::from(iat), i128::from(exp), i128::from(now_unix));
    let (skew, lifetime) = (
        i128::from(f.max_clock_skew_secs),
        i128::from(f.max_lifetime_secs),
    );
    if exp <= iat || exp - iat > lifetime {
        return Err(expired(format!(
            "exp - iat = {}s must be between 1 and {}s",
            exp - iat,
            f.max_lifetime_secs
        )));
    }
    if iat > now_unix + skew {
        return Err(expired(format!(
            "issued {}s in the future by the hub's clock (tolerance {}s); fix the agent's clock",
            iat - now_unix,
            f.max_clock_skew_secs
        )));
    }
    if exp < now_unix - skew {
        return Err(expired(format!(
            "expired {}s ago by the hub's clock (tolerance {}s); fix the agent's clock",
            now_unix - exp,
            f.max_clock_skew_secs
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn at(incarnation: u64, seq: u64) -> Position {
        Position { incarnation, seq }
    }

    #[test]
    fn the_sequence_must_rise_above_the_last_accepted_position() {
        assert_eq!(check_sequence(at(5, 1), None), Ok(at(5, 1)));
        assert_eq!(check_sequence(at(5, 2), Some(at(5, 1))), Ok(at(5, 2)));
        assert_eq!(check_sequence(at(6, 1), Some(at(5, 9))), Ok(at(6, 1)));
        let replayed = check_sequence(at(5, 1), Some(at(5, 1))).unwrap_err();
        assert_eq!(
            (replayed.code, replayed.last_accepted),
            (RejectCode::Replayed, Some(at(5, 1)))
        );
        let stale = check_sequence(at(4, 99), Some(at(5, 1))).unwrap_err();
        assert_eq!(
            (stale.code, stale.last_accepted),
            (RejectCode::StaleSequence, Some(at(5, 1)))
        );
    }

    #[test]
    fn after_a_start_that_may_have_lost_positions_only_later_incarnations_are_accepted() {
        assert_eq!(check_floor(at(1, 1), None), Ok(()));
        assert_eq!(check_floor(at(1_001, 1), Some(1_000)), Ok(()));
        for pos in [at(1_000, 1), at(999, u64::MAX), at(0, 1)] {
            let refused = check_floor(pos, Some(1_000)).unwrap_err();
            assert_eq!(refused.code, RejectCode::StaleSequence, "{pos:?}");
            // The agent restarts one above the position it is given: above the floor.
            assert_eq!(refused.last_accepted, Some(at(1_000, 0)));
            assert!(refused.message.contains("older than this hub's start"));
        }
    }
}
