// The update program of test/helpers/sdk-updates.ts (its protocol is described there), with the C++ SDK.
//   update <keywarden.json> <license key> <hwid> <dir>
#include <keywarden/keywarden.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: update <keywarden.json> <license key> <hwid> <dir>\n";
    return 2;
  }
  const std::string dir = argv[4];
  const char* tamperEnv = std::getenv("KW_DL_TAMPER_URLS");
  auto tamper = nlohmann::json::parse(tamperEnv ? tamperEnv : "{}");
  auto say = [](const nlohmann::json& j) { std::cout << j.dump() << std::endl; };
  try {
    auto c = keywarden::Client::fromConfig(argv[1]);
    c.init();
    c.activateLicense(argv[2], argv[3]);
    auto none = c.checkUpdate("1.1.0", "stable", "linux", "x64");
    say({{"step", "none"}, {"upgrade", none ? nlohmann::json("an offer") : nlohmann::json(nullptr)}});
    auto offer = c.checkUpdate("1.0.0", "stable", "linux", "x64");
    if (!offer) throw std::runtime_error("no offer for 1.0.0");
    auto listed = nlohmann::json::array();
    for (const auto& a : offer->artifacts)
      listed.push_back({{"filename", a.filename}, {"platform", a.platform}, {"arch", a.arch}, {"size", a.size}});
    say({{"step", "offer"}, {"version", offer->version}, {"channel", offer->channel}, {"artifacts", listed}});
    const auto& art = offer->artifacts.at(0);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> seen;
    auto written = c.downloadUpdate(art, (fs::path(dir) / "app.bin").string(),
                                    [&](std::uint64_t got, std::uint64_t total) { seen.emplace_back(got, total); });
    bool monotonic = true;
    for (std::size_t i = 1; i < seen.size(); ++i) monotonic = monotonic && seen[i].first > seen[i - 1].first;
    say({{"step", "download"},
         {"path", written},
         {"calls", seen.size()},
         {"last", {seen.back().first, seen.back().second}},
         {"monotonic", monotonic}});
    for (const auto& [mode, base] : tamper.items()) {
      const auto d = fs::path(dir) / mode;
      fs::create_directories(d);
      auto spoiled = art;
      auto slash = art.url.find('/', art.url.find("://") + 3);
      spoiled.url = base.get<std::string>() + art.url.substr(slash);
      try {
        c.downloadUpdate(spoiled, (d / "app.bin").string());
        say({{"step", "tamper"}, {"mode", mode}, {"error", nullptr}});
      } catch (const keywarden::UpdateError& e) {
        std::vector<std::string> files;
        for (const auto& f : fs::directory_iterator(d)) files.push_back(f.path().filename().string());
        std::sort(files.begin(), files.end());
        say({{"step", "tamper"},
             {"mode", mode},
             {"error", "UpdateError"},
             {"reason", e.reason()},
             {"code", keywarden::to_string(e.code())},
             {"files", files}});
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "failed: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
