//! Benchmark of a Lua evaluation round over 2,000 Pod-like objects, ten checks counting
//! Ready Pods. Prints, from the same run, medians and minimums in milliseconds:
//!
//! - `agent`: the round the agent runs, through the code it runs it with ([`agent`]): the
//!   watch cache's store read, the checks planned as a shared round and evaluated on the
//!   Lua state the previous round kept, every Pod unchanged since (its text parsed and
//!   converted once, in the first round). Measured alternately with ten checks of the
//!   floor, so both see the machine at the same moments.
//! - `floor`: the same check over plain Lua tables converted beforehand, in a bare Lua 5.4
//!   state with the same deadline hook ([`floor`]): what Lua itself costs.
//! - `lazy` and `eager`: a round on a fresh state (every object new to it: the first
//!   round, or a round after every object changed), taking the objects in as compact JSON
//!   text and converting a table when a script first touches it (lazy) or every table at
//!   once (eager, the baseline), and the Lua memory it holds.
//! - `luajit`: the same round on LuaJIT with lua-cjson, decoding every Pod each round, when
//!   `luajit` is installed ([`luajit`]).
//!
//! The last line sums it up: `agent_round_ms=X floor_ms=Y ratio=X/Y`, and LuaJIT's round
//! beside it.
//!
//! Run with `cargo bench -p fleetpulse-common --bench lua_round`. With
//! `LUA_ROUND_PROFILE=agent` (or `floor`) it only runs that line's work, in
//! `profiled_rounds`, for `valgrind --tool=callgrind --toggle-collect='*profiled_rounds*'`.

mod agent;
mod floor;
mod luajit;
mod pods;

use std::time::{Duration, Instant};

use fleetpulse_common::compact::CompactObject;
use fleetpulse_common::lua::{Conversion, LuaRound, ObjectId};
use serde_json::Value;

use agent::{AgentRound, patient_limits};
use floor::Floor;
use pods::{READY_PODS, count_values, pod};

const OBJECTS: usize = 2000;
const CHECKS: usize = 10;
const REPEATS: usize = 7;
/// Pairs of an agent round and ten floor checks.
const PAIRS: usize = 21;

/// Takes the objects in as the agent's reader hands them: compact JSON text.
fn convert(round: &mut LuaRound, pods: Vec<CompactObject>) -> Vec<ObjectId> {
    pods.into_iter()
        .map(|p| round.add_compact(p).expect("pod converts"))
        .collect()
}

fn check(round: &LuaRound, ids: &[ObjectId], i: usize) {
    let outcome = round
        .evaluate(&format!("ready-pods-{i}"), READY_PODS, ids, &[])
        .expect("check runs");
    assert!(outcome.passing, "{}", outcome.message);
}

/// Runs `f` REPEATS times; returns (median, min) in ms.
fn measure(mut f: impl FnMut() -> Duration) -> (f64, f64) {
    median_min((0..REPEATS).map(|_| f().as_secs_f64() * 1000.0).collect())
}

/// (median, min) of `runs`.
fn median_min(mut runs: Vec<f64>) -> (f64, f64) {
    runs.sort_by(f64::total_cmp);
    (runs[runs.len() / 2], runs[0])
}

/// A fresh state's figures: (median, min) ms for taking the objects in, one check, and a
/// full round; and the Lua memory a full round holds, in KiB.
struct Figures {
    convert: (f64, f64),
    one_check: (f64, f64),
    round: (f64, f64),
    lua_kib: usize,
}

fn figures(pods: &[CompactObject], conversion: Conversion) -> Figures {
    let new_round = || LuaRound::with_conversion(patient_limits(), conversion).expect("round");
    let convert_ms = measure(|| {
        let mut round = new_round();
        let copies = pods.to_vec();
        let started = Instant::now();
        convert(&mut round, copies);
        started.elapsed()
    });
    let mut round = new_round();
    let ids = convert(&mut round, pods.to_vec());
    check(&round, &ids, 0);
    let one_check_ms = measure(|| {
        let started = Instant::now();
        check(&round, &ids, 0);
        started.elapsed()
    });
    let mut lua_kib = 0;
    let round_ms = measure(|| {
        let copies = pods.to_vec();
        let started = Instant::now();
        let mut round = new_round();
        let ids = convert(&mut round, copies);
        for i in 0..CHECKS {
            check(&round, &ids, i);
        }
        let took = started.elapsed();
        lua_kib = round.lua_memory() / 1024;
        took
    });
    Figures {
        convert: convert_ms,
        one_check: one_check_ms,
        round: round_ms,
        lua_kib,
    }
}

