/* SPDX-License-Identifier: Apache-2.0 */
/*
 * caching_sha2_password on the backend side: Sluice logging in to a
 * MySQL 8 server. mdb_backend.c is compiled in unchanged (as in
 * fuzz/fuzz_backend_sm.c) and driven through its protocol callbacks with
 * the server's packets; the DCB, the session and the core's sl_backend_*
 * callbacks are fakes here that record what Sluice writes and how the
 * login ends.
 *
 * Debian has no MySQL 8, so the server's packets are not captured from a
 * live server: they are built byte for byte in the layout of MySQL 8.0's
 * protocol documentation (Handshake v10 naming caching_sha2_password,
 * AuthSwitchRequest, AuthMoreData 0x01 0x03 / 0x01 0x04 / 0x01 + PEM key)
 * and written down as hex below. What Sluice answers is checked against
 * values computed independently (Python's hashlib; the test's own RSA
 * private key decrypting Sluice's ciphertext).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

/*
 * The core functions mdb_backend.c calls are this file's fakes: the test
 * links the core's objects too, so they are renamed (the macros stay on
 * for the definitions below).
 */
#define sl_dcb_write fake_dcb_write
#define sl_dcb_is_open fake_dcb_is_open
#define sl_dcb_readq fake_dcb_readq
#define sl_dcb_protocol_data fake_dcb_protocol_data
#define sl_dcb_set_protocol_data fake_dcb_set_protocol_data
#define sl_dcb_session fake_dcb_session
#define sl_dcb_is_unix fake_dcb_is_unix
#define sl_dcb_tls_configured fake_dcb_tls_configured
#define sl_dcb_tls_start fake_dcb_tls_start
#define sl_server_name fake_server_name
#define sl_server_params fake_server_params
#define sl_service_params fake_service_params
#define sl_session_client fake_session_client
#define sl_session_service fake_session_service
#define sl_session_user fake_session_user
#define sl_session_db fake_session_db
#define sl_session_protocol_data fake_session_protocol_data
#define sl_backend_server fake_backend_server
#define sl_backend_state fake_backend_state
#define sl_backend_ready fake_backend_ready
#define sl_backend_failed fake_backend_failed
#define sl_backend_reply fake_backend_reply

/* Before cmocka.h, whose fail() macro would rename mdb_backend.c's. */
#include "../../server/modules/protocol/mariadb/mdb_backend.c"

#include <cmocka.h>
#include "../../fuzz/fake_kill.h"
#include "../../fuzz/fake_compress.h"

#include "internal.h"

/* ---- the recorded exchange ---- */

#define PASSWORD "sluice-sha2"
#define NONCE "ABCDEFGHIJKLMNOPQRST"

/*
 * Known answer, computed with Python's hashlib for PASSWORD and NONCE:
 *   h1 = sha256(b"sluice-sha2")
 *      = 236b60d18596243d9d3f31703e0789894bc327087242a3aa8a6d06ec38369acf
 *   h2 = sha256(h1)
 *   token = h1 XOR sha256(h2 + b"ABCDEFGHIJKLMNOPQRST")
 *      = 299e43b7625d9cf9d4e7dc752b66b7d53cb1caaa5a2d1324ea955aba2340298e
 */
static const char TOKEN_HEX[] =
    "299e43b7625d9cf9d4e7dc752b66b7d53cb1caaa5a2d1324ea955aba2340298e";
static const char SHA256PW_HEX[] =
    "236b60d18596243d9d3f31703e0789894bc327087242a3aa8a6d06ec38369acf";

/* MySQL 8.0.36's greeting (caps 0xdfffffff, utf8mb4_0900_ai_ci, thread 8)
 * with scramble NONCE, naming caching_sha2_password, seq 0. */
static const char GREETING_SHA2[] =
    "4a0000000a382e302e33360008000000414243444546474800ffffff0200ffdf15"
    "00000000000000000000494a4b4c4d4e4f50515253540063616368696e675f7368"
    "61325f70617373776f726400";
