/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend side of the MariaDB protocol: log in to a server on the
 * client's behalf, then pass commands down and track the answers.
 *
 *   CONNECTING --Handshake v10--> send HandshakeResponse41 --> AUTH
 *   AUTH --AuthSwitchRequest (native | client_ed25519)--> send token,
 *        signature or an empty decline --> AUTH
 *   AUTH --AuthSwitchRequest (caching_sha2_password), or the greeting
 *        named it--> send the SHA-256 token, then the server's
 *        AuthMoreData (see sha2_more): 0x01 0x03 fast path, OK follows;
 *        0x01 0x04 full authentication: the password in clear (TLS, unix
 *        socket), or 0x02 for the server's RSA key and the password
 *        encrypted with it --> AUTH
 *        --OK--> READY (sl_backend_ready, flush queued commands)
 *        --OK, the listener has a connection_init_sql_file--> INIT
 *        --ERR--> FAILED (sl_backend_failed with the server's packet)
 *   INIT: the listener's statements were sent at once (COM_QUERY each);
 *         their answers are read here and dropped, never reach the
 *         router. All answered --> READY as above; an ERR --> FAILED
 *         with that packet (the connection is not used: a session
 *         setting it was meant to carry is missing).
 *   READY: commands are written and pushed on the reply tracker's FIFO;
 *          answers are passed up with sl_backend_reply in chunks of
 *          complete packets: one call per read, split only where an
 *          answer completes.
 *
 * The login carries the client's user (or the backend account its
 * listener's user_mapping_file maps it to), capabilities (intersected
 * with the server's), charset and current database, and a
 * mysql_native_password token made from SHA1(password) (recovered at
 * client authentication, or from the mapping) and this server's
 * scramble; a client_ed25519 switch is answered with a signature when
 * the session holds SHA-512 of an ed25519 password. COM_CHANGE_USER
 * from the client is rebuilt the same way; the server's
 * AuthSwitchRequest for it is answered here and never reaches the
 * client.
 *
 * Context: worker-owned (the backend DCB's worker = its session's).
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SL_LOG_TAG "mariadbprotocol"
#include <sluice/buf.h>
#include <sluice/dcb.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/params.h>
#include <sluice/server.h>
#include <sluice/service.h>
#include <sluice/session.h>

#include "mdb.h"
#include "mdb_kill.h"
#include "mdb_reply.h"
#include "mdb_zcodec.h"

enum backend_state {
    BS_HANDSHAKE,
    BS_AUTH,
    BS_INIT,      /* running the listener's connection_init_sql_file */
    BS_READY,
    BS_FAILED,
};

/* Where a caching_sha2_password exchange with the server stands. */
enum sha2_state {
    SHA2_NONE,        /* not this plugin */
    SHA2_TOKEN,       /* token sent: AuthMoreData 0x03/0x04, OK or ERR */
    SHA2_KEY,         /* 0x02 sent: AuthMoreData with the PEM key */
    SHA2_DONE,        /* fast path granted or password sent: OK or ERR */
};

/* The longest RSA public key accepted from a server (a 16384-bit key's
 * PEM is about 2.8 KiB). */
#define SHA2_PEM_MAX 8192

/* A command routed before the login finished. */
struct queued {
    struct sl_buf *buf;
    struct queued *next;
};

struct mdb_backend {
    enum backend_state state;
    struct sl_backend *b;
    uint8_t scramble[MDB_SCRAMBLE_LEN];
    uint32_t caps;                /* negotiated with the server */
    uint32_t ext_caps;            /* MariaDB extended caps, likewise */
    bool compress;                /* CLIENT_COMPRESS sent (server
                                   * compression=true): compressed after
                                   * the login's OK */
    struct mdb_tracker trk;
    struct queued *qhead;
    struct queued *qtail;
    int queued_replies;           /* queued commands expecting answers */
    bool load_data;               /* writing a LOCAL INFILE's packets */
    bool forwarded_running;       /* kernel forwarding ended with a
                                   * statement of its unanswered */
    size_t init_left;             /* INIT: answers still to come */
    size_t init_sent;             /* INIT: statements sent */
    uint32_t tid;                 /* the server's thread id (greeting) */
    uint32_t reg_id;              /* Sluice id registered under, or 0 */
    struct sl_server *reg_srv;    /* and the server */
    struct mdb_pam_replay pam;    /* replaying the client's PAM answers
                                   * to the server's auth_pam */
    enum sha2_state sha2;         /* caching_sha2_password; its nonce
                                   * is scramble */
};

/* The session's login data, or a static empty one. */
static const struct mdb_session *
session_data(struct sl_dcb *dcb)
{
    static const struct mdb_session none;
    struct sl_session *ses = sl_dcb_session(dcb);
    const struct mdb_session *sd =
        ses != NULL ? sl_session_protocol_data(ses) : NULL;

    return sd != NULL ? sd : &none;
}

static const char *
str_or_empty(const char *s)
{
    return s != NULL ? s : "";
}

int
mdb_backend_init(struct sl_dcb *dcb, struct sl_backend *b)
{
    struct mdb_backend *be = calloc(1, sizeof(*be));

    if (be == NULL) {
        return SL_ERROR;
    }
    be->b = b;
    be->state = BS_HANDSHAKE;
    mdb_tracker_init(&be->trk, 0);
    sl_dcb_set_protocol_data(dcb, be);
    return SL_OK;
}

/* Take the first packet of the read queue as a heap chain. */
static struct sl_buf *
take_packet(struct sl_buf *rq, size_t n)
{
    struct sl_buf *buf = sl_buf_new();

    if (buf != NULL && sl_buf_split(rq, n, buf) != 0) {
        sl_buf_free(buf);
        buf = NULL;
    }
    return buf;
}

static void
fail(struct mdb_backend *be, struct sl_buf *errpkt, const char *why)
{
    be->state = BS_FAILED;
    sl_backend_failed(be->b, errpkt, why);
}

static size_t
build_attrs(unsigned char *out, size_t cap, const struct mdb_session *sd)
{
    size_t n = 0;

    mdb_attrs_put(out, cap, &n, "_client_name", "sluice", 6);
    if (sd->program_name[0] != '\0') {
        mdb_attrs_put(out, cap, &n, "program_name", sd->program_name,
                      strlen(sd->program_name));
    }
    return n;
}

/* Fill a login description for this backend from the session. */
static void
make_login(struct sl_dcb *dcb, struct mdb_backend *be, struct mdb_login *l,
           uint8_t token[MDB_SHA256_LEN], unsigned char *attrs, size_t cap)
{
    const struct mdb_session *sd = session_data(dcb);
    struct sl_session *ses = sl_dcb_session(dcb);

    memset(l, 0, sizeof(*l));
    l->caps = be->caps;
    l->ext_caps = be->ext_caps;
    l->charset = sd->charset != 0 ? sd->charset : MDB_DEFAULT_CHARSET;
    if (sd->backend_user[0] != '\0') {
        l->user = sd->backend_user;   /* user_mapping_file */
    } else {
        l->user = ses != NULL ? str_or_empty(sl_session_user(ses)) : "";
    }
    l->db = ses != NULL ? str_or_empty(sl_session_db(ses)) : "";
    if (sd->has_pw) {
        mdb_native_token(sd->sha1pw, be->scramble, token);
        l->token = token;
    }
    l->attrs = attrs;
    l->attrs_len = build_attrs(attrs, cap, sd);
}

static uint32_t
negotiate(struct sl_dcb *dcb, uint32_t server_caps)
{
    const struct mdb_session *sd = session_data(dcb);
    struct sl_session *ses = sl_dcb_session(dcb);
    const char *db = ses != NULL ? sl_session_db(ses) : NULL;
    uint32_t caps = (sd->caps | SL_CAP_PROTOCOL_41 |
                     SL_CAP_SECURE_CONNECTION | SL_CAP_PLUGIN_AUTH |
                     SL_CAP_CONNECT_ATTRS) &
                    server_caps & ~(uint32_t)(SL_CAP_SSL | SL_CAP_COMPRESS);

    caps &= ~(uint32_t)SL_CAP_CONNECT_WITH_DB;
    if (db != NULL && db[0] != '\0') {
        caps |= SL_CAP_CONNECT_WITH_DB & server_caps;
    }
    return caps;
}

/*
 * Server ssl=true: answer the handshake with an SSLRequest (seq + 1) and
 * switch to TLS; the login follows inside TLS with seq + 2 (it queues in
 * the DCB until the TLS handshake is done). 0, or -1 after fail().
 */
static int
start_tls(struct sl_dcb *dcb, struct mdb_backend *be, uint32_t server_caps,
          uint8_t charset, uint8_t seq)
{
    unsigned char req[32] = {0};
    uint32_t caps = be->caps | SL_CAP_SSL;
    struct sl_buf *pkt;
    int rc;

    if (!(server_caps & SL_CAP_SSL)) {
        fail(be, NULL, "server does not support TLS but ssl=true is set");
        return -1;
    }
    sl_mdb_put_le32(req, caps);
    req[6] = 0;
    req[7] = 1;   /* max packet 16 MiB */
    req[8] = charset;
    pkt = sl_mdb_make_packet((uint8_t)(seq + 1), req, sizeof(req));
    if (pkt == NULL || sl_dcb_write(dcb, pkt) != 0) {
        fail(be, NULL, "cannot start TLS");
        return -1;
    }
    rc = sl_dcb_tls_start(dcb);
    if (rc != 0) {
        fail(be, NULL, rc == -EBADMSG ? "server sent plaintext data before "
                                        "TLS started"
                                      : "cannot start TLS");
        return -1;
    }
    return 0;
}

/* The server's greeting h (already consumed from the read queue, so that
 * TLS starts on an empty one): send the login, inside TLS if configured. */
static int
on_handshake(struct sl_dcb *dcb, struct mdb_backend *be,
             const struct mdb_server_hello *h, uint8_t seq)
{
    struct mdb_login l;
    uint8_t token[MDB_SHA256_LEN];
    unsigned char attrs[256];
    unsigned char out[1024];
    size_t n;
    struct sl_buf *pkt;
    const struct mdb_session *sd = session_data(dcb);

    memcpy(be->scramble, h->scramble, MDB_SCRAMBLE_LEN);
    be->tid = h->thread_id;
    be->caps = negotiate(dcb, h->caps);
    be->ext_caps = session_data(dcb)->ext_caps & h->ext_caps;
    if (be->ext_caps != session_data(dcb)->ext_caps) {
        /* Offered because the monitor said 10.5+, and this server is
         * not: its column definitions lack what the client expects. */
        sl_log_warn("server '%s' (%s) does not support the MariaDB "
                    "extended capabilities 0x%x the client negotiated; its "
                    "result sets will not match them",
                    sl_server_name(sl_backend_server(be->b)), h->version,
                    (unsigned)(session_data(dcb)->ext_caps & ~h->ext_caps));
    }
    mdb_tracker_init(&be->trk, be->caps);
    make_login(dcb, be, &l, token, attrs, sizeof(attrs));
    be->sha2 = SHA2_NONE;
    if (strcmp(h->plugin, MDB_SHA2_CLIENT_PLUGIN) == 0 && sd->has_sha256) {
        /* The server's default plugin (MySQL 8): answer with its token
         * rather than be switched (a round trip saved). Without SHA-256
         * of the password the native token goes, and an account of this
         * plugin is switched to it (auth_switch refuses it there). */
        mdb_sha2_token(sd->sha256pw, be->scramble, MDB_SCRAMBLE_LEN, token);
        l.token = token;
        l.token_len = MDB_SHA256_LEN;
        l.plugin = MDB_SHA2_CLIENT_PLUGIN;
        be->sha2 = SHA2_TOKEN;
    }
    if (sl_dcb_tls_configured(dcb)) {
        if (start_tls(dcb, be, h->caps, l.charset, seq) != 0) {
            return SL_OK;
        }
        l.caps |= SL_CAP_SSL;
        seq++;
    }
    /* Server compression=true: zlib, when the server offers it. */
    if (sl_params_bool(sl_server_params(sl_backend_server(be->b)),
                       "compression") &&
        (h->caps & SL_CAP_COMPRESS)) {
        l.caps |= SL_CAP_COMPRESS;
    }
    n = mdb_build_login(out, sizeof(out), &l);
    OPENSSL_cleanse(token, sizeof(token));
    pkt = n > 0 ? sl_mdb_make_packet((uint8_t)(seq + 1), out, n) : NULL;
    if (pkt == NULL || sl_dcb_write(dcb, pkt) != 0) {
        fail(be, NULL, "cannot send the login");
        return SL_OK;
    }
    be->compress = (l.caps & SL_CAP_COMPRESS) != 0;
    be->state = BS_AUTH;
    return SL_OK;
}

/*
 * AuthSwitchRequest during login or COM_CHANGE_USER: answer natively.
 *
 * An account with several plugins (IDENTIFIED VIA ed25519 ... OR
 * mysql_native_password ...) makes the server try them in order, each
 * with a switch request, moving to the next when one fails. Sluice holds
 * only SHA1(password) (the client logged in to it natively), so it
 * declines client_ed25519 with an empty answer, which the server's
 * ed25519 plugin rejects as a malformed signature without further ado;
 * the server then switches to the native alternative, or refuses the
 * login (1045) when there is none. Other plugins fail the login here: an
 * empty answer could count as a wrong password elsewhere (PAM).
 *
 * When the session holds SHA-512 of an ed25519 password (a backend
 * account from user_mapping_file with plugin ed25519), client_ed25519 is
 * answered with the signature of the server's 32-byte nonce.
 */
/* A PAM step of the server's auth_pam: answered with the client's
 * answers to Sluice's own conversation (mdb_pam_replay). -1 when the
 * session has none (the client did not log in with PAM). */
static int
pam_reply(struct sl_dcb *dcb, struct mdb_backend *be, enum mdb_pam_step step,
          const unsigned char *p, size_t len, uint8_t seq)
{
    const struct mdb_session *sd = session_data(dcb);
    size_t alen = 0;
    const char *a;
    struct sl_buf *pkt;

    be->pam.two_factor = sd->pam_2fa;
    a = mdb_pam_replay(&be->pam, sd->pam_answers, sd->pam_len,
                       sd->pam_first_echo, step, p, len, &alen);

    if (a == NULL) {
        return -1;
    }
    /* with its terminator, as the client plugins send it */
    pkt = sl_mdb_make_packet((uint8_t)(seq + 1), a, alen + 1);
    return pkt != NULL && sl_dcb_write(dcb, pkt) == 0 ? 0 : -1;
}

/*
 * caching_sha2_password toward a server (MySQL 8). What the session holds
 * decides what Sluice can answer: SHA-256(password) gives the fast-path
 * token, the password in clear the full authentication. A session with
 * neither (the client logged in natively: Sluice has SHA1(password)
 * only) cannot log in with this plugin: the login fails with 1045 naming
 * it, and a warning says why. Implemented from MySQL's protocol
 * documentation; not tested against a live MySQL 8 (Debian has none).
 */

/* Fail the login with 1045 and reason (also logged as a warning). */
static void
sha2_refuse(struct sl_dcb *dcb, struct mdb_backend *be, const char *reason)
{
    struct sl_session *ses = sl_dcb_session(dcb);
    const char *user = ses != NULL ? str_or_empty(sl_session_user(ses)) : "";
    char msg[384];

    snprintf(msg, sizeof(msg), "Access denied for user '%s': server '%s' "
             "asks for caching_sha2_password and %s", user,
             sl_server_name(sl_backend_server(be->b)), reason);
    sl_log_warn("%s (see docs/authentication.md)", msg);
    fail(be, sl_mdb_make_err(2, 1045, "28000", msg), msg);
}

/* An empty password: no credential of any kind and an empty native one. */
static bool
empty_password(const struct mdb_session *sd)
{
    return !sd->has_pw && !sd->has_sha256 && !sd->has_clear && !sd->has_ed &&
           sd->pam_answers == NULL;
}

static int
write_payload(struct sl_dcb *dcb, uint8_t seq, const void *p, size_t n)
{
    struct sl_buf *pkt = sl_mdb_make_packet(seq, p, n);

    return pkt != NULL && sl_dcb_write(dcb, pkt) == 0 ? 0 : -1;
}

/* AuthSwitchRequest to caching_sha2_password: its nonce is data[dlen]
 * (20 bytes, with or without a NUL). 0, or -1 (not failed yet). */
static int
sha2_switch(struct sl_dcb *dcb, struct mdb_backend *be, const uint8_t *data,
            size_t dlen, uint8_t seq)
{
    const struct mdb_session *sd = session_data(dcb);
    uint8_t token[MDB_SHA256_LEN];
    int rc;

    if (dlen == MDB_SCRAMBLE_LEN + 1 && data[MDB_SCRAMBLE_LEN] == 0) {
        dlen--;
    }
    if (dlen != MDB_SCRAMBLE_LEN) {
        return -1;
    }
    memcpy(be->scramble, data, MDB_SCRAMBLE_LEN);
    be->sha2 = SHA2_TOKEN;
    if (empty_password(sd)) {
        return write_payload(dcb, (uint8_t)(seq + 1), token, 0);
    }
    if (!sd->has_sha256) {
        sha2_refuse(dcb, be, "Sluice has only the mysql_native_password "
                    "hash of the client's password (give the account a "
                    "password in user_mapping_file, or let clients log in "
                    "with caching_sha2_password)");
        return 0;
    }
    mdb_sha2_token(sd->sha256pw, be->scramble, MDB_SCRAMBLE_LEN, token);
    rc = write_payload(dcb, (uint8_t)(seq + 1), token, sizeof(token));
    OPENSSL_cleanse(token, sizeof(token));
    return rc;
}

/* The password encrypted with the server's PEM key pem[len]. */
static int
sha2_send_encrypted(struct sl_dcb *dcb, struct mdb_backend *be,
                    const unsigned char *pem, size_t len, uint8_t seq)
{
    const struct mdb_session *sd = session_data(dcb);
    struct evp_pkey_st *key;
    uint8_t out[2048];
    size_t n = 0;

    if (len == 0 || len > SHA2_PEM_MAX) {
        sha2_refuse(dcb, be, "its RSA public key is empty or too long");
        return 0;
    }
    key = mdb_rsa_public_from_pem((const char *)pem, len);
    if (key != NULL) {
        n = mdb_rsa_encrypt_password(key, sd->clearpw, sd->clearpw_len,
                                     be->scramble, MDB_SCRAMBLE_LEN, out,
                                     sizeof(out));
    }
    mdb_rsa_free(key);
    if (n == 0) {
        sha2_refuse(dcb, be, "its RSA public key cannot be read or used");
        return 0;
    }
    be->sha2 = SHA2_DONE;
    return write_payload(dcb, (uint8_t)(seq + 1), out, n);
}

/*
 * The server's AuthMoreData (0x01, payload p[len]) in a caching_sha2
 * exchange: 0x03 the fast path succeeded (OK follows), 0x04 it wants the
 * full authentication, or (after our 0x02) its RSA public key. 0, or -1
 * for a packet that makes no sense here (not failed yet).
 */
static int
sha2_more(struct sl_dcb *dcb, struct mdb_backend *be, const unsigned char *p,
          size_t len, uint8_t seq)
{
    const struct mdb_session *sd = session_data(dcb);
    static const uint8_t want_key = 0x02;

    if (be->sha2 == SHA2_KEY) {
        return sha2_send_encrypted(dcb, be, p + 1, len - 1, seq);
    }
    if (be->sha2 != SHA2_TOKEN || len != 2) {
        return -1;
    }
    if (p[1] == 0x03) {
        be->sha2 = SHA2_DONE;
        return 0;
    }
    if (p[1] != 0x04) {
        return -1;
    }
    if (!sd->has_clear) {
        sha2_refuse(dcb, be, "requires its full authentication, but Sluice "
                    "does not have the password in clear (see "
                    "docs/authentication.md)");
        return 0;
    }
    if (sl_dcb_tls_configured(dcb) || sl_dcb_is_unix(dcb)) {
        /* A secure link: the password itself, NUL-terminated. */
        char pw[MDB_CLEARPW_MAX + 1];
        int rc;

        memcpy(pw, sd->clearpw, sd->clearpw_len);
        pw[sd->clearpw_len] = '\0';
        be->sha2 = SHA2_DONE;
        rc = write_payload(dcb, (uint8_t)(seq + 1), pw, sd->clearpw_len + 1);
        OPENSSL_cleanse(pw, sizeof(pw));
        return rc;
    }
    be->sha2 = SHA2_KEY;
    return write_payload(dcb, (uint8_t)(seq + 1), &want_key, 1);
}

static int
auth_switch(struct sl_dcb *dcb, struct mdb_backend *be,
            const unsigned char *p, size_t len, uint8_t seq)
{
    char plugin[MDB_PLUGIN_MAX];
    uint8_t data[1024];
    uint8_t token[MDB_SHA1_LEN];
    uint8_t sig[MDB_ED25519_SIG_LEN];

    be->sha2 = SHA2_NONE;
    size_t dlen;
    const struct mdb_session *sd = session_data(dcb);
    struct sl_buf *pkt;

    if (mdb_parse_auth_switch_data(p, len, plugin, data, sizeof(data),
                                   &dlen) != 0) {
        return -1;
    }
    if (strcmp(plugin, MDB_DIALOG_PLUGIN) == 0) {
        return pam_reply(dcb, be, MDB_PAM_SWITCH_DIALOG, data, dlen, seq);
    }
    if (strcmp(plugin, MDB_CLEAR_PLUGIN) == 0) {
        return pam_reply(dcb, be, MDB_PAM_SWITCH_CLEAR, NULL, 0, seq);
    }
    if (strcmp(plugin, MDB_SHA2_CLIENT_PLUGIN) == 0) {
        return sha2_switch(dcb, be, data, dlen, seq);
    }
    if (strcmp(plugin, MDB_ED25519_CLIENT_PLUGIN) == 0) {
        bool sign = sd->has_ed && dlen == MDB_ED25519_NONCE_LEN &&
                    mdb_ed25519_sign_hash(sd->ed_hash, data, dlen, sig) == 0;

        pkt = sl_mdb_make_packet((uint8_t)(seq + 1), sig,
                                 sign ? MDB_ED25519_SIG_LEN : 0);
        return pkt != NULL && sl_dcb_write(dcb, pkt) == 0 ? 0 : -1;
    }
    if (dlen == MDB_SCRAMBLE_LEN + 1 && data[MDB_SCRAMBLE_LEN] == 0) {
        dlen--;   /* the native scramble's NUL */
    }
    if (strcmp(plugin, MDB_NATIVE_PLUGIN) != 0 || dlen != MDB_SCRAMBLE_LEN) {
        return -1;
    }
    memcpy(be->scramble, data, MDB_SCRAMBLE_LEN);
    if (sd->has_pw) {
        mdb_native_token(sd->sha1pw, be->scramble, token);
    }
    pkt = sl_mdb_make_packet((uint8_t)(seq + 1), token,
                             sd->has_pw ? MDB_SHA1_LEN : 0);
    return pkt != NULL && sl_dcb_write(dcb, pkt) == 0 ? 0 : -1;
}

static int write_command(struct sl_dcb *dcb, struct mdb_backend *be,
                         struct sl_buf *buf);

/* Make this backend thread known to KILL under the client's Sluice id
 * (internal sessions have no client and cannot be named). */
static void
register_thread(struct sl_dcb *dcb, struct mdb_backend *be)
{
    struct sl_session *ses = sl_dcb_session(dcb);
    struct sl_dcb *client = ses != NULL ? sl_session_client(ses) : NULL;

    if (client != NULL && be->tid != 0) {
        be->reg_id = mdb_kill_id(client);
        be->reg_srv = sl_backend_server(be->b);
        mdb_kill_add_backend(be->reg_id, be->reg_srv, be->tid);
    }
}

/* Logged in (and initialised): tell the core, send what was queued. */
static int
go_ready(struct sl_dcb *dcb, struct mdb_backend *be)
{
    struct queued *q;

    be->state = BS_READY;
    be->sha2 = SHA2_NONE;
    register_thread(dcb, be);
    sl_backend_ready(be->b);
    while (sl_dcb_is_open(dcb) && (q = be->qhead) != NULL) {
        be->qhead = q->next;
        if (mdb_expects_reply((uint8_t)sl_mdb_command(q->buf))) {
            be->queued_replies--;
        }
        if (write_command(dcb, be, q->buf) != SL_OK) {
            free(q);
            return SL_ERROR;
        }
        free(q);
    }
    be->qtail = NULL;
    return SL_OK;
}

/* The statements of the session's listener's connection_init_sql_file
 * (none for internal sessions, which have no listener). */
static const char *const *
init_statements(struct sl_dcb *dcb, size_t *n)
{
    struct sl_session *ses = sl_dcb_session(dcb);
    struct sl_dcb *client = ses != NULL ? sl_session_client(ses) : NULL;

    *n = 0;
    return client != NULL ? sl_listener_init_sql(sl_dcb_listener(client), n)
                          : NULL;
}

/* Send every init statement at once; the server answers them in order.
 * false after fail(). */
static bool
send_init(struct sl_dcb *dcb, struct mdb_backend *be,
          const char *const *stmts, size_t n)
{
    be->init_left = 0;
    be->init_sent = 0;
    for (size_t i = 0; i < n; i++) {
        struct sl_buf *pkt = sl_mdb_make_query(stmts[i], strlen(stmts[i]));

        if (pkt == NULL || mdb_tracker_expect(&be->trk, SL_COM_QUERY) != 0 ||
            sl_dcb_write(dcb, pkt) != 0) {
            fail(be, NULL, "cannot send connection_init_sql_file");
            return false;
        }
        be->init_sent++;
        be->init_left++;
    }
    return true;
}

static int
on_login_ok(struct sl_dcb *dcb, struct mdb_backend *be)
{
    const char *const *init;
    size_t ninit;

    /* The login is plain; compression starts after its OK, as on the
     * server. */
    if (be->compress &&
        mdb_compress_start(dcb, MDB_Z_ZLIB, -1, true, 0, 0, NULL) != 0) {
        fail(be, NULL, "cannot start protocol compression");
        return SL_OK;
    }
    init = init_statements(dcb, &ninit);
    if (ninit > 0) {
        be->state = BS_INIT;
        send_init(dcb, be, init, ninit);
        return SL_OK;
    }
    return go_ready(dcb, be);
}

/*
 * INIT: read the answers to the init statements (whole packets at the
 * head of rq), drop them, and go READY once all are in. An error answer
 * fails the backend with the server's packet, logged with the statement's
 * number (its line among the file's statements).
 */
static int
init_replies(struct sl_dcb *dcb, struct mdb_backend *be, struct sl_buf *rq)
{
    size_t n;

    while (be->state == BS_INIT && (n = sl_mdb_packet_len(rq)) != 0) {
        unsigned char *p = sl_buf_pullup(rq, n);
        uint32_t len;
        int rc;

        if (p == NULL) {
            return SL_ERROR;
        }
        len = (uint32_t)(n - SL_MDB_HDR_LEN);
        rc = mdb_tracker_packet(&be->trk, len, p + SL_MDB_HDR_LEN,
                                len < MDB_PEEK ? len : MDB_PEEK);
        if (rc == MDB_TRK_UNEXPECTED ||
            be->trk.reply.state == SL_REPLY_LOAD_DATA) {
            /* nobody could send a LOCAL INFILE's contents here */
            sl_buf_reset(rq);
            fail(be, NULL, rc == MDB_TRK_UNEXPECTED
                               ? "unexpected packet after "
                                 "connection_init_sql_file"
                               : "LOAD DATA LOCAL INFILE in "
                                 "connection_init_sql_file");
            return SL_OK;
        }
        if (rc == MDB_TRK_DONE && be->trk.reply.is_err) {
            size_t idx = be->init_sent - be->init_left;
            size_t nst;
            const char *const *st = init_statements(dcb, &nst);
            struct sl_buf *err = take_packet(rq, n);
            char why[400];

            snprintf(why, sizeof(why), "connection_init_sql_file statement "
                     "%zu of %zu ('%.200s') failed: error %u (%s)", idx + 1,
                     be->init_sent, idx < nst ? st[idx] : "?",
                     (unsigned)be->trk.reply.error_code,
                     be->trk.reply.sqlstate);
            sl_log_error("server '%s': %s",
                         sl_server_name(sl_backend_server(be->b)), why);
            sl_buf_reset(rq);
            fail(be, err, why);
            return SL_OK;
        }
        sl_buf_consume(rq, n);
        if (rc == MDB_TRK_DONE && --be->init_left == 0) {
            return go_ready(dcb, be);
        }
    }
    return SL_OK;
}

/* One complete login packet at the head of rq. */
static int
login_step(struct sl_dcb *dcb, struct mdb_backend *be, struct sl_buf *rq,
           size_t n)
{
    unsigned char *p = sl_buf_pullup(rq, n);
    size_t len = n - SL_MDB_HDR_LEN;
    uint8_t seq;

    if (p == NULL) {
        return SL_ERROR;
    }
    seq = p[3];
    p += SL_MDB_HDR_LEN;
    if (len > 0 && p[0] == 0xff) {
        fail(be, take_packet(rq, n), be->state == BS_HANDSHAKE
                                         ? "server refused the connection"
                                         : "login to server failed");
        return SL_OK;
    }
    if (be->state == BS_HANDSHAKE) {
        struct mdb_server_hello h;
        bool bad = mdb_parse_server_hello(p, len, &h) != 0;

        sl_buf_consume(rq, n);
        if (bad) {
            fail(be, NULL, "malformed handshake from server");
            return SL_OK;
        }
        return on_handshake(dcb, be, &h, seq);
    } else if (len > 0 && p[0] == 0x00) {
        sl_buf_consume(rq, n);
        return on_login_ok(dcb, be);
    } else if (len > 0 && p[0] == 0xfe) {
        if (auth_switch(dcb, be, p, len, seq) != 0) {
            fail(be, NULL, "unsupported authentication switch");
        }
    } else if (be->sha2 != SHA2_NONE && len > 0 && p[0] == 0x01) {
        if (sha2_more(dcb, be, p, len, seq) != 0) {
            fail(be, NULL, "malformed caching_sha2_password data from "
                           "server");
        }
    } else if (be->pam.dialog && len > 0) {
        if (pam_reply(dcb, be, MDB_PAM_QUESTION, p, len, seq) != 0) {
            fail(be, NULL, "a PAM question Sluice has no answer for");
        }
    } else {
        fail(be, NULL, "unexpected packet during login");
    }
    sl_buf_consume(rq, n);
    return SL_OK;
}

/* ---- reply tracking ---- */

/*
 * A cursor over the packets of a chain: reads headers and peeks at the
 * first payload bytes without copying more, crossing segments.
 */
struct cursor {
    const struct sl_seg *seg;
    size_t pos;      /* offset inside seg */
    size_t off;      /* offset from the chain's start */
};

static size_t
cur_peek(const struct cursor *c, size_t skip, unsigned char *out, size_t n)
{
    const struct sl_seg *s = c->seg;
    size_t pos = c->pos + skip;
    size_t got = 0;

    while (s != NULL && got < n) {
        size_t seglen = (size_t)(s->end - s->start);

        if (pos >= seglen) {
            pos -= seglen;
            s = s->next;
            continue;
        }
        size_t k = seglen - pos < n - got ? seglen - pos : n - got;
        memcpy(out + got, s->start + pos, k);
        got += k;
        pos += k;
    }
    return got;
}

static void
cur_advance(struct cursor *c, size_t n)
{
    c->off += n;
    n += c->pos;
    while (c->seg != NULL && n >= (size_t)(c->seg->end - c->seg->start)) {
        n -= (size_t)(c->seg->end - c->seg->start);
        c->seg = c->seg->next;
    }
    c->pos = n;
}

/* Pass the first n bytes of rq up as one chunk. false if the DCB closed. */
static bool
deliver(struct sl_dcb *dcb, struct mdb_backend *be, struct sl_buf *rq,
        size_t n, struct cursor *c)
{
    struct sl_buf *chunk = take_packet(rq, n);

    if (chunk == NULL) {
        return false;
    }
    sl_backend_reply(be->b, chunk, &be->trk.reply);
    c->seg = rq->head;
    c->pos = 0;
    c->off = 0;
    return sl_dcb_is_open(dcb);
}

/* The server asked a COM_CHANGE_USER to switch plugins, sent its
 * caching_sha2_password data, or (its auth_pam, after a switch to dialog)
 * asks a further PAM question (type 2-5; the answer itself is only OK or
 * ERR): answer it here. */
static bool
is_change_user_switch(const struct mdb_backend *be, const unsigned char *p,
                      uint32_t len)
{
    return !be->trk.active && be->trk.qlen > 0 &&
           be->trk.q[be->trk.qhead] == SL_COM_CHANGE_USER && len > 0 &&
           (p[0] == 0xfe || (p[0] == 0x01 && be->sha2 != SHA2_NONE) ||
            (be->pam.dialog && p[0] >= MDB_DIALOG_QUESTION && p[0] <= 5));
}

static int
track_replies(struct sl_dcb *dcb, struct mdb_backend *be, struct sl_buf *rq)
{
    struct cursor c = {rq->head, 0, 0};
    unsigned char hdr[SL_MDB_HDR_LEN + MDB_PEEK];
    size_t got;
    uint32_t len;
    int rc;

    for (;;) {
        got = cur_peek(&c, 0, hdr, sizeof(hdr));
        if (got < SL_MDB_HDR_LEN) {
            break;
        }
        len = sl_mdb_get_len(hdr);
        if (c.off + SL_MDB_HDR_LEN + len > rq->len) {
            break;
        }
        if (is_change_user_switch(be, hdr + SL_MDB_HDR_LEN, len)) {
            if (c.off > 0 && !deliver(dcb, be, rq, c.off, &c)) {
                return SL_OK;
            }
            /* c.off is 0 now: the request is at the head. */
            unsigned char *p = sl_buf_pullup(rq, SL_MDB_HDR_LEN + len);

            if (p == NULL ||
                (p[SL_MDB_HDR_LEN] == 0xfe
                     ? auth_switch(dcb, be, p + SL_MDB_HDR_LEN, len, hdr[3])
                     : p[SL_MDB_HDR_LEN] == 0x01
                     ? sha2_more(dcb, be, p + SL_MDB_HDR_LEN, len, hdr[3])
                     : pam_reply(dcb, be, MDB_PAM_QUESTION,
                                 p + SL_MDB_HDR_LEN, len, hdr[3])) != 0) {
                return SL_ERROR;
            }
            if (!sl_dcb_is_open(dcb) || be->state == BS_FAILED) {
                return SL_OK;
            }
            sl_buf_consume(rq, SL_MDB_HDR_LEN + len);
            c.seg = rq->head;
            c.pos = 0;
            continue;
        }
        if (be->trk.active && be->trk.reply.state != SL_REPLY_LOAD_DATA &&
            hdr[3] != (uint8_t)(be->trk.reply.last_seq + 1)) {
            /* Inside an answer every packet follows the previous one
             * (after a LOCAL INFILE request the client's file packets
             * took the numbers in between). Anything else is not part of
             * this answer: a row it would pass for could be anything. */
            if (c.off > 0 && !deliver(dcb, be, rq, c.off, &c)) {
                return SL_OK;
            }
            sl_buf_reset(rq);
            fail(be, NULL, SL_REPLY_LOST_TRACK
                 ": a packet out of sequence inside an answer");
            return SL_OK;
        }
        rc = mdb_tracker_packet(&be->trk, len, hdr + SL_MDB_HDR_LEN,
                                got - SL_MDB_HDR_LEN);
        be->trk.reply.last_seq = hdr[3];
        cur_advance(&c, SL_MDB_HDR_LEN + len);
        if (be->trk.reply.state == SL_REPLY_LOAD_DATA) {
            be->load_data = true;
        }
        if (rc != MDB_TRK_MORE && !deliver(dcb, be, rq, c.off, &c)) {
            return SL_OK;
        }
    }
    if (c.off > 0) {
        deliver(dcb, be, rq, c.off, &c);
    }
    return SL_OK;
}

int
mdb_backend_read(struct sl_dcb *dcb)
{
    struct mdb_backend *be = sl_dcb_protocol_data(dcb);
    struct sl_buf *rq = sl_dcb_readq(dcb);
    size_t n;

    while (be->state == BS_HANDSHAKE || be->state == BS_AUTH) {
        if ((n = sl_mdb_packet_len(rq)) == 0) {
            return SL_OK;
        }
        if (login_step(dcb, be, rq, n) != SL_OK) {
            return SL_ERROR;
        }
        if (!sl_dcb_is_open(dcb)) {
            return SL_OK;
        }
    }
    if (be->state == BS_INIT) {
        if (init_replies(dcb, be, rq) != SL_OK) {
            return SL_ERROR;
        }
        if (!sl_dcb_is_open(dcb)) {
            return SL_OK;
        }
    }
    if (be->state != BS_READY) {
        if (be->state != BS_INIT) {
            sl_buf_reset(rq);
        }
        return SL_OK;
    }
    be->forwarded_running = false;   /* the server answers */
    return track_replies(dcb, be, rq);
}

/* ---- commands ---- */

/* Rebuild the client's COM_CHANGE_USER for this server (takes buf). */
static struct sl_buf *
rebuild_change_user(struct sl_dcb *dcb, struct mdb_backend *be,
                    struct sl_buf *buf)
{
    struct mdb_login l;
    uint8_t token[MDB_SHA256_LEN];
    unsigned char attrs[256];
    unsigned char out[1024];
    size_t n;

    sl_buf_free(buf);
    make_login(dcb, be, &l, token, attrs, sizeof(attrs));
    n = mdb_build_change_user(out, sizeof(out), &l);
    return n > 0 ? sl_mdb_make_packet(0, out, n) : NULL;
}

static int
write_command(struct sl_dcb *dcb, struct mdb_backend *be, struct sl_buf *buf)
{
    int cmd;

    if (be->load_data) {
        /* LOCAL INFILE contents: packets, not commands. */
        if (sl_buf_len(buf) == SL_MDB_HDR_LEN) {
            be->load_data = false;
        }
        return sl_dcb_write(dcb, buf) == 0 ? SL_OK : SL_ERROR;
    }
    cmd = sl_mdb_command(buf);
    if (cmd < 0) {
        sl_buf_free(buf);
        return SL_OK;
    }
    if (cmd == SL_COM_CHANGE_USER) {
        be->sha2 = SHA2_NONE;
        if ((buf = rebuild_change_user(dcb, be, buf)) == NULL) {
            return SL_ERROR;
        }
    }
    if (mdb_tracker_expect(&be->trk, (uint8_t)cmd) != 0) {
        sl_buf_free(buf);
        return SL_ERROR;
    }
    return sl_dcb_write(dcb, buf) == 0 ? SL_OK : SL_ERROR;
}

int
mdb_backend_write(struct sl_dcb *dcb, struct sl_buf *buf)
{
    struct mdb_backend *be = sl_dcb_protocol_data(dcb);
    struct queued *q;

    if (be->state == BS_READY) {
        return write_command(dcb, be, buf);
    }
    if (be->state == BS_FAILED || (q = malloc(sizeof(*q))) == NULL) {
        sl_buf_free(buf);
        return SL_ERROR;
    }
    q->buf = buf;
    q->next = NULL;
    if (be->qtail != NULL) {
        be->qtail->next = q;
    } else {
        be->qhead = q;
    }
    be->qtail = q;
    if (mdb_expects_reply((uint8_t)sl_mdb_command(buf))) {
        be->queued_replies++;
    }
    return SL_OK;
}

/*
 * Does the server still execute a statement for this connection, one that
 * closing the socket would not stop? Not when the only answer pending is
 * already streaming (the server's next write fails once the socket is
 * closed, as with a client that vanishes directly), nor during LOCAL
 * INFILE (the server reads the file from us and sees the close).
 */
static bool
still_running(const struct mdb_backend *be)
{
    size_t pending = mdb_tracker_pending(&be->trk);

    return be->forwarded_running ||
           (pending > 0 && !be->load_data &&
            !(pending == 1 && be->trk.active));
}

/*
 * The backend is closed (client gone, COM_QUIT, session killed, router
 * done with it) while the server still runs a statement for it. Closing
 * the socket does not stop a server busy in SLEEP() or a lock wait, so
 * with kill_on_client_close (default on) a KILL QUERY goes to the server
 * on a separate connection as the session's user.
 */
static void
kill_running(struct sl_dcb *dcb, struct mdb_backend *be)
{
    struct sl_session *ses = sl_dcb_session(dcb);
    const struct sl_params *params =
        ses != NULL ? sl_service_params(sl_session_service(ses)) : NULL;
    const struct mdb_session *sd = session_data(dcb);
    const char *user = ses != NULL ? sl_session_user(ses) : NULL;

    if (params == NULL || !sl_params_bool(params, "kill_on_client_close") ||
        user == NULL || user[0] == '\0') {
        return;
    }
    sl_log_info("server '%s' thread %u still runs a statement of a closing "
                "backend: KILL QUERY", sl_server_name(sl_backend_server(be->b)),
                be->tid);
    mdb_kill_backend_query(sl_backend_server(be->b), be->tid, user, sd);
}

void
mdb_backend_close(struct sl_dcb *dcb)
{
    struct mdb_backend *be = sl_dcb_protocol_data(dcb);
    static const unsigned char quit[] = {1, 0, 0, 0, SL_COM_QUIT};
    struct sl_buf *buf;

    if (be == NULL || be->state != BS_READY) {
        return;
    }
    if (be->tid != 0 && still_running(be) &&
        sl_backend_state(be->b) != SL_BACKEND_FAILED) {
        kill_running(dcb, be);
    }
    if (!be->load_data && (buf = sl_buf_from(quit, sizeof(quit))) != NULL) {
        sl_dcb_write(dcb, buf);
    }
}

void
mdb_backend_forwarded_running(struct sl_dcb *dcb)
{
    struct mdb_backend *be = sl_dcb_protocol_data(dcb);

    if (be != NULL && be->state == BS_READY) {
        be->forwarded_running = true;
    }
}

void
mdb_backend_free(struct sl_dcb *dcb)
{
    struct mdb_backend *be = sl_dcb_protocol_data(dcb);
    struct queued *q;

    if (be == NULL) {
        return;
    }
    while ((q = be->qhead) != NULL) {
        be->qhead = q->next;
        sl_buf_free(q->buf);
        free(q);
    }
    if (be->reg_id != 0) {
        mdb_kill_remove_backend(be->reg_id, be->reg_srv, be->tid);
    }
    mdb_tracker_free(&be->trk);
    free(be);
    sl_dcb_set_protocol_data(dcb, NULL);
}

/*
 * Backend connection pooling (core: pool.c). A connection is parked only
 * when it is logged in, idle and outside a transaction (the server's
 * status in its last answer); whatever else the session left behind
 * (variables, temporary tables, locks, prepared statements, the
 * database) is undone by the COM_CHANGE_USER that starts its reuse.
 */
bool
mdb_backend_park(struct sl_dcb *dcb)
{
    struct mdb_backend *be = sl_dcb_protocol_data(dcb);

    if (be == NULL || be->state != BS_READY || be->qhead != NULL ||
        be->load_data || be->compress || mdb_tracker_pending(&be->trk) > 0 ||
        be->trk.active ||
        (be->trk.reply.server_status & (SL_SERVER_STATUS_IN_TRANS |
                                         SL_SERVER_STATUS_IN_TRANS_READONLY))) {
        return false;
    }
    if (be->reg_id != 0) {
        mdb_kill_remove_backend(be->reg_id, be->reg_srv, be->tid);
        be->reg_id = 0;
        be->reg_srv = NULL;
    }
    be->b = NULL;
    return true;
}

/* Reuse a parked connection for b: COM_CHANGE_USER built from b's session
 * (user, database, charset, a native token from the scramble this
 * connection last had), answered like a login (login_step: an auth
 * switch, then OK or ERR). */
int
mdb_backend_reuse(struct sl_dcb *dcb, struct sl_backend *b)
{
    struct mdb_backend *be = sl_dcb_protocol_data(dcb);
    struct mdb_login l;
    uint8_t token[MDB_SHA256_LEN];
    unsigned char attrs[256];
    unsigned char out[1024];
    struct sl_buf *pkt;
    size_t n;

    if (be == NULL || be->state != BS_READY) {
        return SL_ERROR;
    }
    be->b = b;
    make_login(dcb, be, &l, token, attrs, sizeof(attrs));
    n = mdb_build_change_user(out, sizeof(out), &l);
    pkt = n > 0 ? sl_mdb_make_packet(0, out, n) : NULL;
    if (pkt == NULL || sl_dcb_write(dcb, pkt) != 0) {
        return SL_ERROR;
    }
    be->state = BS_AUTH;
    return SL_OK;
}

int
mdb_backend_pending(const struct sl_dcb *dcb)
{
    const struct mdb_backend *be = sl_dcb_protocol_data(dcb);

    if (be == NULL) {
        return 0;
    }
    return (int)mdb_tracker_pending(&be->trk) + be->queued_replies;
}
