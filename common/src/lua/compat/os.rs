//! `os.time`, `os.date`, `os.difftime` and `os.clock` as gopher-lua (v1.1, Sveltos' Lua)
//! has them, in place of Lua 5.4's. They read the clock and the agent's time zone and
//! nothing else; the rest of `os` stays refused (see `sandbox`).
//!
//! - `os.time()` (or `os.time(nil)`): the current Unix time in whole seconds.
//!   `os.time(t)`: the Unix time of the wall time in `t` in the local zone. Fields are read
//!   raw; numbers are truncated, strings read as Go reads them ([`field`]), anything else
//!   or a missing field takes a default: `hour` 12, `min` and `sec` 0, and -1 for `year`,
//!   `month` and `day` (no error: a missing `day` is the day before the last of the month
//!   before). Out-of-range fields carry over as Go's `time.Date` carries them
//!   ([`calendar`]); `isdst` is ignored.
//! - `os.date(format, time)`: `format` defaults to `"%c"`, `time` to now; leading `!`s mean
//!   UTC, else local time. A format starting with `*t` gives a table: `year`, `month`,
//!   `day`, `hour`, `min`, `sec`, `wday` (1 is Sunday), `yday` always 0 and `isdst` always
//!   false, as gopher-lua leaves them. Any other format goes through gopher-lua's
//!   `strftime` ([`strftime`]). A `time` given is whole seconds (a float is truncated); an
//!   explicit `nil` is an error, as in gopher-lua.
//! - `os.difftime(t2, t1)`: `t2 - t1`, both truncated to whole seconds, both required.
//! - `os.clock()`: seconds (a float) of wall time since the Lua state was made (the agent
//!   keeps its states from round to round; gopher-lua: since its process started); it only
//!   grows.
//!
//! The local zone is the agent's (`TZ`, else `/etc/localtime`, read once per Lua state; UTC
//! when neither names one), as Go's `time.Local` is; in a container it is usually UTC.

mod calendar;
mod field;
mod strftime;

use std::time::{Instant, SystemTime};

use jiff::Timestamp;
use jiff::tz::TimeZone;
use mlua::{Lua, MultiValue, Table, Value};

use calendar::{Civil, Fields};

/// Replaces the date and time functions of `os`.
pub(super) fn install(lua: &Lua, os: &Table) -> mlua::Result<()> {
    let local = TimeZone::try_system().unwrap_or(TimeZone::UTC);
    let started = Instant::now();
    os.raw_set(
        "clock",
        lua.create_function(move |_, _: MultiValue| Ok(started.elapsed().as_secs_f64()))?,
    )?;
    os.raw_set(
        "difftime",
        lua.create_function(|_, args: MultiValue| {
            let later = whole_seconds(&args, 1, "difftime")?;
            Ok(later.wrapping_sub(whole_seconds(&args, 2, "difftime")?))
        })?,
    )?;
    let zone = local.clone();
    os.raw_set(
        "time",
        lua.create_function(move |_, args: MultiValue| time(&zone, &args))?,
    )?;
    os.raw_set(
        "date",
        lua.create_function(move |lua, args: MultiValue| date(lua, &local, &args))?,
    )?;
    Ok(())
}

/// `os.time([t])`.
fn time(local: &TimeZone, args: &MultiValue) -> mlua::Result<i64> {
    let table = match args.front() {
        None | Some(Value::Nil) => return Ok(now()),
        Some(Value::Table(table)) => table,
        Some(other) => return Err(type_error(1, "time", "table", other)),
    };
    let read = |key: &str, default: i64| -> mlua::Result<i64> {
        Ok(match table.raw_get::<Value>(key)? {
            Value::Integer(n) => n,
            Value::Number(n) => n as i64,
            Value::String(s) => field::string_field(&s.to_string_lossy()).unwrap_or(default),
            _ => default,
        })
    };
    let wall = Fields {
        year: read("year", -1)?,
        month: read("month", -1)?,
        day: read("day", -1)?,
        hour: read("hour", 12)?,
        min: read("min", 0)?,
        sec: read("sec", 0)?,
    }
    .wall_seconds();
    Ok(unix_of_wall(local, wall))
}

/// The Unix time of the wall time `wall` (its seconds read as UTC) in `zone`, as Go's
/// `time.Date` finds it: the zone's offset at `wall` read as UTC, then, where the moment
/// that gives falls in another period of the zone, the offset at that moment. So a wall
/// time skipped by a change to summer time counts in the offset before the change, and
/// one repeated by the change back in the offset after it.
fn unix_of_wall(zone: &TimeZone, wall: i128) -> i64 {
    let offset = i128::from(offset_at(zone, wall));
    if offset == 0 {
        return saturate(wall);
    }
    saturate(wall - i128::from(offset_at(zone, wall - offset)))
}

