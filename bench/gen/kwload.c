// kwload: the load generator of the benchmarks (bench/run.ts) and of `keywarden loadtest`
// (loadtest/). Many client session chains on few threads (epoll, one keep-alive HTTP/1.1
// connection per chain), so the generator is not what limits the server.
//
// Each connection prepares its own session over its own connection (Keywarden: init -> license ->
// heartbeat/start; KeyAuth: init -> license), then sends the measured call in a loop: at full
// speed (one request in flight per connection), or paced (--rate, requests per second over all
// connections) with latency taken from the intended send time, so a slow reply delays nothing that
// goes unmeasured (no coordinated omission). Heartbeats carry the token of the previous reply:
// `new_token` is parsed from every beat answer; a non-2xx answer is counted, its body printed
// (the first few) and the chain prepared again.
//
// Output on stdout, one line each:
//   KWLOAD ready <seconds spent preparing>
//   KWLOAD window-start            (after the warm-up; the caller samples server CPU here)
//   KWLOAD window-end
//   KWLOAD {json}                  (requests, non2xx, errors, latency percentiles, own CPU)
// Modes without a measured loop (setup, inits: create --total sessions and stop) print only the
// json line. Compiled by bench/lib.ts with `cc -O2 -pthread` (and `-lsodium` where sodium.h
// exists, `-lssl -lcrypto` where OpenSSL's headers do).
//
// With libsodium, two modes speak the realtime channel (README "Realtime channel"): `ws-hb`
// prepares each chain with init -> license over HTTP, upgrades that connection to
// GET /api/client/ws (a fresh X25519 key per connection, keys derived from the hello as the
// README says), sends heartbeat/start as a channel call and then measures channel heartbeats the
// way `hb` measures REST ones. `ws-hold` prepares --conns such connections, prints
// `KWLOAD ready`, then holds them open (answering transport pings) until its stdin closes,
// printing `KWLOAD event <type> <connection> <CLOCK_MONOTONIC ns>` for every pushed `revoked`,
// `notice` or `update_required`; a revoked connection is not reopened. Its own frames carry the
// MAC and sequence number the server checks, masked with a zero key.
//
// The load test's modes (loadtest/, docs/loadtest.md) run a fleet against a deployment:
//   fleet     --conns clients (a --ws-share of them on the channel) prepare their session and then
//             beat at the interval the server answers (or --beat-interval, or a shared --rate),
//             opened over --ramp seconds, or in steps (--step-clients every --step-seconds: the
//             capacity search); --spike-at drops every connection at once and reopens them all
//             (a fleet reconnecting after an outage: init -> license -> start again).
//   activate  init then license, again and again, each pair from a new client address.
// They print `KWLOAD tick {json}` every second (--ticks) and `KWLOAD step {json}` at the end of
// each step; a run ends at --duration, at --max-requests, or on SIGINT/SIGTERM, always with the
// json line. Connections may speak TLS (--tls, OpenSSL; --ca for a private CA), requests are
// signed with --api-secret (docs/protocol.md 3), and --verify F checks a share F of the answers as an SDK
// would (kw-verify.h): what fails is counted, not acted on, so the run still measures the server.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#if !defined(KW_NO_SODIUM) && __has_include(<sodium.h>) // -DKW_NO_SODIUM builds what a machine without it gets
#include <sodium.h>
#define KW_WS 1
#endif
#include "kw-tls.h"
#include "kw-verify.h"

enum mode { M_HB, M_INIT, M_LICENSE, M_LOGIN, M_SETUP, M_INITS, M_WSHB, M_WSHOLD, M_FLEET, M_ACT };
enum proto { P_KW, P_KA };
enum step { S_INIT, S_LICENSE, S_LOGIN, S_START, S_BEAT, S_CHECK, S_UPGRADE, S_WSSTART, S_WSBEAT, S_NONE };
static const char *step_name[] = { "init", "license", "login", "heartbeat/start", "heartbeat", "check", "ws upgrade", "ws heartbeat/start", "ws heartbeat", "-" };

// ---- options ------------------------------------------------------------------------------------
static const char *host = "127.0.0.1";
static int port = 0;
static enum mode mode = M_HB;
static enum proto proto = P_KW;
static int nconns = 64, nthreads = 2;
static double duration_s = 5, warmup_s = 1, rate = 0, prep_timeout_s = 300;
static const char *api_key = "", *license_key = "", *username = "", *password = "";
static const char *hwid = "bench-hwid-000000000000001", *system_id = "bench-system-01";
static const char *ka_path = "/api/1.2/", *ka_name = "", *ka_owner = "", *ka_ver = "1.0";
static int fake_session = 0, quiet = 0;
static size_t rb_free = 16384; // read-buffer headroom per connection (small for the many channel connections)
static long long total = 0;                     // setup / inits: sessions to create
static uint32_t ip_base = 0, ip_pool = 1u << 24; // X-Forwarded-For 10.x.y.z addresses
static struct sockaddr_in addr, bind_addr;
static int bind_src = 0; // --bind: the source address of every connection (many loopback sources: many ports)
static char **licenses; // --license a,b,c: connection i activates licenses[i % nlicenses]
// setup in two passes (the 1M memory point: every session's heartbeat starts within minutes, well
// inside its expiry window): --sessions-out makes init -> license sessions and writes them, one a
// line; --sessions-in starts the heartbeat of each session of such a file.
static FILE *sessions_out;
static char **sessions_in;
static long long nsessions_in;
static int nlicenses;
// the load test's options
static char host_hdr[300];                  // --host-header (default host:port)
static int use_tls = 0, tls_insecure = 0;   // --tls, --insecure
static const char *tls_ca = NULL, *tls_host = NULL; // --ca FILE, --tls-name NAME (default --host)
static const char *api_secret = NULL, *enc_key = NULL, *public_key = NULL, *kid_opt = NULL;
static const char *license_file = NULL;      // --license-file F: one key a line (a list too long for one argument)
static double verify_frac = 0;              // --verify F: the share of answers checked as an SDK would
static double ws_share = 0;                 // fleet: the share of clients on the channel
static double beat_interval_s = 0;          // fleet: 0 = the interval the server answers
static double ramp_s = 0, spike_at_s = 0, step_s = 0, settle_s = 1;
static int start_clients = 0, step_clients = 0, print_ticks = 0, hwid_per_key = 0;
static int step_control = 0;                // --step-control: after each step, wait for `next`, `again` or `stop` on stdin
static long long max_requests = 0;
static char run_tag[16];                    // makes request nonces unique to this run (docs/protocol.md 3's ledger)
static int newmode;                         // fleet / activate

// ---- shared state --------------------------------------------------------------------------------
static atomic_int phase;            // 0 preparing, 1 running, 2 stopping
static atomic_int ready_conns, dead_conns;
static atomic_llong claims;         // setup / inits: sessions claimed so far
static atomic_ullong ip_counter;
static atomic_int printed;          // error bodies printed so far
static atomic_int vprinted;         // verification failures printed so far
static atomic_llong events;         // ws-hold: pushed messages received
static int prep_window = 0;         // --prep-window N: at most N connections preparing at once (0: all)
static atomic_int preparing;
static atomic_int allowed;          // connections that may be opened by now (ramp, steps)
static atomic_int live;             // clients with a prepared session right now
static atomic_int spike_gen, stop_req;
static uint64_t t_run, win_start, win_end;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kwload: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(2);
}

// ---- latency histogram (log-linear, about 1.5% precision, nanoseconds) ---------------------------
#define HSUB 64
#define HBUCKETS (HSUB * 2 + 40 * HSUB)
struct hist { uint64_t c[HBUCKETS]; uint64_t n, max, sum; };

static int hidx(uint64_t v) {
  if (v < 2 * HSUB) return (int)v;
  int e = 63 - __builtin_clzll(v); // >= 7
  int idx = 2 * HSUB + (e - 7) * HSUB + (int)((v >> (e - 6)) & (HSUB - 1));
  return idx < HBUCKETS ? idx : HBUCKETS - 1;
}
static uint64_t hupper(int idx) { // the largest value that lands in bucket idx
  if (idx < 2 * HSUB) return (uint64_t)idx;
  int e = (idx - 2 * HSUB) / HSUB + 7, sub = (idx - 2 * HSUB) % HSUB;
  return ((uint64_t)(HSUB + sub) << (e - 6)) + ((1ull << (e - 6)) - 1);
}
static void hrec(struct hist *h, uint64_t v) {
  h->c[hidx(v)]++;
  h->n++;
  h->sum += v;
  if (v > h->max) h->max = v;
}
static void hadd(struct hist *d, const struct hist *s) {
  if (!s->n) return;
  for (int i = 0; i < HBUCKETS; i++) d->c[i] += s->c[i];
  d->n += s->n, d->sum += s->sum;
  if (s->max > d->max) d->max = s->max;
}
static uint64_t hpct(const struct hist *h, double p) {
  if (h->n == 0) return 0;
  uint64_t want = (uint64_t)(p / 100.0 * (double)h->n + 0.999999), acc = 0;
  if (want < 1) want = 1;
  for (int i = 0; i < HBUCKETS; i++) {
    acc += h->c[i];
    if (acc >= want) {
      uint64_t u = hupper(i);
      return u < h->max ? u : h->max;
    }
  }
  return h->max;
}

// ---- per-second counters (the load test's live view and steps) ----------------------------------
struct tick {
  struct hist rest, ws, prep; // measured calls by transport; preparing calls (init, license, start, upgrade)
  uint64_t calls, ok, non2xx, shed, limited, errors, reconnects, prep_n, prep_ok, prep_fail, dead;
  uint64_t verified, bad_sig, bad_proof, activations;
};

static void tick_add(struct tick *d, const struct tick *s) {
  hadd(&d->rest, &s->rest), hadd(&d->ws, &s->ws), hadd(&d->prep, &s->prep);
  d->calls += s->calls, d->ok += s->ok, d->non2xx += s->non2xx, d->shed += s->shed, d->limited += s->limited;
  d->errors += s->errors, d->reconnects += s->reconnects, d->prep_n += s->prep_n, d->prep_ok += s->prep_ok;
  d->prep_fail += s->prep_fail, d->dead += s->dead, d->verified += s->verified, d->bad_sig += s->bad_sig;
  d->bad_proof += s->bad_proof, d->activations += s->activations;
}

