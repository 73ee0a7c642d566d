//! Lua 5.1 as gopher-lua (the Lua of Sveltos and Argo CD) has it, on Lua 5.4: the 5.1
//! names 5.4 dropped (`unpack`, `table.getn`, `table.maxn`, `math.mod`, `math.pow`,
//! `math.log10`, `math.ldexp`, `math.frexp`, `math.cosh`, `math.sinh`, `math.tanh`,
//! `math.atan2`), `tostring` of numbers as gopher-lua writes them, `os`'s date and time
//! functions as gopher-lua has them (see [`os`]), and the Sveltos helper globals and
//! modules (see [`helpers`]).

use mlua::{Lua, Table, Value};

mod helpers;
mod os;

/// Lua 5.1 functions 5.4 lacks, defined in Lua over 5.4's own.
const LUA51: &str = r#"
local table, math, rawlen, type, error = table, math, rawlen, type, error
unpack = table.unpack
table.getn = function(t) return #t end
table.maxn = function(t)
  local max = 0
  for k in pairs(t) do
    if type(k) == "number" and k > max then max = k end
  end
  return max
end
math.mod = math.fmod
math.pow = function(x, y) return x ^ y end
math.log10 = function(x) return math.log(x, 10) end
math.ldexp = function(m, e) return m * 2.0 ^ e end
math.cosh = function(x) return (math.exp(x) + math.exp(-x)) / 2 end
math.sinh = function(x) return (math.exp(x) - math.exp(-x)) / 2 end
math.tanh = function(x) local a, b = math.exp(x), math.exp(-x) return (a - b) / (a + b) end
math.atan2 = function(y, x) return math.atan(y, x) end
-- `%s` of a float with an integral value writes it as gopher-lua does ("5", not "5.0").
local format, tointeger, mtype, pack = string.format, math.tointeger, math.type, table.pack
string.format = function(fmt, ...)
  local args = pack(...)
  for i = 1, args.n do
    if mtype(args[i]) == "float" then args[i] = tointeger(args[i]) or args[i] end
  end
  return format(fmt, table.unpack(args, 1, args.n))
end
"#;

/// Installs the 5.1 names, `tostring`, and the Sveltos helpers into `globals`; `plain`
/// copies a script value (objects included) into plain tables.
pub(super) fn install(lua: &Lua, globals: &Table, plain: mlua::Function) -> mlua::Result<()> {
    lua.load(LUA51)
        .set_name("=fleetpulse")
        .set_environment(globals.clone())
        .exec()?;
    let math: Table = globals.raw_get("math")?;
    math.raw_set("frexp", lua.create_function(|_, x: f64| Ok(frexp(x)))?)?;
    let tostring: mlua::Function = globals.raw_get("tostring")?;
    globals.raw_set(
        "tostring",
        lua.create_function(move |lua, value: Value| match value {
            Value::Integer(i) => lua.create_string(i.to_string()).map(Value::String),
            Value::Number(n) => lua.create_string(format_number(n)).map(Value::String),
            other => tostring.call(other),
        })?,
    )?;
    os::install(lua, &globals.raw_get::<Table>("os")?)?;
    helpers::install(lua, globals, plain)
}

/// `frexp` as in C: `x = m * 2^e` with `0.5 <= |m| < 1`.
fn frexp(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let mut e = x.abs().log2().floor() as i32 + 1;
    let mut m = x / 2f64.powi(e);
    // Correct for rounding in log2 near powers of two.
    if m.abs() >= 1.0 {
        m /= 2.0;
        e += 1;
    } else if m.abs() < 0.5 {
        m *= 2.0;
        e -= 1;
    }
    (m, e)
}

/// A number as gopher-lua writes it: integral values (within 64-bit range) as integers,
/// others in Go's shortest form (`%v`): the fewest digits that read back exactly, with an
/// exponent (`1e-05`, `1.2345675e+06`) below 1e-4 and from 1e6 (Go's `%v`).
pub fn format_number(n: f64) -> String {
    if n.is_nan() {
        return "nan".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if n.fract() == 0.0 && n.abs() < 9.223_372_036_854_776e18 {
        return (n as i64).to_string();
    }
    // Shortest round-trip digits and the decimal exponent, from Rust's `{:e}`.
    let sci = format!("{n:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    if (-4..6).contains(&exp) {
        return format!("{n}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_gopher_lua_writes_them() {
        for (n, text) in [
            (3.0, "3"),
            (-0.0, "0"),
            (0.5, "0.5"),
            (1.0 / 3.0, "0.3333333333333333"),
            (1e15, "1000000000000000"),
            (123.456, "123.456"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (1234567.5, "1.2345675e+06"),
            (1.5e300, "1.5e+300"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(format_number(n), text, "{n}");
        }
    }

    #[test]
    fn frexp_splits_like_c() {
        assert_eq!(frexp(8.0), (0.5, 4));
        assert_eq!(frexp(-3.0), (-0.75, 2));
        assert_eq!(frexp(0.0), (0.0, 0));
    }
}
