//! `os.time`, `os.date`, `os.difftime` and `os.clock` as gopher-lua (Sveltos' Lua) has
//! them, from its `oslib.go` and `utils.go` (v1.1): each expected value is what that code
//! gives, and where gopher-lua differs from Lua 5.1's manual the test says so. Formats are
//! checked in UTC (`!`) at fixed times, so the machine's time zone does not matter.

use std::time::{SystemTime, UNIX_EPOCH};

use jiff::tz::TimeZone;

use super::message_of;
use crate::lua::LuaError;
use crate::lua::tests::round;

/// Thursday 29 February 2024, 12:34:56 UTC.
const LEAP_DAY: i64 = 1_709_210_096;

/// The message of a script that returns `expression` as its message.
fn value_of(expression: &str) -> String {
    message_of(&format!(
        "return {{ pass = true, message = tostring({expression}) }}"
    ))
}

/// The error of a script that evaluates `expression`.
fn error_of(expression: &str) -> String {
    let script =
        format!("function evaluate()\nlocal x = {expression}\nreturn {{ pass = true }}\nend");
    match round().evaluate("conformance", &script, &[], &[]) {
        Err(e @ LuaError::Runtime { .. }) => e.to_string(),
        other => panic!("{expression}: expected a runtime error, got {other:?}"),
    }
}

fn unix_now() -> i64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(now.as_secs()).unwrap()
}

#[test]
fn os_time_without_a_table_is_the_current_unix_time_in_whole_seconds() {
    let before = unix_now();
    let text = value_of("os.time()");
    let after = unix_now();
    let seconds: i64 = text.parse().expect("an integer");
    assert!((before..=after).contains(&seconds), "{text}");
    // gopher-lua: an explicit nil is the same as no argument.
    let with_nil: i64 = value_of("os.time(nil)").parse().unwrap();
    assert!((before..=unix_now()).contains(&with_nil));
}

#[test]
fn os_time_of_a_table_is_that_wall_time_in_the_local_zone() {
    let expected = jiff::civil::date(2024, 2, 29)
        .at(12, 34, 56, 0)
        .to_zoned(TimeZone::try_system().unwrap_or(TimeZone::UTC))
        .unwrap()
        .timestamp()
        .as_second();
    let text =
        value_of("os.time{ year = 2024, month = 2, day = 29, hour = 12, min = 34, sec = 56 }");
    assert_eq!(text, expected.to_string());
    // And back: `*t` in the same zone gives the same fields.
    let body = r#"local t = os.date("*t", os.time{ year = 2024, month = 2, day = 29, hour = 12, min = 34, sec = 56 })
      return { pass = true, message = table.concat({ t.year, t.month, t.day, t.hour, t.min, t.sec }, " ") }"#;
    assert_eq!(message_of(body), "2024 2 29 12 34 56");
}

#[test]
fn os_time_defaults_to_noon_and_reads_strings_and_truncates_floats_as_gopher_lua_does() {
    // Lua 5.1 and gopher-lua: `hour` defaults to 12, `min` and `sec` to 0.
    let body = r#"local noon = os.time{ year = 2024, month = 3, day = 1, hour = 12, min = 0, sec = 0 }
      return { pass = true, message = table.concat({
        os.time{ year = 2024, month = 3, day = 1 } - noon,
        os.time{ year = "2024", month = " 03", day = "0x1" } - noon,
        os.time{ year = 2024, month = 3, day = 1.9, hour = 12.5 } - noon,
        os.time{ year = 2024, month = 3, day = 1, hour = "noon", isdst = true } - noon,
        os.time{ year = 2024, month = 3 } - noon,
      }, " ") }"#;
    // gopher-lua has no error for a missing `day` (Lua 5.1 has): -1, two days before the
    // 1st (day 0 is the last of February).
    assert_eq!(message_of(body), "0 0 0 0 -172800");
}

#[test]
fn out_of_range_date_fields_carry_over_as_go_time_date_does() {
    let body = r#"local function same(a, b) return tostring(os.time(a) == os.time(b)) end
      return { pass = true, message = table.concat({
        same({ year = 2023, month = 13, day = 1, hour = 0 }, { year = 2024, month = 1, day = 1, hour = 0 }),
        same({ year = 2024, month = 0, day = 15 }, { year = 2023, month = 12, day = 15 }),
        same({ year = 2024, month = 3, day = 0 }, { year = 2024, month = 2, day = 29 }),
        same({ year = 2023, month = 3, day = 0 }, { year = 2023, month = 2, day = 28 }),
        same({ year = 2024, month = 1, day = 366 }, { year = 2024, month = 12, day = 31 }),
        same({ year = 2024, month = 1, day = 1, hour = 0, sec = -1 }, { year = 2023, month = 12, day = 31, hour = 23, min = 59, sec = 59 }),
        same({ year = 2024, month = 1, day = 1, hour = 24, min = 60 }, { year = 2024, month = 1, day = 2, hour = 1, min = 0 }),
        same({ year = 2024, month = -13, day = 1 }, { year = 2022, month = 11, day = 1 }),
      }, " ") }"#;
    assert_eq!(message_of(body), "true true true true true true true true");
}

