//! `string.find`, `string.match`, `string.gmatch` (also `string.gfind`, its Lua 5.0 name
//! that gopher-lua keeps) and `string.gsub`, with Lua's semantics, on a matcher that honours
//! the evaluation's deadline: Lua's own are C loops no hook can stop, so a backtracking
//! pattern over a long string would run past any deadline.

use std::sync::Arc;

use mlua::{Function, Lua, LuaString, MultiValue, Table, Value, Variadic};

use super::sandbox::DeadlineGuard;

mod matcher;

use matcher::{Capture, MAX_CAPTURES, MatchError, Matcher, is_plain};

/// Installs the four functions (and `gfind`) into `string`.
pub(super) fn install(lua: &Lua, string: &Table, guard: Arc<DeadlineGuard>) -> mlua::Result<()> {
    let g = guard.clone();
    string.raw_set(
        "find",
        lua.create_function(
            move |lua, (s, p, init, plain): (LuaString, LuaString, Option<i64>, Option<Value>)| {
                let plain = plain.is_some_and(|v| !matches!(v, Value::Nil | Value::Boolean(false)));
                find(lua, &g, &s.as_bytes(), &p.as_bytes(), init, plain, true)
            },
        )?,
    )?;
    let g = guard.clone();
    string.raw_set(
        "match",
        lua.create_function(
            move |lua, (s, p, init): (LuaString, LuaString, Option<i64>)| {
                find(lua, &g, &s.as_bytes(), &p.as_bytes(), init, false, false)
            },
        )?,
    )?;
    let g = guard.clone();
    let gmatch = lua.create_function(move |lua, (s, p): (LuaString, LuaString)| {
        let g = g.clone();
        let (src, pat) = (s.as_bytes().to_vec(), p.as_bytes().to_vec());
        let state = std::cell::Cell::new((0usize, None::<usize>));
        lua.create_function(move |lua, ()| {
            let (mut at, last) = state.get();
            let tick = || g.check();
            while at <= src.len() {
                let mut m = Matcher::new(&src, &pat, &tick);
                match m.match_at(at, 0).map_err(into_lua)? {
                    Some(end) if Some(end) != last => {
                        state.set((end, Some(end)));
                        return captures(lua, &src, &m.captures, at, end, true);
                    }
                    _ => at += 1,
                }
            }
            state.set((at, last));
            Ok(MultiValue::from_vec(vec![Value::Nil]))
        })
    })?;
    string.raw_set("gmatch", gmatch.clone())?;
    string.raw_set("gfind", gmatch)?;
    let g = guard;
    string.raw_set(
        "gsub",
        lua.create_function(
            move |lua, (s, p, repl, n): (LuaString, LuaString, Value, Option<i64>)| {
                nested(|| gsub(lua, &g, &s.as_bytes(), &p.as_bytes(), repl, n))
            },
        )?,
    )?;
    Ok(())
}

/// Deepest nesting of `gsub` inside its own replacement functions. Each level costs Rust
/// stack on the thread running the round; Lua's own limit (200 C calls) would be reached
/// only after that stack.
const MAX_GSUB_NESTING: u32 = 32;

