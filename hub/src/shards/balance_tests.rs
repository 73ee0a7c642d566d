//! The balancer's rules one by one, and a simulation of replicas applying their plans
//! round after round: they converge, stay put at balance, and a replica joining or
//! leaving moves only its share.

use super::*;

fn held(by: &[&str]) -> Vec<Option<Seen>> {
    by.iter().map(|h| Some(Seen::held(h))).collect()
}

#[test]
fn a_lone_replica_takes_every_shard() {
    let plan = plan("a", &vec![None; 8]);
    assert_eq!(plan.take, (0..8).collect::<Vec<_>>());
    assert!(plan.renew.is_empty() && plan.release.is_empty() && plan.request.is_none());
}

#[test]
fn at_balance_every_replica_renews_what_it_holds_and_nothing_moves() {
    let leases = held(&["a", "b", "c", "a", "b", "c", "a"]);
    for me in ["a", "b", "c"] {
        let plan = plan(me, &leases);
        assert!(
            plan.release.is_empty() && plan.take.is_empty(),
            "{me}: {plan:?}"
        );
        assert_eq!(plan.request, None, "{me}");
        let mine: Vec<u32> = (0..7)
            .filter(|&k| leases[k as usize] == Some(Seen::held(me)))
            .collect();
        assert_eq!(plan.renew, mine);
    }
}

#[test]
fn a_new_replica_asks_the_fullest_one_for_a_single_shard() {
    let leases = held(&["a", "a", "a", "a", "b", "b", "b", "b"]);
    let plan = plan("c", &leases);
    assert!(plan.take.is_empty());
    assert_eq!(
        plan.request,
        Some(0),
        "one shard of the first of the fullest"
    );
    let mut asked = leases.clone();
    asked[0] = Some(Seen::held("a").preferring("c"));
    assert_eq!(
        super::plan("c", &asked).request,
        None,
        "one request at a time"
    );
}

#[test]
fn a_replica_above_its_floor_gives_up_a_shard_it_is_asked_for_reserved_for_the_asker() {
    let mut leases = held(&["a", "a", "a", "a", "b", "b", "b", "b"]);
    leases[2] = Some(Seen::held("a").preferring("c"));
    let plan_a = plan("a", &leases);
    assert_eq!(plan_a.release, vec![2]);
    assert_eq!(plan_a.renew, vec![0, 1, 3]);
    // Released and reserved: only the asker takes it.
    leases[2] = Some(Seen {
        holder: None,
        preferred: Some("c".into()),
        live: true,
    });
    assert!(!plan("b", &leases).take.contains(&2));
    assert_eq!(plan("c", &leases).take, vec![2]);
}

#[test]
fn a_replica_at_its_floor_keeps_a_shard_it_is_asked_for() {
    // Five replicas, seven shards: a holds its floor of one.
    let mut leases = held(&["a", "b", "b", "c", "c", "d", "d"]);
    leases[0] = Some(Seen::held("a").preferring("e"));
    let plan = plan("a", &leases);
    assert!(plan.release.is_empty());
    assert_eq!(plan.renew, vec![0], "renewing clears the request");
}

#[test]
fn a_replica_above_its_ceiling_releases_its_highest_shard_one_a_round() {
    let leases = held(&["a", "a", "a", "a", "a", "b"]);
    let plan = plan("a", &leases);
    assert_eq!(plan.release, vec![4]);
    assert_eq!(plan.renew, vec![0, 1, 2, 3]);
}

#[test]
fn expired_shards_of_a_lost_replica_are_taken_up_to_the_ceiling() {
    let mut leases = held(&["a", "b", "c", "a", "b", "c"]);
    for k in [2, 5] {
        leases[k] = Some(Seen::held("c").expired());
    }
    let a = plan("a", &leases);
    assert_eq!(a.take.len(), 1, "a takes one to reach 3: {a:?}");
    let b = plan("b", &leases);
    assert_eq!(b.take.len(), 1, "b takes one to reach 3: {b:?}");
}

