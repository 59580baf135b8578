-- init, login or license calls. Every request comes from a different X-Forwarded-For address (the
-- server trusts 127.0.0.1 as a proxy here), so per-IP rate limits measure nothing but themselves.
-- KW_CALL: init | login | license; KW_SESSIONS: "session" lines (login, license);
-- KW_API_KEY, KW_USERNAME, KW_PASSWORD, KW_LICENSE.
local call = os.getenv("KW_CALL")
dofile(os.getenv("KW_LUA_DIR") .. "/common.lua")

local counter = 0
local lines = {}

function setup(thread)
  if call ~= "init" and #lines == 0 then
    for line in io.lines(os.getenv("KW_SESSIONS")) do table.insert(lines, line) end
  end
  counter = counter + 1
  thread:set("session", lines[counter] or "")
  thread:set("tid", counter)
end

local n = 0

function request()
  n = n + 1
  local ip = "10." .. (tid % 250) .. "." .. math.floor(n / 250) % 250 .. "." .. (n % 250)
  local headers = { ["Content-Type"] = "application/json", ["X-Forwarded-For"] = ip, ["X-Nonce"] = "bench-nonce-" .. n .. "-00000" }
  local body
  if call == "init" then
    body = '{"api_key":"' .. os.getenv("KW_API_KEY") .. '"}'
  elseif call == "login" then
    body = '{"session":"' .. session .. '","username":"' .. os.getenv("KW_USERNAME") .. '","password":"' .. os.getenv("KW_PASSWORD") .. '","hwid":"bench-device-0001"}'
  else
    body = '{"session":"' .. session .. '","license":"' .. os.getenv("KW_LICENSE") .. '","hwid":"bench-device-0001"}'
  end
  return wrk.format("POST", "/api/client/" .. call, headers, body)
end

function done(summary, latency, requests)
  report(summary, latency)
end
