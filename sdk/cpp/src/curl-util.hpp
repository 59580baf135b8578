// What the libcurl users of the SDK (the REST transport and the realtime channel's WebSocket)
// share: one curl_global_init, and SIGPIPE kept away from the host program.
#pragma once

#include <curl/curl.h>

#include <mutex>

#if !defined(_WIN32)
#include <pthread.h>
#include <signal.h>
#include <time.h>
#endif

namespace keywarden::detail {

inline void ensureCurl() {
  // curl_global_init is not thread-safe on older libcurl: once, before any heartbeat thread.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

#if !defined(_WIN32)
/**
 * CURLOPT_NOSIGNAL (needed with several threads) also stops libcurl from ignoring SIGPIPE, and a
 * TLS write to a socket the server closed can still raise one, whose default action ends the
 * process. So SIGPIPE is blocked for this thread during the transfer, one raised by it is
 * consumed, and the thread's mask is restored: the host's own signal handling is untouched.
 */
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    pendingBefore_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~SigpipeGuard() {
    if (!pendingBefore_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
#if defined(__APPLE__)
        int sig = 0;
        sigwait(&set_, &sig);  // pending: returns at once (macOS has no sigtimedwait)
#else
        struct timespec zero = {0, 0};
        sigtimedwait(&set_, nullptr, &zero);
#endif
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t set_;
  sigset_t old_;
  bool pendingBefore_ = false;
};
#else
struct SigpipeGuard {};  // Windows has no SIGPIPE
#endif

}  // namespace keywarden::detail
