// Heartbeat fixture shared by the unit tests (test-heartbeat.cpp, against FakeServer) and the
// integration tests (test-integration.cpp, against a real server): HeartbeatEvents collects the
// events a heartbeat reports on its own thread, and options() wires every listener to it.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "keywarden/keywarden.hpp"

namespace kwtest {

/**
 * Heartbeat events as lines ("beat 1", "degraded lost", "degraded unsent", "recovered", "killed",
 * "stopped <reason>"), plus the degraded events and the kill error themselves. Lock mu to read
 * degraded or killedWith while the heartbeat runs.
 */
struct HeartbeatEvents {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> log;
  std::vector<keywarden::DegradedEvent> degraded;
  std::optional<keywarden::Error> killedWith;
  std::optional<keywarden::ExpiredEvent> expiredWith;

  void add(const std::string& s) {
    {
      std::lock_guard<std::mutex> lk(mu);
      log.push_back(s);
    }
    cv.notify_all();
  }
  bool waitFor(const std::string& s, std::chrono::milliseconds t) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, t, [&] { return std::find(log.begin(), log.end(), s) != log.end(); });
  }
  bool has(const std::string& s) {
    std::lock_guard<std::mutex> lk(mu);
    return std::find(log.begin(), log.end(), s) != log.end();
  }
  std::vector<std::string> snapshot() {
    std::lock_guard<std::mutex> lk(mu);
    return log;
  }
  /** Options beating every `interval` (no debugger), every listener recording here. */
  keywarden::HeartbeatOptions options(std::chrono::milliseconds interval = std::chrono::milliseconds(50)) {
    keywarden::HeartbeatOptions o;
    o.interval = interval;
    o.debuggerDetected = [] { return false; };
    o.onBeat = [this](const keywarden::BeatEvent& e) { add("beat " + std::to_string(e.index)); };
    o.onDegraded = [this](const keywarden::DegradedEvent& e) {
      {
        std::lock_guard<std::mutex> lk(mu);
        degraded.push_back(e);
      }
      add(std::string("degraded ") + (e.lost ? "lost" : "unsent"));
    };
    o.onRecovered = [this](const keywarden::RecoveredEvent&) { add("recovered"); };
    o.onKilled = [this](const keywarden::KilledEvent& e) {
      {
        std::lock_guard<std::mutex> lk(mu);
        killedWith = e.error;
      }
      add("killed");
    };
    o.onStopped = [this](const keywarden::StoppedEvent& e) { add("stopped " + e.reason); };
    o.onExpired = [this](const keywarden::ExpiredEvent& e) {
      {
        std::lock_guard<std::mutex> lk(mu);
        expiredWith = e;
      }
      add("expired");
    };
    o.onRevoked = [this](const keywarden::RevokedEvent& e) { add("revoked " + e.reason); };
    return o;
  }
};

}  // namespace kwtest
