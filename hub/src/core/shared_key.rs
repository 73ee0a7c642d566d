//! Two running agents with one key: each report of the one behind is refused as stale,
//! so it restarts its sequence *just above* the hub's last accepted position
//! (incarnation + 1, seq 1), gets ahead, and the other does the same: they leapfrog,
//! and both keep being accepted. One agent does that at most once (a clock set back); an
//! agent that really restarts takes a new, time-based incarnation far above.
//!
//! [`SharedKey`] remembers, for a cluster's last [`WINDOW`] accepted reports, which were
//! such a restart; two or more within the window mean the key is shared. Pure: it sees
//! only positions.

use fleetpulse_common::protocol::replay::Position;

/// Accepted reports remembered.
pub const WINDOW: u32 = 64;
/// Restarts just above the hub's position within [`WINDOW`] that mean a shared key.
pub const RESTARTS: u32 = 2;

/// The recent restarts of one cluster's reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharedKey {
    /// Bit `i`: the `i`-th last accepted report restarted just above the hub's position.
    recent: u64,
}

impl SharedKey {
    /// Records an accepted report at `pos` after `last` (the key's previous accepted
    /// position); returns whether the key now looks shared.
    pub fn accepted(&mut self, last: Option<Position>, pos: Position) -> bool {
        let above = last.is_some_and(|l| pos.incarnation == l.incarnation + 1 && pos.seq == 1);
        self.recent = (self.recent << 1) | u64::from(above);
        self.shared()
    }

    /// Whether two agents seem to sign with the cluster's key.
    pub fn shared(&self) -> bool {
        self.recent.count_ones() >= RESTARTS
    }

    /// How many restarts just above the hub's position are remembered.
    pub fn restarts(&self) -> u32 {
        self.recent.count_ones()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(incarnation: u64, seq: u64) -> Position {
        Position { incarnation, seq }
    }

    /// Feeds accepted positions in order; returns the verdict after each.
    fn verdicts(positions: &[Position]) -> Vec<bool> {
        let mut s = SharedKey::default();
        let mut last = None;
        positions
            .iter()
            .map(|&p| {
                let v = s.accepted(last, p);
                last = Some(p);
                v
            })
            .collect()
    }

    #[test]
    fn two_agents_leapfrogging_are_seen_at_the_second_restart() {
        // A at 100, then B restarts above it, then A above B.
        let v = verdicts(&[at(100, 1), at(100, 2), at(101, 1), at(101, 2), at(102, 1)]);
        assert_eq!(v, [false, false, false, false, true]);
    }

    #[test]
    fn one_agent_restarting_or_once_set_back_is_not_a_shared_key() {
        // Restarts take a time-based incarnation far above; a clock set back restarts
        // just above once.
        let v = verdicts(&[
            at(100, 1),
            at(100, 2),
            at(9_000, 1),
            at(9_000, 2),
            at(9_001, 1),
        ]);
        assert!(v.iter().all(|s| !s), "{v:?}");
    }

    #[test]
    fn the_suspicion_ends_once_the_restarts_leave_the_window() {
        let mut s = SharedKey::default();
        s.accepted(Some(at(1, 5)), at(2, 1));
        s.accepted(Some(at(2, 1)), at(3, 1));
        assert!(s.shared());
        let mut last = at(3, 1);
        for seq in 2..(2 + u64::from(WINDOW) - 2) {
            let pos = at(3, seq);
            assert!(
                s.accepted(Some(last), pos),
                "still within the window at seq {seq}"
            );
            last = pos;
        }
        assert!(!s.accepted(Some(last), at(3, last.seq + 1)));
    }
}
