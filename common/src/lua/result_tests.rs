//! Results and errors of [`LuaRound::evaluate`]: what a script must return, and how
//! syntax and runtime errors read.

use super::tests::round;
use super::*;

#[test]
fn a_result_without_a_verdict_is_an_error() {
    let r = round();
    let cases = [
        ("return { message = \"hi\" }", "neither"),
        ("return nil", "returned nil"),
        ("return true", "returned a boolean"),
        ("return { pass = \"true\" }", "`pass` is a string"),
        ("return { healthy = 1 }", "`healthy` is a number"),
        (
            "return { pass = true, message = {} }",
            "`message` is a table",
        ),
    ];
    for (body, detail) in cases {
        let script = format!("function evaluate() {body} end");
        let err = r.evaluate("verdict", &script, &[], &[]).unwrap_err();
        assert!(matches!(err, LuaError::BadResult { .. }), "{body}: {err}");
        let text = err.to_string();
        assert!(
            text.contains("check `verdict`") && text.contains("boolean `pass` or `healthy`"),
            "{text}"
        );
        assert!(text.contains(detail), "{body}: {text}");
    }
}

#[test]
fn pass_and_healthy_that_disagree_are_an_error_and_agreeing_ones_are_fine() {
    let r = round();
    let err = r.evaluate(
        "both",
        "function evaluate() return { pass = true, healthy = false } end",
        &[],
        &[],
    );
    assert!(matches!(
        err,
        Err(LuaError::Contradiction {
            pass: true,
            healthy: false,
            ..
        })
    ));
    let ok = r.evaluate(
        "both",
        "function evaluate() return { pass = false, healthy = false } end",
        &[],
        &[],
    );
    assert!(!ok.unwrap().passing);
}

#[test]
fn a_script_without_evaluate_is_an_error() {
    let r = round();
    let err = r
        .evaluate(
            "none",
            "local function evaluate() return { pass = true } end",
            &[],
            &[],
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("script does not define function evaluate()"),
        "{err}"
    );
}

#[test]
fn a_syntax_error_names_the_line() {
    let r = round();
    let err = r
        .evaluate(
            "syntax",
            "function evaluate()\n  local x = \n  return { pass = true }\nend",
            &[],
            &[],
        )
        .unwrap_err();
    let LuaError::Syntax { message, .. } = &err else {
        panic!("{err}")
    };
    assert!(message.contains("condition:3"), "{message}");
    assert!(
        err.to_string().starts_with("check `syntax`: syntax error"),
        "{err}"
    );
}

#[test]
fn a_runtime_error_carries_the_lua_message_and_line() {
    let r = round();
    let script = "function evaluate()\n  local n = nil\n  return { pass = n.field }\nend";
    let err = r.evaluate("runtime", script, &[], &[]).unwrap_err();
    let LuaError::Runtime { message, .. } = &err else {
        panic!("{err}")
    };
    assert!(
        message.contains("condition:3") && message.contains("attempt to index a nil value"),
        "{message}"
    );
    let err = r
        .evaluate(
            "runtime",
            "function evaluate() error(\"no metric yet\") end",
            &[],
            &[],
        )
        .unwrap_err();
    assert!(err.to_string().contains("no metric yet"), "{err}");
    assert!(!err.to_string().contains("stack traceback"), "{err}");
}

#[test]
fn a_long_message_is_truncated_at_a_char_boundary() {
    let r = round();
    let script =
        r#"function evaluate() return { pass = true, message = string.rep("é", 100000) } end"#;
    let outcome = r.evaluate("long", script, &[], &[]).unwrap();
    assert!(outcome.message.len() <= LuaLimits::default().max_message_bytes);
    assert!(outcome.message.ends_with('…'));
}
