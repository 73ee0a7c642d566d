//! One check cannot spoil another: a source too large to compile is refused before it is
//! parsed, compiling counts against the evaluation's limits, an object nested too deeply
//! fails only the scripts that reach past the limit, and every evaluation has its own
//! random sequence.

use std::time::Duration;

use serde_json::{Value, json};

use super::convert::MAX_DEPTH;
use super::tests::{assert_round_still_works, node, round};
use super::*;

/// A condition of exactly `bytes` bytes (at least 70): a passing check padded with a
/// comment.
fn padded_condition(bytes: usize) -> String {
    let body = "function evaluate() return { pass = true, message = \"compiled\" } end\n";
    let padding = bytes.saturating_sub(body.len() + "--\n".len());
    format!("{body}--{}\n", "x".repeat(padding))
}

#[test]
fn an_oversize_source_is_refused_before_it_is_parsed_naming_the_limit() {
    let round = round();
    let ten_mb = padded_condition(10 * 1024 * 1024);
    let err = round.evaluate("huge", &ten_mb, &[], &[]).unwrap_err();
    assert!(matches!(err, LuaError::TooLarge { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.starts_with("check `huge`: its Lua source is "),
        "{message}"
    );
    assert!(message.contains("over the 64 KiB limit"), "{message}");
    assert_round_still_works(&round);
    // The same refusal when a manifest is loaded.
    let err = compile_check("huge", &ten_mb).unwrap_err();
    assert!(matches!(err, LuaError::TooLarge { .. }), "{err}");
    // At the limit it compiles and runs.
    let at_limit = padded_condition(MAX_SCRIPT_BYTES);
    assert_eq!(at_limit.len(), MAX_SCRIPT_BYTES);
    compile_check("at-limit", &at_limit).expect("a source at the limit compiles");
    let outcome = round.evaluate("at-limit", &at_limit, &[], &[]).unwrap();
    assert_eq!(outcome.message, "compiled");
}

#[test]
fn compiling_counts_against_the_deadline() {
    // Parsing 60 KiB of table constructor takes milliseconds; the script itself then runs a
    // handful of instructions (the table is built in a function never called), fewer than
    // the hook's interval, so only the time spent compiling can exceed the deadline.
    let limits = LuaLimits {
        deadline: Duration::from_micros(200),
        ..LuaLimits::default()
    };
    let round = LuaRound::new(limits).unwrap();
    let items = "1, ".repeat(20_000);
    let script = format!(
        "local function unused() return {{ {items} }} end\nfunction evaluate() return {{ pass = true }} end"
    );
    assert!(script.len() < MAX_SCRIPT_BYTES);
    let err = round
        .evaluate("slow-to-compile", &script, &[], &[])
        .unwrap_err();
    assert!(matches!(err, LuaError::Deadline { .. }), "{err}");
}

#[test]
fn compiling_counts_against_the_memory_allowance() {
    let limits = LuaLimits {
        memory_bytes: 64 * 1024,
        ..LuaLimits::default()
    };
    let round = LuaRound::new(limits).unwrap();
    // Every distinct constant is kept by the compiled function: about 60 KiB of source
    // compile to several times as much.
    let constants: String = (0..6000).map(|i| format!("{i}.5,")).collect();
    let script =
        format!("local t = {{ {constants} }}\nfunction evaluate() return {{ pass = true }} end");
    assert!(script.len() < MAX_SCRIPT_BYTES);
    let err = round
        .evaluate("big-constants", &script, &[], &[])
        .unwrap_err();
    assert!(matches!(err, LuaError::Memory { .. }), "{err}");
    assert!(err.to_string().contains("64 KiB"), "{err}");
}

/// An object whose `spec` nests `levels` tables deep, with `value` at the bottom.
fn deep(name: &str, levels: usize) -> Value {
    let mut inner = json!({ "value": "bottom" });
    for _ in 0..levels {
        inner = json!({ "next": inner });
    }
    json!({ "apiVersion": "example.io/v1", "kind": "Deep",
            "metadata": { "name": name, "namespace": "ns" }, "spec": inner })
}

const WALK_TO_THE_BOTTOM: &str = r#"function evaluate()
  local t = resources[1].spec
  while t.next do t = t.next end
  return { pass = t.value == "bottom", message = "reached the bottom" }
end"#;

#[test]
fn a_deeply_nested_object_fails_only_the_scripts_that_reach_past_the_limit() {
    let mut round = round();
    let shallow = round.add_object(node("n1", true, false)).unwrap();
    let too_deep = round
        .add_object(deep("abyss", MAX_DEPTH + 10))
        .expect("a deep object is taken in");
    let fine = round.add_object(deep("fine", MAX_DEPTH - 3)).unwrap();

    let name =
        r#"function evaluate() return { pass = true, message = resources[1].metadata.name } end"#;
    let outcome = round
        .evaluate("reads-the-top", name, &[too_deep], &[])
        .unwrap();
    assert_eq!(outcome.message, "abyss");
    let outcome = round
        .evaluate("other-object", name, &[shallow], &[])
        .unwrap();
    assert_eq!(outcome.message, "n1");
    let outcome = round
        .evaluate("within-limit", WALK_TO_THE_BOTTOM, &[fine], &[])
        .unwrap();
    assert!(outcome.passing);

    let err = round
        .evaluate("walks-down", WALK_TO_THE_BOTTOM, &[too_deep], &[])
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("Deep ns/abyss is nested deeper than 64 levels"),
        "{message}"
    );
    assert_round_still_works(&round);
    let outcome = round.evaluate("after", name, &[shallow], &[]).unwrap();
    assert_eq!(outcome.message, "n1");
}

#[test]
fn a_deeply_nested_object_is_taken_in_by_eager_rounds_too() {
    let mut round = LuaRound::with_conversion(LuaLimits::default(), Conversion::Eager).unwrap();
    let too_deep = round.add_object(deep("abyss", MAX_DEPTH + 10)).unwrap();
    let err = round
        .evaluate("walks-down", WALK_TO_THE_BOTTOM, &[too_deep], &[])
        .unwrap_err();
    assert!(err.to_string().contains("nested deeper than 64"), "{err}");
}

fn random_message(round: &LuaRound, check: &str, prefix: &str) -> String {
    let script = format!(
        "function evaluate() {prefix} return {{ pass = true, message = tostring(math.random(1, 1 << 40)) }} end"
    );
    round.evaluate(check, &script, &[], &[]).unwrap().message
}

#[test]
fn a_check_seeding_the_random_generator_does_not_make_the_next_checks_numbers_predictable() {
    let round = round();
    // What a check would draw second after seeding 42, as a script could precompute it.
    let predicted = random_message(
        &round,
        "predict",
        "math.randomseed(42); math.random(1, 1 << 40);",
    );
    let first = random_message(&round, "seeder", "math.randomseed(42);");
    let next = random_message(&round, "victim", "");
    assert_ne!(
        next, predicted,
        "the next check's random number was predictable"
    );
    // Seeding is the check's own business: within it, the sequence is repeatable.
    assert_eq!(
        first,
        random_message(&round, "again", "math.randomseed(42);")
    );
    // And two checks that do not seed draw different numbers.
    assert_ne!(
        random_message(&round, "a", ""),
        random_message(&round, "b", "")
    );
}
