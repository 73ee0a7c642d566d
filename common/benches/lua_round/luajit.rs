//! The same round on LuaJIT with lua-cjson (`luajit.lua`), run as a `luajit` process on the
//! same Pods, when one is installed (Debian: `apt-get install luajit lua-cjson`). A
//! reference, not a candidate engine: LuaJIT's hooks do not fire in compiled code, so a
//! deadline could not be enforced with its JIT on (see the engine decision in
//! docs/checks.md).

use std::io::Write;
use std::process::Command;

use serde_json::Value;

use super::pods::READY_PODS;

/// What `luajit.lua` measured, in ms: (median, min) of a round (decoding every Pod, then
/// the checks) and of the checks alone.
pub struct LuaJit {
    pub round: (f64, f64),
    pub checks: (f64, f64),
}

/// Runs `luajit.lua` over `pods`; `Err` says why there is no figure (no `luajit`, no
/// `cjson`, or a failure).
pub fn measure(pods: &[Value], repeats: usize, checks: usize) -> Result<LuaJit, String> {
    let dir = std::env::temp_dir().join(format!("fleetpulse-lua-round-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let write = |name: &str, bytes: &[u8]| -> Result<String, String> {
        let path = dir.join(name);
        let mut file = std::fs::File::create(&path).map_err(|e| e.to_string())?;
        file.write_all(bytes).map_err(|e| e.to_string())?;
        Ok(path.to_string_lossy().into_owned())
    };
    let lines: String = pods.iter().map(|p| format!("{p}\n")).collect();
    let pods_path = write("pods.jsonl", lines.as_bytes())?;
    let condition_path = write("condition.lua", READY_PODS.as_bytes())?;
    let script_path = write("luajit.lua", include_bytes!("luajit.lua"))?;
    let output = Command::new("luajit")
        .args([&script_path, &pods_path, &condition_path])
        .args([repeats.to_string(), checks.to_string()])
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let output = output.map_err(|e| {
        format!("no luajit to run ({e}); on Debian: apt-get install luajit lua-cjson")
    })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "luajit failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    parse(&stdout).ok_or_else(|| format!("unexpected luajit output: {}", stdout.trim()))
}

/// Reads `luajit_round_ms=M min=N luajit_checks_ms=M min=N`.
fn parse(line: &str) -> Option<LuaJit> {
    let numbers: Vec<f64> = line
        .split_whitespace()
        .filter_map(|field| field.split_once('=')?.1.parse().ok())
        .collect();
    match numbers[..] {
        [round, round_min, checks, checks_min] => Some(LuaJit {
            round: (round, round_min),
            checks: (checks, checks_min),
        }),
        _ => None,
    }
}
