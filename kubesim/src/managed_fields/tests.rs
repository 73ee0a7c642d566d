use super::*;

fn writer(manager: &str, force: bool) -> Writer {
    Writer {
        manager: manager.to_owned(),
        force,
    }
}

fn object(labels: Value) -> Value {
    json!({"metadata": {"name": "a", "labels": labels}})
}

fn apply(current: &Value, labels: Value, manager: &str, force: bool) -> Result<Value, ApiError> {
    let applied = labels.as_object().cloned().unwrap();
    apply_labels(current, &applied, &writer(manager, force), "r", "a")
}

fn created_by(manager: &str, labels: Value) -> Value {
    let mut created = object(labels);
    record_update(&Value::Null, &mut created, &writer(manager, false));
    created
}

#[test]
fn applying_without_a_label_the_manager_owned_removes_it_and_keeps_the_others() {
    let created = created_by("kubectl", json!({"team": "a"}));
    let first = apply(&created, json!({"x": "1", "y": "1"}), "hub", false).unwrap();
    assert_eq!(
        first["metadata"]["labels"],
        json!({"team": "a", "x": "1", "y": "1"})
    );
    let second = apply(&first, json!({"x": "2"}), "hub", false).unwrap();
    assert_eq!(second["metadata"]["labels"], json!({"team": "a", "x": "2"}));
    let managers: Vec<&str> = second["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers, ["kubectl", "hub"]);
}

#[test]
fn changing_a_label_another_manager_owns_is_a_conflict_unless_forced() {
    let created = created_by("kubectl", json!({"x": "theirs"}));
    let err = apply(&created, json!({"x": "mine"}), "hub", false).unwrap_err();
    assert_eq!((err.code, err.reason), (409, "Conflict"));
    assert!(
        err.message.contains("kubectl") && err.message.contains("labels.x"),
        "{}",
        err.message
    );
    let forced = apply(&created, json!({"x": "mine"}), "hub", true).unwrap();
    assert_eq!(forced["metadata"]["labels"]["x"], "mine");
    let fields = forced["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(
        fields.len(),
        1,
        "kubectl's only label was taken over: {fields:?}"
    );
    let dropped = apply(&forced, json!({}), "hub", false).unwrap();
    assert!(dropped["metadata"]["labels"].is_null(), "{dropped}");
}

#[test]
fn a_label_shared_with_another_owner_survives_the_apply_that_drops_it() {
    let created = created_by("kubectl", json!({"x": "1"}));
    let shared = apply(&created, json!({"x": "1"}), "hub", false).unwrap();
    let dropped = apply(&shared, json!({}), "hub", false).unwrap();
    assert_eq!(dropped["metadata"]["labels"], json!({"x": "1"}));
}

#[test]
fn an_update_that_removes_a_label_disowns_it_and_an_unchanged_write_changes_nothing() {
    let first = apply(&object(json!({})), json!({"x": "1"}), "hub", false).unwrap();
    let mut same = first.clone();
    record_update(&first, &mut same, &writer("kubectl", false));
    assert_eq!(same, first);
    let mut removed = first.clone();
    removed["metadata"]["labels"] = json!({});
    record_update(&first, &mut removed, &writer("kubectl", false));
    assert!(removed["metadata"]["managedFields"].is_null(), "{removed}");
    let again = apply(&removed, json!({"x": "1"}), "hub", false).unwrap();
    assert_eq!(again["metadata"]["labels"], json!({"x": "1"}));
}
