//! Conformance with the Lua that Sveltos and Argo CD run (gopher-lua: Lua 5.1 plus
//! `goto`), each expected outcome taken from that project's documented behaviour. The
//! scripts are this project's own, exercising the same constructs.

use serde_json::json;

use super::tests::round;
use super::*;

mod os_library;

/// Runs `body` inside `evaluate()` and returns its message.
fn message_of(body: &str) -> String {
    let script = format!("function evaluate()\n{body}\nend");
    match round().evaluate("conformance", &script, &[], &[]) {
        Ok(o) => o.message,
        Err(e) => panic!("{body}: {e}"),
    }
}

#[test]
fn goto_and_labels_work_as_in_gopher_lua() {
    // gopher-lua accepts `goto` (Lua 5.2 syntax); Argo CD's health scripts use it for
    // `continue`.
    let body = r#"local kept = {}
      for i = 1, 6 do
        if i % 2 == 0 then goto continue end
        kept[#kept + 1] = i
        ::continue::
      end
      return { pass = true, message = table.concat(kept, ",") }"#;
    assert_eq!(message_of(body), "1,3,5");
}

#[test]
fn lua_5_1_library_names_are_there() {
    // Lua 5.1's manual: math.mod (5.0 name of fmod), string.gfind (5.0 name of gmatch),
    // unpack, table.getn, table.maxn, math.pow, math.log10; all present in gopher-lua.
    let body = r#"local words = {}
      for w in string.gfind("a b c", "%a") do words[#words + 1] = w end
      local a, b = unpack({ 1, 2 })
      local t = { 1, 2, 3 }
      t[10] = 1
      return { pass = true, message = table.concat({ math.mod(7, 3), #words, a + b,
        table.getn({ 1, 2 }), table.maxn(t), tostring(math.pow(2, 10)), tostring(math.log10(1000)),
        tostring(math.ldexp(0.5, 4)), select(2, math.frexp(8)) }, " ") }"#;
    assert_eq!(message_of(body), "1 3 3 2 10 1024 3 8 4");
}

#[test]
fn string_format_s_accepts_nil_and_any_value_as_gopher_lua_does() {
    let body = r#"return { pass = true, message = string.format("%s|%s|%s|%d|%5.2f", nil, true, 3, 42, 3.14159) }"#;
    assert_eq!(message_of(body), "nil|true|3|42| 3.14");
}

#[test]
fn numbers_print_as_gopher_lua_prints_them() {
    // gopher-lua: integral values print without a fraction, others in Go's shortest form.
    let body = r#"return { pass = true, message = table.concat({ tostring(10 / 2), tostring(1 / 3),
        tostring(2^53), tostring(0.1 + 0.2), tostring(-0.5), 7 .. "" }, " ") }"#;
    assert_eq!(
        message_of(body),
        "5 0.3333333333333333 9007199254740992 0.30000000000000004 -0.5 7"
    );
}

#[test]
fn a_float_with_an_integral_value_concatenates_with_a_fraction_a_known_difference() {
    // Lua 5.4 writes `10 / 2` as "5.0" when concatenated (gopher-lua: "5"); `tostring`,
    // `string.format` and a numeric `message` follow gopher-lua. Listed in the
    // compatibility table of docs/checks.md.
    let body = r#"return { pass = true, message = (10 / 2) .. " " .. tostring(10 / 2) .. " " .. string.format("%s", 10 / 2) }"#;
    assert_eq!(message_of(body), "5.0 5 5");
}

#[test]
fn patterns_behave_as_in_lua_5_1() {
    let body = r#"local parts = {}
      local s = "image: registry.example/app:1.2.3"
      parts[1] = s:match(":(%d+)%.(%d+)")
      parts[2] = select(2, s:gsub("%a+", "%0"))
      parts[3] = (s:gsub("(%w+)/(%w+)", "%2/%1"))
      parts[4] = tostring(s:find("example", 1, true))
      parts[5] = tostring(("[x]"):find("[", 1, true))
      parts[6] = ("key=value"):match("^(%w+)=(%w+)$")
      parts[7] = ("  trim  "):match("^%s*(.-)%s*$")
      parts[8] = ("f(a(b)c)"):match("%b()")
      parts[9] = tostring(("THE (quick) fox"):find("%f[%a]%a+", 5))
      return { pass = true, message = table.concat(parts, "|") }"#;
    assert_eq!(
        message_of(body),
        "1|4|image: registry.app/example:1.2.3|17|1|key|trim|(a(b)c)|6"
    );
}