/* The same server with default_authentication_plugin=
 * mysql_native_password (scramble "abcdefghijklmnopqrst"). */
static const char GREETING_NATIVE[] =
    "4a0000000a382e302e33360008000000616263646566676800ffffff0200ffdf15"
    "00000000000000000000696a6b6c6d6e6f7071727374006d7973716c5f6e617469"
    "76655f70617373776f726400";
/* Its AuthSwitchRequest (seq 2) to caching_sha2_password for an account
 * of that plugin: nonce NONCE and the NUL MySQL appends. */
static const char SWITCH_SHA2[] =
    "2c000002fe63616368696e675f736861325f70617373776f7264004142434445"
    "464748494a4b4c4d4e4f505152535400";

/* A 1024-bit RSA key made once with
 *   openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024
 * the public half is what the server sends after 0x02; the private half
 * checks Sluice's ciphertext. */
static const char RSA_PUB[] =
    "-----BEGIN PUBLIC KEY-----\n"
    "MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQDrFrESsLCin1Z7A7FaSo+14pS8\n"
    "FKAH2vcF5N+Akv95QQzG8vVc/V5VRdKDv5OHd18UzMf+ivUgBvOie1u+3KvZtBLN\n"
    "HFr7Sn4+jxKZCUdIb/242/dyfjJL3U1rff8zl65LcF8cxV4r6ZmqMlZEkf3LSlbW\n"
    "1lGQjaZJ03Af1rcjFwIDAQAB\n"
    "-----END PUBLIC KEY-----\n";
