-- Heartbeats: one connection per wrk thread, each thread carrying one session's token chain
-- (wrk cannot tell which connection a response belongs to, so a chain needs its own thread).
-- KW_SESSIONS: a file of "session token" lines; KW_DELAY_MS: pause before each request (rate control).
dofile(os.getenv("KW_LUA_DIR") .. "/common.lua")

local counter = 0
local lines = {}

function setup(thread)
  if #lines == 0 then
    for line in io.lines(os.getenv("KW_SESSIONS")) do table.insert(lines, line) end
  end
  counter = counter + 1
  local s, t = lines[counter]:match("^(%S+) (%S+)$")
  thread:set("session", s)
  thread:set("token", t)
  thread:set("pause", tonumber(os.getenv("KW_DELAY_MS") or "0"))
end

local idx = 0

function request()
  idx = idx + 1
  local body = '{"session":"' .. session .. '","token":"' .. token .. '","system_id":"bench-system-01","beat_index":' .. idx .. ',"code_hash":"0123456789abcdef"}'
  return wrk.format("POST", "/api/client/heartbeat", { ["Content-Type"] = "application/json", ["X-Nonce"] = "bench-nonce-" .. idx .. "-00000" }, body)
end

function response(status, headers, body)
  if status == 200 then
    token = body:match('"new_token":"(TT%x+)"') or token
  end
end

function delay()
  return pause
end

function done(summary, latency, requests)
  report(summary, latency)
end