/// `os.date([format [, time]])`.
fn date(lua: &Lua, local: &TimeZone, args: &MultiValue) -> mlua::Result<Value> {
    let mut format = b"%c".to_vec();
    let mut utc = false;
    let mut unix = now();
    if !args.is_empty() {
        format = text(args, 1, "date")?;
        let bangs = format.iter().take_while(|&&b| b == b'!').count();
        if bangs > 0 {
            format.drain(..bangs);
            utc = true;
        }
        if args.len() >= 2 {
            unix = whole_seconds(args, 2, "date")?;
        }
    }
    let zone = if utc { &TimeZone::UTC } else { local };
    let info = zone.to_offset_info(timestamp(i128::from(unix)));
    let t = Civil::at(unix, info.offset().seconds(), info.abbreviation());
    if format.starts_with(b"*t") {
        let table = lua.create_table_with_capacity(0, 9)?;
        table.raw_set("year", t.year)?;
        table.raw_set("month", t.month)?;
        table.raw_set("day", t.day)?;
        table.raw_set("hour", t.hour)?;
        table.raw_set("min", t.min)?;
        table.raw_set("sec", t.sec)?;
        table.raw_set("wday", t.weekday + 1)?;
        table.raw_set("yday", 0)?;
        table.raw_set("isdst", false)?;
        return Ok(Value::Table(table));
    }
    lua.create_string(strftime::strftime(&t, &format))
        .map(Value::String)
}

/// The current Unix time in whole seconds.
fn now() -> i64 {
    Timestamp::try_from(SystemTime::now()).map_or(0, Timestamp::as_second)
}

/// The zone's offset (seconds east of UTC) at `unix`, clamped into the range of times
/// the zone database covers (years -9999 to 9999).
fn offset_at(zone: &TimeZone, unix: i128) -> i32 {
    zone.to_offset(timestamp(unix)).seconds()
}

fn timestamp(unix: i128) -> Timestamp {
    let clamped = unix.clamp(
        Timestamp::MIN.as_second().into(),
        Timestamp::MAX.as_second().into(),
    );
    Timestamp::from_second(saturate(clamped)).expect("clamped into Timestamp's range")
}

fn saturate(n: i128) -> i64 {
    i64::try_from(n).unwrap_or(if n < 0 { i64::MIN } else { i64::MAX })
}

/// Argument `n` (1-based) as whole seconds: a number, truncated (gopher-lua's
/// `CheckInt64`; a numeric string is refused, as there).
fn whole_seconds(args: &MultiValue, n: usize, function: &str) -> mlua::Result<i64> {
    match args.get(n - 1).unwrap_or(&Value::Nil) {
        Value::Integer(i) => Ok(*i),
        Value::Number(f) => Ok(*f as i64),
        other => Err(type_error(n, function, "number", other)),
    }
}

/// Argument `n` (1-based) as a string; a number is written as gopher-lua writes it
/// (its `CheckString`).
fn text(args: &MultiValue, n: usize, function: &str) -> mlua::Result<Vec<u8>> {
    match args.get(n - 1).unwrap_or(&Value::Nil) {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Integer(i) => Ok(i.to_string().into_bytes()),
        Value::Number(f) => Ok(super::format_number(*f).into_bytes()),
        other => Err(type_error(n, function, "string", other)),
    }
}

/// gopher-lua's message for a wrong argument.
fn type_error(n: usize, function: &str, expected: &str, got: &Value) -> mlua::Error {
    mlua::Error::runtime(format!(
        "bad argument #{n} to {function} ({expected} expected, got {})",
        got.type_name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wall(year: i64, month: i64, day: i64, hour: i64, min: i64) -> i128 {
        calendar::tests::fields(year, month, day, hour, min, 0).wall_seconds()
    }

    #[test]
    fn wall_times_around_summer_time_resolve_as_go_time_date_resolves_them() {
        let paris = TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        let cases = [
            (wall(2024, 1, 15, 12, 0), 3600, "winter"),
            (wall(2024, 7, 1, 12, 0), 7200, "summer"),
            // 02:30 on 31 March does not exist (02:00 CET became 03:00 CEST): Go reads it
            // in CET, so it is 03:30 CEST.
            (wall(2024, 3, 31, 2, 30), 3600, "skipped"),
            // 02:30 on 27 October happens twice: Go picks the second, in CET.
            (wall(2024, 10, 27, 2, 30), 3600, "repeated"),
        ];
        for (wall, offset, case) in cases {
            assert_eq!(
                i128::from(unix_of_wall(&paris, wall)),
                wall - offset,
                "{case}"
            );
        }
        let utc = wall(2024, 2, 29, 12, 34);
        assert_eq!(i128::from(unix_of_wall(&TimeZone::UTC, utc)), utc);
    }

    #[test]
    fn times_beyond_the_zone_database_neither_panic_nor_wrap() {
        let paris = TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        assert_eq!(unix_of_wall(&paris, i128::MAX / 2), i64::MAX);
        assert_eq!(unix_of_wall(&paris, i128::MIN / 2), i64::MIN);
        let far = timestamp(i128::from(i64::MAX));
        assert_eq!(far.as_second(), Timestamp::MAX.as_second());
    }
}