// ---- connections -----------------------------------------------------------------------------------
struct conn {
  int fd, id, connected, dead, waiting_out;
  struct worker *w;
  enum step steps[4];
  int nsteps, si;       // the preparing chain and the position in it
  enum step measured;   // S_NONE in setup / inits
  int ready, counted_ready, need_chain, inflight, in_prep, retries;
  uint32_t ip;          // this chain's address (prep, beats)
  char session[1024], token[512];
  uint64_t beat_index, nonce;
  uint64_t intended, sent, next_due, period;
  char wbuf[8192];
  size_t wlen, woff;
  char *rbuf;
  size_t rlen, rcap;
  long long claimed;            // setup / inits: the index of the session this chain makes
  int preparing;                // holds one of the --prep-window places
  int ws, reopen;               // the connection is a channel; the chain must start over on a new one
  uint64_t cseq;                // the channel's last client sequence number
  unsigned char csk[32], c2s[32], s2c[32];
  char ckey[48];                // base64url of the connection's X25519 public key (X-Nonce)
  int chan;                     // fleet: this client beats over the channel
  int hs, tls_ww;               // TLS handshake in progress; OpenSSL waits for writability
#ifdef KW_TLS
  SSL *ssl;
#endif
  int closing;                  // the answer being handled said `Connection: close`
  int pend;                     // a call to send once reconnected (step + 1)
  uint64_t pend_intended;
  int lazy;                     // closed while idle: reopened when its next call is due
  int queued;                   // has a due entry in its worker's heap
  uint64_t queued_at, down_since, vcount;
  int vthis, backoff_ms;        // verify the answer at hand; reconnect backoff
  const char *path, *method;    // of the request in flight (response signatures cover them)
  char rnonce[80];              // its X-Nonce
};

struct due { uint64_t at; struct conn *c; int reopen; };

struct worker {
  pthread_t th;
  int ep, tfd;
  struct conn *conns;
  int n, opened;
  struct hist h;
  uint64_t requests, ok, non2xx, shed, limited, errors, reconnects, prep_fail, created, bad_body, ws_closed;
  int finished;
  pthread_mutex_t tmu;          // guards tk: the main thread takes it every second
  struct tick tk;
  struct due *heap;             // calls due later and reconnects after a backoff, soonest first
  int hn, hcap, kicked, spike_seen;
  struct hist rec;              // spike: time from the drop to the session prepared again
  uint64_t dropped, recovered;
};

#define TK(w, ...) do { pthread_mutex_lock(&(w)->tmu); struct tick *t_ = &(w)->tk; __VA_ARGS__; pthread_mutex_unlock(&(w)->tmu); } while (0)

static void say_error(struct conn *c, enum step s, int status, const char *body, size_t blen) {
  if (quiet || atomic_fetch_add(&printed, 1) >= 5) return;
  fprintf(stderr, "kwload: conn %d %s -> HTTP %d: %.*s\n", c->id, step_name[s], status, (int)(blen > 400 ? 400 : blen), body);
}

static void say_verify(struct conn *c, enum step s, const char *why) {
  if (atomic_fetch_add(&vprinted, 1) >= 5) return;
  fprintf(stderr, "kwload: conn %d %s: verification failed: %s\n", c->id, step_name[s], why);
}

static uint32_t next_ip(void) { return ip_base + (uint32_t)(atomic_fetch_add(&ip_counter, 1) % ip_pool); }
static void ip_str(uint32_t ip, char *out) {
  ip &= 0xffffff;
  sprintf(out, "10.%u.%u.%u", (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

static void set_ready(struct conn *c, int on) {
  if (c->ready == on) return;
  c->ready = on;
  atomic_fetch_add(&live, on ? 1 : -1);
}

__attribute__((unused)) static int want_verify(struct conn *c) { // every 1/F-th answer of each connection
  if (verify_frac <= 0) return 0;
  uint64_t k = c->vcount++;
  return (uint64_t)((double)(k + 1) * verify_frac) > (uint64_t)((double)k * verify_frac);
}

// ---- the due heap ---------------------------------------------------------------------------------
static void heap_push(struct worker *w, uint64_t at, struct conn *c, int reopen) {
  if (w->hn == w->hcap) {
    w->hcap = w->hcap ? w->hcap * 2 : 1024;
    w->heap = realloc(w->heap, (size_t)w->hcap * sizeof *w->heap);
    if (!w->heap) die("out of memory");
  }
  int i = w->hn++;
  while (i > 0 && w->heap[(i - 1) / 2].at > at) w->heap[i] = w->heap[(i - 1) / 2], i = (i - 1) / 2;
  w->heap[i] = (struct due){ at, c, reopen };
}
static struct due heap_pop(struct worker *w) {
  struct due top = w->heap[0], last = w->heap[--w->hn];
  int i = 0;
  for (;;) {
    int k = 2 * i + 1;
    if (k >= w->hn) break;
    if (k + 1 < w->hn && w->heap[k + 1].at < w->heap[k].at) k++;
    if (w->heap[k].at >= last.at) break;
    w->heap[i] = w->heap[k], i = k;
  }
  if (w->hn) w->heap[i] = last;
  return top;
}
static void queue_at(struct conn *c, uint64_t at) {
  if (c->queued && c->queued_at <= at) return;
  heap_push(c->w, at, c, 0);
  c->queued = 1, c->queued_at = at;
}

static void conn_open(struct conn *c);
static void conn_send(struct conn *c, enum step s, uint64_t intended);

// ---- plain or TLS I/O --------------------------------------------------------------------------------
static int is_tls(struct conn *c) {
#ifdef KW_TLS
  return c->ssl != NULL;
#else
  (void)c;
  return 0;
#endif
}

static ssize_t io_read(struct conn *c, void *buf, size_t n) {
#ifdef KW_TLS
  if (c->ssl) return tls_io(c->ssl, buf, n, 0, &c->tls_ww);
#endif
  return read(c->fd, buf, n);
}
static ssize_t io_write(struct conn *c, const void *buf, size_t n) {
#ifdef KW_TLS
  if (c->ssl) return tls_io(c->ssl, (void *)buf, n, 1, &c->tls_ww);
#endif
  return write(c->fd, buf, n);
}

static void arm_out(struct conn *c, int on) {
  if (c->waiting_out == on) return;
  struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };
  epoll_ctl(c->w->ep, EPOLL_CTL_MOD, c->fd, &ev);
  c->waiting_out = on;
}

static void flush_out(struct conn *c) {
  while (c->woff < c->wlen) {
    ssize_t k = io_write(c, c->wbuf + c->woff, c->wlen - c->woff);
    if (k > 0) {
      c->woff += (size_t)k;
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
      // OpenSSL may wait for the peer's bytes before it can write: then readability is what to wait for
      arm_out(c, is_tls(c) ? c->tls_ww : 1);
      return;
    }
    return; // the read side sees the failure
  }
  arm_out(c, 0);
}

static size_t url_piece(char *out, const char *k, const char *v) { // form fields (KeyAuth)
  static const char hex[] = "0123456789ABCDEF";
  size_t n = (size_t)sprintf(out, "%s=", k);
  for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.') out[n++] = (char)*p;
    else { out[n++] = '%'; out[n++] = hex[*p >> 4]; out[n++] = hex[*p & 15]; }
  }
  out[n] = 0;
  return n;
}

static void mark_sent(struct conn *c, enum step s, uint64_t intended) {
  c->woff = 0;
  c->inflight = s + 1; // 0 = nothing in flight
  c->intended = intended;
  c->sent = now_ns();
  flush_out(c);
}

/** docs/protocol.md 3's headers when the application requires signed requests (empty otherwise). */
static void signature_headers(char *out, size_t cap, const char *method, const char *path, const char *nonce, const char *body, size_t blen) {
  out[0] = 0;
  if (!api_secret) return;
#ifdef KW_WS
  char sig[65];
  long ts = (long)time(NULL);
  request_signature(api_secret, method, path, ts, nonce, body, blen, sig);
  snprintf(out, cap, "X-Timestamp: %ld\r\nX-Signature: %s\r\n", ts, sig);
#else
  (void)cap, (void)method, (void)path, (void)nonce, (void)body, (void)blen;
#endif
}

#ifdef KW_WS
// A client frame (masked with a zero key: the server unmasks all the same) appended to what is
// still unsent.
static void ws_frame(struct conn *c, int opcode, const unsigned char *data, size_t len) {
  if (c->woff > 0) memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff), c->wlen -= c->woff, c->woff = 0;
  if (c->wlen + len + 14 > sizeof c->wbuf) die("channel frame too large");
  unsigned char *o = (unsigned char *)c->wbuf + c->wlen;
  size_t h = 0;
  o[h++] = (unsigned char)(0x80 | opcode);
  if (len < 126) o[h++] = (unsigned char)(0x80 | len);
  else o[h++] = 0x80 | 126, o[h++] = (unsigned char)(len >> 8), o[h++] = (unsigned char)len;
  memset(o + h, 0, 4), h += 4;
  memcpy(o + h, data, len);
  c->wlen += h + len;
}

// A channel call: HMAC-SHA256(c2s, payload) || payload, payload {"seq":n,"type":"call",...}.
static void ws_call(struct conn *c, enum step s, uint64_t intended) {
  unsigned char frame[4096];
  char *payload = (char *)frame + 32;
  int n;
  c->cseq++;
  if (s == S_WSSTART)
    n = snprintf(payload, sizeof frame - 32, "{\"seq\":%llu,\"type\":\"call\",\"op\":\"heartbeat/start\",\"body\":{\"system_id\":\"%s\"}}",
                 (unsigned long long)c->cseq, system_id);
  else
    n = snprintf(payload, sizeof frame - 32,
                 "{\"seq\":%llu,\"type\":\"call\",\"op\":\"heartbeat\",\"body\":{\"token\":\"%s\",\"system_id\":\"%s\",\"beat_index\":%llu,"
                 "\"code_hash\":\"0123456789abcdef\"}}",
                 (unsigned long long)c->cseq, c->token, system_id, (unsigned long long)c->beat_index);
  crypto_auth_hmacsha256(frame, (unsigned char *)payload, (unsigned long long)n, c->c2s);
  ws_frame(c, 2, frame, 32 + (size_t)n);
  mark_sent(c, s, intended);
}

