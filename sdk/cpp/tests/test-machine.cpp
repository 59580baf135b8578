// Machine helpers and ISO timestamps.
#include <cstdio>
#include <fstream>

#include "crypto.hpp"
#include "internal.hpp"
#include "runner.hpp"
#include "support.hpp"

namespace d = keywarden::detail;

namespace {
bool isHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}
}  // namespace

KW_TEST(hwid, "machine/machineHwid is salted sha256 of the platform id, stable, and never the raw id") {
  std::string a = keywarden::machineHwid("app-one");
  CHECK(isHex64(a));
  CHECK_EQ(keywarden::machineHwid("app-one"), a);
  CHECK(keywarden::machineHwid("app-two") != a);
  std::string raw = keywarden::rawMachineId();
  if (!raw.empty()) {
    CHECK_EQ(a, d::sha256Hex("kwhwid1\napp-one\n" + d::lowerAscii(d::trimAscii(raw))));
    CHECK(a.find(d::lowerAscii(raw)) == std::string::npos);
  }
#if defined(__linux__)
  // On Linux the platform id is /etc/machine-id (then dbus's copy) when present.
  std::ifstream in("/etc/machine-id");
  std::string line;
  if (in && std::getline(in, line) && !d::trimAscii(line).empty()) CHECK_EQ(raw, d::trimAscii(line));
#endif
}

KW_TEST(self_hash, "machine/selfHash is the SHA-256 of the running binary") {
  std::string h = keywarden::selfHash();
  CHECK(isHex64(h));
  CHECK_EQ(keywarden::selfHash(), h);
#if defined(__linux__)
  CHECK_EQ(h, keywarden::fileSha256("/proc/self/exe"));
#endif
  std::string path = "kw-test-hash.bin";
  {
    std::ofstream out(path, std::ios::binary);
    out << "abc";
  }
  std::string abc = keywarden::fileSha256(path);
  std::remove(path.c_str());
  CHECK_EQ(abc, std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  auto e = EXPECT_ERROR(keywarden::fileSha256("no/such/file"));
  CHECK_EQ(e.code(), keywarden::ErrorCode::server);
}

KW_TEST(debugger, "machine/debuggerAttached answers without a debugger") {
  // Not under a debugger in CI; the value must at least be stable between two calls.
  CHECK_EQ(keywarden::debuggerAttached(), keywarden::debuggerAttached());
}

KW_TEST(iso_time, "time/ISO 8601 timestamps of the server") {
  auto t = d::parseIsoTime("2026-11-21T22:00:00.000Z");
  CHECK(t.has_value());
  CHECK_EQ(kwtest::unixSeconds(*t), std::int64_t{1795298400});
  auto ms = d::parseIsoTime("2030-01-02T03:04:05.678Z");
  CHECK(ms.has_value());
  CHECK_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(ms->time_since_epoch()).count(), std::int64_t{1893553445678});
  CHECK_EQ(kwtest::unixSeconds(*d::parseIsoTime("1970-01-01T00:00:00Z")), std::int64_t{0});
  CHECK_EQ(kwtest::unixSeconds(*d::parseIsoTime("2000-03-01T01:00:00+01:00")), std::int64_t{951868800});
  CHECK(!d::parseIsoTime("2026-11-21 22:00").has_value());
  CHECK(!d::parseIsoTime("2026-11-21T22:00:00").has_value());  // no zone: ambiguous
  CHECK(!d::parseIsoTime("yesterday").has_value());
  CHECK(!d::parseIsoTime("2026-13-01T00:00:00Z").has_value());
  CHECK(!d::parseIsoTime("2026-11-21T22:00:00.Z").has_value());
}
