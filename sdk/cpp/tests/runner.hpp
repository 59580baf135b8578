// A tiny test runner (no test framework download is possible offline, and vendors should be able to
// run the tests with nothing but the SDK's own dependencies). Each test is a function registered by
// KW_TEST / KW_INTEGRATION; checks throw, the runner prints one line per test and a summary:
//   ok   group/name        FAIL group/name: file:line: what        skip group/name: why
//   N passed, N failed, N skipped
#pragma once

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "keywarden/keywarden.hpp"

namespace kwtest {

struct Failure {
  std::string what;
};
struct Skip {
  std::string why;
};

using Fn = void (*)();
struct Case {
  std::string name;
  Fn fn;
  bool integration;
};
std::vector<Case>& registry();
struct Registrar {
  Registrar(const char* name, Fn fn, bool integration) { registry().push_back({name, fn, integration}); }
};

[[noreturn]] void fail(const char* file, int line, const std::string& what);
[[noreturn]] inline void skip(const std::string& why) { throw Skip{why}; }

inline std::string show(const std::string& s) { return "\"" + s + "\""; }
inline std::string show(const char* s) { return show(std::string(s)); }
inline std::string show(bool b) { return b ? "true" : "false"; }
inline std::string show(keywarden::ErrorCode c) { return keywarden::to_string(c); }
template <typename T>
std::string show(const T& v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

/** Runs fn and returns the keywarden::Error it throws; fails the test otherwise. */
template <typename F>
keywarden::Error expectError(F&& fn, const char* file, int line) {
  try {
    fn();
  } catch (const keywarden::Error& e) {
    return e;
  } catch (const std::exception& e) {
    fail(file, line, std::string("expected keywarden::Error, got std::exception: ") + e.what());
  } catch (...) {
    fail(file, line, "expected keywarden::Error, got a non-standard exception");
  }
  fail(file, line, "expected keywarden::Error, nothing was thrown");
}

}  // namespace kwtest

#define KW_TEST_(id, name, integration) \
  static void id();                     \
  static const kwtest::Registrar id##_registrar(name, id, integration); \
  static void id()
#define KW_TEST(id, name) KW_TEST_(id, name, false)
// Integration ids get their own prefix, so a unit and an integration test may share an id even in
// a unity build (cpp.test.ts builds that way: all test sources compiled as one unit).
#define KW_INTEGRATION(id, name) KW_TEST_(integration_##id, "integration/" name, true)

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) kwtest::fail(__FILE__, __LINE__, "CHECK(" #cond ")");    \
  } while (0)
#define CHECK_MSG(cond, msg)                                                                          \
  do {                                                                                                \
    if (!(cond)) kwtest::fail(__FILE__, __LINE__, std::string("CHECK(" #cond "): ") + (msg));        \
  } while (0)
#define CHECK_EQ(a, b)                                                                                     \
  do {                                                                                                     \
    const auto kw_a_ = (a); /* copies: (a) may be a reference into a temporary */                          \
    const auto kw_b_ = (b);                                                                                \
    if (!(kw_a_ == kw_b_))                                                                                 \
      kwtest::fail(__FILE__, __LINE__,                                                                     \
                   "CHECK_EQ(" #a ", " #b "): " + kwtest::show(kw_a_) + " != " + kwtest::show(kw_b_));     \
  } while (0)
#define EXPECT_ERROR(expr) kwtest::expectError([&] { (void)(expr); }, __FILE__, __LINE__)
