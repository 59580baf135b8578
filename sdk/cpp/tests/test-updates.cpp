// sdk/vectors/artifacts.json: every case downloaded for real (from a socket server on 127.0.0.1 serving
// the case's bytes) through Client::downloadUpdate, which must accept it or refuse it with the reason the
// case names, leaving nothing behind when it refuses; and the refusals of a link.
#include "runner.hpp"
#include "support.hpp"

#if !defined(_WIN32)
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "crypto.hpp"
#include "socket-server.hpp"

namespace fs = std::filesystem;

namespace {

/** Serves `files` by path with Content-Length; anything else is 403 Download link expired. */
struct FileServer {
  std::mutex mu;
  std::map<std::string, std::string> files;
  kwtest::SocketServer server{[this](int c) {
    auto req = kwtest::readRequest(c);
    auto start = req.find(' ') + 1;
    auto path = req.substr(start, req.find(' ', start) - start);
    std::string body, status = "200 OK";
    {
      std::lock_guard<std::mutex> lk(mu);
      auto it = files.find(path);
      if (it != files.end()) body = it->second;
      else {
        status = "403 Forbidden";
        body = R"({"detail":"Download link expired"})";
      }
    }
    kwtest::sendAll(c, "HTTP/1.1 " + status + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  }};
};

keywarden::Client clientFor(const nlohmann::json& v, const std::string& appId, const std::string& base) {
  nlohmann::json config = {{"format", 1}, {"base_url", base}, {"api_key", "k"}, {"app_id", appId}, {"response_keys", v["pinned_keys"]}};
  return keywarden::Client::fromConfig(config.dump());
}

keywarden::Artifact artifactOf(const nlohmann::json& c, const std::string& url) {
  const auto& a = c["artifact"];
  keywarden::Artifact out;
  out.appId = c["app_id"];
  out.version = c["version"];
  out.filename = a["filename"];
  out.platform = out.arch = "any";
  out.size = a["size"].get<std::uint64_t>();
  out.sha512 = a["sha512"];
  out.signature = a["signature"];
  out.kid = a["kid"];
  out.url = url;
  return out;
}

fs::path tempDir() {
  auto d = fs::temp_directory_path() / ("kw-cpp-update-" + keywarden::detail::toHex(keywarden::detail::randomBytes(6)));
  fs::create_directories(d);
  return d;
}

std::vector<std::string> listing(const fs::path& d) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(d)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

keywarden::UpdateError updateFailure(const std::function<void()>& run) {
  try {
    run();
  } catch (const keywarden::UpdateError& e) {
    return e;
  } catch (const std::exception& e) {
    kwtest::fail(__FILE__, __LINE__, std::string("expected an UpdateError, got: ") + e.what());
  }
  kwtest::fail(__FILE__, __LINE__, "expected an UpdateError");
}

}  // namespace

KW_TEST(update_vectors, "vectors/artifacts download or are refused for the reason each case names, nothing left behind") {
  auto v = kwtest::vectors("artifacts.json");
  FileServer files;
  std::set<std::string> seen;
  int i = 0;
  for (const auto& c : v["cases"]) {
    const std::string name = c["name"];
    auto bytes = *keywarden::detail::base64Decode(c["downloaded"].get<std::string>());
    const std::string path = "/dl/" + std::to_string(i++);
    {
      std::lock_guard<std::mutex> lk(files.mu);
      files.files[path] = bytes;
    }
    auto dir = tempDir();
    auto art = artifactOf(c, files.server.url() + path);
    const auto target = (dir / art.filename).string();
    auto client = clientFor(v, art.appId, files.server.url());
    std::uint64_t got = 0, total = 0;
    if (c["valid"].get<bool>()) {
      CHECK_MSG(client.downloadUpdate(art, target, [&](std::uint64_t r, std::uint64_t t) { got = r; total = t; }) == target, name);
      CHECK_MSG(kwtest::readFile(target) == bytes, name + ": bytes");
      CHECK_MSG(listing(dir) == std::vector<std::string>{art.filename}, name + ": listing");
      if (!bytes.empty()) CHECK_MSG(got == bytes.size() && total == bytes.size(), name + ": progress");
    } else {
      auto e = updateFailure([&] { client.downloadUpdate(art, target); });
      CHECK_MSG(e.reason() == c["reason"].get<std::string>(), name + ": got " + e.reason());
      CHECK_EQ(e.code(), keywarden::ErrorCode::verification);
      CHECK_MSG(listing(dir).empty(), name + ": left behind");
      seen.insert(e.reason());
    }
    fs::remove_all(dir);
  }
  auto reasons = v["reasons"].get<std::vector<std::string>>();
  CHECK_EQ(seen.size(), reasons.size());
  for (const auto& r : reasons) CHECK_MSG(seen.count(r) == 1, r);
}

KW_TEST(update_refused_link, "updates/a refused link is download_failed (server, 403, its detail) and the target is kept") {
  auto v = kwtest::vectors("artifacts.json");
  const auto& c = v["cases"][0];
  FileServer files;
  auto dir = tempDir();
  const auto target = (dir / "app.bin").string();
  {
    std::ofstream out(target, std::ios::binary);
    out << "the running version";
  }
  auto client = clientFor(v, c["app_id"], files.server.url());
  auto e = updateFailure([&] { client.downloadUpdate(artifactOf(c, files.server.url() + "/gone"), target); });
  CHECK_EQ(e.reason(), std::string("download_failed"));
  CHECK_EQ(e.code(), keywarden::ErrorCode::server);
  CHECK_EQ(e.status(), 403);
  CHECK_EQ(e.detailJson(), std::string(R"("Download link expired")"));
  CHECK_MSG(listing(dir) == std::vector<std::string>{"app.bin"}, "listing");
  CHECK_EQ(kwtest::readFile(target), std::string("the running version"));
  fs::remove_all(dir);
}

KW_TEST(update_unreachable_link, "updates/an unreachable link is a network download_failed") {
  auto v = kwtest::vectors("artifacts.json");
  const auto& c = v["cases"][0];
  auto dir = tempDir();
  const std::string url = "http://127.0.0.1:" + std::to_string(kwtest::closedPort());
  auto client = clientFor(v, c["app_id"], url);
  auto e = updateFailure([&] { client.downloadUpdate(artifactOf(c, url + "/x"), (dir / "a").string()); });
  CHECK_EQ(e.reason(), std::string("download_failed"));
  CHECK_EQ(e.code(), keywarden::ErrorCode::network);
  CHECK_MSG(listing(dir).empty(), "left behind");
  fs::remove_all(dir);
}
#endif
