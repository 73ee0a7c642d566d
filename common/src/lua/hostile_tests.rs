//! Hostile scripts: each fails its own evaluation quickly with a clear message, and the
//! round keeps working for the checks after it.

use std::time::{Duration, Instant};

use super::tests::{assert_round_still_works, node, round};
use super::*;

/// Slack on top of the deadline for a loop to be stopped. Measured: under 1 ms; the rest
/// absorbs a loaded CI machine.
const DEADLINE_SLACK: Duration = Duration::from_millis(400);

fn evaluate_body(round: &LuaRound, body: &str) -> Result<LuaOutcome, LuaError> {
    let script = format!("function evaluate()\n{body}\nreturn {{ pass = true }}\nend");
    round.evaluate("hostile", &script, &[], &[])
}

fn assert_deadline(round: &LuaRound, body: &str) {
    let started = Instant::now();
    let err = evaluate_body(round, body).unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, LuaError::Deadline { .. }), "{body}: {err}");
    assert_eq!(
        err.to_string(),
        "check `hostile`: evaluate() ran longer than the 250 ms deadline; simplify the script or raise spec.timeoutSeconds"
    );
    let deadline = LuaLimits::default().deadline;
    assert!(
        took >= deadline && took < deadline + DEADLINE_SLACK,
        "{body}: stopped after {took:?}"
    );
    assert_round_still_works(round);
}

fn assert_memory(round: &LuaRound, body: &str) {
    let err = evaluate_body(round, body).unwrap_err();
    assert!(matches!(err, LuaError::Memory { .. }), "{body}: {err}");
    assert!(
        err.to_string().contains("allocated more than 32 MiB"),
        "{err}"
    );
    assert_round_still_works(round);
}

#[test]
fn an_endless_loop_fails_at_the_deadline_and_the_round_keeps_working() {
    let r = round();
    assert_deadline(&r, "while true do end");
    assert_deadline(&r, "local i = 0 repeat i = i + 1 until false");
}

#[test]
fn endless_recursion_fails_with_stack_overflow_and_the_round_keeps_working() {
    let r = round();
    for body in [
        "local function f() return 1 + f() end f()",
        r#"local function f() return (string.gsub("a", "a", f)) end f()"#,
        "local t = setmetatable({}, { __index = function(t, k) return t[k] end }) local x = t.x",
    ] {
        // Lua 5.4 grows its stack on the heap: deep recursion meets the stack limit, the
        // memory allowance or (on a slow machine) the deadline first; whichever it is, the
        // script fails and the round goes on.
        let err = evaluate_body(&r, body).unwrap_err();
        assert!(
            err.to_string().contains("stack overflow")
                || matches!(err, LuaError::Memory { .. } | LuaError::Deadline { .. }),
            "{body}: {err}"
        );
        assert_round_still_works(&r);
    }
}

#[test]
fn catching_the_deadline_error_with_pcall_does_not_extend_the_deadline() {
    let r = round();
    assert_deadline(
        &r,
        "local function spin() while true do end end while true do pcall(spin) end",
    );
    assert_deadline(
        &r,
        "for i = 1, 1e12 do pcall(function() while true do end end) end",
    );
    assert_deadline(
        &r,
        "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
    );
}

#[test]
fn backtracking_patterns_fail_at_the_deadline() {
    let r = round();
    assert_deadline(
        &r,
        r#"local s = string.rep("a", 200000) while true do string.find(s, ".-.-.-.-.-b") end"#,
    );
}

#[test]
fn appending_one_interned_string_forever_fails_at_a_limit() {
    let r = round();
    // The same long string appended forever: it fails at whichever limit it reaches first
    // (the array grows, the string is shared).
    let err = evaluate_body(
        &r,
        r#"local t = {} while true do t[#t+1] = string.rep("x", 1e6) end"#,
    )
    .unwrap_err();
    assert!(
        matches!(err, LuaError::Memory { .. } | LuaError::Deadline { .. }),
        "{err}"
    );
    assert_round_still_works(&r);
}

