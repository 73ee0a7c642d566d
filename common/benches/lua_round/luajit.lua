-- The benchmark's round on LuaJIT with lua-cjson, the way a LuaJIT engine would run it
-- with no state kept: every Pod's JSON text decoded to tables (cjson.decode, eager), then
-- each check compiled and run in an environment of its own over them. Also the checks
-- alone, over tables decoded beforehand. JIT on (the default), no hook, no sandbox.
--
-- luajit luajit.lua PODS.jsonl CONDITION.lua REPEATS CHECKS
-- prints: luajit_round_ms=MEDIAN min=MIN luajit_checks_ms=MEDIAN min=MIN

local cjson = require("cjson")
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } fp_timespec;
int clock_gettime(int clock, fp_timespec *ts);
]]
local ts = ffi.new("fp_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local pods_path, condition_path = arg[1], arg[2]
local repeats, checks = tonumber(arg[3]), tonumber(arg[4])
local texts = {}
for line in io.lines(pods_path) do texts[#texts + 1] = line end
local file = assert(io.open(condition_path))
local condition = file:read("*a")
file:close()

local function decode_all()
  local resources = {}
  for i = 1, #texts do resources[i] = cjson.decode(texts[i]) end
  return resources
end

local function run_checks(resources)
  for _ = 1, checks do
    local env = {}
    for k, v in pairs(_G) do env[k] = v end
    env.resources = resources
    local chunk = assert(loadstring(condition, "=condition"))
    setfenv(chunk, env)
    chunk()
    local result = env.evaluate(resources)
    assert(result.pass, result.message)
  end
end

local function median_min(runs)
  table.sort(runs)
  return runs[math.floor(#runs / 2) + 1], runs[1]
end

local decoded = decode_all()
run_checks(decoded) -- warm-up: traces compiled
run_checks(decode_all())
local rounds, alone = {}, {}
for i = 1, repeats do
  local started = now_ms()
  run_checks(decode_all())
  rounds[i] = now_ms() - started
  started = now_ms()
  run_checks(decoded)
  alone[i] = now_ms() - started
end
local round_median, round_min = median_min(rounds)
local alone_median, alone_min = median_min(alone)
print(string.format("luajit_round_ms=%.2f min=%.2f luajit_checks_ms=%.2f min=%.2f",
  round_median, round_min, alone_median, alone_min))