static const char RSA_PRIV[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIICeAIBADANBgkqhkiG9w0BAQEFAASCAmIwggJeAgEAAoGBAOsWsRKwsKKfVnsD\n"
    "sVpKj7XilLwUoAfa9wXk34CS/3lBDMby9Vz9XlVF0oO/k4d3XxTMx/6K9SAG86J7\n"
    "W77cq9m0Es0cWvtKfj6PEpkJR0hv/bjb93J+MkvdTWt9/zOXrktwXxzFXivpmaoy\n"
    "VkSR/ctKVtbWUZCNpknTcB/WtyMXAgMBAAECgYEAostA7cdrWgHq+h6xhuwRHov8\n"
    "IU5LD4WDABLg7wFcZlQ0i+SdIrrVw0kpoVBd0jZIone4mr0RSA9oUYEJJF9dpH07\n"
    "RGkFUFZvmY2nQRtfX9GvbOjqNwk5pmrnAwbkbZTo1UlSEaxkMrZMB1EExjiQvs9p\n"
    "keEL2lAuDp107IZtJWkCQQD+x+cDGifkVpixt1Uftixj5LuStLMFh2hxFbbnQHwi\n"
    "3tMo/UKbvATErxeGVoHAHHPx8TDxUvcuIQCa/9pJv/EzAkEA7DaqwUYkon7mrUwc\n"
    "Dle32oejNH7274XKUsZaNKFwEx//d577gNYjf1XdWHZ40iVCyf8fl85mw1KXtGqY\n"
    "2PeOjQJATD9M7ku8loQn7D9+dSASxs5kKDJ1xPjSE8240BonTFQ9A25PqcWp86am\n"
    "tqha6kBZnpVc3UvD94Ue5kQdcqbDqwJBAJyeyq2IErZjqhPxyRCBfPg6wy4FmTnL\n"
    "3hDwT9Nhz2v+5WatVVlhovvFNRR4yTedWSGSNaJ0SpLr6obHvzztN+kCQQDXJcgk\n"
    "RlqZkxZy7D++wx9Asc+cHrrGSAOLmdWEQe7llZHpF9Cfo6ttrK4NSSvngEcEGBzz\n"
    "ISX171+H25keTClA\n"
    "-----END PRIVATE KEY-----\n";

/* ---- fakes of the core ---- */

struct sl_dcb *
sl_session_client(const struct sl_session *s)
{
    return NULL;
}

struct sl_service *
sl_session_service(const struct sl_session *s)
{
    return NULL;
}

const struct sl_params *
sl_service_params(const struct sl_service *s)
{
    return NULL;
}

struct sl_server *
sl_backend_server(const struct sl_backend *b)
{
    return NULL;
}

const char *
sl_server_name(const struct sl_server *s)
{
    return "mysql8";
}

const struct sl_params *
sl_server_params(const struct sl_server *s)
{
    return NULL;
}

enum sl_backend_state
sl_backend_state(const struct sl_backend *b)
{
    return SL_BACKEND_READY;
}

#define MAX_WRITES 8

static struct fake {
    bool ssl;                    /* the server has ssl=true */
    bool unix_socket;            /* the backend is a unix socket */
    struct sl_buf rq;
    void *proto;
    bool closed;
    bool tls;
    bool ready;
    bool failed;
    uint16_t err_code;           /* of the ERR passed to sl_backend_failed */
    char err_msg[512];
    unsigned replies;            /* sl_backend_reply calls */
    unsigned nw;                 /* packets written */
    unsigned char *w[MAX_WRITES];
    size_t wlen[MAX_WRITES];
    struct mdb_session sd;
} f;

static char dcb_obj, ses_obj, be_obj;
#define DCB ((struct sl_dcb *)&dcb_obj)
#define BACKEND ((struct sl_backend *)&be_obj)

void *
sl_dcb_protocol_data(const struct sl_dcb *d)
{
    return f.proto;
}

void
sl_dcb_set_protocol_data(struct sl_dcb *d, void *p)
{
    f.proto = p;
}

struct sl_buf *
sl_dcb_readq(struct sl_dcb *d)
{
    return &f.rq;
}

struct sl_session *
sl_dcb_session(const struct sl_dcb *d)
{
    return (struct sl_session *)&ses_obj;
}

bool
sl_dcb_is_open(const struct sl_dcb *d)
{
    return !f.closed;
}

bool
sl_dcb_tls_configured(const struct sl_dcb *d)
{
    return f.ssl;
}

bool
sl_dcb_is_unix(const struct sl_dcb *d)
{
    return f.unix_socket;
}

int
sl_dcb_tls_start(struct sl_dcb *d)
{
    assert_true(f.ssl);
    f.tls = true;
    return 0;
}

/* Every write is one whole packet: kept for the test to look at. */
int
sl_dcb_write(struct sl_dcb *d, struct sl_buf *buf)
{
    size_t len = sl_buf_len(buf);

    assert_false(f.closed);
    assert_true(f.nw < MAX_WRITES);
    assert_int_equal(sl_mdb_complete_packets_len(buf, NULL), len);
    f.w[f.nw] = malloc(len);
    assert_non_null(f.w[f.nw]);
    sl_buf_copy_out(buf, 0, len, f.w[f.nw]);
    f.wlen[f.nw++] = len;
    sl_buf_free(buf);
    return 0;
}

void *
sl_session_protocol_data(const struct sl_session *s)
{
    return &f.sd;
}

const char *
sl_session_user(const struct sl_session *s)
{
    return "app";
}

const char *
sl_session_db(const struct sl_session *s)
{
    return "";
}

void
sl_backend_ready(struct sl_backend *b)
{
    assert_false(f.ready || f.failed || f.closed);
    f.ready = true;
}

void
sl_backend_failed(struct sl_backend *b, struct sl_buf *errpkt,
                  const char *reason)
{
    assert_false(f.closed);
    assert_non_null(reason);
    f.failed = true;
    f.closed = true;
    if (errpkt != NULL) {
        size_t len = sl_buf_len(errpkt);
        const unsigned char *p = sl_buf_pullup(errpkt, len);
        const char *msg;
        size_t mlen;
        char state[6];

        assert_true(len > 4);
        assert_true(sl_mdb_parse_err(p + 4, len - 4, &f.err_code, state,
                                     &msg, &mlen));
        snprintf(f.err_msg, sizeof(f.err_msg), "%.*s", (int)mlen, msg);
    }
    sl_buf_free(errpkt);
}

int
sl_backend_reply(struct sl_backend *b, struct sl_buf *buf,
                 const struct sl_reply *reply)
{
    assert_true(f.ready);
    f.replies++;
    sl_buf_free(buf);
    return SL_OK;
}

/* ---- helpers ---- */

static unsigned char *
unhex(const char *hex, size_t *len)
{
    size_t n = strlen(hex) / 2;
    unsigned char *p = malloc(n + 1);

    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        p[i] = (unsigned char)v;
    }
    *len = n;
    return p;
}

