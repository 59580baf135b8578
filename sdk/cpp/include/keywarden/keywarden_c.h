/*
 * Keywarden client SDK: C ABI, for game engines and languages with a C FFI (Unity/C# P/Invoke,
 * Unreal, Godot GDExtension, Rust, Python ctypes...). A thin layer over the C++ client with the
 * same security: every answer is verified (docs/protocol.md 3-6) before it is believed.
 *
 * Rules of this ABI:
 *  - Every call returns a kw_status: KW_OK (0) or an error code; it never exits, aborts or lets a
 *    C++ exception cross the boundary. Pass a kw_error* (may be NULL) for the details.
 *  - Strings in are UTF-8, NUL-terminated; strings out are copied into fixed-size fields of
 *    caller-owned structs (truncated, always NUL-terminated). Nothing returned needs freeing
 *    except the handles (kw_client_free, kw_heartbeat_free).
 *  - A kw_client may be used from several threads. Heartbeat callbacks run on the heartbeat's own
 *    thread; engines that must stay on their main thread can poll kw_heartbeat_get_state instead.
 */
#ifndef KEYWARDEN_C_H
#define KEYWARDEN_C_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && defined(KEYWARDEN_C_SHARED)
#if defined(KEYWARDEN_C_BUILD)
#define KW_API __declspec(dllexport)
#else
#define KW_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) && defined(KEYWARDEN_C_BUILD)
#define KW_API __attribute__((visibility("default")))
#else
#define KW_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Stable numbers: 1-21 are keywarden::ErrorCode in order (the codes of sdk/vectors/errors.json). */
typedef enum kw_status {
  KW_OK = 0,
  KW_ERR_INVALID_KEY = 1,
  KW_ERR_KEY_USED = 2,
  KW_ERR_BANNED = 3,
  KW_ERR_EXPIRED = 4,
  KW_ERR_HWID_MISMATCH = 5,
  KW_ERR_APP_DISABLED = 6,
  KW_ERR_UPDATE_REQUIRED = 7, /* see kw_error.latest_version, kw_error.update_url */
  KW_ERR_RATE_LIMITED = 8,    /* see kw_error.retry_after */
  KW_ERR_LOCKED_OUT = 9,
  KW_ERR_SESSION_EXPIRED = 10,
  KW_ERR_HEARTBEAT_KILLED = 11,
  KW_ERR_VERIFICATION = 12, /* see kw_error.reason */
  KW_ERR_CLOCK_SKEW = 13,
  KW_ERR_NETWORK = 14,
  KW_ERR_TIMEOUT = 15,
  KW_ERR_SERVER = 16,
  KW_ERR_TRIAL_DISABLED = 17,   /* docs/protocol.md 12: the application offers no trials */
  KW_ERR_TRIAL_USED = 18,       /* this device already had its trial */
  KW_ERR_OFFLINE_DISABLED = 19, /* the application issues no offline license files */
  KW_ERR_OFFLINE_INVALID = 20,  /* an offline license file refused: see kw_error.reason */
  KW_ERR_SESSION_LIMIT = 21,    /* heartbeat start while the key's concurrent sessions are all taken */
  KW_ERR_CONFIG = 100,   /* keywarden.json unusable */
  KW_ERR_ARGUMENT = 101, /* NULL handle, missing argument, invalid UTF-8 */
  KW_ERR_INTERNAL = 102  /* out of memory or a bug: never a reason to crash the host */
} kw_status;

typedef struct kw_error {
  kw_status code;
  int http_status;         /* status of a verified answer, 0 if none */
  int retry_after;         /* seconds (rate_limited, locked_out), -1 if absent */
  char reason[32];         /* verification: unsigned, unknown_kid, bad_base64, stale, bad_signature, bad_proof, malformed;
                              offline_invalid: malformed, unknown_kid, bad_signature, wrong_app, wrong_hwid,
                              clock_rolled_back, issued_in_future, expired */
  char latest_version[64]; /* update_required */
  char update_url[512];    /* update_required */
  char message[512];
} kw_error;

