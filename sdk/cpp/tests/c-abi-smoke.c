/* Smoke test of the C ABI, written in C99 so the header is proven to be valid C. Offline checks
 * always run; with the SDK harness's environment (KW_BASE_URL, KW_CONFIG_PLAIN, KW_KEYS_PLAIN) it
 * also activates the LAST key of KW_KEYS_PLAIN (the C++ tests take keys from the front) and
 * beats twice. Prints the same summary line as the C++ runner. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keywarden/keywarden_c.h"

static int passed = 0, failed = 0;

#define CHECK(cond)                                                  \
  do {                                                               \
    if (cond) {                                                      \
      ++passed;                                                      \
    } else {                                                         \
      ++failed;                                                      \
      printf("FAIL c-abi: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                \
  } while (0)

static const char* CONFIG =
    "{\"format\":1,\"base_url\":\"http://127.0.0.1:9\",\"api_key\":\"0123456789abcdef0123456789abcdef\","
    "\"response_keys\":[{\"kid\":\"k1\",\"alg\":\"Ed25519\",\"public_key\":\"Z7P1CneKviCF7Ws179UP02Vmjh+ezX1TCXb5UqUdRcM=\"}]}";

static const char* CONFIG_WITH_APP =
    "{\"format\":1,\"base_url\":\"http://127.0.0.1:9\",\"api_key\":\"0123456789abcdef0123456789abcdef\",\"app_id\":\"app-1\","
    "\"response_keys\":[{\"kid\":\"k1\",\"alg\":\"Ed25519\",\"public_key\":\"Z7P1CneKviCF7Ws179UP02Vmjh+ezX1TCXb5UqUdRcM=\"}]}";

static int beats_seen = 0;
static void on_beat(void* user, int64_t index, int64_t count) {
  (void)index;
  (void)count;
  ++*(int*)user;
}

static void offline(void) {
  kw_error err;
  kw_client* c = NULL;
  char hwid[65];
  kw_options o;

  CHECK(strcmp(kw_version(), "1.0.0") == 0);
  CHECK(strcmp(kw_status_name(KW_ERR_HEARTBEAT_KILLED), "heartbeat_killed") == 0);
  CHECK(strcmp(kw_status_name(KW_ERR_SERVER), "server") == 0);
  CHECK(strcmp(kw_status_name(KW_ERR_CONFIG), "config") == 0);
  CHECK(strcmp(kw_status_name(KW_ERR_TRIAL_USED), "trial_used") == 0);
  CHECK(strcmp(kw_status_name(KW_ERR_SESSION_LIMIT), "session_limit") == 0);

  CHECK(kw_machine_hwid("salt", hwid) == KW_OK);
  CHECK(strlen(hwid) == 64);

  CHECK(kw_client_new("{\"format\":2}", NULL, &c, &err) == KW_ERR_CONFIG);
  CHECK(c == NULL);
  CHECK(err.code == KW_ERR_CONFIG && strstr(err.message, "format") != NULL);
  CHECK(kw_client_new(NULL, NULL, &c, &err) == KW_ERR_ARGUMENT);
  CHECK(kw_init(NULL, NULL, &err) == KW_ERR_ARGUMENT);

  /* Port 9 on loopback refuses: a typed network error, after the retries, never a crash. */
  kw_options_init(&o);
  o.retries = 0;
  o.timeout_ms = 2000;
  CHECK(kw_client_new(CONFIG, &o, &c, &err) == KW_OK);
  CHECK(c != NULL);
  CHECK(kw_activate_license(c, "KEY", NULL, NULL, &err) == KW_ERR_SESSION_EXPIRED);
  CHECK(kw_init(c, NULL, &err) == KW_ERR_NETWORK);
  CHECK(err.code == KW_ERR_NETWORK && err.http_status == 0 && err.retry_after == -1);
  /* Offline license files: without app_id in the config a config error; a damaged file is refused. */
  CHECK(kw_load_offline(c, "kwlic1.x.y", "hwid-0001", NULL, &err) == KW_ERR_CONFIG);
  CHECK(kw_has_entitlement(c, "pro") == 0);
  CHECK(kw_grace_until(c) == 0);
  kw_client_free(c);
  {
    char path[256];
    snprintf(path, sizeof path, "%s/kw-c-abi-smoke-state.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    o.state_file = path;
    CHECK(kw_client_new(CONFIG_WITH_APP, &o, &c, &err) == KW_OK);
    CHECK(kw_load_offline(c, "kwlic1.x.y", "hwid-0001", NULL, &err) == KW_ERR_OFFLINE_INVALID);
    CHECK(strcmp(err.reason, "malformed") == 0);
    kw_client_free(c);
    remove(path);
  }
  kw_client_free(NULL);
  kw_heartbeat_free(NULL);
}

static void online(const char* config, const char* keys) {
  kw_error err;
  kw_client* c = NULL;
  kw_app_info app;
  kw_license_info lic;
  kw_heartbeat* hb = NULL;
  kw_heartbeat_callbacks cbs;
  const char* last = strrchr(keys, ',');
  char key[128];
  snprintf(key, sizeof key, "%s", last ? last + 1 : keys);

  CHECK(kw_client_new(config, NULL, &c, &err) == KW_OK);
  if (!c) return;
  CHECK(kw_init(c, &app, &err) == KW_OK);
  CHECK(strcmp(app.name, "SDK PLAIN") == 0);
  CHECK(app.hwid_lock == 1);
  CHECK(kw_activate_license(c, key, NULL, &lic, &err) == KW_OK);
  CHECK(lic.level == 3);
  CHECK(lic.expires_at > 0);
  CHECK(kw_activate_license(c, "NOT-A-KEY", NULL, NULL, &err) == KW_ERR_INVALID_KEY);
  CHECK(err.http_status == 400);

  memset(&cbs, 0, sizeof cbs);
  cbs.user = &beats_seen;
  cbs.on_beat = on_beat;
  cbs.interval_ms = 300;
  CHECK(kw_heartbeat_start(c, "c-abi-system-01", "c-abi-code-hash-01", &cbs, &hb, &err) == KW_OK);
  if (hb) {
    CHECK(kw_heartbeat_wait_beats(hb, 2, 15000) == 1);
    CHECK(kw_heartbeat_get_state(hb) == KW_HB_RUNNING);
    {
      int64_t last = 0;
      CHECK(kw_heartbeat_get_health(hb, &last) == KW_HEALTH_HEALTHY);
      CHECK(last > 1700000000000LL);
    }
    kw_heartbeat_stop(hb);
    CHECK(kw_heartbeat_get_state(hb) == KW_HB_STOPPED);
    CHECK(beats_seen >= 2);
    CHECK(kw_heartbeat_beats(hb) >= 2);
    CHECK(kw_heartbeat_last_error(hb, &err) == KW_OK);
    kw_heartbeat_free(hb);
  }
  kw_client_free(c);
  printf("integration tests run: 1\n");
}

int main(void) {
  const char* base = getenv("KW_BASE_URL");
  const char* config = getenv("KW_CONFIG_PLAIN");
  const char* keys = getenv("KW_KEYS_PLAIN");
  offline();
  if (base && *base && config && keys && *keys) {
    online(config, keys);
  } else {
    printf("skip c-abi/online: KW_BASE_URL not set\n");
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
