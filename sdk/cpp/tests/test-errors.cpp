// The embedded error table is sdk/vectors/errors.json (generated from the server's src/errors.ts).
#include <set>
#include <tuple>

#include "internal.hpp"
#include "runner.hpp"
#include "support.hpp"

using keywarden::ErrorCode;

KW_TEST(codes, "errors/the code list is errors.json's, in order") {
  auto v = kwtest::vectors("errors.json");
  std::vector<std::string> ours;
  for (int i = 0; i <= static_cast<int>(ErrorCode::session_limit); ++i) ours.push_back(keywarden::to_string(static_cast<ErrorCode>(i)));
  CHECK_EQ(ours.size(), v["codes"].size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    CHECK_EQ(ours[i], v["codes"][i].get<std::string>());
    CHECK(keywarden::errorCodeFromString(ours[i]) == static_cast<ErrorCode>(i));
  }
  CHECK(!keywarden::errorCodeFromString("nope").has_value());
  CHECK_EQ(v["fallback"].get<std::string>(), std::string("server"));
}

KW_TEST(table, "errors/the embedded table equals errors.json entries") {
  auto v = kwtest::vectors("errors.json");
  std::set<std::tuple<int, std::string, std::string>> theirs, ours;
  for (const auto& e : v["entries"]) theirs.insert({e["status"].get<int>(), e["detail"].get<std::string>(), e["sdk_code"].get<std::string>()});
  for (const auto& e : keywarden::errorTable()) ours.insert({e.status, e.detail, keywarden::to_string(e.code)});
  CHECK_EQ(ours.size(), keywarden::errorTable().size());  // no duplicate rows
  for (const auto& t : theirs)
    CHECK_MSG(ours.count(t) == 1, "missing " + std::to_string(std::get<0>(t)) + " " + std::get<1>(t) + " -> " + std::get<2>(t));
  for (const auto& t : ours)
    CHECK_MSG(theirs.count(t) == 1, "extra " + std::to_string(std::get<0>(t)) + " " + std::get<1>(t) + " -> " + std::get<2>(t));
  for (const auto& e : v["entries"]) {
    std::string detail = e["detail"];
    CHECK_EQ(keywarden::to_string(keywarden::codeFor(e["status"].get<int>(), &detail)), e["sdk_code"].get<std::string>());
  }
}

KW_TEST(fallbacks, "errors/status fallbacks and extra cases") {
  auto v = kwtest::vectors("errors.json");
  std::map<int, std::string> theirs, ours;
  for (auto it = v["status_fallbacks"].begin(); it != v["status_fallbacks"].end(); ++it) theirs[std::stoi(it.key())] = it.value();
  for (const auto& [s, c] : keywarden::errorStatusFallbacks()) ours[s] = keywarden::to_string(c);
  CHECK(theirs == ours);
  CHECK(v["extra_cases"].size() >= 3);
  for (const auto& c : v["extra_cases"]) {
    auto e = keywarden::detail::errorFromAnswer(c["status"].get<int>(), c["detail"], nullptr);
    CHECK_MSG(keywarden::to_string(e.code()) == c["sdk_code"].get<std::string>(), c["why"].get<std::string>());
    CHECK_EQ(e.status(), c["status"].get<int>());
    CHECK_EQ(e.detailJson(), c["detail"].dump());
  }
  CHECK_EQ(keywarden::codeFor(418, nullptr), ErrorCode::server);
  std::string other = "something new";
  CHECK_EQ(keywarden::codeFor(400, &other), ErrorCode::server);
  CHECK_EQ(keywarden::codeFor(403, &other), ErrorCode::app_disabled);
}

KW_TEST(data, "errors/426 carries latest_version and update_url, 429 carries retry_after") {
  nlohmann::json detail = {{"message", "Version 2.0 is out."}, {"latest_version", "2.0"},
                           {"update_url", "https://example.com/download/2.0"}, {"force_update", true}};
  auto e = keywarden::detail::errorFromAnswer(426, detail, nullptr);
  CHECK_EQ(e.code(), ErrorCode::update_required);
  CHECK_EQ(e.latestVersion(), std::string("2.0"));
  CHECK_EQ(e.updateUrl(), std::string("https://example.com/download/2.0"));
  CHECK(std::string(e.what()).find("Version 2.0 is out.") != std::string::npos);
  std::string retry = "42";
  auto r = keywarden::detail::errorFromAnswer(429, "Rate limit exceeded", &retry);
  CHECK_EQ(r.code(), ErrorCode::rate_limited);
  CHECK(r.retryAfter() == 42);
  std::string junk = "soon";
  CHECK(!keywarden::detail::errorFromAnswer(429, "Rate limit exceeded", &junk).retryAfter().has_value());
  auto l = keywarden::detail::errorFromAnswer(429, "Too many failed attempts, try again later.", &retry);
  CHECK_EQ(l.code(), ErrorCode::locked_out);
  CHECK(l.retryAfter() == 42);
}
