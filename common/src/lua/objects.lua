-- Kubernetes objects as scripts see them: lazily converted, modifiable, copy on write.
--
-- Every JSON object or array a state holds is a proxy: an empty table whose metatable reads
-- through to the node's content. Until a script first touches it a proxy is pending: its
-- metatable is the shared `pending` table and it holds its node id under a private key.
-- The first touch converts the node (`materialise`, in Rust, which converts small
-- subtrees in the same call) and gives the proxy a metatable of its own,
-- `{ __index = content, ... }`; the content is then shared by every check of the round and
-- of every later round that takes in the same object version, and reading a field is a
-- table lookup through `__index`, native in the VM.
-- The first write to a proxy copies its content into the proxy itself ("detaches" it)
-- and records it; after each evaluation `restore` empties the detached proxies and
-- re-attaches them, so no change is visible to another check or to the next round.
--
-- Trusted code: what it keeps in locals (metatables, contents, the journal) is out of
-- scripts' reach (no `debug`; `getmetatable` and `setmetatable` see proxies as plain
-- tables).

local materialise, force_metatable = ...
local next, rawget, rawset, rawlen, type, error, getmetatable, setmetatable =
  next, rawget, rawset, rawlen, type, error, getmetatable, setmetatable
local move = table.move

local ID = {}                       -- private key: a pending proxy's node id
local journal, journal_n = {}, 0    -- proxies detached by the running evaluation, and
                                    -- the metatable each had
local pending, cow

-- Whether `m` (a raw metatable) is a proxy's: pending, or attached.
local function is_proxy_meta(m)
  return m == pending or (type(m) == "table" and rawget(m, "__newindex") == cow)
end

-- The content of a proxy that is not detached (converted first if pending); nil for any
-- other value. Nothing is kept per proxy outside the proxy and its metatable: a table
-- of all proxies would be written at every conversion and so re-read by every
-- young-generation collection.
local function content_of(p)
  local m = getmetatable(p)
  if m == pending then
    m = materialise(p, rawget(p, ID))
  elseif not is_proxy_meta(m) then
    return nil
  end
  return m.__index
end

local function detach(p)
  local content = content_of(p)
  local m = getmetatable(p)
  for k, v in next, content do rawset(p, k, v) end
  force_metatable(p, nil)
  journal[journal_n + 1], journal[journal_n + 2] = p, m
  journal_n = journal_n + 2
end

cow = function(p, k, v)
  detach(p)
  rawset(p, k, v)
end

local function len(p)
  return rawlen(content_of(p))
end

local function iterate(p)
  local content = content_of(p)
  return function(_, k) return next(content, k) end, p, nil
end

-- The metatable of every pending proxy.
pending = {
  __index = function(p, k) return content_of(p)[k] end,
  __newindex = cow,
  __len = len,
  __pairs = iterate,
}

-- Undoes every detach of the evaluation that just ended (a metatable the script set on
-- a detached proxy included, protected or not).
local function restore()
  for i = 1, journal_n, 2 do
    local p, m = journal[i], journal[i + 1]
    journal[i], journal[i + 1] = nil, nil
    local k = next(p)
    while k ~= nil do
      rawset(p, k, nil)
      k = next(p)
    end
    force_metatable(p, m)
  end
  journal_n = 0
end

-- Base functions that see proxies as the tables they stand for.
local overrides = {
  next = function(t, k)
    return next(content_of(t) or t, k)
  end,
  rawget = function(t, k)
    return rawget(content_of(t) or t, k)
  end,
  rawset = function(t, k, v)
    if content_of(t) then detach(t) end
    return rawset(t, k, v)
  end,
  rawlen = function(t)
    return rawlen(content_of(t) or t)
  end,
  getmetatable = function(t)
    local m = getmetatable(t)
    if is_proxy_meta(m) then return nil end
    return m
  end,
  setmetatable = function(t, mt)
    if content_of(t) then detach(t) end
    return setmetatable(t, mt)
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

-- Converts a whole object now (the eager baseline of the benchmark): in an eager round
-- `materialise` converts every table of the object when the root is first touched.
local function eager(p)
  content_of(p)
end

-- Root proxies, created when a check first lists the object, kept while the state holds
-- the object (rounds that take in the same object version again reuse them).
local roots = {}
local function root(id)
  local p = roots[id]
  if p == nil then
    p = setmetatable({ [ID] = id }, pending)
    roots[id] = p
  end
  return p
end

-- Drops the root proxies of `ids` (objects the state lets go of): what was converted of
-- them is garbage once no evaluation holds it.
local function forget(ids)
  for i = 1, #ids do roots[ids[i]] = nil end
end

-- The array of the roots `ids`, in order (a check's `resources` or a `ctx` list).
local function pick(ids)
  local out = {}
  for i = 1, #ids do out[i] = root(ids[i]) end
  return out
end

-- `fresh` filled with the elements of `template` (an array `pick` made), in order: each
-- evaluation's own copy of a kept array.
local function copy(template, fresh)
  return move(template, 1, #template, 1, fresh)
end

return {
  root = root, pick = pick, copy = copy, forget = forget, restore = restore, overrides = overrides, plain = plain,
  eager = eager,
  -- For `materialise`: what it builds proxies and metatables from.
  kit = { pending = pending, id = ID, cow = cow, len = len, iterate = iterate },
}