static void ws_upgrade(struct conn *c) {
  unsigned char pk[32];
  char ipb[32], sig[256];
  randombytes_buf(c->csk, sizeof c->csk);
  crypto_scalarmult_base(pk, c->csk);
  sodium_bin2base64(c->ckey, sizeof c->ckey, pk, sizeof pk, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  ip_str(c->ip, ipb);
  c->path = "/api/client/ws", c->method = "GET";
  snprintf(c->rnonce, sizeof c->rnonce, "%s", c->ckey); // the key is the nonce (docs/protocol.md 3 and 4)
  signature_headers(sig, sizeof sig, "GET", c->path, c->ckey, "", 0);
  c->wlen = (size_t)snprintf(c->wbuf, sizeof c->wbuf,
                             "GET /api/client/ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             "Sec-WebSocket-Key: a3dsb2FkLWNoYW5uZWwtMQ==\r\nSec-WebSocket-Version: 13\r\nX-Forwarded-For: %s\r\n"
                             "X-Session: %s\r\nX-Nonce: %s\r\n%s\r\n",
                             host_hdr, ipb, c->session, c->ckey, sig);
  mark_sent(c, S_UPGRADE, 0);
}
#endif

static void conn_send(struct conn *c, enum step s, uint64_t intended) {
  if (c->closing) { // the server closes this connection after the answer at hand: send on the next one
    c->pend = s + 1, c->pend_intended = intended;
    return;
  }
#ifdef KW_WS
  if (s == S_UPGRADE) return ws_upgrade(c);
  if (s == S_WSSTART || s == S_WSBEAT) return ws_call(c, s, intended);
#endif
  char body[4096], ipb[32], sig[256], hw[300];
  const char *path;
  int n = 0;
  uint32_t ip = (s == S_INIT && !c->in_prep) || ((s == S_LICENSE || s == S_LOGIN) && !c->in_prep) ? next_ip() : c->ip;
  if (mode == M_INITS) ip = next_ip();
  if (mode == M_ACT) { // an activation (init, then license) comes from one new address
    if (s == S_INIT) c->ip = next_ip();
    ip = c->ip;
  }
  ip_str(ip, ipb);
  if (hwid_per_key) snprintf(hw, sizeof hw, "%s-%d", hwid, c->id % nlicenses); // a key is always seen on the same device
  else snprintf(hw, sizeof hw, "%s", hwid);
  if (proto == P_KW) {
    switch (s) {
    case S_INIT:
      path = "/api/client/init";
      if (enc_key) n = snprintf(body, sizeof body, "{\"api_key\":\"%s\",\"enc_key\":\"%s\"}", api_key, enc_key);
      else n = snprintf(body, sizeof body, "{\"api_key\":\"%s\"}", api_key);
      break;
    case S_LICENSE: path = "/api/client/license"; n = snprintf(body, sizeof body, "{\"session\":\"%s\",\"license\":\"%s\",\"hwid\":\"%s\"}", c->session, licenses[c->id % nlicenses], hw); break;
    case S_LOGIN: path = "/api/client/login"; n = snprintf(body, sizeof body, "{\"session\":\"%s\",\"username\":\"%s\",\"password\":\"%s\",\"hwid\":\"%s\"}", c->session, username, password, hw); break;
    case S_START: path = "/api/client/heartbeat/start"; n = snprintf(body, sizeof body, "{\"session\":\"%s\",\"system_id\":\"%s\"}", c->session, system_id); break;
    case S_BEAT:
      path = "/api/client/heartbeat";
      n = snprintf(body, sizeof body, "{\"session\":\"%s\",\"token\":\"%s\",\"system_id\":\"%s\",\"beat_index\":%llu,\"code_hash\":\"0123456789abcdef\"}",
                   c->session, c->token, system_id, (unsigned long long)c->beat_index);
      break;
    default: die("step %d has no Keywarden request", s);
    }
  } else {
    char *b = body;
    path = ka_path;
    b += sprintf(b, "type=%s&", s == S_INIT ? "init" : s == S_LICENSE ? "license" : s == S_CHECK ? "check" : "login");
    if (s == S_INIT) { b += url_piece(b, "ver", ka_ver); *b++ = '&'; }
    if (s == S_LICENSE) { b += url_piece(b, "key", licenses[c->id % nlicenses]); *b++ = '&'; b += url_piece(b, "hwid", hw); *b++ = '&'; }
    if (s == S_LOGIN) { b += url_piece(b, "username", username); *b++ = '&'; b += url_piece(b, "pass", password); *b++ = '&'; b += url_piece(b, "hwid", hw); *b++ = '&'; }
    if (s != S_INIT) { b += url_piece(b, "sessionid", c->session); *b++ = '&'; }
    b += url_piece(b, "name", ka_name); *b++ = '&';
    b += url_piece(b, "ownerid", ka_owner);
    n = (int)(b - body);
  }
  c->nonce++;
  // 16-64 characters of [A-Za-z0-9_-], unique to this run: a signed request's nonce is refused when reused within 600 s
  snprintf(c->rnonce, sizeof c->rnonce, "kw%s-%d-%llu", run_tag, c->id, (unsigned long long)c->nonce);
  c->path = path, c->method = "POST";
  signature_headers(sig, sizeof sig, "POST", path, c->rnonce, body, (size_t)n);
  c->wlen = (size_t)snprintf(c->wbuf, sizeof c->wbuf,
                             "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nX-Forwarded-For: %s\r\n"
                             "X-Nonce: %s\r\n%sContent-Length: %d\r\n\r\n%.*s",
                             path, host_hdr, proto == P_KW ? "application/json" : "application/x-www-form-urlencoded", ipb, c->rnonce,
                             sig, n, n, body);
  mark_sent(c, s, intended);
}

static void mark_ready(struct conn *c, uint64_t now);

// Start (or restart) the preparing chain of a connection.
static void start_chain(struct conn *c, uint64_t now) {
  c->in_prep = 1;
  set_ready(c, 0);
  c->si = 0;
  c->ip = next_ip();
  c->beat_index = 1;
  if (sessions_in && c->claimed < nsessions_in) snprintf(c->session, sizeof c->session, "%s", sessions_in[c->claimed]);
  if (c->nsteps == 0) {
    mark_ready(c, now);
    return;
  }
  conn_send(c, c->steps[0], 0);
}

static int claim(struct conn *c) { return (c->claimed = atomic_fetch_add(&claims, 1)) < total; }

static void prep_done(struct conn *c) {
  if (c->preparing) c->preparing = 0, atomic_fetch_sub(&preparing, 1);
}

static void mark_ready(struct conn *c, uint64_t now) {
  c->in_prep = 0;
  set_ready(c, 1);
  c->retries = 0;
  prep_done(c);
  if (!c->counted_ready) c->counted_ready = 1, atomic_fetch_add(&ready_conns, 1);
  if (newmode) c->next_due = 0; // a new session beats one interval after its start
  if (c->down_since) { // spike: this client is back
    hrec(&c->w->rec, now - c->down_since);
    c->w->recovered++;
    c->down_since = 0;
  }
}

static void kill_conn(struct conn *c) {
  if (c->dead) return;
  prep_done(c);
  set_ready(c, 0);
  c->dead = 1;
  atomic_fetch_add(&dead_conns, 1);
  TK(c->w, t_->dead++);
  if (c->fd >= 0) {
    epoll_ctl(c->w->ep, EPOLL_CTL_DEL, c->fd, NULL);
#ifdef KW_TLS
    if (c->ssl) SSL_free(c->ssl), c->ssl = NULL;
#endif
    close(c->fd), c->fd = -1;
  }
}

// The first call of a paced connection. The benchmark's connections are all ready when the window
// opens and are staggered over one period; a load-test client starts its schedule when its session
// is ready: one interval later (an SDK's first beat), or, under a shared --rate, at a point of the
// period spread by its id (Knuth's multiplicative hash) so that clients ramped in together do not beat together.
static uint64_t first_due(struct conn *c, uint64_t now) {
  if (!newmode) return t_run + (c->period * (uint64_t)c->id) / (uint64_t)nconns;
  if (rate <= 0) return now + c->period;
  uint32_t h = (uint32_t)c->id * 2654435761u;
  return now + (uint64_t)((double)c->period * ((double)h / 4294967296.0));
}

// The measured call, when the schedule says so (else it is queued for its due time).
static void kick(struct conn *c, uint64_t now) {
  if (c->dead || c->inflight || !c->ready || atomic_load(&phase) != 1 || c->measured == S_NONE || c->closing) return;
  if (c->fd >= 0 && !c->connected) return; // connecting: on_connected kicks it
  uint64_t due = now;
  if (c->period) {
    if (c->next_due == 0) c->next_due = first_due(c, now);
    if (c->next_due > now) {
      queue_at(c, c->next_due);
      return;
    }
    due = c->next_due;
  }
  if (c->fd < 0) { // closed while idle: open it now, and send once it is up
    if (c->lazy) c->lazy = 0, conn_open(c);
    return;
  }
  if (c->period) c->next_due += c->period;
  conn_send(c, c->measured, due);
}

static const char *find_field(const char *body, size_t blen, const char *name, size_t *vlen) {
  char pat[64];
  int pl = snprintf(pat, sizeof pat, "\"%s\"", name);
  const char *p = memmem(body, blen, pat, (size_t)pl);
  if (!p) return NULL;
  p += pl;
  const char *end = body + blen;
  while (p < end && (*p == ' ' || *p == ':')) p++;
  if (p >= end || *p != '"') return NULL;
  p++;
  const char *q = memchr(p, '"', (size_t)(end - p));
  if (!q) return NULL;
  *vlen = (size_t)(q - p);
  return p;
}

static int copy_field(const char *body, size_t blen, const char *name, char *out, size_t cap) {
  size_t n;
  const char *v = find_field(body, blen, name, &n);
  if (!v || n == 0 || n >= cap) return 0;
  memcpy(out, v, n);
  out[n] = 0;
  return 1;
}

static int num_field(const char *body, size_t blen, const char *name, char *out, size_t cap) { // an integer's digits
  char pat[64];
  int pl = snprintf(pat, sizeof pat, "\"%s\":", name);
  const char *p = memmem(body, blen, pat, (size_t)pl), *end = body + blen;
  if (!p) return 0;
  p += pl;
  size_t n = 0;
  while (p < end && n + 1 < cap && ((*p >= '0' && *p <= '9') || (*p == '-' && n == 0))) out[n++] = *p++;
  out[n] = 0;
  return n > 0;
}

/** The proof of a heartbeat answer (docs/protocol.md 6), checked before the chain moves on; 1 when it holds. */
static int proof_holds(struct conn *c, enum step s, const char *body, size_t blen) {
#ifdef KW_WS
  char proof[128], tok[512], count[32];
  if (!copy_field(body, blen, "proof", proof, sizeof proof)) return 0;
  if (s == S_START || s == S_WSSTART)
    return copy_field(body, blen, "token", tok, sizeof tok) && check_start_proof(c->session, system_id, tok, proof);
  return copy_field(body, blen, "new_token", tok, sizeof tok) && num_field(body, blen, "beat_count", count, sizeof count) &&
         check_beat_proof(c->token, c->session, (unsigned long long)c->beat_index, tok, count, proof);
#else
  (void)c, (void)s, (void)body, (void)blen;
  return 1;
#endif
}

static void on_response(struct conn *c, int status, const char *body, size_t blen, uint64_t now) {
  struct worker *w = c->w;
  enum step s = (enum step)(c->inflight - 1);
  c->inflight = 0;
  int ok = status >= 200 && status < 300;
  if (ok && proto == P_KA && memmem(body, blen, "\"success\":true", 14) == NULL) ok = 0; // KeyAuth answers 200 to failures
  if (ok && c->vthis && (s == S_START || s == S_WSSTART || s == S_BEAT || s == S_WSBEAT) && !proof_holds(c, s, body, blen)) {
    TK(w, t_->bad_proof++);
    say_verify(c, s, "the heartbeat proof does not hold");
  }
  if (c->in_prep) {
    if (ok && s == S_INIT) ok = copy_field(body, blen, proto == P_KW ? "session" : "sessionid", c->session, sizeof c->session);
    if (ok && (s == S_START || s == S_WSSTART)) {
      ok = copy_field(body, blen, "token", c->token, sizeof c->token);
      char iv[32];
      // a fleet beats at the interval its application sets, as an SDK does
      if (ok && newmode && beat_interval_s <= 0 && rate <= 0)
        c->period = (uint64_t)(num_field(body, blen, "beat_interval", iv, sizeof iv) && atol(iv) > 0 ? atol(iv) : 30) * 1000000000ull;
    }
    TK(w, t_->prep_n++; if (ok) t_->prep_ok++; else t_->prep_fail++; hrec(&t_->prep, now - c->sent));
    if (!ok) {
      if (status == 503) w->shed++;        // load shed by the server (a bounded table is full)
      else if (status == 429) w->limited++; // a per-address limit (setup / inits count, not fail)
      else w->prep_fail++, say_error(c, s, status, body, blen);
      if (status == 429 && mode != M_SETUP && mode != M_INITS) w->prep_fail++, say_error(c, s, status, body, blen);
      if (newmode) TK(w, t_->shed += status == 503; t_->limited += status == 429);
      if (mode == M_SETUP || mode == M_INITS) {
        if (w->prep_fail > 100) die("more than 100 failed calls while creating sessions");
        if (claim(c)) start_chain(c, now);
        else c->dead = 1;
        return;
      }
      if (++c->retries > 3) { kill_conn(c); return; }
      if (c->ws) { c->reopen = 1; return; } // a new connection, then the chain from init
      start_chain(c, now);
      return;
    }
    if (++c->si < c->nsteps) {
      conn_send(c, c->steps[c->si], 0);
      return;
    }
    if (mode == M_SETUP || mode == M_INITS) {
      w->created++;
      if (sessions_out) {
        flockfile(sessions_out);
        fprintf(sessions_out, "%s\n", c->session);
        funlockfile(sessions_out);
      }
      if (claim(c)) start_chain(c, now);
      else c->dead = 1;
      return;
    }
    mark_ready(c, now);
    kick(c, now);
    return;
  }
  // the measured call
  int counted = now >= win_start && now <= win_end;
  uint64_t lat = now - (c->period ? c->intended : c->sent);
  if (counted) {
    w->requests++;
    if (ok) w->ok++;
    else w->non2xx++, w->shed += status == 503, w->limited += status == 429;
    hrec(&w->h, lat);
  }
  TK(w, t_->calls++; if (ok) t_->ok++; else t_->non2xx++, t_->shed += status == 503, t_->limited += status == 429;
     hrec(c->chan || s == S_WSBEAT ? &t_->ws : &t_->rest, lat));
  if (!ok) say_error(c, s, status, body, blen);
  if (mode == M_ACT) { // an activation: init, then license on the session it gave, from the same address
    if (s == S_INIT && ok && copy_field(body, blen, "session", c->session, sizeof c->session)) {
      conn_send(c, S_LICENSE, now);
      return;
    }
    if (s == S_LICENSE && ok) TK(w, t_->activations++);
    kick(c, now);
    return;
  }
  if (s == S_BEAT || s == S_WSBEAT) {
    if (ok && !copy_field(body, blen, "new_token", c->token, sizeof c->token)) {
      w->bad_body++;
      say_error(c, s, status, body, blen);
      ok = 0;
    }
    if (!ok && !fake_session) { // the chain is broken: prepare it again
      if (c->ws) { c->reopen = 1; return; }
      start_chain(c, now);
      return;
    }
    if (!ok) { // a fake session (the ceiling): send the same token again
      kick(c, now);
      return;
    }
    c->beat_index++;
  }
  kick(c, now);
}

#ifdef KW_WS
// The hello: the transcript, X25519, then HKDF-SHA256 (RFC 5869, with libsodium's HMAC) for both keys.
static int ws_hello(struct conn *c, const char *js, size_t len) {
  char kid[64], ts[32], skey[64], connid[128], interval[32], sig[128], tr[2048];
  unsigned char spk[32], shared[32], salt[32], prk[32], t1[32], t2[32], in[64];
  size_t spk_len = 0;
  if (!copy_field(js, len, "kid", kid, sizeof kid) || !num_field(js, len, "ts", ts, sizeof ts) ||
      !copy_field(js, len, "server_key", skey, sizeof skey) || !copy_field(js, len, "conn", connid, sizeof connid) ||
      !num_field(js, len, "beat_interval", interval, sizeof interval))
    return -1;
  if (sodium_base642bin(spk, sizeof spk, skey, strlen(skey), NULL, &spk_len, NULL, sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 || spk_len != 32)
    return -1;
  int n = snprintf(tr, sizeof tr, "kwc1-hello\n%s\n%s\n%s\n%s\n%s\n%s\n%s", kid, ts, c->session, c->ckey, skey, connid, interval);
  if (verify_frac > 0) { // every hello: the connection's keys hang on it
    const char *why = copy_field(js, len, "sig", sig, sizeof sig) ? check_hello(kid, ts, sig, tr, (size_t)n) : "hello: no sig";
    TK(c->w, t_->verified++; if (why) t_->bad_sig++);
    if (why) say_verify(c, S_UPGRADE, why);
  }
  crypto_hash_sha256(salt, (unsigned char *)tr, (unsigned long long)n);
  if (crypto_scalarmult(shared, c->csk, spk) != 0) return -1;
  crypto_auth_hmacsha256(prk, shared, sizeof shared, salt);
  memcpy(in, "kwc1 keys\x01", 10);
  crypto_auth_hmacsha256(t1, in, 10, prk); // okm[0..32]: s2c
  memcpy(c->s2c, t1, 32);
  memcpy(in, t1, 32), memcpy(in + 32, "kwc1 keys\x02", 10);
  crypto_auth_hmacsha256(t2, in, 42, prk);
  memcpy(c->c2s, t2, 32);
  c->cseq = 0;
  return 0;
}

static int ws_message(struct conn *c, int op, const unsigned char *pl, size_t len, uint64_t now) {
  switch (op) {
  case 9: ws_frame(c, 10, pl, len), flush_out(c); return 0; // ping -> pong
  case 10: return 0;
  case 8:
    c->w->ws_closed++;
    if (!quiet && atomic_fetch_add(&printed, 1) < 5)
      fprintf(stderr, "kwload: conn %d channel closed by the server: %d %.*s\n", c->id, len >= 2 ? pl[0] << 8 | pl[1] : 0,
              (int)(len > 2 ? len - 2 : 0), (const char *)pl + 2);
    return -1;
  case 1:
    if (c->inflight != S_UPGRADE + 1 || ws_hello(c, (const char *)pl, len) < 0) return -1;
    c->vthis = 0;
    on_response(c, 200, (const char *)pl, len, now);
    return 0;
  case 2: {
    if (len < 32) return -1;
    const char *js = (const char *)pl + 32;
    size_t jl = len - 32;
    char type[32], st[8];
    if (!copy_field(js, jl, "type", type, sizeof type)) return -1;
    if (!strcmp(type, "reply")) {
      if (!c->inflight || !num_field(js, jl, "status", st, sizeof st)) return -1;
      if ((c->vthis = want_verify(c))) {
        int good = check_frame_mac(c->s2c, pl, len);
        TK(c->w, t_->verified++; if (!good) t_->bad_sig++);
        if (!good) say_verify(c, (enum step)(c->inflight - 1), "the frame's MAC does not verify");
      }
      on_response(c, atoi(st), js, jl, now);
      return 0;
    }
    if (!strcmp(type, "pong")) return 0;
    atomic_fetch_add(&events, 1);
    printf("KWLOAD event %s %d %llu\n", type, c->id, (unsigned long long)now_ns());
    fflush(stdout);
    if (!strcmp(type, "revoked")) { // the server closes it (4003); nothing to reopen
      kill_conn(c);
      return -1;
    }
    return 0;
  }
  default: return -1;
  }
}

static int parse_ws(struct conn *c, uint64_t now) {
  for (;;) {
    if (c->reopen || c->dead) return -1;
    const unsigned char *b = (const unsigned char *)c->rbuf;
    size_t have = c->rlen, len = b[1] & 127, h = 2;
    if (have < 2) return 0;
    if (b[1] & 0x80) return -1; // a server does not mask
    if (len == 126) {
      if (have < 4) return 0;
      len = (size_t)b[2] << 8 | b[3], h = 4;
    } else if (len == 127) {
      if (have < 10) return 0;
      len = 0, h = 10;
      for (int i = 0; i < 8; i++) len = len << 8 | b[2 + i];
    }
    if (have < h + len) return 0;
    int r = ws_message(c, b[0] & 15, b + h, len, now);
    if (c->dead) return -1;
    memmove(c->rbuf, c->rbuf + h + len, have - h - len);
    c->rlen -= h + len;
    c->rbuf[c->rlen] = 0;
    if (r < 0 || c->reopen) return -1;
  }
}
#endif

/** A response header's value (trimmed) into out; empty when absent. */
static void header_value(const char *l, size_t name_len, const char *hend, char *out, size_t cap) {
  const char *v = l + name_len;
  while (v < hend && (*v == ' ' || *v == '\t')) v++;
  size_t n = 0;
  while (v < hend && *v != '\r' && *v != '\n' && n + 1 < cap) out[n++] = *v++;
  out[n] = 0;
}

// Parse whole responses out of the read buffer. Returns -1 when the connection must be closed.
static int parse_responses(struct conn *c, uint64_t now) {
  for (;;) {
#ifdef KW_WS
    if (c->ws) return parse_ws(c, now);
#endif
    if (c->rlen < 12) return 0;
    char *hend = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
    if (!hend) return 0;
    size_t hlen = (size_t)(hend - c->rbuf) + 4;
    int status = atoi(c->rbuf + 9);
    if (status == 101 && c->inflight == S_UPGRADE + 1) { // now a channel: the hello completes the step
      memmove(c->rbuf, c->rbuf + hlen, c->rlen - hlen);
      c->rlen -= hlen;
      c->rbuf[c->rlen] = 0;
      c->ws = 1;
      continue;
    }
    long clen = -1;
    int chunked = 0, close_after = 0;
    char kid[32] = "", rts[32] = "", rsig[128] = "";
    for (char *line = memchr(c->rbuf, '\n', hlen); line && line < hend; line = memchr(line + 1, '\n', (size_t)(hend - line))) {
      char *l = line + 1;
      if (!strncasecmp(l, "content-length:", 15)) clen = atol(l + 15);
      else if (!strncasecmp(l, "transfer-encoding:", 18) && strcasestr(l, "chunked") && strcasestr(l, "chunked") < hend) chunked = 1;
      else if (!strncasecmp(l, "connection:", 11) && !strncasecmp(l + 11 + strspn(l + 11, " "), "close", 5)) close_after = 1;
      else if (verify_frac > 0 && !strncasecmp(l, "x-response-kid:", 15)) header_value(l, 15, hend, kid, sizeof kid);
      else if (verify_frac > 0 && !strncasecmp(l, "x-response-timestamp:", 21)) header_value(l, 21, hend, rts, sizeof rts);
      else if (verify_frac > 0 && !strncasecmp(l, "x-response-signature:", 21)) header_value(l, 21, hend, rsig, sizeof rsig);
    }
    size_t consumed;
    char *body = c->rbuf + hlen;
    size_t blen;
    if (chunked) { // first check the whole message is here, then decode it in place
      char *p = body, *end = c->rbuf + c->rlen;
      for (;;) {
        char *crlf = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!crlf) return 0;
        long sz = strtol(p, NULL, 16);
        if (sz == 0) {
          char *fin = memmem(crlf, (size_t)(end - crlf), "\r\n\r\n", 4);
          if (!fin) return 0;
          consumed = (size_t)(fin + 4 - c->rbuf);
          break;
        }
        if (crlf + 2 + sz + 2 > end) return 0;
        p = crlf + 2 + sz + 2;
      }
      char *out = body;
      for (p = body;;) {
        char *crlf = memmem(p, (size_t)(end - p), "\r\n", 2);
        long sz = strtol(p, NULL, 16);
        if (sz == 0) break;
        memmove(out, crlf + 2, (size_t)sz);
        out += sz;
        p = crlf + 2 + sz + 2;
      }
      blen = (size_t)(out - body);
    } else {
      if (clen < 0) clen = 0;
      if (c->rlen < hlen + (size_t)clen) return 0;
      blen = (size_t)clen;
      consumed = hlen + blen;
    }
    if (!c->inflight) return -1; // an answer nobody asked for
    c->vthis = 0;
#ifdef KW_WS
    if (proto == P_KW && (c->vthis = want_verify(c))) {
      const char *why = check_reply_signature(kid, rts, rsig, c->method, c->path, status, c->rnonce, body, blen);
      TK(c->w, t_->verified++; if (why) t_->bad_sig++);
      if (why) say_verify(c, (enum step)(c->inflight - 1), why);
    }
#endif
    if (close_after) c->closing = 1; // what on_response sends waits for the next connection
    on_response(c, status, body, blen, now);
    if (c->dead) return -1;
    memmove(c->rbuf, c->rbuf + consumed, c->rlen - consumed);
    c->rlen -= consumed;
    c->rbuf[c->rlen] = 0;
    if (close_after) return -1;
  }
}

static void conn_close_fd(struct conn *c) {
  if (c->fd < 0) return;
  epoll_ctl(c->w->ep, EPOLL_CTL_DEL, c->fd, NULL);
#ifdef KW_TLS
  if (c->ssl) SSL_free(c->ssl), c->ssl = NULL;
#endif
  close(c->fd), c->fd = -1;
  c->connected = 0, c->hs = 0, c->tls_ww = 0;
}

static void conn_reopen(struct conn *c, int was_error) {
  struct worker *w = c->w;
  int lost = c->inflight != 0;
  conn_close_fd(c);
  c->rlen = 0;
  if (was_error || lost) {
    w->errors++;
    TK(w, t_->errors++);
  }
  w->reconnects++;
  TK(w, t_->reconnects++);
  if (!newmode && w->reconnects > 10000) die("more than 10000 reconnects: is the server up?");
  c->inflight = 0;
  c->closing = 0;
  // A call lost with its connection: the chain's state on the server is unknown, so start over
  // (except where every measured call stands alone).
  if (lost && (c->in_prep || c->measured == S_BEAT) && !fake_session) c->need_chain = 1, set_ready(c, 0);
  if (c->ws || c->reopen || c->measured == S_WSBEAT || mode == M_WSHOLD) c->need_chain = 1, set_ready(c, 0); // a channel is not resumed
  c->ws = 0, c->reopen = 0;
  // A load-test client whose idle connection the server closed opens a new one when it next needs
  // one, as an SDK does (the server's keep-alive timeout is shorter than most beat intervals).
  if (newmode && !c->need_chain && !c->pend && !lost && !was_error && c->ready) {
    c->lazy = 1;
    kick(c, now_ns());
    return;
  }
  conn_open(c);
}

static void conn_open(struct conn *c) {
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) {
    if (errno == EMFILE || errno == ENFILE)
      die("socket: %s: more clients than this process may hold open (ulimit -n); use fewer clients", strerror(errno));
    die("socket: %s", strerror(errno));
  }
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (bind_src) {
    setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (bind(c->fd, (struct sockaddr *)&bind_addr, sizeof bind_addr) < 0) die("bind: %s", strerror(errno));
  }
  c->connected = 0, c->hs = 0, c->lazy = 0;
  c->waiting_out = 1;
  struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
  epoll_ctl(c->w->ep, EPOLL_CTL_ADD, c->fd, &ev);
  if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS) {
    if (!newmode) die("connect: %s", strerror(errno));
    c->waiting_out = 1; // reported through SO_ERROR on the next wake-up
  }
}

