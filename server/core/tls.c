/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS with OpenSSL: one SSL_CTX per TLS listener or server (built at
 * configuration load, immutable, shared by every worker), one SSL per
 * connection (owned by the DCB's worker).
 *
 * Connections run over a small custom BIO instead of a socket BIO: it
 * first hands out the bytes the protocol had already read in plain mode
 * (a client sends its ClientHello right behind the SSLRequest, so one
 * read() may hold both), then reads the socket; it writes with
 * MSG_NOSIGNAL. Everything is non-blocking: EAGAIN becomes
 * SSL_ERROR_WANT_READ / WANT_WRITE and dcb.c waits for the matching
 * event.
 *
 *   new --SSL_do_handshake--> HANDSHAKE --done--> OPEN --shutdown--> freed
 *                               |  WANT_READ/WRITE: wait for an event
 *                               +--error--> logged, the DCB hangs up
 *
 * Context: configuration functions run on main; connection functions on
 * the DCB's worker.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "tls"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sluice/buf.h>
#include <sluice/log.h>
#include <sluice/params.h>

#include "config_int.h"
#include "tls.h"

struct sl_tls {
    SSL_CTX *ctx;
    bool listener;
    bool verify_host;
};

struct sl_tls_conn {
    SSL *ssl;
    int fd;
    bool handshaking;
    bool read_wants_write;
    bool write_wants_read;
    struct sl_buf pre;          /* TLS bytes read before TLS started */
};

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

/* ---- the BIO ---- */

static int
bio_read(BIO *b, char *out, int len)
{
    struct sl_tls_conn *c = BIO_get_data(b);
    ssize_t n;

    BIO_clear_retry_flags(b);
    if (len <= 0) {
        return 0;
    }
    if (c->pre.len > 0) {
        n = (ssize_t)sl_buf_copy_out(&c->pre, 0, (size_t)len, out);
        sl_buf_consume(&c->pre, (size_t)n);
        return (int)n;
    }
    do {
        n = read(c->fd, out, (size_t)len);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        BIO_set_retry_read(b);
    }
    return (int)n;
}

static int
bio_write(BIO *b, const char *in, int len)
{
    struct sl_tls_conn *c = BIO_get_data(b);
    ssize_t n;

    BIO_clear_retry_flags(b);
    do {
        n = send(c->fd, in, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        BIO_set_retry_write(b);
    }
    return (int)n;
}

static long
bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int
bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static void
bio_method_init(void)
{
    bio_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
                              "sluice-dcb");
    if (bio_method != NULL) {
        BIO_meth_set_read(bio_method, bio_read);
        BIO_meth_set_write(bio_method, bio_write);
        BIO_meth_set_ctrl(bio_method, bio_ctrl);
        BIO_meth_set_create(bio_method, bio_create);
    }
}

/* ---- configuration ---- */

static void
log_ssl_errors(char *out, size_t len)
{
    unsigned long e;
    size_t off = 0;

    out[0] = '\0';
    while ((e = ERR_get_error()) != 0) {
        if (off + 2 < len) {
            if (off > 0) {
                out[off++] = ';';
                out[off++] = ' ';
            }
            ERR_error_string_n(e, out + off, len - off);
            off = strlen(out);
        }
    }
}

/* "TLSv12" etc. to an OpenSSL version, 0 for an unknown name. */
static int
version_of(const char *s, size_t n)
{
    static const struct {
        const char *name;
        int v;
    } names[] = {
        {"TLSv10", TLS1_VERSION},   {"TLSv11", TLS1_1_VERSION},
        {"TLSv12", TLS1_2_VERSION}, {"TLSv13", TLS1_3_VERSION},
        {"TLSv1.0", TLS1_VERSION},  {"TLSv1.1", TLS1_1_VERSION},
        {"TLSv1.2", TLS1_2_VERSION}, {"TLSv1.3", TLS1_3_VERSION},
    };

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strlen(names[i].name) == n &&
            strncasecmp(names[i].name, s, n) == 0) {
            return names[i].v;
        }
    }
    return 0;
}

/* ssl_version: MAX (OpenSSL's defaults) or a comma list of versions,
 * which bound the protocol range. false on a bad value. */
