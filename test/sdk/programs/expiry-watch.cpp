// Expiry while running (docs/protocol.md 12.8) with the C++ SDK: activates a key, beats on the realtime channel
// and reports what the heartbeat tells (protocol: test/helpers/sdk-expiry.ts).
//   expiry-watch <keywarden.json> <license key> <hwid>
#include <keywarden/keywarden.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <string>

namespace {
std::mutex out;

long long nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void say(const std::string& line) {
  std::lock_guard<std::mutex> lk(out);
  std::cout << line << std::endl;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: expiry-watch <keywarden.json> <license key> <hwid>\n";
    return 2;
  }
  try {
    auto client = keywarden::Client::fromConfig(argv[1]);
    client.init();
    client.activateLicense(argv[2], argv[3]);
    keywarden::HeartbeatOptions o;
    o.interval = std::chrono::milliseconds(300);
    o.debuggerDetected = [] { return false; };
    o.onBeat = [](const keywarden::BeatEvent& e) { say("beat " + std::to_string(e.index) + " " + std::to_string(nowMs())); };
    o.onExpired = [](const keywarden::ExpiredEvent&) { say("expired " + std::to_string(nowMs())); };
    o.onRevoked = [](const keywarden::RevokedEvent& e) { say("revoked " + e.reason + " " + std::to_string(nowMs())); };
    o.onKilled = [](const keywarden::KilledEvent& e) {
      say(std::string("killed ") + keywarden::to_string(e.error.code()) + " " + std::to_string(nowMs()));
    };
    auto hb = client.startHeartbeat("expiry-watch-cpp", "abcdef0123456789", o);
    if (!hb.waitForBeats(1, std::chrono::seconds(10))) {
      say("no first beat");
      return 1;
    }
    say(std::string("ready ") + (hb.onChannel() ? "1" : "0"));
    const bool ended = hb.waitUntilEnded(std::chrono::seconds(30));
    say(std::string("state ") + keywarden::to_string(hb.state()));
    if (!ended) hb.stop();
    return ended ? 0 : 1;
  } catch (const keywarden::Error& e) {
    std::cerr << "keywarden error: " << e.what() << "\n";
    return 1;
  }
}