/** A connection that could not be made (refused, reset, TLS handshake failed). */
static void connect_failed(struct conn *c, uint64_t now, const char *why) {
  struct worker *w = c->w;
  w->errors++;
  TK(w, t_->errors++);
  conn_close_fd(c);
  if (!newmode) {
    if (w->errors > 1000) die("connect failed: %s", why);
    usleep(10000);
    conn_open(c);
    return;
  }
  if (!quiet && atomic_fetch_add(&printed, 1) < 5) fprintf(stderr, "kwload: conn %d: cannot connect: %s\n", c->id, why);
  // back off, as a client would, instead of hammering a deployment that refuses connections
  c->backoff_ms = c->backoff_ms ? (c->backoff_ms * 2 > 2000 ? 2000 : c->backoff_ms * 2) : 100;
  heap_push(w, now + (uint64_t)c->backoff_ms * 1000000ull, c, 1);
}

static void on_connected(struct conn *c, uint64_t now) {
  c->connected = 1;
  c->backoff_ms = 0;
  arm_out(c, 0);
  if (c->pend) { // a call held back while the previous connection closed
    enum step s = (enum step)(c->pend - 1);
    c->pend = 0;
    conn_send(c, s, c->pend_intended);
    return;
  }
  if (c->need_chain) { // first connect, or a chain to start over
    c->need_chain = 0;
    start_chain(c, now);
  }
  kick(c, now);
}