thread_local! {
    static GSUB_NESTING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `f` one `gsub` level deeper, failing past [`MAX_GSUB_NESTING`].
fn nested<T>(f: impl FnOnce() -> mlua::Result<T>) -> mlua::Result<T> {
    let depth = GSUB_NESTING.with(|d| {
        d.set(d.get() + 1);
        d.get()
    });
    let result = if depth > MAX_GSUB_NESTING {
        Err(mlua::Error::runtime(
            "stack overflow (string.gsub nested too deeply in its replacement function)",
        ))
    } else {
        f()
    };
    GSUB_NESTING.with(|d| d.set(d.get() - 1));
    result
}

fn into_lua(e: MatchError) -> mlua::Error {
    match e {
        MatchError::Pattern(message) => mlua::Error::runtime(message),
        MatchError::Stopped(e) => e,
    }
}

/// Lua's `posrelat` for an `init` argument: 1-based, negative from the end; 0-based result.
fn start_of(init: Option<i64>, len: usize) -> Option<usize> {
    let len = len as i64;
    let init = match init.unwrap_or(1) {
        i if i > 0 => i,
        0 => 1,
        i if -i > len => 1,
        i => len + i + 1,
    };
    (init <= len + 1).then_some((init - 1) as usize)
}

fn find(
    lua: &Lua,
    guard: &DeadlineGuard,
    src: &[u8],
    pat: &[u8],
    init: Option<i64>,
    plain: bool,
    is_find: bool,
) -> mlua::Result<MultiValue> {
    let Some(start) = start_of(init, src.len()) else {
        return Ok(MultiValue::from_vec(vec![Value::Nil]));
    };
    if is_find && (plain || is_plain(pat)) {
        let found = if pat.is_empty() {
            Some(start)
        } else {
            src[start..]
                .windows(pat.len())
                .position(|w| w == pat)
                .map(|i| i + start)
        };
        return Ok(match found {
            Some(i) => MultiValue::from_vec(vec![
                Value::Integer(i as i64 + 1),
                Value::Integer((i + pat.len()) as i64),
            ]),
            None => MultiValue::from_vec(vec![Value::Nil]),
        });
    }
    let (anchored, p) = match pat.first() {
        Some(b'^') => (true, 1),
        _ => (false, 0),
    };
    let tick = || guard.check();
    let mut at = start;
    loop {
        let mut m = Matcher::new(src, pat, &tick);
        if let Some(end) = m.match_at(at, p).map_err(into_lua)? {
            if is_find {
                let mut values = vec![Value::Integer(at as i64 + 1), Value::Integer(end as i64)];
                values.extend(captures(lua, src, &m.captures, at, end, false)?);
                return Ok(MultiValue::from_vec(values));
            }
            return captures(lua, src, &m.captures, at, end, true);
        }
        at += 1;
        if anchored || at > src.len() {
            return Ok(MultiValue::from_vec(vec![Value::Nil]));
        }
    }
}

/// The captures of a match as Lua values; with none, the whole match when `whole`.
fn captures(
    lua: &Lua,
    src: &[u8],
    caps: &[Capture],
    start: usize,
    end: usize,
    whole: bool,
) -> mlua::Result<MultiValue> {
    if caps.is_empty() {
        return Ok(MultiValue::from_vec(if whole {
            vec![Value::String(lua.create_string(&src[start..end])?)]
        } else {
            Vec::new()
        }));
    }
    let mut values = Vec::with_capacity(caps.len());
    for c in caps {
        values.push(capture_value(lua, src, *c)?);
    }
    Ok(MultiValue::from_vec(values))
}

fn capture_value(lua: &Lua, src: &[u8], c: Capture) -> mlua::Result<Value> {
    match c {
        Capture::Position(at) => Ok(Value::Integer(at as i64 + 1)),
        Capture::Range(at, Some(len)) => Ok(Value::String(lua.create_string(&src[at..at + len])?)),
        Capture::Range(_, None) => Err(mlua::Error::runtime("unfinished capture")),
    }
}

fn gsub(
    lua: &Lua,
    guard: &DeadlineGuard,
    src: &[u8],
    pat: &[u8],
    repl: Value,
    max: Option<i64>,
) -> mlua::Result<(LuaString, i64)> {
    match &repl {
        Value::String(_)
        | Value::Table(_)
        | Value::Function(_)
        | Value::Integer(_)
        | Value::Number(_) => {}
        other => {
            return Err(mlua::Error::runtime(format!(
                "bad argument #3 to 'gsub' (string/function/table expected, got {})",
                other.type_name()
            )));
        }
    }
    let (anchored, p) = match pat.first() {
        Some(b'^') => (true, 1),
        _ => (false, 0),
    };
    let max = max.unwrap_or(i64::MAX);
    let tick = || guard.check();
    let mut out: Vec<u8> = Vec::with_capacity(src.len());
    let (mut at, mut count, mut last) = (0usize, 0i64, None::<usize>);
    while count < max {
        let mut m = Matcher::new(src, pat, &tick);
        let end = m.match_at(at, p).map_err(into_lua)?;
        if let Some(end) = end.filter(|e| Some(*e) != last) {
            count += 1;
            replace(lua, src, &m.captures, at, end, &repl, &mut out)?;
            at = end;
            last = Some(end);
        } else if at < src.len() {
            out.push(src[at]);
            at += 1;
        } else {
            break;
        }
        if anchored {
            break;
        }
    }
    if at < src.len() {
        out.extend_from_slice(&src[at..]);
    }
    Ok((lua.create_string(&out)?, count))
}

fn replace(
    lua: &Lua,
    src: &[u8],
    caps: &[Capture],
    start: usize,
    end: usize,
    repl: &Value,
    out: &mut Vec<u8>,
) -> mlua::Result<()> {
    let whole = &src[start..end];
    let first = || -> mlua::Result<Value> {
        match caps.first() {
            Some(c) => capture_value(lua, src, *c),
            None => Ok(Value::String(lua.create_string(whole)?)),
        }
    };
    let value = match repl {
        Value::Table(t) => t.get::<Value>(first()?)?,
        Value::Function(f) => call_with_captures(lua, f, src, caps, whole)?,
        other => {
            let text = lua
                .coerce_string(other.clone())?
                .expect("a string or number");
            let text = text.as_bytes();
            let mut i = 0;
            while i < text.len() {
                if text[i] != b'%' {
                    out.push(text[i]);
                    i += 1;
                    continue;
                }
                i += 1;
                match text.get(i) {
                    Some(b'%') => out.push(b'%'),
                    Some(b'0') => out.extend_from_slice(whole),
                    Some(d @ b'1'..=b'9') => {
                        let index = usize::from(d - b'1');
                        match caps.get(index) {
                            Some(c) => push_value(lua, out, capture_value(lua, src, *c)?)?,
                            None if index == 0 && caps.is_empty() => out.extend_from_slice(whole),
                            None => {
                                return Err(mlua::Error::runtime(format!(
                                    "invalid capture index %{} in replacement string",
                                    index + 1
                                )));
                            }
                        }
                    }
                    _ => {
                        return Err(mlua::Error::runtime(
                            "invalid use of '%' in replacement string",
                        ));
                    }
                }
                i += 1;
            }
            return Ok(());
        }
    };
    match value {
        Value::Nil | Value::Boolean(false) => out.extend_from_slice(whole),
        Value::String(_) | Value::Integer(_) | Value::Number(_) => push_value(lua, out, value)?,
        other => {
            return Err(mlua::Error::runtime(format!(
                "invalid replacement value (a {})",
                other.type_name()
            )));
        }
    }
    Ok(())
}

fn call_with_captures(
    lua: &Lua,
    f: &Function,
    src: &[u8],
    caps: &[Capture],
    whole: &[u8],
) -> mlua::Result<Value> {
    if caps.is_empty() {
        return f.call(lua.create_string(whole)?);
    }
    let mut args = Variadic::with_capacity(caps.len().min(MAX_CAPTURES));
    for c in caps {
        args.push(capture_value(lua, src, *c)?);
    }
    f.call(args)
}

fn push_value(lua: &Lua, out: &mut Vec<u8>, value: Value) -> mlua::Result<()> {
    if let Some(s) = lua.coerce_string(value)? {
        out.extend_from_slice(&s.as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
