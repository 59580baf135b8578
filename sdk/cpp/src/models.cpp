// The licensing models of docs/protocol.md 12 on the client: trials, entitlements, offline license files and
// the grace period (12.6). Only verified answers move the grace: each verified answer of license,
// login, register, trial, heartbeat/start or an accepted beat sets it to its grace_until (an answer
// without one, or with one that is not a strict ISO 8601 UTC time, grants none); a verified refusal
// (any 4xx but 429, which says "not now", not "no") ends it at once.
#include <algorithm>

#include "client-impl.hpp"

namespace keywarden {

bool hasCode(const std::vector<std::string>& codes, const std::string& code) noexcept {
  return std::find(codes.begin(), codes.end(), code) != codes.end();
}

namespace detail {
std::vector<std::string> entitlementsOf(const nlohmann::json& r) {
  auto it = r.find("entitlements");
  if (it == r.end() || it->is_null()) return {};
  if (!it->is_array() || !std::all_of(it->begin(), it->end(), [](const nlohmann::json& e) { return e.is_string(); }))
    throw verificationError("malformed", "entitlements is not a list of codes");
  std::vector<std::string> out;
  for (const auto& e : *it) out.push_back(e.get<std::string>());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}
}  // namespace detail

void Client::Impl::noteGrace(const nlohmann::json& r) {
  auto it = r.find("grace_until");
  std::optional<std::int64_t> until;
  if (it != r.end() && it->is_string()) until = detail::parseUtcMs(it->get<std::string>());
  std::lock_guard<std::mutex> lk(mu);
  graceUntilMs = until;
}

void Client::Impl::endGrace() {
  std::lock_guard<std::mutex> lk(mu);
  graceUntilMs.reset();
}

void Client::Impl::noteRefusal(int status) {
  if (status < 400 || status >= 500 || status == 429) return;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (!graceUntilMs) return;
    graceUntilMs.reset();
  }
  log(LogLevel::info, "keywarden.grace.ended", "a verified " + std::to_string(status) + " refusal");
}

std::optional<std::int64_t> Client::Impl::graceUntil() const {
  std::lock_guard<std::mutex> lk(mu);
  return graceUntilMs;
}

bool Client::Impl::graceActive() const {
  auto until = graceUntil();
  return until && serverNowMs() < *until;
}

std::vector<std::string> Client::Impl::activated(const nlohmann::json& r) {
  auto ents = detail::entitlementsOf(r);
  noteGrace(r);
  // The license's expires_at (license, trial) or the end user's (login, register: user.expires_at).
  std::optional<std::int64_t> expires;
  auto it = r.find("expires_at");
  if (it != r.end() && it->is_string()) {
    expires = detail::parseUtcMs(it->get<std::string>());
  } else if (auto user = r.find("user"); user != r.end() && user->is_object()) {
    auto ue = user->find("expires_at");
    if (ue != user->end() && ue->is_string()) expires = detail::parseUtcMs(ue->get<std::string>());
  }
  std::lock_guard<std::mutex> lk(mu);
  entitlements = ents;
  expiryMs = expires;
  return ents;
}

std::optional<std::int64_t> Client::Impl::expiry() const {
  std::lock_guard<std::mutex> lk(mu);
  return expiryMs;
}

void Client::Impl::forgetExpiry() {
  std::lock_guard<std::mutex> lk(mu);
  expiryMs.reset();
}

TrialInfo Client::trial(const std::string& hwid) {
  const std::string h = hwid.empty() ? machineHwid() : hwid;
  nlohmann::json r = impl_->call("trial", {{"session", impl_->requireSession()}, {"hwid", h}});
  auto key = r.find("key");
  auto level = r.find("level");
  if (key == r.end() || !key->is_string() || key->get<std::string>().empty() || level == r.end() || !level->is_number_integer())
    throw detail::verificationError("malformed", "trial answer lacks key or level");
  TrialInfo info;
  info.key = key->get<std::string>();
  info.level = level->get<int>();
  auto expires = r.find("expires_at");
  if (expires != r.end() && expires->is_string()) {
    if (auto ms = detail::parseUtcMs(expires->get<std::string>())) info.expiresAt = detail::timeFromMs(*ms);
  }
  auto message = r.find("message");
  if (message != r.end() && message->is_string()) info.message = message->get<std::string>();
  info.entitlements = impl_->activated(r);
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->lastActivation = Activation{true, {}, {}, info.key, h};
  return info;
}

std::string Client::offlineFile(const std::string& hwid) {
  nlohmann::json r = impl_->call("offline", {{"session", impl_->requireSession()}, {"hwid", hwid.empty() ? machineHwid() : hwid}});
  auto f = r.find("license_file");
  if (f == r.end() || !f->is_string() || f->get<std::string>().rfind("kwlic1.", 0) != 0)
    throw detail::verificationError("malformed", "offline answer lacks license_file");
  return f->get<std::string>();
}

namespace {
std::shared_ptr<detail::ClockRecord> recordOf(const std::shared_ptr<Client::Impl>& impl) {
  std::lock_guard<std::mutex> lk(impl->mu);
  if (!impl->clockRecord) {
    std::weak_ptr<Client::Impl> weak = impl;
    impl->clockRecord = std::make_shared<detail::ClockRecord>(
        impl->stateFileOption.empty() ? defaultStateFile(impl->config.apiKey) : impl->stateFileOption,
        [weak](const std::string& event, const std::string& message) {
          if (auto self = weak.lock()) self->log(LogLevel::warn, event, message);
        });
  }
  return impl->clockRecord;
}
}  // namespace

std::string Client::stateFile() const { return recordOf(impl_)->file(); }

OfflineLicense Client::loadOffline(const std::string& file, const std::string& hwid) {
  if (impl_->config.appId.empty()) throw ConfigError("keywarden config: app_id missing (offline license files are checked against it)");
  auto record = recordOf(impl_);
  const TimePoint now = impl_->clock();
  try {
    OfflineLicense lic = verifyLicenseFile(file, impl_->config.responseKeys, impl_->config.appId, hwid.empty() ? machineHwid() : hwid,
                                           now, record->lastSeen());
    record->record(now);
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->entitlements = lic.entitlements;
    return lic;
  } catch (const Error& e) {
    impl_->log(LogLevel::warn, "keywarden.offline.refused", e.what());
    record->record(now);
    throw;
  }
}

std::vector<std::string> Client::entitlements() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->entitlements;
}

bool Client::hasEntitlement(const std::string& code) const { return hasCode(entitlements(), code); }

std::optional<TimePoint> Client::graceUntil() const {
  auto ms = impl_->graceUntil();
  if (!ms) return std::nullopt;
  return detail::timeFromMs(*ms);
}

bool Client::graceActive() const { return impl_->graceActive(); }

std::optional<TimePoint> Client::expiresAt() const {
  auto ms = impl_->expiry();
  if (!ms) return std::nullopt;
  return detail::timeFromMs(*ms);
}

}  // namespace keywarden