// Opens this thread's connections, as many as --ramp or the steps allow by now, and at most
// --prep-window of all threads' preparing at once: with 100,000 channel clients, all preparing
// together would be 100,000 calls in flight at once.
static void open_more(struct worker *w) {
  int lim = atomic_load(&allowed);
  while (w->opened < w->n && w->conns[w->opened].id < lim && (prep_window <= 0 || atomic_load(&preparing) < prep_window)) {
    struct conn *c = &w->conns[w->opened++];
    if (prep_window > 0) c->preparing = 1, atomic_fetch_add(&preparing, 1);
    conn_open(c);
  }
}

// --spike-at: every client loses its connection at once and comes back at once, preparing its
// session again (init -> license -> heartbeat/start, and the upgrade for channel clients).
static void spike(struct worker *w, uint64_t now) {
  for (int i = 0; i < w->opened; i++) {
    struct conn *c = &w->conns[i];
    if (c->dead) continue;
    w->dropped++;
    c->down_since = now;
    conn_close_fd(c);
    c->inflight = 0, c->rlen = 0, c->ws = 0, c->reopen = 0, c->closing = 0, c->pend = 0, c->lazy = 0, c->retries = 0;
    set_ready(c, 0);
    c->in_prep = 0;
    c->need_chain = 1;
    conn_open(c);
  }
}

static void on_readable(struct conn *c, uint64_t now) {
  int closed = 0;
  for (;;) {
    if (c->rcap - c->rlen < rb_free) {
      c->rcap = c->rcap ? c->rcap * 2 : rb_free * 4;
      c->rbuf = realloc(c->rbuf, c->rcap);
      if (!c->rbuf) die("out of memory");
    }
    ssize_t k = io_read(c, c->rbuf + c->rlen, c->rcap - c->rlen - 1);
    if (k > 0) {
      c->rlen += (size_t)k;
      c->rbuf[c->rlen] = 0; // header parsing uses C string functions
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (is_tls(c) && c->tls_ww) arm_out(c, 1);
      break;
    }
    closed = 1;
    break;
  }
  if (parse_responses(c, now) < 0) closed = 1;
  if (c->dead) return;
  if (closed) {
    conn_reopen(c, c->inflight != 0);
    return;
  }
  if (is_tls(c) && c->woff < c->wlen) flush_out(c); // a write that waited for the peer's bytes
}

