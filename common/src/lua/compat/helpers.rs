//! Sveltos' helpers for `validateHealths` / HealthCheck scripts, reachable as in Sveltos:
//! the globals `base64Encode`, `base64Decode`, `getLabel`, `getAnnotation` and
//! `getResource`, and the modules `json` (`encode`, `decode`, `toYAML`, `fromYAML`) and
//! `strings` (Go's `strings` package by name: `Contains`, `Split`, `TrimSpace`, ...) through
//! a `require` that knows only these two.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use mlua::{Function, Lua, LuaSerdeExt, MultiValue, Table, Value};

/// Installs the globals and `require`.
pub(super) fn install(lua: &Lua, globals: &Table, plain: Function) -> mlua::Result<()> {
    globals.raw_set(
        "base64Encode",
        lua.create_function(|lua, s: mlua::LuaString| {
            if s.as_bytes().is_empty() {
                return Ok((Value::Nil, Some("provided string is empty")));
            }
            let encoded = STANDARD.encode(&*s.as_bytes());
            Ok((Value::String(lua.create_string(encoded)?), None))
        })?,
    )?;
    globals.raw_set(
        "base64Decode",
        lua.create_function(|lua, s: mlua::LuaString| {
            if s.as_bytes().is_empty() {
                return Ok((Value::Nil, Some("provided string is empty")));
            }
            match STANDARD.decode(&*s.as_bytes()) {
                Ok(bytes) => Ok((Value::String(lua.create_string(bytes)?), None)),
                Err(_) => Ok((Value::Nil, Some("decoding failed"))),
            }
        })?,
    )?;
    let lookup = lua.load(LOOKUPS).set_name("=fleetpulse").eval::<(
        mlua::Function,
        mlua::Function,
        mlua::Function,
    )>()?;
    globals.raw_set("getLabel", lookup.0)?;
    globals.raw_set("getAnnotation", lookup.1)?;
    globals.raw_set("getResource", lookup.2)?;

    let json = json_module(lua, plain)?;
    let strings = strings_module(lua)?;
    globals.raw_set(
        "require",
        lua.create_function(move |lua, name: String| match name.as_str() {
            // A copy per call: what one script changes in a module, no other sees.
            "json" => copy(lua, &json),
            "strings" => copy(lua, &strings),
            other => Err(mlua::Error::runtime(format!(
                "module '{other}' not found: the fleetpulse Lua sandbox provides only the \
                 Sveltos helper modules \"json\" and \"strings\""
            ))),
        })?,
    )?;
    Ok(())
}

fn copy(lua: &Lua, module: &Table) -> mlua::Result<Table> {
    let out = lua.create_table()?;
    for pair in module.pairs::<Value, Value>() {
        let (k, v) = pair?;
        out.raw_set(k, v)?;
    }
    Ok(out)
}

/// `getLabel(obj, key)`, `getAnnotation(obj, key)`, `getResource(resources, key)`: the value,
/// or `nil` when absent or not a string (labels, annotations); two arguments required.
const LOOKUPS: &str = r##"
local type, select = type, select
local function metadata_value(field)
  return function(...)
    if select("#", ...) ~= 2 then return nil, "expected 2 arguments (table, key)" end
    local obj, key = ...
    if type(obj) ~= "table" then error("bad argument #1 (table expected, got " .. type(obj) .. ")", 2) end
    local meta = obj.metadata
    if type(meta) ~= "table" then return nil end
    local values = meta[field]
    if type(values) ~= "table" then return nil end
    local v = values[key]
    if type(v) ~= "string" then return nil end
    return v
  end
end
local function get_resource(...)
  if select("#", ...) ~= 2 then return nil, "expected 2 arguments (table, key)" end
  local resources, key = ...
  if type(resources) ~= "table" then error("bad argument #1 (table expected, got " .. type(resources) .. ")", 2) end
  return resources[key]
end
return metadata_value("labels"), metadata_value("annotations"), get_resource
"##;