typedef struct kw_options {
  const char* base_url;  /* NULL: the config's base_url */
  int timeout_ms;        /* per call; <= 0: 10000 */
  int retries;           /* extra attempts for calls that never reached the server; < 0: 2 */
  const char* proxy;     /* NULL or "": direct */
  const char* ca_bundle; /* NULL: libcurl's default */
  const char* enc_key;   /* NULL: no response encryption (needs api_secret in the config) */
  const char* state_file; /* NULL: the default state file of offline license checks (README "Offline license files") */
} kw_options;

typedef struct kw_app_info {
  char name[256];
  char version[64];
  int hwid_lock;
} kw_app_info;

typedef struct kw_user_info {
  char username[256];
  int level;
  int64_t expires_at; /* unix seconds; 0: no expiry */
} kw_user_info;

typedef struct kw_license_info {
  int level;
  int64_t expires_at; /* unix seconds; 0: no expiry (lifetime key) */
} kw_license_info;

typedef struct kw_trial_info {
  char key[128]; /* the plaintext trial key: shown this once */
  int level;
  int64_t expires_at; /* unix seconds */
} kw_trial_info;

typedef struct kw_offline_license {
  char license_id[128];
  char user[256];        /* "" for a license-only key */
  int level;
  int64_t expires_at;    /* unix seconds; 0: no expiry */
  int64_t issued_at;     /* unix seconds */
  int64_t valid_until;   /* unix seconds: the file is accepted until then */
  char entitlements[1024]; /* sorted codes, comma-separated */
} kw_offline_license;

typedef struct kw_client kw_client;
typedef struct kw_heartbeat kw_heartbeat;

typedef struct kw_heartbeat_callbacks {
  void* user;                                                    /* passed back to every callback */
  void (*on_beat)(void* user, int64_t index, int64_t count);     /* a verified beat */
  void (*on_degraded)(void* user, const kw_error* error, int lost);
  void (*on_killed)(void* user, const kw_error* error);          /* final */
  void (*on_stopped)(void* user, const char* reason);            /* "stop" or "killed" */
  int (*debugger_detected)(void* user);                          /* NULL: built-in check */
  int interval_ms; /* <= 0: the server's beat_interval */
  int reauth;      /* non-zero: after a lost beat, init + same activation + heartbeat/start again */
  /* compromised_after verification failures in a row: answers are tampered with; no automatic
     re-authentication follows until a beat verifies */
  void (*on_compromised)(void* user, const kw_error* error, int failures);
  /* pushed on the realtime channel (license_banned, user_deleted, ...); on_killed follows */
  void (*on_revoked)(void* user, const char* reason, const char* detail);
  int compromised_after; /* <= 0: 5 */
  int rest_only;         /* non-zero: no realtime channel, every beat over REST */
  /* the service cannot be reached and the grace period covers now: the license stays valid until
     grace_until_ms (unix ms); once per outage */
  void (*on_offline)(void* user, const kw_error* error, int64_t grace_until_ms);
  /* still unreachable, and the grace period is over */
  void (*on_grace_expired)(void* user, int64_t grace_until_ms);
  /* the license (or end user) expired while running (docs/protocol.md 12.8); expires_at_ms: the expiry the client
     knew (unix ms), 0 when unknown. on_killed follows with KW_ERR_EXPIRED */
  void (*on_expired)(void* user, int64_t expires_at_ms);
} kw_heartbeat_callbacks;

typedef enum kw_heartbeat_state { KW_HB_RUNNING = 0, KW_HB_STOPPED = 1, KW_HB_KILLED = 2 } kw_heartbeat_state;

/* How a running heartbeat fares: the last beat verified, failed, or compromised_after failed verification in a row. */
typedef enum kw_heartbeat_health {
  KW_HEALTH_HEALTHY = 0,
  KW_HEALTH_DEGRADED = 1,
  KW_HEALTH_COMPROMISED = 2,
  KW_HEALTH_ENDED = 3, /* stopped, killed, revoked or expired: see kw_heartbeat_get_state and kw_heartbeat_last_error */
  KW_HEALTH_OFFLINE = 4 /* the service cannot be reached and the grace period covers now (kw_grace_until) */
} kw_heartbeat_health;