#[test]
fn unbounded_allocation_fails_with_the_memory_message_and_memory_is_released() {
    // A deadline far away, so that a slow machine cannot turn a memory failure into a
    // deadline failure.
    let limits = LuaLimits {
        deadline: Duration::from_secs(20),
        ..LuaLimits::default()
    };
    let r = LuaRound::new(limits).unwrap();
    let before = r.used_memory();
    assert_memory(
        &r,
        r#"local t = {} while true do t[#t+1] = string.rep("x", 1e6) .. #t end"#,
    );
    assert_memory(&r, r#"local s = string.rep("x", 1e8)"#);
    assert_memory(&r, "local t = {} for i = 1, 1e9 do t[i] = i end");
    assert_memory(
        &r,
        r#"local parts = {} for i = 1, 1e7 do parts[i] = tostring(i) end local s = table.concat(parts)"#,
    );
    // pcall may catch an allocation failure, but gets no more memory: the next allocation
    // outside pcall fails, or the script spins until its deadline.
    let body = r#"local t = {} while true do pcall(function() t[#t+1] = string.rep("y", 1e6) .. #t end) end"#;
    let err = evaluate_body(&r, body).unwrap_err();
    assert!(
        matches!(err, LuaError::Memory { .. } | LuaError::Deadline { .. }),
        "{err}"
    );
    assert_round_still_works(&r);
    assert!(
        r.used_memory() < before + 4 * 1024 * 1024,
        "garbage left: {} -> {}",
        before,
        r.used_memory()
    );
}

#[test]
fn a_string_beyond_the_memory_allowance_fails_with_the_memory_message() {
    let r = round();
    for body in [
        r#"local s = string.rep("x", 1.5e9)"#,
        r#"local s = string.rep("x", 1e12)"#,
        r#"local s = ("x"):rep(1e7):rep(1e3)"#,
    ] {
        let err = evaluate_body(&r, body).unwrap_err();
        let too_large = err.to_string().contains("resulting string too large");
        assert!(
            matches!(err, LuaError::Memory { .. }) || too_large,
            "{body}: {err}"
        );
        assert_round_still_works(&r);
    }
}

#[test]
fn escapes_from_the_sandbox_fail_and_the_round_keeps_working() {
    let r = round();
    let attempts = [
        (r#"os.execute("id")"#, "`os.execute` is not available"),
        (r#"os.getenv("HOME")"#, "`os.getenv` is not available"),
        (r#"os.remove("/tmp/x")"#, "`os.remove` is not available"),
        (r#"io.open("/etc/passwd")"#, "`io.open` is not available"),
        (r#"io.popen("id")"#, "there is no `io` library"),
        (r#"load("return 1")"#, "`load` is not available"),
        (r#"loadstring("return 1")"#, "`loadstring` is not available"),
        (
            r#"loadstring(string.dump(function() end))"#,
            "attempt to call a nil value",
        ),
        (r#"dofile("/etc/passwd")"#, "`dofile` is not available"),
        ("getfenv(0)", "`getfenv` is not available"),
        ("setfenv(1, {})", "`setfenv` is not available"),
        ("debug.getinfo(1)", "`debug.getinfo` is not available"),
        (
            "package.loadlib('x', 'y')",
            "`package.loadlib` is not available",
        ),
        ("newproxy(true)", "`newproxy` is not available"),
        (
            "getmetatable(io).__index = nil",
            "attempt to index a boolean value",
        ),
        ("io.evil = true", "readonly"),
        (
            r#"getmetatable("").__index = { evil = true }"#,
            "attempt to index a boolean value",
        ),
        ("string.dump(function() end)", "attempt to call a nil value"),
        (r#"require("os")"#, "module 'os' not found"),
        (r#"require("io")"#, "module 'io' not found"),
        (r#"collectgarbage("stop")"#, "invalid option"),
        (r#"collectgarbage("collect")"#, "invalid option"),
    ];
    for (body, expected) in attempts {
        let err = evaluate_body(&r, body).unwrap_err();
        assert!(matches!(err, LuaError::Runtime { .. }), "{body}: {err}");
        assert!(err.to_string().contains(expected), "{body}: {err}");
        assert_round_still_works(&r);
    }
    // What stays available reads the clock and counts memory, nothing more.
    let ok = "assert(type(os.time()) == 'number' and type(os.clock()) == 'number' and os.date ~= nil)\n\
              assert(collectgarbage('count') > 0 and print('ignored') == nil)";
    assert!(evaluate_body(&r, ok).unwrap().passing);
    // A script may change its own globals and libraries (as in gopher-lua, where Sveltos
    // makes a state per evaluation), and the next script sees none of it.
    let patch = "_G.evil = true string.upper = function() return 'pwned' end table.insert = nil \
                 setmetatable(_G, { __index = function() return 1 end }) assert(undefined_name == 1)";
    assert!(evaluate_body(&r, patch).unwrap().passing);
    let intact = "assert(string.upper('a') == 'A' and ('a'):upper() == 'A' and _G.evil == nil \
                  and table.insert ~= nil and undefined_name == nil and getmetatable(_G) == nil)";
    assert!(evaluate_body(&r, intact).unwrap().passing);
}

#[test]
fn what_a_script_changes_in_objects_no_other_check_sees() {
    let mut r = round();
    let id = r.add_object(node("original", true, false)).unwrap();
    let attempts = [
        "resources[1].metadata.name = 'changed'",
        "rawset(resources[1].metadata, 'name', 'changed')",
        "resources[1].status.conditions[1] = nil",
        // An element converted together with its array is copy on write too.
        "resources[1].status.conditions[2].type = 'changed'",
        "table.insert(resources[1].status.conditions, { type = 'Ready', status = 'False' })",
        "table.sort(resources[1].status.conditions, function(a, b) return a.type > b.type end)",
        "table.remove(resources[1].status.conditions, 1)",
        "ctx.node.metadata.labels.extra = 'x'",
        "resources[1].status = nil",
        "for k in pairs(resources[1]) do resources[1][k] = nil end",
    ];
    let ctx = [("node".to_string(), CtxValue::One(id))];
    for body in attempts {
        let script = format!("function evaluate()\n{body}\nreturn {{ pass = true }}\nend");
        let outcome = r.evaluate("mutate", &script, &[id], &ctx).unwrap();
        assert!(outcome.passing, "{body}");
        let reader = r#"function evaluate()
            local n = resources[1]
            return { pass = n.metadata.labels.extra == nil and #n.status.conditions == 2
                            and n.status.conditions[1].type == "MemoryPressure"
                            and n.status.conditions[2].type == "Ready" and getmetatable(n) == nil,
                     message = n.metadata.name }
        end"#;
        let outcome = r.evaluate("reader", reader, &[id], &ctx).unwrap();
        assert_eq!(
            outcome,
            LuaOutcome {
                passing: true,
                message: "original".into()
            },
            "after {body}"
        );
    }
    // As in gopher-lua, a script may give an object a metatable, even a protected one;
    // the next check sees the object as it was.
    let meta = r#"function evaluate()
        local n = resources[1]
        setmetatable(n, { __index = function() return "made up" end, __metatable = "mine" })
        return { pass = getmetatable(n) == "mine" and n.anything == "made up"
                        and n.metadata.name == "original" }
    end"#;
    assert!(r.evaluate("meta", meta, &[id], &[]).unwrap().passing);
    let after = r#"function evaluate()
        local n = resources[1]
        return { pass = getmetatable(n) == nil and n.anything == nil
                        and n.metadata.name == "original" and #n.status.conditions == 2 }
    end"#;
    assert!(r.evaluate("after-meta", after, &[id], &[]).unwrap().passing);
    let own = "function evaluate() resources[1] = nil table.insert(resources, 1) return { pass = #resources == 1 } end";
    assert!(r.evaluate("own", own, &[id], &[]).unwrap().passing);
}

#[test]
fn a_huge_returned_table_is_read_with_bounded_effort() {
    // Building the table is not what is measured: a deadline a loaded machine meets.
    let r = LuaRound::new(LuaLimits {
        deadline: Duration::from_secs(10),
        ..LuaLimits::default()
    })
    .unwrap();
    let script = r#"function evaluate()
        local hs = { pass = true, message = "ok" }
        for i = 1, 200000 do hs[i] = { i } end
        return hs
    end"#;
    let outcome = r.evaluate("huge", script, &[], &[]).unwrap();
    assert_eq!(
        outcome,
        LuaOutcome {
            passing: true,
            message: "ok".into()
        }
    );
}

#[test]
fn bytecode_as_condition_is_refused() {
    let r = round();
    let bytecode = "\x06\x03\x00\x00\x00\x00";
    let err = r.evaluate("bytecode", bytecode, &[], &[]).unwrap_err();
    assert!(
        matches!(err, LuaError::Syntax { .. } | LuaError::Runtime { .. }),
        "{err}"
    );
    assert_round_still_works(&r);
}
