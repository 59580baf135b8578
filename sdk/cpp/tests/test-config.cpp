// keywarden.json format 1: what is accepted and what is refused (and how).
#include <cstdio>
#include <fstream>

#include "runner.hpp"
#include "support.hpp"

using keywarden::Config;
using keywarden::ConfigError;

namespace {
const char* kKey = "Z7P1CneKviCF7Ws179UP02Vmjh+ezX1TCXb5UqUdRcM=";

nlohmann::json base() {
  return {{"format", 1},
          {"base_url", "http://127.0.0.1:8080"},
          {"app_name", "Demo"},
          {"api_key", "0123456789abcdef0123456789abcdef"},
          {"version", "1.2"},
          {"response_keys", {{{"kid", "k1"}, {"alg", "Ed25519"}, {"public_key", kKey}}}}};
}

std::string refusal(const nlohmann::json& c) {
  try {
    Config::parse(c.dump());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

KW_TEST(config_parse, "config/parses format 1 and ignores unknown fields") {
  auto j = base();
  j["future_field"] = {{"x", 1}};
  Config c = Config::parse(j.dump());
  CHECK_EQ(c.baseUrl, std::string("http://127.0.0.1:8080"));
  CHECK_EQ(c.appName, std::string("Demo"));
  CHECK_EQ(c.apiKey, std::string("0123456789abcdef0123456789abcdef"));
  CHECK_EQ(c.version, std::string("1.2"));
  CHECK_EQ(c.responseKeys.size(), std::size_t{1});
  CHECK_EQ(c.responseKeys[0].kid, std::string("k1"));
  CHECK(!c.apiSecret.has_value());
  j["api_secret"] = "s3cret";
  CHECK(Config::parse(j.dump()).apiSecret == std::string("s3cret"));
  j["api_secret"] = "";
  CHECK(!Config::parse(j.dump()).apiSecret.has_value());
  j.erase("version");
  CHECK_EQ(Config::parse(j.dump()).version, std::string("1.0"));
}

KW_TEST(config_refuse, "config/refuses what it cannot use, with a ConfigError naming the field") {
  auto j = base();
  j["format"] = 2;
  CHECK(refusal(j).find("format") != std::string::npos);
  j = base();
  j.erase("format");
  CHECK(refusal(j).find("format") != std::string::npos);
  j = base();
  j["base_url"] = "ftp://x";
  CHECK(refusal(j).find("base_url") != std::string::npos);
  j = base();
  j.erase("api_key");
  CHECK(refusal(j).find("api_key") != std::string::npos);
  j = base();
  j["response_keys"] = nlohmann::json::array();
  CHECK(refusal(j).find("response_keys") != std::string::npos);
  j = base();
  j["response_keys"][0]["public_key"] = "AAAA";
  CHECK(refusal(j).find("32 bytes") != std::string::npos);
  j = base();
  j["response_keys"][0]["alg"] = "RSA";
  CHECK(refusal(j).find("alg") != std::string::npos);
  j = base();
  j["response_keys"][0].erase("kid");
  CHECK(refusal(j).find("kid") != std::string::npos);
  j = base();
  j["version"] = 2;
  CHECK(refusal(j).find("version") != std::string::npos);
  bool threw = false;
  try {
    Config::parse("{not json");
  } catch (const ConfigError& e) {
    threw = std::string(e.what()).find("not JSON") != std::string::npos;
  }
  CHECK(threw);
  threw = false;
  try {
    Config::parse("[1,2]");
  } catch (const ConfigError&) {
    threw = true;
  }
  CHECK(threw);
}

KW_TEST(config_from, "config/fromConfig takes JSON text or a path; a missing file is a ConfigError") {
  auto j = base();
  auto fromText = keywarden::Client::fromConfig("  \n" + j.dump());
  CHECK_EQ(fromText.config().apiKey, j["api_key"].get<std::string>());
  std::string path = "kw-test-config.json";
  {
    std::ofstream out(path);
    out << j.dump(2);
  }
  keywarden::Options o;
  o.baseUrl = "http://override.test:1///";
  auto fromFile = keywarden::Client::fromConfig(path, o);
  std::remove(path.c_str());
  CHECK_EQ(fromFile.config().version, std::string("1.2"));
  bool threw = false;
  try {
    keywarden::Client::fromConfig("does/not/exist/keywarden.json");
  } catch (const ConfigError& e) {
    threw = std::string(e.what()).find("cannot read") != std::string::npos;
  }
  CHECK(threw);
  // Response encryption is keyed with the api_secret: asking for it without one is refused up front.
  keywarden::Options enc;
  enc.encKey = "k";
  threw = false;
  try {
    keywarden::Client::fromConfig(j.dump(), enc);
  } catch (const ConfigError&) {
    threw = true;
  }
  CHECK(threw);
}