/* The server sends bytes (a whole packet or several). */
static void
server(const void *p, size_t n)
{
    sl_buf_append_data(&f.rq, p, n);
    if (mdb_backend_read(DCB) == SL_ERROR) {
        f.closed = true;
    }
}

static void
server_hex(const char *hex)
{
    size_t n;
    unsigned char *p = unhex(hex, &n);

    server(p, n);
    free(p);
}

/* A packet with payload p[n] and sequence seq from the server. */
static void
server_packet(uint8_t seq, const void *p, size_t n)
{
    unsigned char *pkt = malloc(n + 4);

    assert_non_null(pkt);
    pkt[0] = (unsigned char)(n & 0xff);
    pkt[1] = (unsigned char)((n >> 8) & 0xff);
    pkt[2] = (unsigned char)((n >> 16) & 0xff);
    pkt[3] = seq;
    memcpy(pkt + 4, p, n);
    server(pkt, n + 4);
    free(pkt);
}

static const unsigned char OK_PKT[] = {0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
                                       0x00};

static void
with_password(const char *pw, bool sha256, bool clear)
{
    mdb_sha1(pw, strlen(pw), f.sd.sha1pw);
    f.sd.has_pw = true;
    if (sha256) {
        mdb_sha256_password(pw, strlen(pw), f.sd.sha256pw);
        f.sd.has_sha256 = true;
    }
    if (clear) {
        strcpy(f.sd.clearpw, pw);
        f.sd.clearpw_len = strlen(pw);
        f.sd.has_clear = true;
    }
}

static int
setup(void **state)
{
    (void)state;
    memset(&f, 0, sizeof(f));
    f.sd.caps = MDB_SERVER_CAPS;
    f.sd.charset = 45;
    assert_int_equal(mdb_backend_init(DCB, BACKEND), SL_OK);
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    f.closed = true;
    mdb_backend_free(DCB);
    assert_null(f.proto);
    sl_buf_reset(&f.rq);
    for (unsigned i = 0; i < f.nw; i++) {
        free(f.w[i]);
    }
    return 0;
}

/* Written packet i: its sequence and payload. */
static const unsigned char *
written(unsigned i, uint8_t *seq, size_t *len)
{
    assert_true(i < f.nw);
    *seq = f.w[i][3];
    *len = f.wlen[i] - 4;
    return f.w[i] + 4;
}

/* The login (HandshakeResponse41) Sluice wrote as packet i, decoded with
 * the client side's own parser. */
static void
written_login(unsigned i, struct mdb_hello *h)
{
    uint8_t seq;
    size_t len;
    const unsigned char *p = written(i, &seq, &len);

    assert_int_equal(mdb_parse_hello(p, len, h), 0);
}

static void
assert_payload(unsigned i, uint8_t want_seq, const void *want, size_t n)
{
    uint8_t seq;
    size_t len;
    const unsigned char *p = written(i, &seq, &len);

    assert_int_equal(seq, want_seq);
    assert_int_equal(len, n);
    assert_memory_equal(p, want, n);
}

