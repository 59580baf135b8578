// The C ABI over the C++ client. No exception crosses this boundary: every entry point catches
// everything and turns it into a kw_status (an exception unwinding into C code is undefined).
#include "keywarden/keywarden_c.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <new>

#include "keywarden/keywarden.hpp"

struct kw_client {
  keywarden::Client client;
};

struct kw_heartbeat {
  keywarden::Heartbeat heartbeat;
  kw_heartbeat_callbacks callbacks{};
  std::atomic<int> state{KW_HB_RUNNING};
  mutable std::mutex mu;
  kw_error lastError{};
};

namespace {

void copy(char* dst, std::size_t cap, const std::string& src) {
  std::size_t n = src.size() < cap - 1 ? src.size() : cap - 1;
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

template <std::size_t N>
void copy(char (&dst)[N], const std::string& src) {
  copy(dst, N, src);
}

void clear(kw_error* err) {
  if (!err) return;
  std::memset(err, 0, sizeof *err);
  err->retry_after = -1;
}

kw_status statusOf(keywarden::ErrorCode c) { return static_cast<kw_status>(static_cast<int>(c) + 1); }

void fill(kw_error* err, const keywarden::Error& e) {
  if (!err) return;
  clear(err);
  err->code = statusOf(e.code());
  err->http_status = e.status();
  err->retry_after = e.retryAfter() ? *e.retryAfter() : -1;
  copy(err->reason, e.reason());
  copy(err->latest_version, e.latestVersion());
  copy(err->update_url, e.updateUrl());
  copy(err->message, e.what());
}

kw_status fail(kw_error* err, kw_status code, const std::string& message) {
  if (err) {
    clear(err);
    err->code = code;
    copy(err->message, message);
  }
  return code;
}

/** Runs fn, mapping every exception to a status. */
template <typename Fn>
kw_status guarded(kw_error* err, Fn&& fn) noexcept {
  try {
    clear(err);
    fn();
    return KW_OK;
  } catch (const keywarden::Error& e) {
    fill(err, e);
    return statusOf(e.code());
  } catch (const keywarden::ConfigError& e) {
    return fail(err, KW_ERR_CONFIG, e.what());
  } catch (const std::invalid_argument& e) {
    return fail(err, KW_ERR_ARGUMENT, e.what());
  } catch (const std::bad_alloc&) {
    return fail(err, KW_ERR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(err, KW_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(err, KW_ERR_INTERNAL, "unknown exception");
  }
}

std::string str(const char* s) { return s ? std::string(s) : std::string(); }

std::int64_t unixSeconds(const std::optional<keywarden::TimePoint>& t) {
  if (!t) return 0;
  return std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count();
}

void fillUser(kw_user_info* out, const keywarden::UserInfo& u) {
  if (!out) return;
  std::memset(out, 0, sizeof *out);
  copy(out->username, u.username);
  out->level = u.level;
  out->expires_at = unixSeconds(u.expiresAt);
}

}  // namespace

extern "C" {

void kw_options_init(kw_options* o) {
  if (!o) return;
  std::memset(o, 0, sizeof *o);
  o->timeout_ms = 10000;
  o->retries = 2;
}

kw_status kw_client_new(const char* config, const kw_options* o, kw_client** out, kw_error* err) {
  if (!config || !out) return fail(err, KW_ERR_ARGUMENT, "config and out are required");
  *out = nullptr;
  return guarded(err, [&] {
    keywarden::Options opts;
    if (o) {
      opts.baseUrl = str(o->base_url);
      if (o->timeout_ms > 0) opts.timeout = std::chrono::milliseconds(o->timeout_ms);
      if (o->retries >= 0) opts.retries = o->retries;
      opts.proxy = str(o->proxy);
      opts.caBundle = str(o->ca_bundle);
      opts.encKey = str(o->enc_key);
      opts.stateFile = str(o->state_file);
    }
    *out = new kw_client{keywarden::Client::fromConfig(config, std::move(opts))};
  });
}

void kw_client_free(kw_client* c) { delete c; }

kw_status kw_init(kw_client* c, kw_app_info* out, kw_error* err) {
  if (!c) return fail(err, KW_ERR_ARGUMENT, "client is NULL");
  return guarded(err, [&] {
    keywarden::AppInfo app = c->client.init();
    if (out) {
      std::memset(out, 0, sizeof *out);
      copy(out->name, app.name);
      copy(out->version, app.version);
      out->hwid_lock = app.hwidLock ? 1 : 0;
    }
  });
}

kw_status kw_register(kw_client* c, const char* username, const char* password, const char* license, const char* hwid,
                      kw_user_info* out, kw_error* err) {
  if (!c || !username || !password || !license) return fail(err, KW_ERR_ARGUMENT, "client, username, password and license are required");
  return guarded(err, [&] { fillUser(out, c->client.registerUser(username, password, license, str(hwid))); });
}

kw_status kw_login(kw_client* c, const char* username, const char* password, const char* hwid, kw_user_info* out,
                   kw_error* err) {
  if (!c || !username || !password) return fail(err, KW_ERR_ARGUMENT, "client, username and password are required");
  return guarded(err, [&] { fillUser(out, c->client.login(username, password, str(hwid))); });
}

kw_status kw_activate_license(kw_client* c, const char* key, const char* hwid, kw_license_info* out, kw_error* err) {
  if (!c || !key) return fail(err, KW_ERR_ARGUMENT, "client and key are required");
  return guarded(err, [&] {
    keywarden::LicenseInfo info = c->client.activateLicense(key, str(hwid));
    if (out) {
      out->level = info.level;
      out->expires_at = unixSeconds(info.expiresAt);
    }
  });
}

kw_status kw_trial(kw_client* c, const char* hwid, kw_trial_info* out, kw_error* err) {
  if (!c) return fail(err, KW_ERR_ARGUMENT, "client is NULL");
  return guarded(err, [&] {
    keywarden::TrialInfo t = c->client.trial(str(hwid));
    if (out) {
      std::memset(out, 0, sizeof *out);
      copy(out->key, t.key);
      out->level = t.level;
      out->expires_at = unixSeconds(t.expiresAt);
    }
  });
}

kw_status kw_offline_file(kw_client* c, const char* hwid, char* out, size_t outSize, kw_error* err) {
  if (!c || !out || outSize == 0) return fail(err, KW_ERR_ARGUMENT, "client and out are required");
  return guarded(err, [&] {
    std::string file = c->client.offlineFile(str(hwid));
    if (file.size() + 1 > outSize) throw std::invalid_argument("out_size too small: " + std::to_string(file.size() + 1) + " bytes needed");
    copy(out, outSize, file);
  });
}

kw_status kw_load_offline(kw_client* c, const char* file, const char* hwid, kw_offline_license* out, kw_error* err) {
  if (!c || !file) return fail(err, KW_ERR_ARGUMENT, "client and file are required");
  return guarded(err, [&] {
    keywarden::OfflineLicense lic = c->client.loadOffline(file, str(hwid));
    if (!out) return;
    std::memset(out, 0, sizeof *out);
    copy(out->license_id, lic.licenseId);
    copy(out->user, lic.user.value_or(""));
    out->level = static_cast<int>(lic.level);
    out->expires_at = unixSeconds(lic.expiresAt);
    out->issued_at = unixSeconds(lic.issuedAt);
    out->valid_until = unixSeconds(lic.validUntil);
    std::string codes;
    for (const auto& e : lic.entitlements) codes += (codes.empty() ? "" : ",") + e;
    copy(out->entitlements, codes);
  });
}

int kw_has_entitlement(const kw_client* c, const char* code) {
  if (!c || !code) return 0;
  try {
    return c->client.hasEntitlement(code) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

int64_t kw_grace_until(const kw_client* c) {
  if (!c) return 0;
  try {
    auto until = c->client.graceUntil();
    return until ? std::chrono::duration_cast<std::chrono::milliseconds>(until->time_since_epoch()).count() : 0;
  } catch (...) {
    return 0;
  }
}

kw_status kw_heartbeat_start(kw_client* c, const char* systemId, const char* codeHash, const kw_heartbeat_callbacks* cbs,
                             kw_heartbeat** out, kw_error* err) {
  if (!c || !out) return fail(err, KW_ERR_ARGUMENT, "client and out are required");
  *out = nullptr;
  return guarded(err, [&] {
    auto* hb = new kw_heartbeat();
    if (cbs) hb->callbacks = *cbs;
    const kw_heartbeat_callbacks cb = hb->callbacks;
    auto remember = [hb](const keywarden::Error& e) {
      std::lock_guard<std::mutex> lk(hb->mu);
      fill(&hb->lastError, e);
    };
    keywarden::HeartbeatOptions o;
    if (cb.interval_ms > 0) o.interval = std::chrono::milliseconds(cb.interval_ms);
    o.reauth = cb.reauth != 0;
    if (cb.compromised_after > 0) o.compromisedAfter = cb.compromised_after;
    o.channel = cb.rest_only == 0;
    o.onCompromised = [cb](const keywarden::CompromisedEvent& e) {
      if (!cb.on_compromised) return;
      kw_error k;
      fill(&k, e.error);
      cb.on_compromised(cb.user, &k, e.failures);
    };
    o.onRevoked = [cb](const keywarden::RevokedEvent& e) {
      if (cb.on_revoked) cb.on_revoked(cb.user, e.reason.c_str(), e.detail.c_str());
    };
    auto ms = [](keywarden::TimePoint t) { return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count(); };
    o.onOffline = [cb, ms](const keywarden::OfflineEvent& e) {
      if (!cb.on_offline) return;
      kw_error k;
      fill(&k, e.error);
      cb.on_offline(cb.user, &k, ms(e.graceUntil));
    };
    o.onGraceExpired = [cb, ms](const keywarden::GraceExpiredEvent& e) {
      if (cb.on_grace_expired) cb.on_grace_expired(cb.user, ms(e.graceUntil));
    };
    o.onExpired = [cb, ms](const keywarden::ExpiredEvent& e) {
      if (cb.on_expired) cb.on_expired(cb.user, e.expiresAt ? ms(*e.expiresAt) : 0);
    };
    if (cb.debugger_detected) o.debuggerDetected = [cb] { return cb.debugger_detected(cb.user) != 0; };
    o.onBeat = [cb](const keywarden::BeatEvent& e) {
      if (cb.on_beat) cb.on_beat(cb.user, e.index, e.count);
    };
    o.onDegraded = [cb, remember](const keywarden::DegradedEvent& e) {
      remember(e.error);
      if (!cb.on_degraded) return;
      kw_error k;
      fill(&k, e.error);
      cb.on_degraded(cb.user, &k, e.lost ? 1 : 0);
    };
    o.onKilled = [cb, remember, hb](const keywarden::KilledEvent& e) {
      remember(e.error);
      hb->state = KW_HB_KILLED;
      if (!cb.on_killed) return;
      kw_error k;
      fill(&k, e.error);
      cb.on_killed(cb.user, &k);
    };
    o.onStopped = [cb, hb](const keywarden::StoppedEvent& e) {
      if (e.reason != "killed") hb->state = KW_HB_STOPPED;
      if (cb.on_stopped) cb.on_stopped(cb.user, e.reason.c_str());
    };
    try {
      hb->heartbeat = c->client.startHeartbeat(str(systemId), str(codeHash), std::move(o));
    } catch (...) {
      delete hb;
      throw;
    }
    *out = hb;
  });
}

void kw_heartbeat_stop(kw_heartbeat* hb) {
  if (!hb) return;
  hb->heartbeat.stop();  // noexcept
  int expected = KW_HB_RUNNING;
  hb->state.compare_exchange_strong(expected, KW_HB_STOPPED);
}

void kw_heartbeat_free(kw_heartbeat* hb) {
  if (!hb) return;
  kw_heartbeat_stop(hb);
  delete hb;
}

kw_heartbeat_state kw_heartbeat_get_state(const kw_heartbeat* hb) {
  return hb ? static_cast<kw_heartbeat_state>(hb->state.load()) : KW_HB_STOPPED;
}

int64_t kw_heartbeat_beats(const kw_heartbeat* hb) { return hb ? hb->heartbeat.beatCount() : 0; }

kw_heartbeat_health kw_heartbeat_get_health(const kw_heartbeat* hb, int64_t* lastBeatAtMs) {
  if (lastBeatAtMs) *lastBeatAtMs = 0;
  if (!hb) return KW_HEALTH_ENDED;
  if (lastBeatAtMs)
    *lastBeatAtMs = std::chrono::duration_cast<std::chrono::milliseconds>(hb->heartbeat.lastBeatAt().time_since_epoch()).count();
  switch (hb->heartbeat.state()) {
    case keywarden::HeartbeatState::healthy: return KW_HEALTH_HEALTHY;
    case keywarden::HeartbeatState::degraded: return KW_HEALTH_DEGRADED;
    case keywarden::HeartbeatState::compromised: return KW_HEALTH_COMPROMISED;
    case keywarden::HeartbeatState::offline: return KW_HEALTH_OFFLINE;
    default: return KW_HEALTH_ENDED;
  }
}

int kw_heartbeat_wait_beats(const kw_heartbeat* hb, int64_t beats, int timeoutMs) {
  if (!hb) return 0;
  try {
    return hb->heartbeat.waitForBeats(beats, std::chrono::milliseconds(timeoutMs > 0 ? timeoutMs : 0)) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

kw_status kw_heartbeat_last_error(const kw_heartbeat* hb, kw_error* err) {
  if (!hb) return fail(err, KW_ERR_ARGUMENT, "heartbeat is NULL");
  std::lock_guard<std::mutex> lk(hb->mu);
  if (err) *err = hb->lastError;
  return hb->lastError.code;
}

kw_status kw_machine_hwid(const char* salt, char out[65]) {
  if (!out) return KW_ERR_ARGUMENT;
  return guarded(nullptr, [&] { copy(out, 65, keywarden::machineHwid(str(salt))); });
}

kw_status kw_self_hash(char out[65], kw_error* err) {
  if (!out) return fail(err, KW_ERR_ARGUMENT, "out is NULL");
  return guarded(err, [&] { copy(out, 65, keywarden::selfHash()); });
}

const char* kw_status_name(kw_status s) {
  switch (s) {
    case KW_OK: return "ok";
    case KW_ERR_CONFIG: return "config";
    case KW_ERR_ARGUMENT: return "argument";
    case KW_ERR_INTERNAL: return "internal";
    default:
      if (s >= KW_ERR_INVALID_KEY && s <= KW_ERR_SESSION_LIMIT) return keywarden::to_string(static_cast<keywarden::ErrorCode>(s - 1));
      return "unknown";
  }
}

const char* kw_version(void) { return keywarden::kVersion; }

}  // extern "C"
