//! Objects read from their JSON text a level at a time read as the JSON says: escaped and
//! non-ASCII strings, integers and floats, `null` as `nil` (holes in arrays), nesting
//! past the bulk size, and the same values through every conversion.

use serde_json::json;

use super::super::{Conversion, LuaLimits, LuaRound};

const READ_ALL: &str = r#"function evaluate()
  local o = resources[1]
  local big = o.spec.big
  local parts = {
    o.metadata.name, o.spec.text, tostring(o.spec.int), tostring(o.spec.float),
    tostring(o.spec.integral_float), tostring(o.spec.exp), tostring(o.spec.negative),
    tostring(o.spec.flag), tostring(o.spec.none), tostring(#o.spec.holes),
    tostring(o.spec.holes[2]), tostring(o.spec.holes[3]), o.spec.nested[1][1].deep,
    tostring(#big), big[#big].name, tostring(big[#big].values[3]),
  }
  return { pass = true, message = table.concat(parts, "|") }
end"#;

fn object() -> serde_json::Value {
    let big: Vec<_> = (0..40)
        .map(|i| json!({ "name": format!("element-{i}"), "values": [i, i + 1, i * 2], "pad": "x".repeat(40) }))
        .collect();
    json!({
        "kind": "Thing",
        "metadata": { "name": "naïve \"quoted\"\n\\ ✓" },
        "spec": {
            "text": "tab\there", "int": 42, "float": 0.25, "integral_float": 3.0, "exp": 1e3,
            "negative": -7, "flag": false, "none": null, "holes": [1, null, 3],
            "nested": [[{ "deep": "down" }]], "big": [{ "whole": big }, big[39].clone()]
        }
    })
}

#[test]
fn values_read_from_json_text_keep_their_strings_numbers_and_holes() {
    for conversion in [Conversion::Lazy, Conversion::Eager] {
        let mut round = LuaRound::with_conversion(LuaLimits::default(), conversion).unwrap();
        let id = round.add_object(object()).unwrap();
        let outcome = round.evaluate("read-all", READ_ALL, &[id], &[]).unwrap();
        assert_eq!(
            outcome.message,
            "naïve \"quoted\"\n\\ ✓|tab\there|42|0.25|3|1000|-7|false|nil|3|nil|3|down|2|element-39|78",
            "{conversion:?}"
        );
    }
}
