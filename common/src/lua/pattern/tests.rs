//! The pattern functions against Lua 5.1's documented results, and their deadline.

use std::time::{Duration, Instant};

use super::super::tests::round;
use super::super::{LuaError, LuaLimits};

fn run(expr: &str) -> String {
    let script = format!("function evaluate() return {{ pass = true, message = {expr} }} end");
    round()
        .evaluate("pattern", &script, &[], &[])
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
        .message
}

#[test]
fn find_match_gmatch_and_gsub_give_lua_results() {
    let cases = [
        (r#"tostring(string.find("hello world", "o w"))"#, "5"),
        (r#"select(2, string.find("hello world", "o w"))"#, "7"),
        (r#"tostring(string.find("hello", "l+"))"#, "3"),
        (r#"tostring(string.find("a.b", ".", 1, true))"#, "2"),
        (r#"tostring(string.find("abc", "b", -1))"#, "nil"),
        (r#"tostring(string.find("abc", "", 10))"#, "nil"),
        (r#"string.match("key = value", "(%w+)%s*=%s*(%w+)")"#, "key"),
        (
            r#"select(2, string.match("key = value", "(%w+)%s*=%s*(%w+)"))"#,
            "value",
        ),
        (r#"tostring(string.match("hello", "()ll()"))"#, "3"),
        (
            r#"string.match("2024-05-01T10:00:00Z", "^(%d+)-(%d+)")"#,
            "2024",
        ),
        (r#"tostring(string.match("abc", "^b"))"#, "nil"),
        (r#"string.match("[[x]]", "%[(.-)%]")"#, "[x"),
        (r#"string.match("aaa", "a-b") or "none""#, "none"),
        (r#"string.match("xyz", "[^x]+")"#, "yz"),
        (r#"string.match("a1-b2", "[%a%-]+")"#, "a"),
        (r#"(string.gsub("hello world", "o", "0"))"#, "hell0 w0rld"),
        (
            r#"(string.gsub("hello world", "(%w+)", "<%1>"))"#,
            "<hello> <world>",
        ),
        (r#"(string.gsub("abc", "%w", "%0%0", 2))"#, "aabbc"),
        (r#"(string.gsub("abc", "", "-"))"#, "-a-b-c-"),
        (
            r#"(string.gsub("$name is $age", "%$(%w+)", { name = "ann", age = 3 }))"#,
            "ann is 3",
        ),
        (
            r#"(string.gsub("a b", "%w", function(c) return c:upper() end))"#,
            "A B",
        ),
        (r#"(string.gsub("abc", "b", "%%"))"#, "a%c"),
        (
            r#"(string.gsub("hello", "l", false and "" or nil ~= nil and "" or "L"))"#,
            "heLLo",
        ),
        (
            r#"(function() local t = {} for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do t[#t+1] = k .. v end return table.concat(t, ";") end)()"#,
            "a1;b2",
        ),
        (
            r#"(function() local n = 0 for _ in ("abc"):gmatch("") do n = n + 1 end return tostring(n) end)()"#,
            "4",
        ),
        (
            r#"string.match("THE (quick) fox", "%f[%a]%a+", 5)"#,
            "quick",
        ),
        (r#"string.match("x = (a(b)c) y", "%b()")"#, "(a(b)c)"),
        (r#"string.match("hello hello", "(h%a+) %1")"#, "hello"),
    ];
    for (expr, expected) in cases {
        assert_eq!(run(expr), expected, "{expr}");
    }
}

#[test]
fn malformed_patterns_fail_with_lua_messages() {
    let r = round();
    for (pattern, message) in [
        ("%", "malformed pattern (ends with '%')"),
        ("[a", "malformed pattern (missing ']')"),
        ("(a", "unfinished capture"),
        ("a)", "invalid pattern capture"),
        ("%1", "invalid capture index %1"),
        ("%f", "missing '[' after '%f' in pattern"),
    ] {
        let script = format!(
            "function evaluate() string.match('abc', {pattern:?}) return {{ pass = true }} end"
        );
        match r.evaluate("malformed", &script, &[], &[]) {
            Err(err) => assert!(err.to_string().contains(message), "{pattern}: {err}"),
            Ok(o) => panic!("{pattern}: accepted ({o:?})"),
        }
    }
}

#[test]
fn a_backtracking_gsub_or_gmatch_stops_at_the_deadline() {
    let r = round();
    for body in [
        r#"local s = string.rep("a", 100000) string.gsub(s, ".-.-.-.-b", "")"#,
        r#"local s = string.rep("a", 100000) for _ in s:gmatch(".-.-.-.-b") do end"#,
        r#"local s = string.rep("a", 100000) s:match("(.-)(.-)(.-)(.-)b")"#,
    ] {
        let started = Instant::now();
        let script = format!("function evaluate()\n{body}\nreturn {{ pass = true }}\nend");
        let err = r.evaluate("backtrack", &script, &[], &[]).unwrap_err();
        assert!(matches!(err, LuaError::Deadline { .. }), "{body}: {err}");
        let deadline = LuaLimits::default().deadline;
        assert!(
            started.elapsed() < deadline + Duration::from_millis(400),
            "{body}"
        );
    }
}
