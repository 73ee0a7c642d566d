//! One Event store behind both Event APIs, as in Kubernetes: Events are stored in the core
//! `v1` shape, and `events.k8s.io/v1` requests are converted on the way in and out, so an
//! Event created through one API is read, watched, patched and deleted through the other.

use crate::resources::ResourceDef;
use serde_json::{Map, Value};

/// Fields that differ between the shapes: (core `v1`, `events.k8s.io/v1`). Every other
/// field (`metadata`, `reason`, `type`, `action`, `eventTime`, `series`, `related`,
/// `reportingInstance`) has one name in both.
const RENAMED: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

fn rename(obj: Value, from_core: bool, api_version: &str) -> Value {
    let Value::Object(fields) = obj else {
        return obj;
    };
    let mut out = Map::with_capacity(fields.len());
    for (key, value) in fields {
        let renamed = RENAMED.iter().find_map(|(core, v1)| {
            let (from, to) = if from_core { (core, v1) } else { (v1, core) };
            (key == *from).then_some(*to)
        });
        out.insert(renamed.map_or(key, str::to_owned), value);
    }
    out.insert("apiVersion".into(), api_version.into());
    out.insert("kind".into(), "Event".into());
    Value::Object(out)
}

/// An object as the API of `def` shows it: stored core Events become `events.k8s.io/v1`
/// Events for that API; everything else is unchanged.
pub fn to_view(def: &ResourceDef, obj: Value) -> Value {
    if def.is_events_v1() {
        rename(obj, true, "events.k8s.io/v1")
    } else {
        obj
    }
}

/// An object sent to the API of `def` in the shape it is stored in.
pub fn from_view(def: &ResourceDef, obj: Value) -> Value {
    if def.is_events_v1() {
        rename(obj, false, "v1")
    } else {
        obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_v1_fields_map_to_core_and_back() {
        let def = crate::resources::builtins()
            .into_iter()
            .find(ResourceDef::is_events_v1)
            .unwrap();
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e"}, "regarding": {"name": "x"}, "note": "n",
            "reportingController": "c", "deprecatedCount": 2, "reason": "R"});
        let core = from_view(&def, v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "x");
        assert_eq!(core["message"], "n");
        assert_eq!(core["reportingComponent"], "c");
        assert_eq!(core["count"], 2);
        assert_eq!(core["reason"], "R");
        assert!(core.get("note").is_none());
        assert_eq!(to_view(&def, core), v1);
    }
}