/* ---- tests ---- */

static void
test_token_vector(void **state)
{
    size_t n;
    unsigned char *want = unhex(TOKEN_HEX, &n);
    unsigned char *h1 = unhex(SHA256PW_HEX, &n);
    uint8_t sha256pw[MDB_SHA256_LEN], token[MDB_SHA256_LEN];

    (void)state;
    mdb_sha256_password(PASSWORD, strlen(PASSWORD), sha256pw);
    assert_memory_equal(sha256pw, h1, MDB_SHA256_LEN);
    mdb_sha2_token(sha256pw, (const uint8_t *)NONCE, 20, token);
    assert_memory_equal(token, want, MDB_SHA256_LEN);
    free(want);
    free(h1);
}

/* The greeting names caching_sha2_password: the login carries its token
 * and names it; 0x01 0x03 then OK is the fast path. */
static void
test_fast_path_greeting(void **state)
{
    struct mdb_hello h;
    size_t n;
    unsigned char *want = unhex(TOKEN_HEX, &n);
    static const unsigned char fast_ok[] = {0x01, 0x03};

    (void)state;
    with_password(PASSWORD, true, false);
    server_hex(GREETING_SHA2);
    assert_int_equal(f.nw, 1);
    written_login(0, &h);
    assert_string_equal(h.user, "app");
    assert_string_equal(h.plugin, "caching_sha2_password");
    assert_int_equal(h.auth_len, MDB_SHA256_LEN);
    assert_memory_equal(h.auth, want, MDB_SHA256_LEN);
    assert_int_equal(f.w[0][3], 1);
    server_packet(2, fast_ok, sizeof(fast_ok));
    assert_false(f.ready);
    assert_false(f.failed);
    assert_int_equal(f.nw, 1);      /* nothing to answer to 0x03 */
    server_packet(3, OK_PKT, sizeof(OK_PKT));
    assert_true(f.ready);
    assert_int_equal(f.nw, 1);
    free(want);
}

/* A native greeting, an account of caching_sha2_password: the server
 * switches with a fresh nonce, Sluice answers with the token of it. */
static void
test_fast_path_switch(void **state)
{
    struct mdb_hello h;
    size_t n;
    unsigned char *want = unhex(TOKEN_HEX, &n);
    static const unsigned char fast_ok[] = {0x01, 0x03};

    (void)state;
    with_password(PASSWORD, true, false);
    server_hex(GREETING_NATIVE);
    written_login(0, &h);
    assert_string_equal(h.plugin, "mysql_native_password");
    assert_int_equal(h.auth_len, MDB_SHA1_LEN);
    server_hex(SWITCH_SHA2);
    assert_int_equal(f.nw, 2);
    assert_payload(1, 3, want, MDB_SHA256_LEN);
    server_packet(4, fast_ok, sizeof(fast_ok));
    server_packet(5, OK_PKT, sizeof(OK_PKT));
    assert_true(f.ready);
    free(want);
}

/* Full authentication over TLS: the password in clear, NUL-terminated. */
static void
test_full_tls(void **state)
{
    static const unsigned char full[] = {0x01, 0x04};
    struct mdb_hello h;

    (void)state;
    f.ssl = true;
    with_password(PASSWORD, true, true);
    server_hex(GREETING_SHA2);
    assert_true(f.tls);
    assert_int_equal(f.nw, 2);      /* SSLRequest, then the login */
    assert_int_equal(f.w[1][3], 2);
    written_login(1, &h);
    assert_string_equal(h.plugin, "caching_sha2_password");
    server_packet(3, full, sizeof(full));
    assert_int_equal(f.nw, 3);
    assert_payload(2, 4, PASSWORD, sizeof(PASSWORD));   /* with its NUL */
    server_packet(5, OK_PKT, sizeof(OK_PKT));
    assert_true(f.ready);
}