#[test]
fn sveltos_helpers_are_globals_and_require_knows_only_json_and_strings() {
    let mut r = round();
    let id = r
        .add_object(json!({
            "kind": "Secret",
            "metadata": { "name": "s", "labels": { "env": "prod" }, "annotations": { "team": "a" },
                          "finalizers": ["x/keep", "y/keep"] },
            "data": { "token": "aGVsbG8=" }
        }))
        .unwrap();
    let script = r#"function evaluate()
      local json = require("json")
      local strings = require("strings")
      local obj = resources[1]
      local decoded = json.decode('{"a": [1, 2, {"b": true}]}')
      local parts = {
        base64Decode(obj.data.token), base64Encode("hello"), tostring(base64Encode("")),
        getLabel(obj, "env"), getAnnotation(obj, "team"), tostring(getLabel(obj, "none")),
        json.encode({ x = 1 }), json.encode(obj.metadata.labels), json.encode({}),
        tostring(decoded.a[3].b), tostring(strings.Contains("fleetpulse", "pulse")),
        table.concat(strings.Split("a,b,c", ","), "+"), strings.TrimSpace("  x "),
        tostring(strings.Index("chicken", "ken")), tostring(getResource({ k = "v" }, "k")),
        strings.Join(obj.metadata.finalizers, ","),
      }
      local ok, err = pcall(require, "socket")
      parts[#parts + 1] = tostring(ok)
      return { pass = true, message = table.concat(parts, " ") }
    end"#;
    let outcome = r.evaluate("helpers", script, &[id], &[]).unwrap();
    assert_eq!(
        outcome.message,
        r#"hello aGVsbG8= nil prod a nil {"x":1} {"env":"prod"} [] true true a+b+c x 4 v x/keep,y/keep false"#
    );
}

#[test]
fn argo_cd_health_script_passes_only_when_every_object_is_healthy() {
    // Argo CD's convention: the script reads the global `obj` and returns `hs` with
    // `status` (Healthy, Progressing, Degraded, Suspended, Missing) and `message`.
    const CERTIFICATE_HEALTH: &str = r#"
      local hs = { status = "Progressing", message = "Waiting for the certificate" }
      if obj.status ~= nil and obj.status.conditions ~= nil then
        for _, c in ipairs(obj.status.conditions) do
          if c.type ~= "Ready" then goto next_condition end
          if c.status == "True" then
            hs.status = "Healthy"
            hs.message = c.message
          elseif c.status == "False" then
            hs.status = "Degraded"
            hs.message = c.message
          end
          ::next_condition::
        end
      end
      return hs"#;
    let cert = |name: &str, ready: Option<&str>| {
        let mut c = json!({ "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": { "name": name, "namespace": "web" }, "status": {} });
        if let Some(status) = ready {
            c["status"]["conditions"] = json!([{ "type": "Issuing", "status": "True" }, { "type": "Ready", "status": status, "message": format!("{name} says {status}") }]);
        }
        c
    };
    let mut r = round();
    let ok = r.add_object(cert("a", Some("True"))).unwrap();
    let ok2 = r.add_object(cert("b", Some("True"))).unwrap();
    let bad = r.add_object(cert("c", Some("False"))).unwrap();
    let pending = r.add_object(cert("d", None)).unwrap();
    let deadline = LuaLimits::default().deadline;
    let all_ok = r
        .health("certs", CERTIFICATE_HEALTH, &[ok, ok2], deadline)
        .unwrap();
    assert_eq!(
        all_ok,
        LuaOutcome {
            passing: true,
            message: "all 2 objects Healthy".into()
        }
    );
    let one_bad = r
        .health("certs", CERTIFICATE_HEALTH, &[ok, bad, pending], deadline)
        .unwrap();
    assert_eq!(
        one_bad,
        LuaOutcome {
            passing: false,
            message: "Certificate web/c is Degraded: c says False".into()
        }
    );
    let waiting = r
        .health("certs", CERTIFICATE_HEALTH, &[pending, bad], deadline)
        .unwrap();
    assert_eq!(
        waiting.message,
        "Certificate web/d is Progressing: Waiting for the certificate"
    );
    let err = r
        .health("certs", "return { status = 'Fine' }", &[ok], deadline)
        .unwrap_err();
    assert!(
        err.to_string().contains("Healthy, Progressing, Degraded"),
        "{err}"
    );
}

#[test]
fn a_selectors_evaluate_filter_keeps_objects_returning_matching_true() {
    // Sveltos: the selector's `evaluate` sees one object as `obj` and returns
    // `hs.matching`.
    let mut r = round();
    let ids: Vec<_> = ["Running", "Pending", "Running"]
        .iter()
        .map(|phase| {
            r.add_object(json!({ "kind": "Pod", "metadata": { "name": phase }, "status": { "phase": phase } }))
                .unwrap()
        })
        .collect();
    let filter = r#"function evaluate()
        hs = {}
        hs.matching = obj.status.phase == "Running"
        return hs
      end"#;
    let keep = r
        .filter("pods", filter, &ids, LuaLimits::default().deadline)
        .unwrap();
    assert_eq!(keep, vec![true, false, true]);
}