#[test]
fn a_lease_this_replica_still_holds_but_let_expire_is_renewed_not_taken() {
    let mut leases = held(&["a", "b"]);
    leases[0] = Some(Seen::held("a").expired());
    let plan = plan("a", &leases);
    assert_eq!(plan.renew, vec![0]);
    assert!(plan.take.is_empty());
}

/// Replicas applying their plans one after another on one set of Leases, as the API
/// server's optimistic concurrency would serialise them.
struct Sim {
    leases: Vec<Option<Seen>>,
    moves: usize,
}

impl Sim {
    fn new(shards: usize) -> Self {
        Sim {
            leases: vec![None; shards],
            moves: 0,
        }
    }

    fn round(&mut self, replicas: &[&str]) {
        for me in replicas {
            let plan = plan(me, &self.leases);
            for k in plan.release {
                let preferred = self.leases[k as usize]
                    .as_ref()
                    .and_then(|s| s.preferred.clone());
                self.leases[k as usize] = Some(Seen {
                    holder: None,
                    preferred: preferred.filter(|p| p.as_str() != *me),
                    live: true,
                });
            }
            for k in plan.renew {
                self.leases[k as usize] = Some(Seen::held(me));
            }
            for k in plan.take {
                self.moves += 1;
                self.leases[k as usize] = Some(Seen::held(me));
            }
            if let Some(k) = plan.request {
                let seen = self.leases[k as usize].take().unwrap();
                self.leases[k as usize] = Some(seen.preferring(me));
            }
        }
    }

    fn kill(&mut self, replica: &str) {
        for seen in self.leases.iter_mut().flatten() {
            if seen.holder.as_deref() == Some(replica) || seen.preferred.as_deref() == Some(replica)
            {
                seen.live = false;
            }
        }
    }

    fn counts(&self, replicas: &[&str]) -> Vec<usize> {
        (replicas.iter())
            .map(|r| {
                (self.leases.iter().flatten())
                    .filter(|s| s.holder.as_deref() == Some(r))
                    .count()
            })
            .collect()
    }

    fn balanced(&self, replicas: &[&str]) -> bool {
        let shards = self.leases.len();
        let (floor, ceil) = (shards / replicas.len(), shards.div_ceil(replicas.len()));
        let counts = self.counts(replicas);
        counts.iter().all(|&n| (floor..=ceil).contains(&n))
            && counts.iter().sum::<usize>() == shards
    }

    fn settle(&mut self, replicas: &[&str], rounds: usize) -> usize {
        for round in 1..=rounds {
            self.round(replicas);
            if self.balanced(replicas) {
                return round;
            }
        }
        panic!(
            "not balanced after {rounds} rounds: {:?}",
            self.counts(replicas)
        );
    }
}

#[test]
fn replicas_converge_stay_put_and_move_only_their_share_when_one_joins_or_leaves() {
    for shards in [1, 7, 16, 32, 61] {
        for n in 1..=5 {
            let all = ["r0", "r1", "r2", "r3", "r4"];
            let replicas = &all[..n];
            let mut sim = Sim::new(shards);
            sim.settle(replicas, 4 * shards + 4);
            let before = sim.leases.clone();
            let moves = sim.moves;
            sim.round(replicas);
            assert_eq!(
                sim.leases, before,
                "{shards} shards, {n} replicas: nothing moves at balance"
            );
            assert_eq!(sim.moves, moves);

            // One joins: it gets its share, and no more shards move than it gets.
            let joined = &all[..(n + 1).min(5)];
            if joined.len() > n {
                let moves = sim.moves;
                sim.settle(joined, 4 * shards + 4);
                let got = sim.counts(joined)[n];
                assert_eq!(
                    sim.moves - moves,
                    got,
                    "{shards} shards, {n}+1: only the newcomer's share moved"
                );
            }
            // One is lost: its shards move, and only those.
            let lost = *joined.last().unwrap();
            let had = sim.counts(joined)[joined.len() - 1];
            sim.kill(lost);
            let left = &joined[..joined.len() - 1];
            if !left.is_empty() {
                let moves = sim.moves;
                sim.settle(left, 4 * shards + 4);
                assert_eq!(
                    sim.moves - moves,
                    had,
                    "{shards} shards: only the lost replica's shards moved"
                );
            }
        }
    }
}
