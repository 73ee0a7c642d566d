//! Sveltos' `evaluateCEL` filter: named CEL rules over the variable `resource` (the
//! object), evaluated in order; an object is kept when any rule yields `true`. As in
//! Sveltos, a rule that fails on an object (a missing field, a type mismatch) or yields a
//! non-boolean counts as `false` for that object; a rule that does not parse is an error
//! of the check, so a typo never silently selects nothing.

use cel::{Context, Program, Value};
use serde_json::Value as Json;

use crate::api::CelRule;

/// A rule does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("evaluateCEL rule {name:?} does not parse: {message}; fix the CEL expression")]
pub struct CelError {
    /// The rule's name.
    pub name: String,
    /// What the parser said.
    pub message: String,
}

/// The rules of one selector, parsed.
pub struct CelFilter {
    programs: Vec<Program>,
}

impl std::fmt::Debug for CelFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelFilter")
            .field("rules", &self.programs.len())
            .finish()
    }
}

/// Parses one rule (what the hub checks when it loads a manifest).
pub fn compile(rule: &CelRule) -> Result<(), CelError> {
    parse(rule).map(drop)
}

fn parse(rule: &CelRule) -> Result<Program, CelError> {
    Program::compile(&rule.rule).map_err(|e| CelError {
        name: rule.name.clone(),
        message: e.to_string(),
    })
}

impl CelFilter {
    /// Parses every rule; `None` when there are none (every object is kept).
    pub fn new(rules: &[CelRule]) -> Result<Option<Self>, CelError> {
        if rules.is_empty() {
            return Ok(None);
        }
        let programs = rules.iter().map(parse).collect::<Result<_, _>>()?;
        Ok(Some(CelFilter { programs }))
    }

    /// Whether any rule is true for `object`.
    pub fn keeps(&self, object: &Json) -> bool {
        let mut context = Context::default();
        if context.add_variable("resource", object).is_err() {
            return false;
        }
        self.programs
            .iter()
            .any(|p| matches!(p.execute(&context), Ok(Value::Bool(true))))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(name: &str, rule: &str) -> CelRule {
        CelRule {
            name: name.into(),
            rule: rule.into(),
        }
    }

    #[test]
    fn an_object_is_kept_when_any_rule_is_true() {
        let filter = CelFilter::new(&[
            rule("running", r#"resource.status.phase == "Running""#),
            rule("labelled", r#"resource.metadata.labels.tier == "db""#),
        ])
        .unwrap()
        .unwrap();
        let pod = |phase: &str, tier: &str| json!({"metadata": {"labels": {"tier": tier}}, "status": {"phase": phase}});
        assert!(filter.keeps(&pod("Running", "web")));
        assert!(filter.keeps(&pod("Pending", "db")));
        assert!(!filter.keeps(&pod("Pending", "web")));
    }

    #[test]
    fn a_rule_failing_on_an_object_counts_as_false_and_the_next_rule_decides() {
        let filter = CelFilter::new(&[
            rule("missing-field", "resource.status.replicas > 2"),
            rule("not-bool", "resource.metadata.name"),
            rule("name", r#"resource.metadata.name.startsWith("web-")"#),
        ])
        .unwrap()
        .unwrap();
        assert!(filter.keeps(&json!({"metadata": {"name": "web-1"}})));
        assert!(!filter.keeps(&json!({"metadata": {"name": "db-1"}})));
    }

    #[test]
    fn a_rule_that_does_not_parse_is_an_error_naming_it() {
        let e = CelFilter::new(&[rule("broken", "resource.status ==")]).unwrap_err();
        assert_eq!(e.name, "broken");
        assert!(e.to_string().contains("fix the CEL expression"), "{e}");
        assert!(CelFilter::new(&[]).unwrap().is_none());
    }
}