static bool
set_versions(SSL_CTX *ctx, const char *list)
{
    int lo = 0;
    int hi = 0;
    const char *p = list;

    if (strcasecmp(list, "MAX") == 0) {
        return true;
    }
    while (*p != '\0') {
        size_t n = strcspn(p, ", ");
        int v = version_of(p, n);

        if (n > 0) {
            if (v == 0) {
                return false;
            }
            lo = lo == 0 || v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        p += n;
        p += strspn(p, ", ");
    }
    return lo != 0 && SSL_CTX_set_min_proto_version(ctx, lo) == 1 &&
           SSL_CTX_set_max_proto_version(ctx, hi) == 1;
}

static const char *
ca_param(const struct sl_params *p)
{
    return sl_params_has(p, "ssl_ca") ? "ssl_ca" : "ssl_ca_cert";
}

/*
 * ssl_crl: revocation lists (PEM, one file, any number of CRLs) checked
 * for every certificate of the peer's chain, as MariaDB does: the file
 * needs a CRL from each CA in the chain. Errors counted in d.
 */
static void
load_crl(struct sl_cfg_diag *d, const struct sl_params *p, SSL_CTX *ctx,
         const char *what)
{
    const char *crl = sl_params_get(p, "ssl_crl");
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    X509_LOOKUP *lookup;
    char err[512];

    if (crl == NULL || crl[0] == '\0') {
        return;
    }
    lookup = store != NULL ? X509_STORE_add_lookup(store, X509_LOOKUP_file())
                           : NULL;
    if (lookup == NULL ||
        X509_load_crl_file(lookup, crl, X509_FILETYPE_PEM) <= 0) {
        log_ssl_errors(err, sizeof(err));
        sl__cfg_error(d, sl__params_line(p, "ssl_crl"), "cannot load "
                      "ssl_crl '%s' of %s: %s", crl, what,
                      err[0] != '\0' ? err : "no CRL in the file");
        return;
    }
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK |
                                    X509_V_FLAG_CRL_CHECK_ALL);
}

/* Certificate, key and CA. Errors counted in d. */
static void
load_files(struct sl_cfg_diag *d, const struct sl_params *p, SSL_CTX *ctx,
           const char *what)
{
    const char *cert = sl_params_get(p, "ssl_cert");
    const char *key = sl_params_get(p, "ssl_key");
    const char *ca = sl_params_get(p, ca_param(p));
    char err[512];

    if (cert != NULL &&
        SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        log_ssl_errors(err, sizeof(err));
        sl__cfg_error(d, sl__params_line(p, "ssl_cert"), "cannot load "
                      "ssl_cert '%s' of %s: %s", cert, what, err);
    }
    if (key != NULL &&
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        log_ssl_errors(err, sizeof(err));
        sl__cfg_error(d, sl__params_line(p, "ssl_key"), "cannot load "
                      "ssl_key '%s' of %s: %s", key, what, err);
    } else if (key != NULL && cert != NULL &&
               SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        sl__cfg_error(d, sl__params_line(p, "ssl_key"), "ssl_key '%s' of "
                      "%s does not match ssl_cert '%s'", key, what, cert);
    }
    if (ca != NULL && SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
        log_ssl_errors(err, sizeof(err));
        sl__cfg_error(d, sl__params_line(p, ca_param(p)), "cannot load "
                      "%s '%s' of %s: %s", ca_param(p), ca, what, err);
    }
    load_crl(d, p, ctx, what);
}

/* Everything but the files: mandatory pieces, versions, ciphers,
 * verification. */
static void
set_policy(struct sl_cfg_diag *d, const struct sl_params *p,
           struct sl_tls *t, const char *what)
{
    const char *version = sl_params_get(p, "ssl_version");
    const char *cipher = sl_params_get(p, "ssl_cipher");
    bool verify = sl_params_bool(p, "ssl_verify_peer_certificate");
    int mode = SSL_VERIFY_NONE;

