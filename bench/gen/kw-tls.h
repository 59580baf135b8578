// TLS for kwload (OpenSSL from Debian's libssl-dev), included by kwload.c. One SSL object per
// connection, over the same non-blocking socket and the same level-triggered epoll loop as plain
// HTTP: the handshake runs after the TCP connect, and reads and writes go through tls_io(), which
// turns OpenSSL's "want read / want write" into EAGAIN like a socket would. The certificate is
// checked (system CAs, or --ca for a private or self-signed one) unless --insecure says not to:
// a load test through the wrong proxy should fail, not measure something else.
#if !defined(KW_NO_TLS) && __has_include(<openssl/ssl.h>)
#define KW_TLS 1
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

static SSL_CTX *tls_ctx;
static const char *tls_name; // the name the certificate must carry: a host name (also sent as SNI) or an IP address
static int tls_name_is_ip;

static void tls_die(const char *what) {
  char buf[256];
  unsigned long e = ERR_get_error();
  ERR_error_string_n(e, buf, sizeof buf);
  fprintf(stderr, "kwload: %s: %s\n", what, e ? buf : "unknown error");
  exit(2);
}

static void tls_setup(const char *ca_file, int insecure, const char *name) {
  tls_ctx = SSL_CTX_new(TLS_client_method());
  if (!tls_ctx) tls_die("SSL_CTX_new");
  SSL_CTX_set_min_proto_version(tls_ctx, TLS1_2_VERSION);
  // The write buffer may move between a partial write and its retry (frames are appended).
  SSL_CTX_set_mode(tls_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
  SSL_CTX_set_options(tls_ctx, SSL_OP_IGNORE_UNEXPECTED_EOF); // a proxy closing without close_notify is an ordinary close
#endif
  if (insecure) {
    SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_NONE, NULL);
  } else {
    SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_PEER, NULL);
    if (ca_file) {
      if (SSL_CTX_load_verify_locations(tls_ctx, ca_file, NULL) != 1) tls_die("--ca: cannot load the certificate file");
    } else if (SSL_CTX_set_default_verify_paths(tls_ctx) != 1) {
      tls_die("cannot load the system's CA certificates");
    }
  }
  // HTTP/1.1 only: the generator frames HTTP/1.1 itself (nginx would otherwise offer h2).
  static const unsigned char alpn[] = "\x08http/1.1";
  SSL_CTX_set_alpn_protos(tls_ctx, alpn, sizeof alpn - 1);
  tls_name = name;
  struct in6_addr a6;
  struct in_addr a4;
  tls_name_is_ip = inet_pton(AF_INET, name, &a4) == 1 || inet_pton(AF_INET6, name, &a6) == 1;
}

static SSL *tls_new(int fd) {
  SSL *s = SSL_new(tls_ctx);
  if (!s) tls_die("SSL_new");
  SSL_set_fd(s, fd);
  if (tls_name_is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), tls_name);
  } else {
    SSL_set_tlsext_host_name(s, tls_name);
    SSL_set1_host(s, tls_name);
  }
  SSL_set_connect_state(s);
  return s;
}

/** 1: done; 0: in progress (*want_write says which readiness to wait for); -1: failed (why in err). */
static int tls_handshake(SSL *s, int *want_write, char *err, size_t errlen) {
  ERR_clear_error();
  int r = SSL_do_handshake(s);
  if (r == 1) return 1;
  int e = SSL_get_error(s, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    *want_write = e == SSL_ERROR_WANT_WRITE;
    return 0;
  }
  long v = SSL_get_verify_result(s);
  if (v != X509_V_OK) snprintf(err, errlen, "certificate: %s", X509_verify_cert_error_string(v));
  else {
    unsigned long q = ERR_get_error();
    if (q) ERR_error_string_n(q, err, errlen);
    else snprintf(err, errlen, "handshake failed (%s)", e == SSL_ERROR_SYSCALL ? strerror(errno) : "closed");
  }
  return -1;
}

/**
 * Read (write = 0) or write: bytes moved, 0 when the peer closed, -1 with errno EAGAIN when OpenSSL
 * waits for the socket (*want_write: it waits for writability, even on a read), else -1.
 */
static ssize_t tls_io(SSL *s, void *buf, size_t n, int write, int *want_write) {
  ERR_clear_error();
  int r = write ? SSL_write(s, buf, (int)n) : SSL_read(s, buf, (int)n);
  if (r > 0) return r;
  int e = SSL_get_error(s, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    *want_write = e == SSL_ERROR_WANT_WRITE;
    errno = EAGAIN;
    return -1;
  }
  if (e == SSL_ERROR_ZERO_RETURN) return 0;
  errno = EIO;
  return -1;
}
#endif
