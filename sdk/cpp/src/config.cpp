// keywarden.json, format 1 (sdk/vectors/README.md): what the dashboard's SDK zip carries.
#include <fstream>
#include <sstream>

#include "crypto.hpp"
#include "internal.hpp"

namespace keywarden {

namespace {
[[noreturn]] void fail(const std::string& msg) { throw ConfigError("keywarden config: " + msg); }

const nlohmann::json* field(const nlohmann::json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string optionalString(const nlohmann::json& o, const char* name) {
  const auto* v = field(o, name);
  if (!v) return {};
  if (!v->is_string()) fail(std::string(name) + " must be a string");
  return v->get<std::string>();
}
}  // namespace

Config Config::parse(const std::string& text) {
  nlohmann::json c;
  try {
    c = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(std::string("not JSON: ") + e.what());
  }
  if (!c.is_object()) fail("not a JSON object");
  const auto* format = field(c, "format");
  if (!format || !format->is_number_integer() || format->get<long long>() != 1)
    fail("unsupported format " + (format ? format->dump() : std::string("(missing)")) + " (this SDK reads format 1)");
  Config out;
  out.baseUrl = optionalString(c, "base_url");
  if (out.baseUrl.rfind("http://", 0) != 0 && out.baseUrl.rfind("https://", 0) != 0) fail("base_url must be an http(s) URL");
  out.apiKey = optionalString(c, "api_key");
  if (out.apiKey.empty()) fail("api_key missing");
  out.appName = optionalString(c, "app_name");
  out.appId = optionalString(c, "app_id");
  if (field(c, "app_id") && out.appId.empty()) fail("app_id must be a non-empty string");
  if (field(c, "version")) out.version = optionalString(c, "version");
  std::string secret = optionalString(c, "api_secret");
  if (!secret.empty()) out.apiSecret = secret;
  const auto* keys = field(c, "response_keys");
  if (!keys || !keys->is_array() || keys->empty()) fail("response_keys must list at least one key");
  detail::ensureSodium();
  for (const auto& k : *keys) {
    if (!k.is_object()) fail("a response key is not an object");
    ResponseKey rk;
    rk.kid = optionalString(k, "kid");
    if (rk.kid.empty()) fail("a response key has no kid");
    std::string alg = optionalString(k, "alg");
    if (!alg.empty() && alg != "Ed25519") fail("key " + rk.kid + ": unsupported alg " + alg);
    rk.publicKey = optionalString(k, "public_key");
    auto raw = detail::base64Decode(rk.publicKey);
    if (!raw || raw->size() != 32) fail("key " + rk.kid + ": public_key must be base64 of 32 bytes");
    out.responseKeys.push_back(std::move(rk));
  }
  return out;
}

Config Config::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return parse(ss.str());
  } catch (const ConfigError& e) {
    throw ConfigError(std::string(e.what()) + " (in " + path + ")");
  }
}

}  // namespace keywarden