    if (t->listener && (!sl_params_has(p, "ssl_cert") ||
                        !sl_params_has(p, "ssl_key"))) {
        sl__cfg_error(d, sl__params_line(p, "ssl"), "%s has ssl=true but "
                      "no ssl_cert and ssl_key", what);
    }
    if (version != NULL && !set_versions(t->ctx, version)) {
        sl__cfg_error(d, sl__params_line(p, "ssl_version"), "invalid value "
                      "'%s' for parameter 'ssl_version' in %s (expected "
                      "MAX, TLSv10, TLSv11, TLSv12 or TLSv13)", version,
                      what);
    }
    if (cipher != NULL && SSL_CTX_set_cipher_list(t->ctx, cipher) != 1) {
        ERR_clear_error();
        sl__cfg_error(d, sl__params_line(p, "ssl_cipher"), "invalid value "
                      "'%s' for parameter 'ssl_cipher' in %s", cipher, what);
    }
    if (!verify && !t->listener) {
        sl__cfg_warn(d, sl__params_line(p, "ssl"), "%s has ssl=true but "
                     "ssl_verify_peer_certificate=false: its certificate is "
                     "not checked, so anyone in the path can pose as it and "
                     "read the connection", what);
    }
    if (verify) {
        if (!sl_params_has(p, "ssl_ca") && !sl_params_has(p, "ssl_ca_cert")) {
            SSL_CTX_set_default_verify_paths(t->ctx);
        }
        mode = SSL_VERIFY_PEER;
        if (t->listener) {
            mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
        }
        t->verify_host = !t->listener &&
                         sl_params_bool(p, "ssl_verify_peer_host");
    }
    SSL_CTX_set_verify(t->ctx, mode, NULL);
    SSL_CTX_set_verify_depth(t->ctx,
                             (int)sl_params_count(p, "ssl_cert_verify_depth"));
}

void
sl__tls_configure(struct sl_cfg_diag *d, const struct sl_params *p,
                  bool listener, const char *what, struct sl_tls **out)
{
    struct sl_tls *t;

    *out = NULL;
    if (!sl_params_bool(p, "ssl")) {
        return;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        sl__cfg_error(d, sl__params_line(p, "ssl"), "out of memory");
        return;
    }
    t->listener = listener;
    t->ctx = SSL_CTX_new(listener ? TLS_server_method() : TLS_client_method());
    if (t->ctx == NULL) {
        sl__cfg_error(d, sl__params_line(p, "ssl"), "cannot create a TLS "
                      "context for %s", what);
        free(t);
        return;
    }
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                                 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                 SSL_MODE_RELEASE_BUFFERS);
    /* RELEASE_BUFFERS above: an idle TLS connection keeps no record
     * buffers. Session resumption needs an id context on the server. */
    if (listener) {
        SSL_CTX_set_session_id_context(t->ctx, (const unsigned char *)"sl",
                                       2);
    }
    load_files(d, p, t->ctx, what);
    set_policy(d, p, t, what);
    *out = t;
}

void
sl__tls_free(struct sl_tls *t)
{
    if (t != NULL) {
        SSL_CTX_free(t->ctx);
        free(t);
    }
}

bool
sl__tls_required(const struct sl_tls *t)
{
    return t != NULL && t->listener;
}

/* ---- connections ---- */

struct sl_tls_conn *
sl__tls_conn_new(struct sl_tls *t, int fd, bool accept, struct sl_buf *pre,
                 const char *host)
{
    struct sl_tls_conn *c;
    BIO *bio;

    pthread_once(&bio_once, bio_method_init);
    if (bio_method == NULL || (c = calloc(1, sizeof(*c))) == NULL) {
        return NULL;
    }
    c->fd = fd;
    c->ssl = SSL_new(t->ctx);
    bio = BIO_new(bio_method);
    if (c->ssl == NULL || bio == NULL) {
        BIO_free(bio);
        SSL_free(c->ssl);
        free(c);
        return NULL;
    }
    BIO_set_data(bio, c);
    SSL_set_bio(c->ssl, bio, bio);
    if (accept) {
        SSL_set_accept_state(c->ssl);
    } else {
        SSL_set_connect_state(c->ssl);
        if (t->verify_host && host != NULL && host[0] != '\0') {
            SSL_set1_host(c->ssl, host);
        }
    }
    if (pre != NULL) {
        sl_buf_append(&c->pre, pre);
    }
    c->handshaking = true;
    return c;
}