static void on_event(struct conn *c, uint32_t events, uint64_t now) {
  if (!c->connected) {
    if (!c->hs) { // the TCP connect
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err) {
        connect_failed(c, now, strerror(err));
        return;
      }
      if (!(events & (EPOLLOUT | EPOLLIN))) return;
#ifdef KW_TLS
      if (use_tls) c->ssl = tls_new(c->fd), c->hs = 1;
#endif
    }
#ifdef KW_TLS
    if (c->hs) {
      int ww = 0;
      char why[256];
      int r = tls_handshake(c->ssl, &ww, why, sizeof why);
      if (r < 0) {
        if (!strncmp(why, "certificate:", 12)) // a configuration to fix, not a load to measure
          die("TLS %s (give the CA with --ca FILE; --insecure skips the check)", why);
        connect_failed(c, now, why);
        return;
      }
      if (r == 0) {
        arm_out(c, ww);
        return;
      }
      c->hs = 0;
    }
#endif
    on_connected(c, now);
    if (!(events & EPOLLIN) || c->fd < 0) return;
  } else if (events & EPOLLOUT) {
    flush_out(c);
    if (is_tls(c) && !(events & EPOLLIN)) events |= EPOLLIN; // OpenSSL may have waited for writability on a read
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(c, now);
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct epoll_event evs[256];
  open_more(w);
  uint64_t armed = 0;
  for (;;) {
    open_more(w);
    int ph = atomic_load(&phase);
    if (ph == 2) break;
    if (mode == M_SETUP || mode == M_INITS) {
      int alive = 0;
      for (int i = 0; i < w->n; i++) alive += !w->conns[i].dead;
      if (!alive) break;
    }
    int n = epoll_wait(w->ep, evs, 256, 5);
    uint64_t now = now_ns();
    int sg = atomic_load(&spike_gen);
    if (sg != w->spike_seen) w->spike_seen = sg, spike(w, now);
    for (int i = 0; i < n; i++) {
      if (evs[i].data.ptr == NULL) { // the pacing timer
        uint64_t x;
        if (read(w->tfd, &x, sizeof x) < 0) {}
        armed = 0;
        continue;
      }
      struct conn *c = evs[i].data.ptr;
      if (c->dead || c->fd < 0) continue;
      on_event(c, evs[i].events, now);
    }
    if (atomic_load(&phase) == 1 && mode != M_SETUP && mode != M_INITS && mode != M_WSHOLD) {
      if (!w->kicked) { // the window opened: every prepared connection starts its schedule
        w->kicked = 1;
        for (int i = 0; i < w->opened; i++) kick(&w->conns[i], now);
      }
      now = now_ns();
      while (w->hn && w->heap[0].at <= now) {
        struct due d = heap_pop(w);
        struct conn *c = d.c;
        if (d.reopen) {
          if (c->fd < 0 && !c->dead) conn_open(c);
          continue;
        }
        if (c->queued && c->queued_at == d.at) c->queued = 0;
        kick(c, now);
      }
      if (w->hn && w->heap[0].at != armed) {
        uint64_t soonest = w->heap[0].at;
        struct itimerspec its = { .it_value = { .tv_sec = (time_t)(soonest / 1000000000ull), .tv_nsec = (long)(soonest % 1000000000ull) } };
        timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL);
        armed = soonest;
      }
    }
  }
  w->finished = 1;
  return NULL;
}

static double tv(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec / 1e6; }
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return tv(ru.ru_utime) + tv(ru.ru_stime);
}
static void sleep_until(uint64_t t) {
  struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull), .tv_nsec = (long)(t % 1000000000ull) };
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

static void usage(void) {
  fprintf(stderr,
          "usage: kwload --port P [--host 127.0.0.1] --mode hb|init|license|login|setup|inits|ws-hb|ws-hold|fleet|activate\n"
          "  [--conns 64] [--threads 2] [--duration 5] [--warmup 1] [--rate R] [--total N]\n"
          "  [--api-key K] [--license L1,L2 | --license-file F] [--username U --password P] [--hwid H] [--fake-session]\n"
          "  [--proto kw|keyauth --ka-name N --ka-owner O --ka-path /api/1.2/ --ka-ver 1.0]\n"
          "  [--ip-base N] [--ip-pool N] [--bind 127.0.0.2] [--sessions-out F | --sessions-in F] [--prep-window N] [--quiet]\n"
          "  load test: [--tls [--ca FILE | --insecure] [--tls-name NAME]] [--host-header H] [--api-secret S] [--enc-key K]\n"
          "  [--verify F --public-key B64 [--kid k1]] [--ws-share F] [--beat-interval S] [--ramp S] [--spike-at S]\n"
          "  [--start-clients N --step-clients N --step-seconds S --settle S [--step-control]] [--max-requests N] [--ticks] [--hwid-per-key]\n");
  exit(2);
}

static void on_signal(int sig) {
  (void)sig;
  atomic_store(&stop_req, 1);
}

// ---- the load test's run: ramp or steps, spike, a line every second -------------------------------

// the second at hand, the step's settled seconds (latency), the whole step (failures of its new clients), the whole run
static struct tick *tk_now, *tk_step, *tk_step_all, *tk_all;

static void collect(struct worker *ws, struct tick *out) {
  memset(out, 0, sizeof *out);
  for (int t = 0; t < nthreads; t++) {
    pthread_mutex_lock(&ws[t].tmu);
    tick_add(out, &ws[t].tk);
    memset(&ws[t].tk, 0, sizeof ws[t].tk);
    pthread_mutex_unlock(&ws[t].tmu);
  }
}

/** The counters of a tick or step as json fields (no braces). */
static void print_counts(const struct tick *k) {
  struct hist *all = calloc(1, sizeof *all);
  if (!all) die("out of memory");
  hadd(all, &k->rest), hadd(all, &k->ws);
  printf("\"calls\":%llu,\"ok\":%llu,\"non2xx\":%llu,\"shed\":%llu,\"limited\":%llu,\"errors\":%llu,\"reconnects\":%llu,"
         "\"prep\":%llu,\"prep_ok\":%llu,\"prep_fail\":%llu,\"dead\":%llu,\"verified\":%llu,\"bad_sig\":%llu,\"bad_proof\":%llu,"
         "\"activations\":%llu,\"rest_calls\":%llu,\"ws_calls\":%llu,"
         "\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,\"rest_p99_us\":%.1f,\"ws_p99_us\":%.1f,"
         "\"prep_p50_us\":%.1f,\"prep_p99_us\":%.1f",
         (unsigned long long)k->calls, (unsigned long long)k->ok, (unsigned long long)k->non2xx, (unsigned long long)k->shed,
         (unsigned long long)k->limited, (unsigned long long)k->errors, (unsigned long long)k->reconnects, (unsigned long long)k->prep_n,
         (unsigned long long)k->prep_ok, (unsigned long long)k->prep_fail, (unsigned long long)k->dead, (unsigned long long)k->verified,
         (unsigned long long)k->bad_sig, (unsigned long long)k->bad_proof, (unsigned long long)k->activations,
         (unsigned long long)k->rest.n, (unsigned long long)k->ws.n, hpct(all, 50) / 1e3, hpct(all, 90) / 1e3, hpct(all, 99) / 1e3,
         all->max / 1e3, hpct(&k->rest, 99) / 1e3, hpct(&k->ws, 99) / 1e3, hpct(&k->prep, 50) / 1e3, hpct(&k->prep, 99) / 1e3);
  free(all);
}

// The capacity steps. Step k adds --step-clients (opened over --ramp), waits until every client
// it added has its session or gave up (preparing thousands of sessions takes longer than a beat
// interval on a small server; at most max(30 s, 3 steps) so a stuck step still ends), lets
// --settle seconds pass, then measures for the rest of --step-seconds: the step's line has the
// measured seconds ("settled": latency) and the whole step ("all": the failures of the clients
// it added). With --step-control the caller decides after each step, on stdin: `next` (add the
// next clients), `again` (measure these clients once more) or `stop`; the clients keep beating
// meanwhile.
static int step_k;           // the step at hand
static double step_t0;       // when it started, seconds since the run's start

static long step_target(int k) {
  long n = (long)start_clients + (long)k * step_clients;
  return n > nconns ? nconns : n;
}

/** Clients that may be open at t seconds: a linear ramp, or the step at hand's (ramped in over --ramp). */
static int target_at(double t) {
  if (step_clients > 0) {
    long hi = step_target(step_k), lo = step_k == 0 ? 0 : step_target(step_k - 1);
    double f = ramp_s > 0 ? (t - step_t0) / ramp_s : 1;
    if (f > 1) f = 1;
    if (f < 0) f = 0;
    return (int)(lo + (long)((double)(hi - lo) * f + 0.999999));
  }
  if (ramp_s <= 0 || t >= ramp_s) return nconns;
  return (int)((double)nconns * t / ramp_s + 0.999999);
}