/// The agent's round and ten floor checks, measured alternately PAIRS times: (median,
/// min) ms of each, and the Lua memory the kept state holds, in KiB.
struct AgentAgainstFloor {
    agent: (f64, f64),
    floor: (f64, f64),
    lua_kib: usize,
}

fn agent_against_floor(agent: &mut AgentRound, floor: &Floor) -> AgentAgainstFloor {
    // The first round converts what the checks read; the second is the first like the
    // agent's steady state.
    agent.run();
    agent.run();
    let (mut rounds, mut floors) = (Vec::new(), Vec::new());
    for _ in 0..PAIRS {
        let started = Instant::now();
        agent.run();
        rounds.push(started.elapsed().as_secs_f64() * 1000.0);
        floors.push((0..CHECKS).map(|_| floor.check_ms()).sum());
    }
    AgentAgainstFloor {
        agent: median_min(rounds),
        floor: median_min(floors),
        lua_kib: agent.lua_memory() / 1024,
    }
}

/// The rounds callgrind counts: five agent rounds (after two), or five times ten floor
/// checks.
#[inline(never)]
fn profiled_rounds(agent: &mut AgentRound, floor: Option<&Floor>) {
    for _ in 0..5 {
        match floor {
            Some(floor) => (0..CHECKS).for_each(|_| floor.check()),
            None => agent.run(),
        }
    }
}

fn main() {
    let pods: Vec<Value> = (0..OBJECTS).map(pod).collect();
    let mut agent = AgentRound::new(&pods, CHECKS, patient_limits());
    let bare = Floor::new(&pods);
    if let Ok(line) = std::env::var("LUA_ROUND_PROFILE") {
        agent.run();
        agent.run();
        profiled_rounds(&mut agent, (line == "floor").then_some(&bare));
        println!("lua_round profiled {line}: 5 rounds");
        return;
    }
    let bytes: usize = pods.iter().map(|p| p.to_string().len()).sum();
    let values: usize = pods.iter().map(count_values).sum();
    let compact: Vec<CompactObject> = pods.iter().map(CompactObject::from).collect();
    let lazy = figures(&compact, Conversion::Lazy);
    let eager = figures(&compact, Conversion::Eager);
    let floor = median_min((0..REPEATS).map(|_| bare.check_ms()).collect());
    let paired = agent_against_floor(&mut agent, &bare);
    let luajit = luajit::measure(&pods, REPEATS, CHECKS);
    println!(
        "lua_round objects={OBJECTS} json_kib={} json_values={values} repeats={REPEATS} \
         pairs={PAIRS} checks={CHECKS} engine=lua54",
        bytes / 1024
    );
    println!(
        "  agent agent_round_ms={:.2} (min {:.2}) lua_kib={}: the agent's round (watch store \
         read, shared round planned, run on the state the last round kept, every Pod unchanged)",
        paired.agent.0, paired.agent.1, paired.lua_kib
    );
    println!(
        "  floor floor_ms={:.2} (min {:.2}): {CHECKS} checks over plain tables in a bare state \
         with the same hook, alternately with the agent's rounds; one check {:.2} (min {:.2})",
        paired.floor.0, paired.floor.1, floor.0, floor.1
    );
    for (name, f) in [("lazy", &lazy), ("eager", &eager)] {
        println!(
            "  {name:<5} convert_ms={:.2} (min {:.2}) one_check_ms={:.2} (min {:.2}) \
             round_{CHECKS}_checks_ms={:.2} (min {:.2}) lua_kib={}: a fresh state",
            f.convert.0, f.convert.1, f.one_check.0, f.one_check.1, f.round.0, f.round.1, f.lua_kib
        );
    }
    let ratio = paired.agent.0 / paired.floor.0;
    let against_luajit = match &luajit {
        Ok(j) => {
            println!(
                "  luajit luajit_round_ms={:.2} (min {:.2}) luajit_checks_ms={:.2} (min {:.2}): \
                 LuaJIT + cjson, every Pod decoded each round, JIT on, no hook",
                j.round.0, j.round.1, j.checks.0, j.checks.1
            );
            format!(
                " luajit_round_ms={:.2} vs_luajit={:.2}",
                j.round.0,
                paired.agent.0 / j.round.0
            )
        }
        Err(why) => {
            println!("  luajit: {why}");
            String::new()
        }
    };
    println!(
        "agent_round_ms={:.2} floor_ms={:.2} ratio={ratio:.2}{against_luajit}",
        paired.agent.0, paired.floor.0
    );
}