/// `json`: `encode(value)` (an empty table is `[]`, a table with keys 1..n an array, one
/// with string keys an object, as in Sveltos' module), `decode(text)`, `toYAML(value)`, `fromYAML(text)`; each returns
/// `nil, message` on failure, as Sveltos' module does.
fn json_module(lua: &Lua, plain: Function) -> mlua::Result<Table> {
    let module = lua.create_table()?;
    let fail = |message: String| Ok((Value::Nil, Some(message)));
    let to_json = move |lua: &Lua, value: Value| -> Result<serde_json::Value, String> {
        let value = plain.call::<Value>(value).map_err(|e| e.to_string())?;
        match &value {
            Value::Table(t) if t.clone().pairs::<Value, Value>().next().is_none() => {
                Ok(serde_json::Value::Array(Vec::new()))
            }
            _ => lua.from_value(value).map_err(|e| e.to_string()),
        }
    };
    let to_yaml = to_json.clone();
    module.raw_set(
        "encode",
        lua.create_function(move |lua, value: Value| match to_json(lua, value) {
            Ok(json) => Ok((Value::String(lua.create_string(json.to_string())?), None)),
            Err(e) => fail(e),
        })?,
    )?;
    module.raw_set(
        "decode",
        lua.create_function(move |lua, text: String| {
            match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(json) => Ok((from_json(lua, &json)?, None)),
                Err(e) => fail(e.to_string()),
            }
        })?,
    )?;
    module.raw_set(
        "toYAML",
        lua.create_function(move |lua, value: Value| {
            match to_yaml(lua, value)
                .and_then(|j| serde_yaml_ng::to_string(&j).map_err(|e| e.to_string()))
            {
                Ok(yaml) => Ok((Value::String(lua.create_string(yaml)?), None)),
                Err(e) => fail(e),
            }
        })?,
    )?;
    module.raw_set(
        "fromYAML",
        lua.create_function(move |lua, text: String| {
            match serde_yaml_ng::from_str::<serde_json::Value>(&text) {
                Ok(json) => Ok((from_json(lua, &json)?, None)),
                Err(e) => fail(e.to_string()),
            }
        })?,
    )?;
    Ok(module)
}

fn from_json(lua: &Lua, json: &serde_json::Value) -> mlua::Result<Value> {
    Ok(match json {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(lua.create_string(s)?),
        serde_json::Value::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, from_json(lua, item)?)?;
            }
            Value::Table(t)
        }
        serde_json::Value::Object(map) => {
            let t = lua.create_table_with_capacity(0, map.len())?;
            for (k, v) in map {
                t.raw_set(k.as_str(), from_json(lua, v)?)?;
            }
            Value::Table(t)
        }
    })
}