void
sl__tls_conn_free(struct sl_tls_conn *c)
{
    if (c != NULL) {
        SSL_free(c->ssl);
        sl_buf_reset(&c->pre);
        free(c);
    }
}

enum sl_rc
sl__tls_handshake(struct sl_tls_conn *c, const char *who)
{
    char err[512];
    long vr;
    int rc;

    if (!c->handshaking) {
        return SL_OK;
    }
    ERR_clear_error();
    rc = SSL_do_handshake(c->ssl);
    if (rc == 1) {
        c->handshaking = false;
        sl_log_info("%s: TLS established (%s, %s)", who,
                    SSL_get_version(c->ssl), SSL_get_cipher_name(c->ssl));
        return SL_OK;
    }
    switch (SSL_get_error(c->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return SL_AGAIN;
    default:
        vr = SSL_get_verify_result(c->ssl);
        log_ssl_errors(err, sizeof(err));
        sl_log_warn("%s: TLS handshake failed: %s%s%s", who,
                    err[0] != '\0' ? err : "connection closed",
                    vr != X509_V_OK ? "; certificate: " : "",
                    vr != X509_V_OK ? X509_verify_cert_error_string(vr) : "");
        return SL_ERROR;
    }
}

bool
sl__tls_handshaking(const struct sl_tls_conn *c)
{
    return c->handshaking;
}

/* errno for an SSL_read/SSL_write result that is not a byte count. */
static ssize_t
io_error(struct sl_tls_conn *c, int rc, bool reading)
{
    switch (SSL_get_error(c->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        c->write_wants_read = !reading;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        c->read_wants_write = reading;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        if (reading) {
            return 0;
        }
        errno = EPIPE;
        return -1;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        if (reading && errno == 0) {
            return 0;   /* EOF without close_notify */
        }
        errno = errno != 0 ? errno : EPIPE;
        return -1;
    default:
        ERR_clear_error();
        errno = EPROTO;
        return -1;
    }
}

ssize_t
sl__tls_read(struct sl_tls_conn *c, void *buf, size_t len)
{
    int rc;

    c->read_wants_write = false;
    if (len > INT32_MAX) {
        len = INT32_MAX;
    }
    errno = 0;
    rc = SSL_read(c->ssl, buf, (int)len);
    return rc > 0 ? rc : io_error(c, rc, true);
}

ssize_t
sl__tls_write(struct sl_tls_conn *c, const void *buf, size_t len)
{
    int rc;

    c->write_wants_read = false;
    if (len > INT32_MAX) {
        len = INT32_MAX;
    }
    errno = 0;
    rc = SSL_write(c->ssl, buf, (int)len);
    return rc > 0 ? rc : io_error(c, rc, false);
}

bool
sl__tls_read_wants_write(const struct sl_tls_conn *c)
{
    return c->read_wants_write;
}

bool
sl__tls_write_wants_read(const struct sl_tls_conn *c)
{
    return c->write_wants_read;
}

void
sl__tls_shutdown(struct sl_tls_conn *c)
{
    if (c != NULL && !c->handshaking) {
        (void)SSL_shutdown(c->ssl);
        ERR_clear_error();
    }
}

const char *
sl__tls_cipher(const struct sl_tls_conn *c)
{
    const char *s = c != NULL ? SSL_get_cipher_name(c->ssl) : NULL;

    return s != NULL ? s : "";
}

bool
sl__tls_peer_names(const struct sl_tls_conn *c, char *issuer, size_t ilen,
                   char *subject, size_t slen)
{
    X509 *cert;

    issuer[0] = '\0';
    subject[0] = '\0';
    if (c == NULL || c->handshaking ||
        SSL_get_verify_result(c->ssl) != X509_V_OK ||
        (cert = SSL_get_peer_certificate(c->ssl)) == NULL) {
        return false;
    }
    X509_NAME_oneline(X509_get_issuer_name(cert), issuer, (int)ilen);
    X509_NAME_oneline(X509_get_subject_name(cert), subject, (int)slen);
    X509_free(cert);
    return true;
}