/* Over a unix socket too (the server counts it as secure). */
static void
test_full_unix(void **state)
{
    static const unsigned char full[] = {0x01, 0x04};

    (void)state;
    f.unix_socket = true;
    with_password(PASSWORD, true, true);
    server_hex(GREETING_SHA2);
    server_packet(2, full, sizeof(full));
    assert_int_equal(f.nw, 2);
    assert_payload(1, 3, PASSWORD, sizeof(PASSWORD));
    server_packet(4, OK_PKT, sizeof(OK_PKT));
    assert_true(f.ready);
}

/* Decrypt ct with the test's private key (OAEP, SHA-1). */
static size_t
rsa_decrypt(const unsigned char *ct, size_t len, unsigned char *out,
            size_t cap)
{
    BIO *b = BIO_new_mem_buf(RSA_PRIV, -1);
    EVP_PKEY *key = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(key, NULL);
    size_t n = cap;

    assert_non_null(key);
    assert_non_null(ctx);
    assert_int_equal(EVP_PKEY_decrypt_init(ctx), 1);
    assert_int_equal(EVP_PKEY_CTX_set_rsa_padding(ctx,
                                                  RSA_PKCS1_OAEP_PADDING), 1);
    assert_int_equal(EVP_PKEY_decrypt(ctx, out, &n, ct, len), 1);
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(key);
    BIO_free(b);
    return n;
}

/* Full authentication on plain TCP: 0x02 asks for the key, the password
 * goes encrypted with it, XOR'ed with the nonce. */
static void
test_full_rsa(void **state)
{
    static const unsigned char full[] = {0x01, 0x04};
    static const unsigned char want_key[] = {0x02};
    unsigned char keypkt[1 + sizeof(RSA_PUB)];
    unsigned char plain[256];
    unsigned char expect[sizeof(PASSWORD)];
    const unsigned char *ct;
    uint8_t seq;
    size_t len, n;

    (void)state;
    with_password(PASSWORD, true, true);
    server_hex(GREETING_SHA2);
    server_packet(2, full, sizeof(full));
    assert_int_equal(f.nw, 2);
    assert_payload(1, 3, want_key, 1);
    keypkt[0] = 0x01;
    memcpy(keypkt + 1, RSA_PUB, sizeof(RSA_PUB) - 1);
    server_packet(4, keypkt, sizeof(RSA_PUB));   /* 0x01 + PEM, no NUL */
    assert_false(f.failed);
    assert_int_equal(f.nw, 3);
    ct = written(2, &seq, &len);
    assert_int_equal(seq, 5);
    assert_int_equal(len, 128);                 /* a 1024-bit key */
    n = rsa_decrypt(ct, len, plain, sizeof(plain));
    /* (PASSWORD NUL) XOR NONCE, the nonce repeated */
    for (size_t i = 0; i < sizeof(PASSWORD); i++) {
        expect[i] = (unsigned char)(PASSWORD[i] ^ NONCE[i % 20]);
    }
    assert_int_equal(n, sizeof(PASSWORD));
    assert_memory_equal(plain, expect, sizeof(PASSWORD));
    server_packet(6, OK_PKT, sizeof(OK_PKT));
    assert_true(f.ready);
}

/* A wrong password: the server's ERR 1045 after the token reaches the
 * client as it is. */
static void
test_server_err(void **state)
{
    static const char err[] =
        "\xff\x15\x04#28000Access denied for user 'app'@'10.0.0.1' "
        "(using password: YES)";

    (void)state;
    with_password(PASSWORD, true, false);
    server_hex(GREETING_SHA2);
    server_packet(2, err, sizeof(err) - 1);
    assert_true(f.failed);
    assert_false(f.ready);
    assert_int_equal(f.err_code, 1045);
    assert_string_equal(f.err_msg, "Access denied for user 'app'@'10.0.0.1' "
                                   "(using password: YES)");
}

