-- Kubernetes objects as scripts see them: lazily converted, modifiable, copy on write.
--
-- Every JSON object or array of a round is a proxy: an empty table whose (private,
-- per-node) metatable reads through to the node's content. The content is converted
-- from JSON on first touch (`materialise`, in Rust) and then shared by every check of
-- the round: reading a field is a table lookup through `__index`, native in the VM.
-- The first write to a proxy copies its content into the proxy itself ("detaches" it)
-- and records it; after each evaluation `restore` empties the detached proxies and
-- re-attaches them, so no change is visible to another check or to the next round.
--
-- Trusted code: what it keeps in locals (metatables, contents, the journal) is out of
-- scripts' reach (no `debug`, protected metatables).

local materialise, grant = ...
local next, rawget, rawset, rawlen, type, error, setmetatable, getmetatable, collectgarbage =
  next, rawget, rawset, rawlen, type, error, setmetatable, getmetatable, collectgarbage

local meta_of = {}                  -- proxy -> its metatable
local journal, journal_n = {}, 0    -- proxies detached by the running evaluation

local cow, len, iterate, lazy

local function proxy(id)
  local mt = { __index = lazy, __newindex = cow, __len = len, __pairs = iterate,
               __metatable = false, id = id }
  local p = setmetatable({}, mt)
  meta_of[p] = mt
  return p
end

-- Converts a node's content from JSON, once per round.
local function attach(mt)
  local before = collectgarbage("count")
  local content, kids = materialise(mt.id)
  for i = 1, #kids, 2 do
    content[kids[i]] = proxy(kids[i + 1])
  end
  mt[1] = content
  mt.__index = content
  -- Converting is the round's work, not the script's: it does not count against the
  -- evaluation's memory allowance.
  grant(before)
  return content
end

-- The shared content of an attached proxy, or nil once detached.
local function content_of(p)
  local mt = meta_of[p]
  if mt == nil or mt.__newindex == nil then return nil end
  return mt[1] or attach(mt)
end

lazy = function(p, k)
  return attach(meta_of[p])[k]
end

local function detach(p)
  local content = content_of(p)
  for k, v in next, content do rawset(p, k, v) end
  local mt = meta_of[p]
  mt.__index, mt.__newindex, mt.__len, mt.__pairs = nil, nil, nil, nil
  journal_n = journal_n + 1
  journal[journal_n] = p
end

cow = function(p, k, v)
  detach(p)
  rawset(p, k, v)
end

len = function(p)
  return rawlen(content_of(p))
end

iterate = function(p)
  local content = content_of(p)
  return function(_, k) return next(content, k) end, p, nil
end

-- Undoes every detach of the evaluation that just ended.
local function restore()
  for i = 1, journal_n do
    local p = journal[i]
    journal[i] = nil
    local k = next(p)
    while k ~= nil do
      rawset(p, k, nil)
      k = next(p)
    end
    local mt = meta_of[p]
    mt.__index, mt.__newindex, mt.__len, mt.__pairs = mt[1], cow, len, iterate
  end
  journal_n = 0
end

-- Base functions that see proxies as the tables they stand for.
local overrides = {
  next = function(t, k)
    local content = content_of(t)
    if content then return next(content, k) end
    return next(t, k)
  end,
  rawget = function(t, k)
    local content = content_of(t)
    if content then return rawget(content, k) end
    return rawget(t, k)
  end,
  rawset = function(t, k, v)
    if content_of(t) then detach(t) end
    return rawset(t, k, v)
  end,
  rawlen = function(t)
    local content = content_of(t)
    if content then return rawlen(content) end
    return rawlen(t)
  end,
  getmetatable = function(t)
    if meta_of[t] then return nil end
    return getmetatable(t)
  end,
}

-- A plain deep copy (for json.encode and other Rust-side readers of script values).
local function plain(v, seen)
  if type(v) ~= "table" then return v end
  seen = seen or {}
  if seen[v] then error("cannot encode recursively nested tables to JSON", 0) end
  seen[v] = true
  local out = {}
  local k, x = overrides.next(v, nil)
  while k ~= nil do
    out[k] = plain(x, seen)
    k, x = overrides.next(v, k)
  end
  seen[v] = nil
  return out
end

-- Converts a whole object now (the eager baseline of the benchmark).
local function eager(p)
  local content = content_of(p)
  for _, v in next, content do
    if meta_of[v] then eager(v) end
  end
end

-- Root proxies, created when a check first lists the object.
local roots = {}
local function root(id)
  local p = roots[id]
  if p == nil then
    p = proxy(id)
    roots[id] = p
  end
  return p
end

-- The array of the roots `ids`, in order (a check's `resources` or a `ctx` list).
local function pick(ids)
  local out = {}
  for i = 1, #ids do out[i] = root(ids[i]) end
  return out
end

return { root = root, pick = pick, restore = restore, overrides = overrides, plain = plain, eager = eager }
