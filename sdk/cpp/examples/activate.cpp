// Example: activate a license key and keep a verified heartbeat for three beats.
//
//   keywarden_activate <LICENSE-KEY> [path/to/keywarden.json]
//
// Reads keywarden.json (default: ./keywarden.json, as the dashboard's SDK download ships it),
// opens a session, activates the key for this machine and beats three times. Every answer is
// verified against the pinned keys; every failure is a keywarden::Error with a code.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

#include "keywarden/keywarden.hpp"

namespace {

std::string formatTime(const std::optional<keywarden::TimePoint>& t) {
  if (!t) return "never";
  std::time_t secs = std::chrono::system_clock::to_time_t(*t);
  char buf[32];
  std::tm tm{};
#if defined(_WIN32)
  gmtime_s(&tm, &secs);
#else
  gmtime_r(&secs, &tm);
#endif
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

int explain(const keywarden::Error& e) {
  std::fprintf(stderr, "keywarden error [%s]: %s\n", keywarden::to_string(e.code()), e.what());
  switch (e.code()) {
    case keywarden::ErrorCode::update_required:
      std::fprintf(stderr, "  version %s is required: %s\n", e.latestVersion().c_str(), e.updateUrl().c_str());
      break;
    case keywarden::ErrorCode::rate_limited:
    case keywarden::ErrorCode::locked_out:
      if (e.retryAfter()) std::fprintf(stderr, "  try again in %d s\n", *e.retryAfter());
      break;
    case keywarden::ErrorCode::verification:
      std::fprintf(stderr, "  an answer did not verify (%s): is something between you and the server?\n", e.reason().c_str());
      break;
    default:
      break;
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <LICENSE-KEY> [keywarden.json]\n", argv[0]);
    return 2;
  }
  const std::string key = argv[1];
  const std::string config = argc > 2 ? argv[2] : "keywarden.json";
  try {
    keywarden::Options options;
    options.logger = [](keywarden::LogLevel level, const std::string& event, const std::string& message) {
      if (level >= keywarden::LogLevel::warn) std::fprintf(stderr, "[%s] %s\n", event.c_str(), message.c_str());
    };
    auto client = keywarden::Client::fromConfig(config, options);
    auto app = client.init();
    std::printf("connected to %s (version %s)\n", app.name.c_str(), app.version.c_str());

    auto license = client.activateLicense(key);
    std::printf("license ok: level %d, expires %s\n", license.level, formatTime(license.expiresAt).c_str());

    std::mutex mu;
    std::condition_variable cv;
    bool ended = false;
    keywarden::HeartbeatOptions hb;
    hb.reauth = true;  // a lost beat: init + the same activation + heartbeat/start again, on its own
    hb.onBeat = [](const keywarden::BeatEvent& e) {
      std::printf("beat %lld verified (server count %lld)\n", static_cast<long long>(e.index), static_cast<long long>(e.count));
      std::fflush(stdout);
    };
    hb.onDegraded = [](const keywarden::DegradedEvent& e) { std::fprintf(stderr, "heartbeat degraded: %s\n", e.error.what()); };
    hb.onKilled = [&](const keywarden::KilledEvent& e) {
      std::fprintf(stderr, "heartbeat killed: %s\n", e.error.what());
      std::lock_guard<std::mutex> lk(mu);
      ended = true;
      cv.notify_all();
    };
    auto heartbeat = client.startHeartbeat({}, {}, hb);
    std::printf("heartbeat started: a beat every %lld s\n", static_cast<long long>(heartbeat.beatInterval().count()));
    std::fflush(stdout);
    bool beat3 = heartbeat.waitForBeats(3, heartbeat.beatInterval() * 3 + std::chrono::seconds(30));
    heartbeat.stop();
    {
      std::lock_guard<std::mutex> lk(mu);
      if (ended || !beat3) {
        std::fprintf(stderr, "the heartbeat did not reach 3 beats\n");
        return 1;
      }
    }
    std::printf("heartbeat stopped\n");
    return 0;
  } catch (const keywarden::Error& e) {
    return explain(e);
  } catch (const keywarden::ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
