use serde_json::json;

use super::*;

#[test]
fn a_value_becomes_compact_text_without_managed_fields() {
    let object = CompactObject::from(json!({
        "kind": "Pod",
        "metadata": { "name": "web", "managedFields": [{ "manager": "kubectl" }] },
        "spec": { "replicas": 3, "ratio": 0.5, "big": 3.0 }
    }));
    assert_eq!(
        object.text(),
        r#"{"kind":"Pod","metadata":{"name":"web"},"spec":{"big":3.0,"ratio":0.5,"replicas":3}}"#
    );
    assert_eq!(object.to_value()["spec"]["big"], json!(3.0));
    assert!(object.is_object());
}

#[test]
fn identity_reads_the_identifying_fields_and_tolerates_odd_shapes() {
    let object = CompactObject::from(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "we\"b", "namespace": "team-a", "labels": { "a": "b" } }
    }));
    let id = object.identity();
    assert_eq!(
        (&*id.api_version, &*id.kind),
        ("v1", "Pod"),
        "read from the text"
    );
    assert_eq!(id.metadata.name.as_deref(), Some("we\"b"));
    assert_eq!(object.label(), "Pod team-a/we\"b");

    let odd = CompactObject::from(json!({ "kind": 3, "metadata": "none" }));
    assert_eq!(odd.label(), "object <unnamed>");
    let cluster_scoped =
        CompactObject::from(json!({ "kind": "Node", "metadata": { "name": "n1" } }));
    assert_eq!(cluster_scoped.label(), "Node n1");
    assert_eq!(
        CompactObject::from(json!([1, 2])).label(),
        "object <unnamed>"
    );
}

#[test]
fn depth_counts_nesting_and_ignores_brackets_in_strings() {
    let object = CompactObject::from(json!({ "a": { "b": [1, { "c": "{[\"{" }] } }));
    assert_eq!(object.depth(), 4);
    assert_eq!(CompactObject::from(json!("x")).depth(), 0);
}

/// An object nested deeper than a JSON parser's recursion limit.
fn nested(name: &str, depth: usize) -> CompactObject {
    let mut deep = json!("bottom");
    for _ in 0..depth {
        deep = json!({ "x": deep });
    }
    CompactObject::from(json!({
        "apiVersion": "example.com/v1", "kind": "Deep",
        "metadata": { "name": name, "namespace": "a" },
        "spec": deep
    }))
}

#[test]
fn identity_is_read_even_past_the_parsers_recursion_limit() {
    let (one, two) = (nested("one", 300), nested("two", 300));
    assert_eq!(one.identity().metadata.name.as_deref(), Some("one"));
    assert_ne!(one.identity(), two.identity());
    assert_eq!(two.label(), "Deep a/two");
}