/* Only SHA1(password) (a native client login): no token can be made;
 * 1045 naming the plugin, nothing sent, never a hang. */
static void
test_no_credential(void **state)
{
    struct mdb_hello h;

    (void)state;
    with_password(PASSWORD, false, false);
    server_hex(GREETING_SHA2);
    written_login(0, &h);   /* no SHA-256: the native token goes */
    assert_string_equal(h.plugin, "mysql_native_password");
    server_hex(SWITCH_SHA2);
    assert_true(f.failed);
    assert_int_equal(f.nw, 1);
    assert_int_equal(f.err_code, 1045);
    assert_non_null(strstr(f.err_msg, "caching_sha2_password"));
    assert_non_null(strstr(f.err_msg, "'app'"));
}

/* The fast path's SHA-256 without the password in clear: a full
 * authentication cannot be done. */
static void
test_full_without_clear(void **state)
{
    static const unsigned char full[] = {0x01, 0x04};

    (void)state;
    with_password(PASSWORD, true, false);
    server_hex(GREETING_SHA2);
    server_packet(2, full, sizeof(full));
    assert_true(f.failed);
    assert_int_equal(f.nw, 1);
    assert_int_equal(f.err_code, 1045);
    assert_non_null(strstr(f.err_msg, "full authentication"));
}

/* An empty password: an empty answer, as MySQL's client sends. */
static void
test_empty_password(void **state)
{
    (void)state;
    server_hex(GREETING_NATIVE);
    server_hex(SWITCH_SHA2);
    assert_int_equal(f.nw, 2);
    assert_payload(1, 3, "", 0);
    server_packet(4, OK_PKT, sizeof(OK_PKT));
    assert_true(f.ready);
}

/* Sluice's answers after which the server sends p[n] (seq 2 or 4). */
static void
malformed_after(bool key, const void *p, size_t n)
{
    static const unsigned char full[] = {0x01, 0x04};

    with_password(PASSWORD, true, true);
    server_hex(GREETING_SHA2);
    if (key) {
        server_packet(2, full, sizeof(full));
        assert_int_equal(f.nw, 2);
    }
    server_packet(key ? 4 : 2, p, n);
    assert_true(f.failed);
    assert_false(f.ready);
}

static void
test_malformed_empty(void **state)
{
    static const unsigned char empty[] = {0x01};

    (void)state;
    malformed_after(false, empty, sizeof(empty));
    assert_int_equal(f.nw, 1);
}

static void
test_malformed_tag(void **state)
{
    static const unsigned char tag[] = {0x01, 0x07};
    static const unsigned char longer[] = {0x01, 0x03, 0x00};

    (void)state;
    malformed_after(false, tag, sizeof(tag));
    assert_int_equal(f.nw, 1);
    teardown(state);
    setup(state);
    malformed_after(false, longer, sizeof(longer));
}

static void
test_malformed_pem(void **state)
{
    unsigned char keypkt[1 + 100];

    (void)state;
    keypkt[0] = 0x01;
    memcpy(keypkt + 1, RSA_PUB, 100);   /* truncated */
    malformed_after(true, keypkt, sizeof(keypkt));
    assert_int_equal(f.nw, 2);
    assert_int_equal(f.err_code, 1045);
    teardown(state);
    setup(state);
    malformed_after(true, keypkt, 1);     /* no key at all */
    assert_int_equal(f.err_code, 1045);
}

/* A 16 MiB "key": refused by length, never parsed. */
static void
test_huge_key(void **state)
{
    size_t n = 0xffffff;
    unsigned char *p = malloc(n);

    (void)state;
    assert_non_null(p);
    memset(p, 'A', n);
    p[0] = 0x01;
    malformed_after(true, p, n);
    assert_int_equal(f.nw, 2);
    assert_int_equal(f.err_code, 1045);
    assert_non_null(strstr(f.err_msg, "too long"));
    free(p);
}