#[test]
fn os_date_star_t_gives_the_fields_with_wday_from_sunday_and_yday_zero_as_gopher_lua() {
    let fields = |expression: &str| {
        message_of(&format!(
            r#"local t = {expression}
              return {{ pass = true, message = table.concat({{ t.year, t.month, t.day, t.hour,
                t.min, t.sec, t.wday, t.yday, tostring(t.isdst) }}, " ") }}"#
        ))
    };
    // Lua 5.1's manual: wday 1 is Sunday. yday: gopher-lua always writes 0 (Lua 5.1: the
    // day of the year, 60 here); isdst: always false.
    assert_eq!(
        fields(&format!(r#"os.date("!*t", {LEAP_DAY})"#)),
        "2024 2 29 12 34 56 5 0 false"
    );
    assert_eq!(
        fields(r#"os.date("!*t", 1704585600)"#),
        "2024 1 7 0 0 0 1 0 false",
        "a Sunday"
    );
    assert_eq!(
        fields(r#"os.date("!*t", 1704585599)"#),
        "2024 1 6 23 59 59 7 0 false",
        "a Saturday"
    );
    assert_eq!(
        fields("os.date('!*t', -1)"),
        "1969 12 31 23 59 59 4 0 false"
    );
    // gopher-lua checks only the prefix, and a float time is truncated.
    assert_eq!(
        fields(&format!(r#"os.date("!*tail", {LEAP_DAY}.9)"#)),
        "2024 2 29 12 34 56 5 0 false"
    );
    // Local time round-trips through os.time.
    assert_eq!(
        value_of(&format!(r#"os.time(os.date("*t", {LEAP_DAY}))"#)),
        LEAP_DAY.to_string()
    );
    let now_year = jiff::Timestamp::now().to_zoned(TimeZone::UTC).year();
    assert_eq!(value_of(r#"os.date("!*t").year"#), now_year.to_string());
}

#[test]
fn os_date_formats_write_what_gopher_lua_strftime_writes() {
    let date = |format: &str| value_of(&format!(r#"os.date("{format}", {LEAP_DAY})"#));
    for (format, expected) in [
        ("!%Y-%m-%d %H:%M:%S", "2024-02-29 12:34:56"),
        ("!%A %B %b %d", "Thursday February Feb 29"),
        ("!%y %F %I %p %P %w", "24 2024-02-29 12 PM pm 4"),
        ("!%X", "12:34:56"),
        ("!%z %Z", "+0000 UTC"),
        // gopher-lua's layouts: `%c` is Go's "02 Jan 06 15:04 MST" (C: "Thu Feb 29
        // 12:34:56 2024"), `%x` its "15/04/05" (C: "02/29/24"), `%a` its "mon", which is
        // no Go layout element and so written as is (C: "Thu").
        ("!%c", "29 Feb 24 12:34 UTC"),
        ("!%x", "12/34/56"),
        ("!%a", "mon"),
        // Conversions gopher-lua does not know stay as written; `%%` is a percent sign.
        ("!%j %e %D %U", "%j %e %D %U"),
        ("!100%% at %H%", "100% at 12%"),
        ("!!%H", "12"),
        ("!", ""),
    ] {
        assert_eq!(date(format), expected, "{format}");
    }
    assert_eq!(
        value_of(r#"os.date("!%Y-%m-%d %H:%M:%S", 0)"#),
        "1970-01-01 00:00:00"
    );
    assert_eq!(value_of(r#"os.date("!%I %p", 1709164800)"#), "12 AM");
    // A number as the format is written as a string first (gopher-lua's CheckString).
    assert_eq!(value_of(&format!("os.date(2024, {LEAP_DAY})")), "2024");
    // The default format is %c ("02 Jan 06 15:04 MST"), in local time.
    assert_eq!(
        value_of(r#"os.date():match("^%d%d %a%a%a %d%d %d%d:%d%d .") ~= nil"#),
        "true"
    );
}

#[test]
fn os_date_and_difftime_refuse_arguments_as_gopher_lua_does() {
    for (expression, expected) in [
        (
            "os.date(nil)",
            "bad argument #1 to date (string expected, got nil)",
        ),
        (
            "os.date({})",
            "bad argument #1 to date (string expected, got table)",
        ),
        (
            r#"os.date("%H", nil)"#,
            "bad argument #2 to date (number expected, got nil)",
        ),
        (
            r#"os.date("%H", "0")"#,
            "bad argument #2 to date (number expected, got string)",
        ),
        (
            r#"os.time("2024")"#,
            "bad argument #1 to time (table expected, got string)",
        ),
        (
            "os.difftime(5)",
            "bad argument #2 to difftime (number expected, got nil)",
        ),
        (
            "os.difftime()",
            "bad argument #1 to difftime (number expected, got nil)",
        ),
    ] {
        let err = error_of(expression);
        assert!(err.contains(expected), "{expression}: {err}");
    }
}

#[test]
fn os_difftime_subtracts_whole_seconds() {
    // gopher-lua truncates both to integers (Lua 5.1 would give 6.7 for the second).
    let body = r#"return { pass = true, message = table.concat({
        os.difftime(10, 4), os.difftime(10.9, 4.2), os.difftime(0, 60),
        os.difftime(os.time{ year = 2024, month = 3, day = 1 }, os.time{ year = 2024, month = 2, day = 28 }),
      }, " ") }"#;
    assert_eq!(message_of(body), "6 6 -60 172800");
}

#[test]
fn os_clock_is_a_non_negative_number_of_seconds_that_grows() {
    let body = r#"local first = os.clock()
      local later = first
      for _ = 1, 10000000 do
        later = os.clock()
        if later > first then break end
      end
      return { pass = true, message = table.concat({ type(first), tostring(first >= 0),
        tostring(later > first) }, " ") }"#;
    assert_eq!(message_of(body), "number true true");
    // Across the evaluations of one round, too.
    let r = round();
    let clock = |r: &crate::lua::LuaRound| -> f64 {
        let script = "function evaluate() return { pass = true, message = string.format('%.9f', os.clock()) } end";
        r.evaluate("clock", script, &[], &[])
            .unwrap()
            .message
            .parse()
            .unwrap()
    };
    let (a, b) = (clock(&r), clock(&r));
    assert!(0.0 <= a && a <= b, "{a} then {b}");
}