/// `strings`: the functions of Go's `strings` package that take and return strings,
/// numbers and booleans, by their Go names (indices are 0-based, -1 when absent, as in Go).
fn strings_module(lua: &Lua) -> mlua::Result<Table> {
    let m = lua.create_table()?;
    let s2b = |f: fn(&str, &str) -> bool| move |_: &Lua, (a, b): (String, String)| Ok(f(&a, &b));
    m.raw_set("Contains", lua.create_function(s2b(|a, b| a.contains(b)))?)?;
    m.raw_set(
        "ContainsAny",
        lua.create_function(s2b(|a, b| a.chars().any(|c| b.contains(c))))?,
    )?;
    m.raw_set(
        "HasPrefix",
        lua.create_function(s2b(|a, b| a.starts_with(b)))?,
    )?;
    m.raw_set(
        "HasSuffix",
        lua.create_function(s2b(|a, b| a.ends_with(b)))?,
    )?;
    m.raw_set(
        "EqualFold",
        lua.create_function(s2b(|a, b| a.to_lowercase() == b.to_lowercase()))?,
    )?;
    let s2i = |f: fn(&str, &str) -> i64| move |_: &Lua, (a, b): (String, String)| Ok(f(&a, &b));
    m.raw_set(
        "Index",
        lua.create_function(s2i(|a, b| a.find(b).map_or(-1, |i| i as i64)))?,
    )?;
    m.raw_set(
        "LastIndex",
        lua.create_function(s2i(|a, b| a.rfind(b).map_or(-1, |i| i as i64)))?,
    )?;
    m.raw_set("Compare", lua.create_function(s2i(|a, b| a.cmp(b) as i64))?)?;
    m.raw_set(
        "Count",
        lua.create_function(s2i(|a, b| {
            if b.is_empty() {
                a.chars().count() as i64 + 1
            } else {
                a.matches(b).count() as i64
            }
        }))?,
    )?;
    let s2s = |f: fn(&str, &str) -> String| move |_: &Lua, (a, b): (String, String)| Ok(f(&a, &b));
    m.raw_set(
        "Trim",
        lua.create_function(s2s(|a, b| a.trim_matches(|c| b.contains(c)).into()))?,
    )?;
    m.raw_set(
        "TrimLeft",
        lua.create_function(s2s(|a, b| a.trim_start_matches(|c| b.contains(c)).into()))?,
    )?;
    m.raw_set(
        "TrimRight",
        lua.create_function(s2s(|a, b| a.trim_end_matches(|c| b.contains(c)).into()))?,
    )?;
    m.raw_set(
        "TrimPrefix",
        lua.create_function(s2s(|a, b| a.strip_prefix(b).unwrap_or(a).into()))?,
    )?;
    m.raw_set(
        "TrimSuffix",
        lua.create_function(s2s(|a, b| a.strip_suffix(b).unwrap_or(a).into()))?,
    )?;
    let s1 = |f: fn(&str) -> String| move |_: &Lua, a: String| Ok(f(&a));
    m.raw_set("ToLower", lua.create_function(s1(|a| a.to_lowercase()))?)?;
    m.raw_set("ToUpper", lua.create_function(s1(|a| a.to_uppercase()))?)?;
    m.raw_set("TrimSpace", lua.create_function(s1(|a| a.trim().into()))?)?;
    m.raw_set(
        "Split",
        lua.create_function(|_, (a, b): (String, String)| {
            Ok(if b.is_empty() {
                a.chars().map(String::from).collect::<Vec<_>>()
            } else {
                a.split(b.as_str()).map(String::from).collect()
            })
        })?,
    )?;
    m.raw_set(
        "SplitN",
        lua.create_function(|_, (a, b, n): (String, String, i64)| {
            Ok(match n {
                0 => None,
                n if n < 0 => Some(a.split(b.as_str()).map(String::from).collect::<Vec<_>>()),
                n => Some(a.splitn(n as usize, b.as_str()).map(String::from).collect()),
            })
        })?,
    )?;
    m.raw_set(
        "Fields",
        lua.create_function(|_, a: String| {
            Ok(a.split_whitespace().map(String::from).collect::<Vec<_>>())
        })?,
    )?;
    m.raw_set(
        "Join",
        lua.create_function(|_, (t, sep): (Table, String)| {
            // Read through metamethods: an array of an object is a proxy (see objects.lua).
            let mut parts = Vec::new();
            for i in 1.. {
                match t.get::<Value>(i)? {
                    Value::Nil => break,
                    Value::String(s) => parts.push(s.to_string_lossy()),
                    _ => {}
                }
            }
            Ok(parts.join(&sep))
        })?,
    )?;
    m.raw_set(
        "Replace",
        lua.create_function(|_, (s, old, new, n): (String, String, String, i64)| {
            Ok(if n < 0 {
                s.replace(&old, &new)
            } else {
                s.replacen(&old, &new, n as usize)
            })
        })?,
    )?;
    m.raw_set(
        "Repeat",
        lua.create_function(|lua, (s, n): (mlua::LuaString, i64)| {
            if n < 0 {
                return Err(mlua::Error::runtime("strings: negative Repeat count"));
            }
            // Through string.rep, so the allocation counts against the memory limit.
            let rep: mlua::Function = lua.globals().raw_get::<Table>("string")?.raw_get("rep")?;
            rep.call::<MultiValue>((s, n))
        })?,
    )?;
    Ok(m)
}
