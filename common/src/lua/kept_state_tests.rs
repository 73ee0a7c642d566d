//! A state kept from round to round ([`LuaRound::begin`]): an object taken in again as the
//! same text keeps what earlier rounds converted of it, no round sees what a check of
//! another changed, a new version of an object is read anew, and what a round does not
//! take in is let go of.

use serde_json::{Value, json};

use super::tests::{node, round};
use super::*;
use crate::compact::CompactObject;

const READS_READINESS: &str = r#"function evaluate()
  local ready = 0
  for _, n in ipairs(resources) do
    for _, c in ipairs(n.status.conditions) do
      if c.type == "Ready" and c.status == "True" then ready = ready + 1 end
    end
  end
  return { pass = true, message = ready .. "/" .. #resources }
end"#;

/// Changes every object it sees, at every level it reads, then reports what it read first.
const CHANGES_EVERYTHING: &str = r#"function evaluate()
  local first = resources[1].metadata.name .. " " .. resources[1].status.conditions[2].status
  for _, n in ipairs(resources) do
    n.metadata.name = "renamed"
    n.metadata.labels.added = "yes"
    n.status.conditions[2].status = "Changed"
    table.insert(n.status.conditions, { type = "Extra", status = "True" })
    n.status.capacity = nil
    setmetatable(n, { __index = function() return "meta" end })
  end
  resources[1] = nil
  return { pass = true, message = first }
end"#;

/// What the objects read as: names, labels, the Ready status, conditions and capacity.
const DESCRIBES: &str = r#"function evaluate()
  local out = {}
  for _, n in ipairs(resources) do
    out[#out + 1] = n.metadata.name .. ":" .. tostring(n.metadata.labels.added) .. ":" ..
      n.status.conditions[2].status .. ":" .. #n.status.conditions .. ":" ..
      tostring(n.status.capacity and n.status.capacity.cpu) .. ":" .. tostring(n.nothing)
  end
  return { pass = true, message = table.concat(out, ",") }
end"#;

fn compact(objects: &[Value]) -> Vec<CompactObject> {
    objects.iter().cloned().map(CompactObject::from).collect()
}

/// Begins the next round on `state`, takes in clones of `objects`, lets go of the rest.
fn next_round(state: &mut LuaRound, objects: &[CompactObject]) -> Vec<ObjectId> {
    state.begin(LuaLimits::default());
    let ids = objects
        .iter()
        .map(|o| state.add_compact(o.clone()).expect("object taken in"))
        .collect();
    state.release_untaken().expect("release");
    ids
}

fn message(state: &LuaRound, script: &str, ids: &[ObjectId]) -> String {
    state
        .evaluate("check", script, ids, &[])
        .expect("check runs")
        .message
}

#[test]
fn an_unchanged_object_is_converted_once_over_many_rounds() {
    let nodes = compact(&[node("a", true, false), node("b", false, false)]);
    let mut state = round();
    let ids = next_round(&mut state, &nodes);
    assert_eq!(message(&state, READS_READINESS, &ids), "1/2");
    let converted = state.converted_nodes();
    assert!(converted >= 2, "the first round converts what it reads");
    for _ in 0..5 {
        let ids = next_round(&mut state, &nodes);
        assert_eq!(message(&state, READS_READINESS, &ids), "1/2");
    }
    assert_eq!(
        state.converted_nodes(),
        converted,
        "later rounds convert nothing"
    );
    assert_eq!(state.held_objects(), 2);
}

#[test]
fn no_later_check_or_round_sees_what_a_check_changed_in_a_kept_object() {
    let nodes = compact(&[node("a", true, false), node("b", false, false)]);
    let mut state = round();
    let ids = next_round(&mut state, &nodes);
    let pristine = "a:nil:True:2:4:nil,b:nil:False:2:4:nil";
    assert_eq!(message(&state, DESCRIBES, &ids), pristine);
    assert_eq!(message(&state, CHANGES_EVERYTHING, &ids), "a True");
    assert_eq!(message(&state, DESCRIBES, &ids), pristine, "the next check");
    for _ in 0..3 {
        let ids = next_round(&mut state, &nodes);
        assert_eq!(message(&state, DESCRIBES, &ids), pristine, "the next round");
        assert_eq!(message(&state, CHANGES_EVERYTHING, &ids), "a True");
    }
    let ids = next_round(&mut state, &nodes);
    assert_eq!(message(&state, DESCRIBES, &ids), pristine);
}

#[test]
fn a_new_version_of_an_object_is_read_anew_and_the_old_one_let_go_of() {
    let first = compact(&[node("a", true, false), node("b", true, false)]);
    let mut state = round();
    let ids = next_round(&mut state, &first);
    assert_eq!(message(&state, READS_READINESS, &ids), "2/2");
    // b changed: the watch hands out new text for it; a is the same text.
    let second = vec![
        first[0].clone(),
        compact(&[node("b", false, false)]).remove(0),
    ];
    let ids = next_round(&mut state, &second);
    assert_eq!(message(&state, READS_READINESS, &ids), "1/2");
    assert_eq!(state.held_objects(), 2, "the old version of b is let go of");
    // Equal text that is not the same text is a new object to the state: nothing is
    // reused by content, so no stale table can be read for it.
    let copies = compact(&[node("a", true, false), node("b", false, false)]);
    let before = state.converted_nodes();
    let ids = next_round(&mut state, &copies);
    assert_eq!(message(&state, READS_READINESS, &ids), "1/2");
    assert!(state.converted_nodes() > before);
    assert_eq!(state.held_objects(), 2);
}

#[test]
fn objects_a_round_does_not_take_in_are_let_go_of_and_their_memory_freed() {
    let many: Vec<Value> = (0..300)
        .map(|i| node(&format!("n{i}"), true, false))
        .collect();
    let many = compact(&many);
    let mut state = round();
    let ids = next_round(&mut state, &many);
    assert_eq!(message(&state, READS_READINESS, &ids), "300/300");
    assert_eq!(message(&state, DESCRIBES, &ids[..1]), "n0:nil:True:2:4:nil");
    let holding = state.used_memory();
    let ids = next_round(&mut state, &many[..1]);
    assert_eq!(state.held_objects(), 1);
    assert_eq!(message(&state, READS_READINESS, &ids), "1/1");
    state.collect_garbage();
    state.collect_garbage();
    let after = state.used_memory();
    assert!(
        after < holding / 2,
        "the tables of 299 objects let go of are freed: {holding} bytes before, {after} after"
    );
}

#[test]
fn a_previous_rounds_handles_are_refused_after_the_next_begins() {
    let nodes = compact(&[node("a", true, false)]);
    let mut state = round();
    let old = next_round(&mut state, &nodes);
    let new = next_round(&mut state, &nodes);
    assert_eq!(message(&state, READS_READINESS, &new), "1/1");
    let refused = state.evaluate("check", READS_READINESS, &old, &[]);
    assert!(
        matches!(refused, Err(LuaError::UnknownObject { .. })),
        "{refused:?}"
    );
}

#[test]
fn the_same_text_taken_twice_in_a_round_is_one_object_listed_twice() {
    let a = compact(&[json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}})]);
    let mut state = round();
    state.begin(LuaLimits::default());
    let first = state.add_compact(a[0].clone()).expect("taken in");
    let second = state.add_compact(a[0].clone()).expect("taken in");
    state.release_untaken().expect("release");
    let script = r#"function evaluate()
      resources[1].data.k = "changed"
      return { pass = true, message = resources[2].data.k .. " " .. #resources }
    end"#;
    assert_eq!(message(&state, script, &[first, second]), "changed 2");
    assert_eq!(state.held_objects(), 1);
}