static const char *run_load_test(struct worker *ws, uint64_t t0) {
  const char *stopped = "duration";
  int spiked = 0, stage = 0; // steps: 0 preparing its clients, 1 settling, 2 measuring, 3 waiting for the caller
  char cmd[256];
  size_t cmd_len = 0;
  double stage_end = 0, measure_from = 0, prep_max = step_s * 3 > 30 ? step_s * 3 : 30;
  uint64_t end = t0 + (uint64_t)(duration_s * 1e9), next_tick = t0 + 1000000000ull;
  int sent_window_start = 0;
  for (;;) {
    uint64_t now = now_ns();
    double t = (double)(now - t0) / 1e9;
    atomic_store(&allowed, target_at(t));
    if (spike_at_s > 0 && !spiked && t >= spike_at_s) {
      spiked = 1;
      atomic_fetch_add(&spike_gen, 1);
    }
    if (!sent_window_start && now >= win_start) {
      sent_window_start = 1;
      printf("KWLOAD window-start\n");
      fflush(stdout);
    }
    if (now >= next_tick) {
      double ts = (double)(next_tick - t0) / 1e9;
      collect(ws, tk_now);
      tick_add(tk_all, tk_now);
      if (print_ticks) {
        printf("KWLOAD tick {\"t\":%.0f,\"clients\":%d,\"target\":%d,", ts, atomic_load(&live), atomic_load(&allowed));
        print_counts(tk_now);
        printf("}\n");
        fflush(stdout);
      }
      if (step_clients > 0) {
        long hi = step_target(step_k);
        tick_add(tk_step_all, tk_now);
        if (stage == 2) tick_add(tk_step, tk_now); // the second that just ended was measured
        if (stage == 0 && ts - step_t0 >= ramp_s &&
            (atomic_load(&live) + atomic_load(&dead_conns) >= hi || ts - step_t0 >= prep_max))
          stage = 1, stage_end = ts + settle_s;
        if (stage == 1 && ts >= stage_end - 1e-9) stage = 2, measure_from = ts, stage_end = ts + (step_s - settle_s);
        if (stage == 2 && ts >= stage_end - 1e-9) {
          printf("KWLOAD step {\"step\":%d,\"clients\":%ld,\"live\":%d,\"from\":%.0f,\"to\":%.0f,\"started\":%.0f,\"settled\":{",
                 step_k, hi, atomic_load(&live), measure_from, ts, step_t0);
          print_counts(tk_step);
          printf("},\"all\":{");
          print_counts(tk_step_all);
          printf("}}\n");
          fflush(stdout);
          memset(tk_step, 0, sizeof *tk_step);
          memset(tk_step_all, 0, sizeof *tk_step_all);
          if (hi >= nconns && !step_control) {
            stopped = "max-clients";
            break;
          }
          if (step_control) stage = 3;
          else step_k++, step_t0 = ts, stage = 0;
        }
        if (stage == 3) memset(tk_step_all, 0, sizeof *tk_step_all); // while the caller decides: in no step
      }
      if (max_requests > 0 && (long long)(tk_all->calls + tk_all->prep_n) >= max_requests) {
        stopped = "max-requests";
        break;
      }
      next_tick += 1000000000ull;
    }
    if (stage == 3) { // the caller's decision on the step just reported
      struct pollfd pf = { .fd = 0, .events = POLLIN };
      if (poll(&pf, 1, 0) > 0) {
        ssize_t k = read(0, cmd + cmd_len, sizeof cmd - 1 - cmd_len);
        if (k <= 0) {
          stopped = "signal"; // the caller is gone
          break;
        }
        cmd_len += (size_t)k;
        cmd[cmd_len] = 0;
      }
      char *nl = memchr(cmd, '\n', cmd_len);
      if (nl) {
        *nl = 0;
        double ts = (double)(next_tick - t0) / 1e9 - 1;
        int stop_now = 0;
        if (!strcmp(cmd, "next")) {
          if (step_target(step_k) >= nconns) stopped = "max-clients", stop_now = 1;
          else step_k++, step_t0 = ts, stage = 0;
        } else if (!strcmp(cmd, "again")) {
          stage = 2, measure_from = ts, stage_end = ts + (step_s - settle_s);
        } else {
          stopped = "signal", stop_now = 1;
        }
        cmd_len -= (size_t)(nl + 1 - cmd);
        memmove(cmd, nl + 1, cmd_len);
        if (stop_now) break;
      }
    }
    if (now >= end) break;
    if (atomic_load(&stop_req)) {
      stopped = "signal";
      break;
    }
    uint64_t wake = next_tick < end ? next_tick : end;
    if (wake > now + 20000000ull) wake = now + 20000000ull; // the ramp moves in 20 ms steps
    sleep_until(wake);
  }
  printf("KWLOAD window-end\n");
  fflush(stdout);
  return stopped;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && v && (i++, 1))
    if (OPT("--host")) host = v;
    else if (OPT("--port")) port = atoi(v);
    else if (OPT("--mode")) {
      if (!strcmp(v, "hb")) mode = M_HB;
      else if (!strcmp(v, "init")) mode = M_INIT;
      else if (!strcmp(v, "license")) mode = M_LICENSE;
      else if (!strcmp(v, "login")) mode = M_LOGIN;
      else if (!strcmp(v, "setup")) mode = M_SETUP;
      else if (!strcmp(v, "inits")) mode = M_INITS;
      else if (!strcmp(v, "ws-hb")) mode = M_WSHB;
      else if (!strcmp(v, "ws-hold")) mode = M_WSHOLD;
      else if (!strcmp(v, "fleet")) mode = M_FLEET;
      else if (!strcmp(v, "activate")) mode = M_ACT;
      else usage();
    } else if (OPT("--proto")) proto = !strcmp(v, "keyauth") ? P_KA : P_KW;
    else if (OPT("--conns")) nconns = atoi(v);
    else if (OPT("--threads")) nthreads = atoi(v);
    else if (OPT("--duration")) duration_s = atof(v);
    else if (OPT("--warmup")) warmup_s = atof(v);
    else if (OPT("--rate")) rate = atof(v);
    else if (OPT("--total")) total = atoll(v);
    else if (OPT("--api-key")) api_key = v;
    else if (OPT("--license")) license_key = v;
    else if (OPT("--username")) username = v;
    else if (OPT("--password")) password = v;
    else if (OPT("--hwid")) hwid = v;
    else if (OPT("--ka-name")) ka_name = v;
    else if (OPT("--ka-owner")) ka_owner = v;
    else if (OPT("--ka-path")) ka_path = v;
    else if (OPT("--ka-ver")) ka_ver = v;
    else if (OPT("--ip-base")) ip_base = (uint32_t)strtoul(v, NULL, 10);
    else if (OPT("--ip-pool")) ip_pool = (uint32_t)strtoul(v, NULL, 10);
    else if (OPT("--prep-timeout")) prep_timeout_s = atof(v);
    else if (OPT("--prep-window")) prep_window = atoi(v);
    else if (OPT("--license-file")) license_file = v;
    else if (OPT("--host-header")) snprintf(host_hdr, sizeof host_hdr, "%s", v);
    else if (OPT("--ca")) tls_ca = v;
    else if (OPT("--tls-name")) tls_host = v;
    else if (OPT("--api-secret")) api_secret = v;
    else if (OPT("--enc-key")) enc_key = v;
    else if (OPT("--verify")) verify_frac = atof(v);
    else if (OPT("--public-key")) public_key = v;
    else if (OPT("--kid")) kid_opt = v;
    else if (OPT("--ws-share")) ws_share = atof(v);
    else if (OPT("--beat-interval")) beat_interval_s = atof(v);
    else if (OPT("--ramp")) ramp_s = atof(v);
    else if (OPT("--spike-at")) spike_at_s = atof(v);
    else if (OPT("--start-clients")) start_clients = atoi(v);
    else if (OPT("--step-clients")) step_clients = atoi(v);
    else if (OPT("--step-seconds")) step_s = atof(v);
    else if (OPT("--settle")) settle_s = atof(v);
    else if (OPT("--max-requests")) max_requests = atoll(v);
    else if (OPT("--sessions-out")) {
      if (!(sessions_out = fopen(v, "w"))) die("%s: %s", v, strerror(errno));
    } else if (OPT("--sessions-in")) {
      FILE *f = fopen(v, "r");
      if (!f) die("%s: %s", v, strerror(errno));
      char line[1024];
      long long cap = 1024;
      sessions_in = malloc((size_t)cap * sizeof *sessions_in);
      while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!*line) continue;
        if (nsessions_in == cap) sessions_in = realloc(sessions_in, (size_t)(cap *= 2) * sizeof *sessions_in);
        if (!sessions_in || !(sessions_in[nsessions_in++] = strdup(line))) die("out of memory");
      }
      fclose(f);
    } else if (OPT("--bind")) {
      bind_src = 1;
      bind_addr.sin_family = AF_INET;
      if (inet_pton(AF_INET, v, &bind_addr.sin_addr) != 1) die("--bind needs an IPv4 address");
    }
    else if (!strcmp(a, "--fake-session")) fake_session = 1;
    else if (!strcmp(a, "--quiet")) quiet = 1;
    else if (!strcmp(a, "--tls")) use_tls = 1;
    else if (!strcmp(a, "--insecure")) tls_insecure = 1;
    else if (!strcmp(a, "--ticks")) print_ticks = 1;
    else if (!strcmp(a, "--hwid-per-key")) hwid_per_key = 1;
    else if (!strcmp(a, "--step-control")) step_control = 1;
    else usage();
  }
  if (!port || nconns < 1 || nthreads < 1 || ip_pool < 1) usage();
  newmode = mode == M_FLEET || mode == M_ACT;
  if (!host_hdr[0]) snprintf(host_hdr, sizeof host_hdr, "%s:%d", host, port);
  {
    unsigned char r[6];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) die("getrandom: %s", strerror(errno));
    for (int i = 0; i < 6; i++) sprintf(run_tag + 2 * i, "%02x", r[i]);
  }
  if (mode == M_WSHB || mode == M_WSHOLD || (mode == M_FLEET && ws_share > 0)) {
#ifdef KW_WS
    rb_free = 1024;
#else
    die("built without libsodium (apt-get install libsodium-dev): no channel modes");
#endif
  }
  if (newmode) rb_free = 2048; // answers are small; a fleet has many connections
#ifdef KW_WS
  if (sodium_init() < 0) die("sodium_init failed");
  if (verify_frac > 0) {
    if (!public_key || set_public_key(public_key) != 0) die("--verify needs --public-key (base64 of the 32-byte Ed25519 key)");
    if (kid_opt) vk_kid = kid_opt;
  }
#else
  if (verify_frac > 0 || api_secret) die("built without libsodium (apt-get install libsodium-dev): no --verify, no --api-secret");
