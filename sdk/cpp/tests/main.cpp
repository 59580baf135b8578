// Runs every registered test (or those whose name contains argv[1]). Integration tests need the
// SDK harness's environment (KW_BASE_URL...); without it they are skipped, unless
// KW_REQUIRE_INTEGRATION=1 makes that a failure.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runner.hpp"

namespace kwtest {

std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

void fail(const char* file, int line, const std::string& what) {
  const char* base = std::strrchr(file, '/');
  throw Failure{std::string(base ? base + 1 : file) + ":" + std::to_string(line) + ": " + what};
}

}  // namespace kwtest

int main(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : nullptr;
  const char* baseUrl = std::getenv("KW_BASE_URL");
  const char* requireIntegration = std::getenv("KW_REQUIRE_INTEGRATION");
  bool haveServer = baseUrl && *baseUrl;
  bool mustIntegrate = requireIntegration && std::strcmp(requireIntegration, "1") == 0;
  int passed = 0, failed = 0, skipped = 0, integrationRan = 0;
  for (const auto& c : kwtest::registry()) {
    if (filter && c.name.find(filter) == std::string::npos) continue;
    if (c.integration && !haveServer) {
      if (mustIntegrate) {
        std::printf("FAIL %s: KW_BASE_URL is not set and KW_REQUIRE_INTEGRATION=1\n", c.name.c_str());
        ++failed;
      } else {
        std::printf("skip %s: KW_BASE_URL not set\n", c.name.c_str());
        ++skipped;
      }
      continue;
    }
    auto start = std::chrono::steady_clock::now();
    try {
      c.fn();
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
      std::printf("ok   %s (%lld ms)\n", c.name.c_str(), static_cast<long long>(ms));
      ++passed;
      if (c.integration) ++integrationRan;
    } catch (const kwtest::Skip& s) {
      std::printf("skip %s: %s\n", c.name.c_str(), s.why.c_str());
      ++skipped;
    } catch (const kwtest::Failure& f) {
      std::printf("FAIL %s: %s\n", c.name.c_str(), f.what.c_str());
      ++failed;
      if (c.integration) ++integrationRan;
    } catch (const keywarden::Error& e) {
      std::printf("FAIL %s: unexpected keywarden::Error %s (status %d, reason '%s'): %s\n", c.name.c_str(),
                  keywarden::to_string(e.code()), e.status(), e.reason().c_str(), e.what());
      ++failed;
      if (c.integration) ++integrationRan;
    } catch (const std::exception& e) {
      std::printf("FAIL %s: unexpected exception: %s\n", c.name.c_str(), e.what());
      ++failed;
      if (c.integration) ++integrationRan;
    }
    std::fflush(stdout);
  }
  std::printf("integration tests run: %d\n", integrationRan);
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed == 0 ? 0 : 1;
}