/* AuthMoreData outside a caching_sha2 exchange is not a login step. */
static void
test_more_data_unexpected(void **state)
{
    static const unsigned char fast_ok[] = {0x01, 0x03};

    (void)state;
    with_password(PASSWORD, true, false);
    server_hex(GREETING_NATIVE);
    server_packet(2, fast_ok, sizeof(fast_ok));
    assert_true(f.failed);
    assert_int_equal(f.nw, 1);
}

/* After the fast path was granted no further AuthMoreData is allowed. */
static void
test_more_data_twice(void **state)
{
    static const unsigned char fast_ok[] = {0x01, 0x03};

    (void)state;
    with_password(PASSWORD, true, true);
    server_hex(GREETING_SHA2);
    server_packet(2, fast_ok, sizeof(fast_ok));
    server_packet(3, fast_ok, sizeof(fast_ok));
    assert_true(f.failed);
    assert_int_equal(f.nw, 1);
}

/* COM_CHANGE_USER on a logged-in connection: the server's switch to
 * caching_sha2_password and its AuthMoreData are answered in place (never
 * passed to the client); only the final OK is the command's answer. */
static void
test_change_user(void **state)
{
    static const unsigned char full[] = {0x01, 0x04};
    static const unsigned char want_key[] = {0x02};
    static const unsigned char cu[] = {0x11, 'a', 'p', 'p', 0, 0, 0, 0x2d,
                                       0};
    unsigned char keypkt[1 + sizeof(RSA_PUB)];
    unsigned char plain[256];
    size_t n, len;
    uint8_t seq;
    const unsigned char *ct;
    unsigned char *want = unhex(TOKEN_HEX, &n);
    unsigned char *sw;
    size_t swlen;
    struct sl_buf *cmd;

    (void)state;
    with_password(PASSWORD, true, true);
    server_hex(GREETING_NATIVE);
    server_packet(2, OK_PKT, sizeof(OK_PKT));
    assert_true(f.ready);
    cmd = sl_mdb_make_packet(0, cu, sizeof(cu));
    assert_non_null(cmd);
    assert_int_equal(mdb_backend_write(DCB, cmd), SL_OK);
    assert_int_equal(f.nw, 2);      /* rebuilt COM_CHANGE_USER */
    assert_int_equal(f.w[1][4], 0x11);
    sw = unhex(SWITCH_SHA2, &swlen);
    sw[3] = 1;                      /* the answer to a command: seq 1 */
    server(sw, swlen);
    free(sw);
    assert_int_equal(f.nw, 3);
    assert_payload(2, 2, want, MDB_SHA256_LEN);
    server_packet(3, full, sizeof(full));
    assert_payload(3, 4, want_key, 1);
    keypkt[0] = 0x01;
    memcpy(keypkt + 1, RSA_PUB, sizeof(RSA_PUB) - 1);
    server_packet(5, keypkt, sizeof(RSA_PUB));
    assert_int_equal(f.nw, 5);
    ct = written(4, &seq, &len);
    assert_int_equal(seq, 6);
    assert_int_equal(rsa_decrypt(ct, len, plain, sizeof(plain)),
                     sizeof(PASSWORD));
    assert_int_equal(f.replies, 0);
    server_packet(7, OK_PKT, sizeof(OK_PKT));
    assert_int_equal(f.replies, 1);
    assert_false(f.failed);
    free(want);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_vector),
        cmocka_unit_test_setup_teardown(test_fast_path_greeting, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fast_path_switch, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_full_tls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_unix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_rsa, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_err, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_credential, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_full_without_clear, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_empty_password, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_malformed_empty, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_malformed_tag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_pem, setup, teardown),
        cmocka_unit_test_setup_teardown(test_huge_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_more_data_unexpected, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_more_data_twice, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_change_user, setup, teardown),
    };

    sl__log_init("/dev/null", SL_LOG_DEBUG);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
