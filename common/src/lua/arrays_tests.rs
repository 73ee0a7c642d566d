//! The arrays a round hands scripts (`resources`, a `ctx` list) are kept from check to
//! check and round to round, yet every evaluation gets its own: what one script does to
//! its arrays no later check or round sees, and each list of objects reads in its own
//! order.

use serde_json::Value;

use super::tests::{node, round};
use super::*;
use crate::compact::CompactObject;

/// The names in `resources` and in `ctx.nodes`, then whether `resources.marker` is set.
const LISTS: &str = r#"function evaluate()
  local names, ctx_names = {}, {}
  for i, n in ipairs(resources) do names[i] = n.metadata.name end
  for i, n in ipairs(ctx.nodes) do ctx_names[i] = n.metadata.name end
  return { pass = true, message = table.concat(names, ",") .. " " .. table.concat(ctx_names, ",")
    .. " " .. tostring(resources.marker) }
end"#;

/// Empties, reorders and marks both arrays.
const CHANGES_THE_ARRAYS: &str = r#"function evaluate()
  table.sort(resources, function(a, b) return a.metadata.name > b.metadata.name end)
  table.remove(resources, 1)
  resources[#resources + 1] = "not an object"
  resources.marker = true
  ctx.nodes[1] = nil
  table.insert(ctx.nodes, 1, "added")
  return { pass = true, message = #resources .. " " .. #ctx.nodes }
end"#;

fn take(state: &mut LuaRound, objects: &[CompactObject]) -> Vec<ObjectId> {
    state.begin(LuaLimits::default());
    let ids = objects
        .iter()
        .map(|o| state.add_compact(o.clone()).expect("object taken in"))
        .collect();
    state.release_untaken().expect("release");
    ids
}

fn lists(state: &LuaRound, script: &str, resources: &[ObjectId], nodes: &[ObjectId]) -> String {
    let ctx = [("nodes".to_string(), CtxValue::Many(nodes.to_vec()))];
    state
        .evaluate("check", script, resources, &ctx)
        .expect("check runs")
        .message
}

fn nodes(names: &[&str]) -> Vec<CompactObject> {
    let values: Vec<Value> = names.iter().map(|n| node(n, true, false)).collect();
    values.into_iter().map(CompactObject::from).collect()
}

#[test]
fn what_a_script_does_to_its_arrays_no_later_check_or_round_sees() {
    let objects = nodes(&["a", "b", "c"]);
    let mut state = round();
    let ids = take(&mut state, &objects);
    assert_eq!(lists(&state, LISTS, &ids, &ids), "a,b,c a,b,c nil");
    assert_eq!(lists(&state, CHANGES_THE_ARRAYS, &ids, &ids), "3 4");
    assert_eq!(lists(&state, LISTS, &ids, &ids), "a,b,c a,b,c nil");
    let ids = take(&mut state, &objects);
    assert_eq!(lists(&state, CHANGES_THE_ARRAYS, &ids, &ids), "3 4");
    assert_eq!(lists(&state, LISTS, &ids, &ids), "a,b,c a,b,c nil");
}

#[test]
fn each_list_of_objects_reads_in_its_own_order_in_every_round() {
    let objects = nodes(&["a", "b", "c"]);
    let mut state = round();
    for _ in 0..3 {
        let ids = take(&mut state, &objects);
        let (a, b, c) = (ids[0], ids[1], ids[2]);
        assert_eq!(lists(&state, LISTS, &[a, b, c], &[c, a]), "a,b,c c,a nil");
        assert_eq!(lists(&state, LISTS, &[c, a], &[a, b, c]), "c,a a,b,c nil");
        assert_eq!(lists(&state, LISTS, &[b], &[]), "b  nil");
    }
}

#[test]
fn a_list_whose_objects_changed_lists_the_new_versions() {
    let mut state = round();
    let ids = take(&mut state, &nodes(&["a", "b"]));
    assert_eq!(lists(&state, LISTS, &ids, &ids), "a,b a,b nil");
    let ids = take(&mut state, &nodes(&["a", "x"]));
    assert_eq!(lists(&state, LISTS, &ids, &ids), "a,x a,x nil");
}