#endif
  if (use_tls) {
#ifdef KW_TLS
    tls_setup(tls_ca, tls_insecure, tls_host ? tls_host : host);
#else
    die("built without OpenSSL (apt-get install libssl-dev): no --tls");
#endif
  }
  if (newmode) {
    if (step_clients > 0 && (step_s < 1 || settle_s < 0 || settle_s >= step_s || settle_s != (int)settle_s || step_s != (int)step_s))
      die("--step-clients needs whole seconds: --step-seconds S > --settle");
    if (step_clients > 0 && start_clients <= 0) start_clients = step_clients;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
  }
  signal(SIGPIPE, SIG_IGN); // a write to a connection the peer closed is an error to count, not an exit
  { // as many connections as the hard limit allows
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) rl.rlim_cur = rl.rlim_max, setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (nthreads > nconns) nthreads = nconns;
  if (mode == M_SETUP && sessions_in && total < 1) total = nsessions_in;
  if ((mode == M_SETUP || mode == M_INITS) && total < 1) die("--total is needed in this mode");
  if ((mode == M_SETUP || mode == M_INITS) && total < nconns) nconns = (int)total;
  if (license_file) { // one key a line, joined into the --license form
    FILE *f = fopen(license_file, "r");
    if (!f) die("%s: %s", license_file, strerror(errno));
    size_t cap = 4096, len = 0;
    char *all = malloc(cap), line[1024];
    if (!all) die("out of memory");
    all[0] = 0;
    while (fgets(line, sizeof line, f)) {
      line[strcspn(line, "\r\n")] = 0;
      if (!*line) continue;
      size_t l = strlen(line);
      while (len + l + 2 > cap) if (!(all = realloc(all, cap *= 2))) die("out of memory");
      if (len) all[len++] = ',';
      memcpy(all + len, line, l + 1), len += l;
    }
    fclose(f);
    license_key = all;
  }
  { // the license list
    char *all = strdup(license_key), *save = NULL;
    licenses = calloc(strlen(all) / 2 + 2, sizeof *licenses);
    for (char *k = strtok_r(all, ",", &save); k; k = strtok_r(NULL, ",", &save)) licenses[nlicenses++] = k;
    if (nlicenses == 0) licenses[nlicenses++] = "";
  }
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
    struct hostent *he = gethostbyname(host);
    if (!he) die("unknown host %s", host);
    memcpy(&addr.sin_addr, he->h_addr_list[0], sizeof addr.sin_addr);
  }

  // chains
  enum step steps[4], wsteps[4];
  int nsteps = 0, nwsteps = 0;
  enum step measured = S_NONE;
  switch (mode) {
  case M_HB:
    if (!fake_session) {
      steps[nsteps++] = S_INIT, steps[nsteps++] = S_LICENSE;
      if (proto == P_KW) steps[nsteps++] = S_START;
    }
    measured = proto == P_KW ? S_BEAT : S_CHECK;
    break;
  case M_INIT: measured = S_INIT; break;
  case M_LICENSE: steps[nsteps++] = S_INIT, measured = S_LICENSE; break;
  case M_LOGIN: steps[nsteps++] = S_INIT, measured = S_LOGIN; break;
  case M_SETUP:
    if (!sessions_in) steps[nsteps++] = S_INIT, steps[nsteps++] = S_LICENSE;
    if (proto == P_KW && !sessions_out) steps[nsteps++] = S_START;
    break;
  case M_INITS: steps[nsteps++] = S_INIT; break;
  case M_WSHB:
  case M_WSHOLD:
    steps[nsteps++] = S_INIT, steps[nsteps++] = S_LICENSE, steps[nsteps++] = S_UPGRADE, steps[nsteps++] = S_WSSTART;
    measured = mode == M_WSHB ? S_WSBEAT : S_NONE;
    break;
  case M_FLEET: // REST clients; channel clients take wsteps
    steps[nsteps++] = S_INIT, steps[nsteps++] = S_LICENSE, steps[nsteps++] = S_START;
    wsteps[nwsteps++] = S_INIT, wsteps[nwsteps++] = S_LICENSE, wsteps[nwsteps++] = S_UPGRADE, wsteps[nwsteps++] = S_WSSTART;
    measured = S_BEAT;
    break;
  case M_ACT: measured = S_INIT; break; // then S_LICENSE on the session it gave
  }

  struct worker *ws = calloc((size_t)nthreads, sizeof *ws);
  if (!ws) die("out of memory");
  uint64_t period = rate > 0 ? (uint64_t)(1e9 * nconns / rate) : 0;
  if (mode == M_FLEET && rate <= 0 && beat_interval_s > 0) period = (uint64_t)(beat_interval_s * 1e9);
  // Connection i belongs to thread i % threads, so a ramp (connections opened in id order) loads every thread.
  for (int t = 0; t < nthreads; t++) {
    struct worker *w = &ws[t];
    w->ep = epoll_create1(EPOLL_CLOEXEC);
    w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
    epoll_ctl(w->ep, EPOLL_CTL_ADD, w->tfd, &ev);
    w->n = (nconns - t + nthreads - 1) / nthreads;
    w->conns = calloc((size_t)w->n, sizeof *w->conns);
    if (!w->conns) die("out of memory");
    pthread_mutex_init(&w->tmu, NULL);
    for (int k = 0; k < w->n; k++) {
      struct conn *c = &w->conns[k];
      c->id = t + k * nthreads;
      c->fd = -1;
      c->w = w;
      // fleet: client i is on the channel when the share says so (floor((i+1)f) > floor(if): exactly f of them)
      c->chan = mode == M_FLEET && (long)((c->id + 1) * ws_share) > (long)(c->id * ws_share);
      memcpy(c->steps, c->chan ? wsteps : steps, sizeof steps);
      c->nsteps = c->chan ? nwsteps : nsteps;
      c->measured = c->chan ? S_WSBEAT : measured;
      c->need_chain = 1;
      c->period = period;
      c->beat_index = 1;
      if (fake_session) {
        snprintf(c->session, sizeof c->session, "S%042d", c->id);
        snprintf(c->token, sizeof c->token, "TT%032d", 0);
      }
    }
  }
  if (mode == M_SETUP || mode == M_INITS) // claims in id order, as before the connections were interleaved
    for (int i = 0; i < nconns; i++) claim(&ws[i % nthreads].conns[i / nthreads]);
  tk_now = calloc(1, sizeof *tk_now), tk_step = calloc(1, sizeof *tk_step), tk_step_all = calloc(1, sizeof *tk_step_all);
  tk_all = calloc(1, sizeof *tk_all);
  if (!tk_now || !tk_step || !tk_step_all || !tk_all) die("out of memory");

  double cpu0 = cpu_s();
  uint64_t t0 = now_ns();
  const char *stopped = "duration";
  atomic_store(&allowed, newmode ? target_at(0) : nconns);
  if (mode == M_SETUP || mode == M_INITS) atomic_store(&phase, 1);
  if (newmode) { // clients start as soon as their session is ready; the window is the run after the warm-up
    t_run = t0;
    win_start = t0 + (uint64_t)(warmup_s * 1e9);
    win_end = t0 + (uint64_t)(duration_s * 1e9);
    atomic_store(&phase, 1);
  }
  for (int t = 0; t < nthreads; t++) pthread_create(&ws[t].th, NULL, worker_main, &ws[t]);

  double prep_s = 0, cpu_w0 = 0, cpu_w1 = 0;
  if (newmode) {
    cpu_w0 = cpu0;
    stopped = run_load_test(ws, t0);
    duration_s = (double)(now_ns() - t0) / 1e9;
    cpu_w1 = cpu_s();
    atomic_store(&phase, 2);
  } else if (mode != M_SETUP && mode != M_INITS) {
    uint64_t limit = t0 + (uint64_t)(prep_timeout_s * 1e9);
    while (atomic_load(&ready_conns) + atomic_load(&dead_conns) < nconns) {
      if (now_ns() > limit) die("preparing the sessions took longer than %.0f s (%d of %d ready)", prep_timeout_s, atomic_load(&ready_conns), nconns);
      usleep(2000);
    }
    if (atomic_load(&ready_conns) == 0) die("no connection could prepare its session");
    prep_s = (double)(now_ns() - t0) / 1e9;
    printf("KWLOAD ready %.3f\n", prep_s);
    fflush(stdout);
    t_run = now_ns();
  }
  if (newmode) {
  } else if (mode == M_WSHOLD) { // hold the channels open until the caller closes our stdin
    win_start = t_run;
    cpu_w0 = cpu_s();
    atomic_store(&phase, 1);
    char buf[256];
    while (read(0, buf, sizeof buf) > 0) {}
    win_end = now_ns();
    duration_s = (double)(win_end - win_start) / 1e9;
    cpu_w1 = cpu_s();
    atomic_store(&phase, 2);
  } else if (mode != M_SETUP && mode != M_INITS) {
    win_start = t_run + (uint64_t)(warmup_s * 1e9);
    win_end = win_start + (uint64_t)(duration_s * 1e9);
    atomic_store(&phase, 1);
    sleep_until(win_start);
    cpu_w0 = cpu_s();
    printf("KWLOAD window-start\n");
    fflush(stdout);
    sleep_until(win_end);
    cpu_w1 = cpu_s();
    printf("KWLOAD window-end\n");
    fflush(stdout);
    atomic_store(&phase, 2);
  } else {
    win_start = t0;
    win_end = UINT64_MAX;
    cpu_w0 = cpu0;
  }
  for (int t = 0; t < nthreads; t++) pthread_join(ws[t].th, NULL);
  uint64_t t_end = now_ns();
  if (sessions_out && fclose(sessions_out) != 0) die("--sessions-out: %s", strerror(errno));
  if (mode == M_SETUP || mode == M_INITS) cpu_w1 = cpu_s();
  if (newmode) { // what arrived after the last whole second
    collect(ws, tk_now);
    tick_add(tk_all, tk_now);
  }

  struct hist *h = calloc(1, sizeof *h), *rec = calloc(1, sizeof *rec);
  uint64_t requests = 0, ok = 0, non2xx = 0, shed = 0, limited = 0, errors = 0, reconnects = 0, prep_fail = 0, created = 0, bad_body = 0, ws_closed = 0;
  uint64_t dropped = 0, recovered = 0;
  for (int t = 0; t < nthreads; t++) {
    struct worker *w = &ws[t];
    hadd(h, &w->h);
    hadd(rec, &w->rec);
    requests += w->requests, ok += w->ok, non2xx += w->non2xx, shed += w->shed, limited += w->limited, errors += w->errors;
    reconnects += w->reconnects, prep_fail += w->prep_fail, created += w->created, bad_body += w->bad_body, ws_closed += w->ws_closed;
    dropped += w->dropped, recovered += w->recovered;
  }
  if (mode == M_WSHOLD) requests = ok = (uint64_t)atomic_load(&ready_conns); // channels prepared and held
  double window = (mode == M_SETUP || mode == M_INITS) ? (double)(t_end - t0) / 1e9 : duration_s;
  if (newmode) window = (double)(win_end < t_end ? win_end : t_end) / 1e9 - (double)win_start / 1e9;
  if (window <= 0) window = 1e-9;
  if (mode == M_SETUP || mode == M_INITS) requests = ok = created;
  printf("KWLOAD {\"mode\":\"%s\",\"proto\":\"%s\",\"conns\":%d,\"threads\":%d,\"rate\":%.1f,\"duration_s\":%.3f,"
         "\"requests\":%llu,\"ok\":%llu,\"non2xx\":%llu,\"shed\":%llu,\"limited\":%llu,\"errors\":%llu,\"reconnects\":%llu,\"prep_fail\":%llu,\"bad_body\":%llu,"
         "\"dead_conns\":%d,\"rps\":%.1f,\"ok_rps\":%.1f,\"prep_s\":%.3f,"
         "\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,\"mean_us\":%.1f,"
         "\"cpu_window_s\":%.4f,\"cpu_total_s\":%.4f,\"events\":%lld,\"ws_closed\":%llu,",
         mode == M_HB ? "hb" : mode == M_INIT ? "init" : mode == M_LICENSE ? "license" : mode == M_LOGIN ? "login" : mode == M_SETUP ? "setup"
         : mode == M_INITS ? "inits" : mode == M_WSHB ? "ws-hb" : mode == M_WSHOLD ? "ws-hold" : mode == M_FLEET ? "fleet" : "activate",
         proto == P_KW ? "keywarden" : "keyauth", nconns, nthreads, rate, window, (unsigned long long)requests, (unsigned long long)ok,
         (unsigned long long)non2xx, (unsigned long long)shed, (unsigned long long)limited, (unsigned long long)errors, (unsigned long long)reconnects, (unsigned long long)prep_fail,
         (unsigned long long)bad_body, (mode == M_SETUP || mode == M_INITS) ? 0 : atomic_load(&dead_conns), (double)requests / window,
         (double)ok / window, prep_s, hpct(h, 50) / 1e3, hpct(h, 90) / 1e3, hpct(h, 99) / 1e3, hpct(h, 99.9) / 1e3, h->max / 1e3,
         h->n ? (double)h->sum / (double)h->n / 1e3 : 0, cpu_w1 - cpu_w0, cpu_s() - cpu0, (long long)atomic_load(&events),
         (unsigned long long)ws_closed);
  // the load test's totals over the whole run (ramp included), the spike's recovery, why the run ended
  printf("\"stopped\":\"%s\",\"clients_end\":%d,\"spike_dropped\":%llu,\"spike_recovered\":%llu,\"spike_p50_us\":%.1f,"
         "\"spike_p99_us\":%.1f,\"spike_max_us\":%.1f,\"total\":{",
         stopped, atomic_load(&live), (unsigned long long)dropped, (unsigned long long)recovered, hpct(rec, 50) / 1e3, hpct(rec, 99) / 1e3,
         rec->max / 1e3);
  print_counts(tk_all);
  printf("}}\n");
  fflush(stdout);
  return 0;
}