/* Fills *options with the defaults. */
KW_API void kw_options_init(kw_options* options);

/* config_json_or_path: keywarden.json text (starting with '{') or its path. options may be NULL. */
KW_API kw_status kw_client_new(const char* config_json_or_path, const kw_options* options, kw_client** out, kw_error* err);
KW_API void kw_client_free(kw_client* client);

KW_API kw_status kw_init(kw_client* client, kw_app_info* out, kw_error* err);
/* Registers, then logs in at once (that login's failure is ignored). hwid NULL: the machine hwid. */
KW_API kw_status kw_register(kw_client* client, const char* username, const char* password, const char* license,
                             const char* hwid, kw_user_info* out, kw_error* err);
KW_API kw_status kw_login(kw_client* client, const char* username, const char* password, const char* hwid,
                          kw_user_info* out, kw_error* err);
KW_API kw_status kw_activate_license(kw_client* client, const char* key, const char* hwid, kw_license_info* out,
                                     kw_error* err);

/* docs/protocol.md 12. A trial key for this device, activated at once (once per device: KW_ERR_TRIAL_USED). */
KW_API kw_status kw_trial(kw_client* client, const char* hwid, kw_trial_info* out, kw_error* err);
/* An offline license file for this machine after an activation, NUL-terminated into out (KW_ERR_ARGUMENT
   when out_size is too small; 2048 bytes always do). */
KW_API kw_status kw_offline_file(kw_client* client, const char* hwid, char* out, size_t out_size, kw_error* err);
/* Checks an offline license file without the service; KW_ERR_OFFLINE_INVALID with kw_error.reason, or
   KW_ERR_CONFIG when the config has no app_id. */
KW_API kw_status kw_load_offline(kw_client* client, const char* file, const char* hwid, kw_offline_license* out, kw_error* err);
/* 1 when the last verified activation (or offline file) grants the entitlement code. */
KW_API int kw_has_entitlement(const kw_client* client, const char* code);
/* Unix ms until which the license stays valid while the service cannot be reached; 0: no grace. */
KW_API int64_t kw_grace_until(const kw_client* client);

/* system_id / code_hash NULL: machine hwid / SHA-256 of the running binary. callbacks may be NULL. */
KW_API kw_status kw_heartbeat_start(kw_client* client, const char* system_id, const char* code_hash,
                                    const kw_heartbeat_callbacks* callbacks, kw_heartbeat** out, kw_error* err);
/* Stops beating and closes the heartbeat session; blocks for at most one call. Safe to call twice. */
KW_API void kw_heartbeat_stop(kw_heartbeat* heartbeat);
/* Stops (if running) and frees. */
KW_API void kw_heartbeat_free(kw_heartbeat* heartbeat);
KW_API kw_heartbeat_state kw_heartbeat_get_state(const kw_heartbeat* heartbeat);
/* The server's beat_count of the current heartbeat session (starts again at 0 after a re-authentication). */
KW_API int64_t kw_heartbeat_beats(const kw_heartbeat* heartbeat);
/* Waits until this heartbeat verified `beats` beats in all (across re-authentications) or ended; 1 when reached. */
KW_API int kw_heartbeat_wait_beats(const kw_heartbeat* heartbeat, int64_t beats, int timeout_ms);
/* Health, and (when last_beat_at_ms is not NULL) the unix time in ms of the last verified beat (or of the start). */
KW_API kw_heartbeat_health kw_heartbeat_get_health(const kw_heartbeat* heartbeat, int64_t* last_beat_at_ms);
/* The error of the last degraded or killed event; KW_OK when none. */
KW_API kw_status kw_heartbeat_last_error(const kw_heartbeat* heartbeat, kw_error* err);

/* 64 lower-case hex characters + NUL. salt: use your api_key (NULL: ""). */
KW_API kw_status kw_machine_hwid(const char* salt, char out[65]);
KW_API kw_status kw_self_hash(char out[65], kw_error* err);
/* "ok", "invalid_key", ..., "config", "argument", "internal". */
KW_API const char* kw_status_name(kw_status status);
KW_API const char* kw_version(void);

#ifdef __cplusplus
}
#endif

#endif /* KEYWARDEN_C_H */
