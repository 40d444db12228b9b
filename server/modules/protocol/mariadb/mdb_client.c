/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client side of the MariaDB protocol: greeting, authentication
 * against the service's account cache, command decoding, errors.
 *
 *   accept --Handshake v10--> HELLO
 *   HELLO --HandshakeResponse41, caching_sha2_password--> check the
 *         fast-path token (none: SWITCH to caching_sha2_password first)
 *         --cached SHA-256 matches--> 0x01 0x03, STARTING
 *         --else--> 0x01 0x04, SWITCH: the password (TLS, unix socket),
 *           or 0x02 --> 0x01 PEM key --> RSA answer (plain TCP); check
 *   HELLO --HandshakeResponse41, other plugin--> SWITCH (AuthSwitchRequest)
 *   HELLO | SWITCH --token--> check --OK--> STARTING (session created)
 *                                  --ed25519 account--> SWITCH (to
 *                                    client_ed25519, 32-byte nonce; the
 *                                    answer is a signature, checked again;
 *                                    ed_mode=sha256: caching_sha2_password,
 *                                    token, 0x01 0x04, then the password
 *                                    over TLS or RSA, as above)
 *                                  --no match--> PARKED (accounts reload)
 *                                  --denied--> ERR 1045, close
 *                                  --pam account (PAMAuth)--> PAM: the
 *                                    conversation runs on a helper thread
 *                                    (mdb_pam.c); each prompt --> PAM_ASK
 *                                    (dialog question; the first inside an
 *                                    AuthSwitchRequest) --answer--> PAM;
 *                                    pam_use_cleartext_plugin=true: first
 *                                    PAM_ASK (mysql_clear_password) for the
 *                                    password, then PAM --> ended: check
 *                                    again (pam_done) --> STARTING | 1045;
 *                                    pam_mode=password_2FA: two PAM_ASK
 *                                    (password, code), then PAM
 *   PARKED --reload done--> check again --> STARTING | ERR 1045
 *   STARTING --session_ready--> OK to the client --> READY
 *   READY: complete commands --> sl_session_route_query
 *          COM_CHANGE_USER --> CU_SWITCH / CU_PARKED --> routed or 1045
 *          (a pam account: PAM / PAM_ASK as at login, cu_pam set, then
 *          routed, or 1045 and READY as the old user)
 *          LOCAL INFILE: packets are file data until an empty one
 *
 * Sequence numbers during login: handshake 0, response 1, OK/ERR 2; after
 * an auth switch: request 2, response 3, OK/ERR 4; each further switch
 * (native, then client_ed25519) adds two.
 *
 * Bounds on what a client makes us hold: outside READY at most one login
 * packet may be queued (1043 beyond); in READY a command may announce at
 * most the service's max_allowed_packet (1153, judged from its headers
 * before its bytes arrive). Either closes the client.
 *
 * TLS (listener ssl=true): the handshake offers CLIENT_SSL; the client's
 * SSLRequest (seq 1) starts TLS (sl_dcb_tls_start) and the real response
 * follows inside TLS with seq 2, so every later login seq is one higher.
 * A plain response on such a listener is refused (TLS is required, as in
 * MaxScale).
 *
 * Context: worker-owned (the client DCB's worker).
 */
#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
#include "mdb_dbtrack.h"
#include "mdb_kill.h"
#include "mdb_reply.h"
#include "mdb_zcodec.h"

/* Longest login packet accepted before the client is called malformed. */
#define MAX_LOGIN_PACKET 65536

enum client_state {
    CS_HELLO,
    CS_SWITCH,
    CS_PARKED,
    CS_STARTING,
    CS_READY,
    CS_CU_SWITCH,
    CS_CU_PARKED,
    CS_KILLING,      /* a translated KILL runs; commands wait behind it */
    CS_PAM,          /* the PAM conversation runs (helper thread) */
    CS_PAM_ASK,      /* a PAM question was sent: the client's answer */
};

/* What cl->hello->auth holds. */
enum proof {
    PROOF_NATIVE,     /* a mysql_native_password token of scramble */
    PROOF_ED25519,    /* a client_ed25519 signature of ed_nonce */
    PROOF_SHA2,       /* a caching_sha2_password fast-path token */
    PROOF_CLEAR,      /* the password (caching_sha2_password's full
                       * authentication, over TLS or RSA) */
};

/* caching_sha2_password after "perform full authentication" (0x04):
 * the client's next packet is the password (TLS, unix socket), a request
 * for the public key (0x02) or the RSA-encrypted password; after the key
 * was sent, the encrypted password. */
enum sha2_stage {
    SHA2_NONE,
    SHA2_FULL,
    SHA2_KEY,
};

struct mdb_client {
    enum client_state state;
    uint8_t scramble[MDB_SCRAMBLE_LEN];
    uint8_t seq;                 /* login: sequence of our next packet */
    bool reloaded;               /* a reload was already waited for */
    bool load_data;              /* client is sending a LOCAL INFILE */
    bool in_answer;              /* part of an answer was sent: an error
                                  * made up now continues it */
    uint8_t answer_seq;          /* then: the sequence number it takes */
    bool kill_wait;              /* a KILL waits for earlier answers */
    int8_t cu_seq;               /* seq for the COM_CHANGE_USER answer */
    struct mdb_hello *hello;     /* during login and COM_CHANGE_USER */
    struct sl_buf *cu_cmd;       /* the COM_CHANGE_USER being checked */
    struct mdb_usage *cu_old_usage;  /* the old account's slot, given
                                      * back while the change is checked */
    struct mdb_session *sd;      /* handed to the session */
    struct mdb_dbtrack dbt;      /* default-database changes in flight */
    bool tls_started;            /* SSLRequest seen, TLS running */
    uint64_t max_packet;         /* service's max_allowed_packet */
    uint32_t zcaps;              /* CLIENT_COMPRESS / MDB_CAP_ZSTD asked
                                  * for in the handshake response */
    uint8_t zstd_level;          /* its zstd level (0: none sent) */
    struct mdb_zstate *z;        /* compressed: the codec's state */
    bool load_data_done;         /* LOCAL INFILE data ended: the answer
                                  * that follows is the same answer's */
    uint32_t ext_offered;        /* MariaDB extended caps offered */
    uint8_t proof;               /* enum proof: what hello->auth is */
    uint8_t sha2;                /* enum sha2_stage: what the client's
                                  * next auth packet is */
    bool sha2_bad;               /* its RSA answer did not decrypt */
    bool sha2_rsa;               /* the password came RSA-encrypted */
    uint8_t ed_nonce[MDB_ED25519_NONCE_LEN];
    struct mdb_pam_job *pam;     /* the PAM conversation running */
    bool pam_first;              /* its next question switches plugins */
    bool pam_clear;              /* PAM_ASK: mysql_clear_password's
                                  * password, then the conversation */
    bool pam_mapped;             /* pam_backend_map=mariadb: the below */
    char pam_map_user[MDB_USER_MAX];
    uint8_t pam_map_sha1[MDB_SHA1_LEN];
    bool pam_map_has_pw;
    uint8_t pam_2fa_ask;         /* pam_mode=password_2FA: 1 the password,
                                  * 2 the code is being asked (PAM_ASK) */
    bool pam_done;               /* the conversation accepted the user */
    /* COM_CHANGE_USER to a pam account: the conversation runs for the
     * new user (cl->seq numbers its packets); the old user's answers
     * are kept aside until the change succeeds or fails. */
    bool cu_pam;
    char *cu_old_answers;
    size_t cu_old_len;
    bool cu_old_first_echo;
    bool cu_old_2fa;
    char pam_service[128];
};

static struct mdb_client *
client_of(const struct sl_dcb *dcb)
{
    return sl_dcb_protocol_data(dcb);
}

/* Free a decoded login, wiping its answer first: with ed_mode=sha256 it
 * is the client's password. */
static void
free_hello(struct mdb_hello *h)
{
    if (h != NULL) {
        OPENSSL_cleanse(h->auth, sizeof(h->auth));
    }
    free(h);
}

static void
send_err(struct sl_dcb *dcb, uint8_t seq, uint16_t code, const char *state,
         const char *msg)
{
    struct sl_buf *err = sl_mdb_make_err(seq, code, state, msg);

    if (err != NULL) {
        sl_dcb_write(dcb, err);
    }
}

static int
send_payload(struct sl_dcb *dcb, uint8_t seq, const void *p, size_t len)
{
    struct sl_buf *buf = sl_mdb_make_packet(seq, p, len);

    return buf != NULL && sl_dcb_write(dcb, buf) == 0 ? SL_OK : SL_ERROR;
}

/* Apply a default-database verdict of the tracker to the session. */
static void
apply_db(struct sl_dcb *dcb, struct mdb_db_verdict v)
{
    struct sl_session *ses = sl_dcb_session(dcb);

    if (v.db != NULL) {
        sl_session_set_db(ses, v.db);
    }
    sl_session_set_db_unsure(ses, v.unsure);
    sl_session_set_answers_pending(ses, v.pending);
}

/* The host is blocked (max_auth_errors_until_block): ERR 1129 with seq,
 * true. Checked at connect and again at each COM_CHANGE_USER, so
 * sessions opened before the block cannot keep guessing. */
static bool
refuse_if_blocked(struct sl_dcb *dcb, uint8_t seq)
{
    char msg[200];

    if (!mdb_host_blocked(sl_dcb_service(dcb), sl_dcb_remote(dcb))) {
        return false;
    }
    snprintf(msg, sizeof(msg), "Host '%s' is blocked because of many "
             "connection errors", sl_dcb_remote(dcb));
    send_err(dcb, seq, 1129, "HY000", msg);
    sl_service_auth_failed(sl_dcb_service(dcb), SL_AUTH_FAIL_HOST_BLOCKED);
    return true;
}

/*
 * The MariaDB extended capabilities to offer: MDB_EXT_CAPS when every
 * server of the service whose version the monitor knows (at least one) is
 * MariaDB 10.5 or later, which answer with extended metadata; none
 * otherwise (a MySQL server or an older MariaDB could not honour it, and
 * the client would misread every column definition).
 */
static uint32_t
ext_caps_to_offer(const struct sl_service *svc)
{
    size_t n = 0;
    struct sl_server *const *srv = svc != NULL ? sl_service_servers(svc, &n)
                                               : NULL;
    bool known = false;

    for (size_t i = 0; srv != NULL && i < n; i++) {
        uint64_t v = sl_server_version(srv[i]);

        if (v == 0) {
            continue;
        }
        if (v < 100500 || v >= 1000000) {
            return 0;
        }
        known = true;
    }
    return known ? MDB_EXT_CAPS : 0;
}

int
mdb_client_accept(struct sl_dcb *client)
{
    struct mdb_client *cl = calloc(1, sizeof(*cl));
    const struct sl_params *params = sl_service_params(sl_dcb_service(client));
    const char *version = params != NULL
                              ? sl_params_get(params, "version_string")
                              : NULL;
    unsigned char p[256];
    size_t n;

    if (cl == NULL || (cl->sd = calloc(1, sizeof(*cl->sd))) == NULL) {
        free(cl);
        return SL_ERROR;
    }
    sl_dcb_set_protocol_data(client, cl);
    if (refuse_if_blocked(client, 0)) {
        return SL_ERROR;
    }
    cl->cu_seq = -1;
    cl->max_packet = params != NULL
                         ? sl_params_size(params, "max_allowed_packet")
                         : 16 * 1024 * 1024;
    if (mdb_make_scramble(cl->scramble, NULL) != 0) {
        sl_log_error("no random bytes for the scramble of client %s: "
                     "connection refused", sl_dcb_remote(client));
        send_err(client, 0, 1105, "HY000",
                 "Cannot generate a random scramble");
        return SL_ERROR;
    }
    if (version == NULL || version[0] == '\0' || strlen(version) > 128) {
        version = MDB_DEFAULT_VERSION;
    }
    cl->ext_offered = ext_caps_to_offer(sl_dcb_service(client));
    n = mdb_build_handshake_ext(p, sizeof(p), version,
                                mdb_kill_id(client), cl->scramble,
                                MDB_SERVER_CAPS | SL_CAP_COMPRESS |
                                    MDB_CAP_ZSTD |
                                    (sl_dcb_tls_configured(client)
                                         ? SL_CAP_SSL
                                         : 0),
                                cl->ext_offered, MDB_DEFAULT_CHARSET);
    cl->state = CS_HELLO;
    cl->seq = 2;
    return send_payload(client, 0, p, n);
}

/* ---- authentication ---- */

/* The account cache of the client's service (NULL if none). */
static struct mdb_service *
service_cache(struct sl_dcb *dcb)
{
    struct sl_service *svc = sl_dcb_service(dcb);

    return svc != NULL ? sl_service_protocol_data(svc) : NULL;
}

static void
send_access_denied(struct sl_dcb *dcb, uint8_t seq, const struct mdb_hello *h)
{
    char msg[600];

    snprintf(msg, sizeof(msg),
             "Access denied for user '%s'@'%s' (using password: %s)",
             h->user, sl_dcb_remote(dcb), h->auth_len > 0 ? "YES" : "NO");
    send_err(dcb, seq, 1045, "28000", msg);
}

/* log_auth_warnings=true (the default) logs refusals as warnings. */
static void
log_denied(struct sl_dcb *dcb, const struct mdb_hello *h)
{
    const struct sl_params *params = sl_service_params(sl_dcb_service(dcb));

    if (params == NULL || sl_params_bool(params, "log_auth_warnings")) {
        sl_log_warn("authentication failed for '%s'@'%s'", h->user,
                    sl_dcb_remote(dcb));
    } else {
        sl_log_info("authentication failed for '%s'@'%s'", h->user,
                    sl_dcb_remote(dcb));
    }
}

static bool
needs_switch(const struct mdb_hello *h)
{
    if (!(h->caps & SL_CAP_PLUGIN_AUTH)) {
        return false;   /* cannot switch: its token is native anyway */
    }
    if (h->plugin[0] != '\0') {
        return strcmp(h->plugin, MDB_NATIVE_PLUGIN) != 0;
    }
    return h->auth_len != 0 && h->auth_len != MDB_SHA1_LEN;
}

/*
 * The listener's authenticator list (MaxScale's module names): may it
 * check native passwords (no list, or a native name in it) and ed25519
 * signatures (ed25519auth in it)? The configuration refused any other
 * name when it was loaded.
 */
static void
listener_auth(struct sl_dcb *dcb, bool *native, bool *ed25519, bool *pam)
{
    const struct sl_listener *l = sl_dcb_listener(dcb);
    const struct sl_params *p = l != NULL ? sl_listener_params(l) : NULL;
    const char *v = p != NULL ? sl_params_get(p, "authenticator") : NULL;
    char item[64];

    *native = v == NULL || v[0] == '\0';
    *ed25519 = false;
    *pam = false;
    while (v != NULL && *v != '\0') {
        size_t n = strcspn(v, ",");
        size_t i = 0, j = 0;

        for (; i < n && j + 1 < sizeof(item); i++) {
            if (v[i] != ' ' && v[i] != '\t') {
                item[j++] = v[i];
            }
        }
        item[j] = '\0';
        if (strcasecmp(item, "ed25519auth") == 0) {
            *ed25519 = true;
        } else if (strcasecmp(item, "pamauth") == 0) {
            *pam = true;
        } else if (item[0] != '\0') {
            *native = true;
        }
        v = v[n] == ',' ? v + n + 1 : NULL;
    }
}

/* The listener's user_mapping_file, or NULL. */
static const char *
listener_map(struct sl_dcb *dcb)
{
    const struct sl_listener *l = sl_dcb_listener(dcb);
    const struct sl_params *p = l != NULL ? sl_listener_params(l) : NULL;
    const char *v = p != NULL ? sl_params_get(p, "user_mapping_file")
                              : NULL;

    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* authenticator_options has option (lower case, no spaces: e.g.
 * "ed_mode=sha256"). config_objects.c refused every option Sluice does
 * not know, and values other than true/false for the booleans. */
static bool
listener_option(struct sl_dcb *dcb, const char *option)
{
    const struct sl_listener *l = sl_dcb_listener(dcb);
    const struct sl_params *p = l != NULL ? sl_listener_params(l) : NULL;
    const char *v = p != NULL ? sl_params_get(p, "authenticator_options")
                              : NULL;
    char low[256];
    size_t n = 0;

    for (; v != NULL && *v != '\0' && n + 1 < sizeof(low); v++) {
        if (*v != ' ' && *v != '\t') {
            low[n++] = (char)tolower((unsigned char)*v);
        }
    }
    low[n] = '\0';
    for (const char *at = low; (at = strstr(at, option)) != NULL; at++) {
        size_t k = strlen(option);

        if ((at == low || at[-1] == ',') &&
            (at[k] == '\0' || at[k] == ',')) {
            return true;
        }
    }
    return false;
}

/* pam_backend_map=mariadb (or MaxScale's pam_backend_mapping=mariadb):
 * pam_mapped_pw_file's path (case kept) into buf, "" without one; NULL
 * when the listener does not map. */
static const char *
pam_map_file(struct sl_dcb *dcb, char *buf, size_t cap)
{
    static const char key[] = "pam_mapped_pw_file=";
    const struct sl_listener *l = sl_dcb_listener(dcb);
    const struct sl_params *p = l != NULL ? sl_listener_params(l) : NULL;
    const char *v = p != NULL ? sl_params_get(p, "authenticator_options")
                              : NULL;

    if (!listener_option(dcb, "pam_backend_map=mariadb") &&
        !listener_option(dcb, "pam_backend_mapping=mariadb")) {
        return NULL;
    }
    buf[0] = '\0';
    while (v != NULL && *v != '\0') {
        size_t n = strcspn(v, ",");

        while (n > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            n--;
        }
        if (n > sizeof(key) - 1 &&
            strncasecmp(v, key, sizeof(key) - 1) == 0) {
            size_t k = n - (sizeof(key) - 1);

            while (k > 0 && (v[sizeof(key) - 1 + k - 1] == ' ' ||
                             v[sizeof(key) - 1 + k - 1] == '\t')) {
                k--;
            }
            snprintf(buf, cap, "%.*s", (int)k, v + sizeof(key) - 1);
        }
        v = v[n] == ',' ? v + n + 1 : NULL;
    }
    return buf;
}

static bool
listener_sha256(struct sl_dcb *dcb)
{
    return listener_option(dcb, "ed_mode=sha256");
}

/*
 * ed_mode=sha256, as MaxScale does it: AuthSwitchRequest to
 * caching_sha2_password with the scramble; its first answer is a
 * fast-path token (PROOF_SHA2), answered like any caching_sha2_password
 * login (sha2_ask_full: there is no SHA-256 to check it against), after
 * which the client sends its password over TLS, or RSA-encrypted on a
 * plain connection.
 *
 *   SWITCH(caching_sha2_password, scramble) --token--> 0x01 0x04
 *   --password NUL | 0x02 .. key .. RSA answer--> check (req->cleartext)
 */
static int
send_sha256_switch(struct sl_dcb *dcb, struct mdb_client *cl, uint8_t seq)
{
    static const char plugin[] = MDB_SHA2_CLIENT_PLUGIN;
    unsigned char p[1 + sizeof(plugin) + MDB_SCRAMBLE_LEN + 1];
    size_t n = 0;

    p[n++] = 0xfe;
    memcpy(p + n, plugin, sizeof(plugin));
    n += sizeof(plugin);
    memcpy(p + n, cl->scramble, MDB_SCRAMBLE_LEN);
    n += MDB_SCRAMBLE_LEN;
    p[n++] = 0;
    cl->proof = PROOF_SHA2;
    cl->sha2 = SHA2_NONE;
    return send_payload(dcb, seq, p, n);
}

/* caching_sha2_password: "perform full authentication" (0x01 0x04) at
 * *seq, which moves past the client's answer. The fast-path token is
 * wiped. */
static int
sha2_ask_full(struct sl_dcb *dcb, struct mdb_client *cl, uint8_t *seq)
{
    static const unsigned char more[] = {0x01, 0x04};

    OPENSSL_cleanse(cl->hello->auth, sizeof(cl->hello->auth));
    cl->hello->auth_len = 0;
    cl->sha2 = SHA2_FULL;
    *seq = (uint8_t)(*seq + 2);
    return send_payload(dcb, (uint8_t)(*seq - 2), more, sizeof(more));
}

/* caching_sha2_password's fast path passed: "fast auth success" (0x01
 * 0x03) at *seq, before the OK. */
static int
sha2_fast_ok(struct sl_dcb *dcb, struct mdb_client *cl, uint8_t *seq)
{
    static const unsigned char ok[] = {0x01, 0x03};

    sl_log_info("client '%s'@'%s' logged in by caching_sha2_password's "
                "fast authentication (service '%s')", cl->hello->user,
                sl_dcb_remote(dcb), sl_service_name(sl_dcb_service(dcb)));
    *seq = (uint8_t)(*seq + 1);
    return send_payload(dcb, (uint8_t)(*seq - 1), ok, sizeof(ok));
}

/* The full authentication passed (the password was right). */
static void
sha2_log_full(struct sl_dcb *dcb, const struct mdb_client *cl)
{
    sl_log_info("client '%s'@'%s' passed caching_sha2_password's full "
                "authentication (%s, service '%s')", cl->hello->user,
                sl_dcb_remote(dcb),
                cl->sha2_rsa            ? "RSA"
                : sl_dcb_is_unix(dcb)   ? "unix socket"
                                        : "TLS",
                sl_service_name(sl_dcb_service(dcb)));
}

/* The public key for a 0x02 request: 0x01 and the PEM, at *seq. */
static int
sha2_send_key(struct sl_dcb *dcb, struct mdb_client *cl, uint8_t *seq)
{
    const char *pem = mdb_server_rsa_pem();
    unsigned char p[2048];
    size_t n = pem != NULL ? strlen(pem) : 0;

    if (n == 0 || n + 1 > sizeof(p)) {
        send_err(dcb, *seq, 1105, "HY000", "No RSA key for "
                 "caching_sha2_password");
        return SL_ERROR;
    }
    p[0] = 0x01;
    memcpy(p + 1, pem, n);
    cl->sha2 = SHA2_KEY;
    *seq = (uint8_t)(*seq + 2);
    return send_payload(dcb, (uint8_t)(*seq - 2), p, n + 1);
}

/* TLS or a unix socket: where caching_sha2_password's clients send the
 * password in clear (as they do to MySQL). */
static bool
secure_transport(struct sl_dcb *dcb)
{
    return sl_dcb_is_tls(dcb) || sl_dcb_is_unix(dcb);
}

/*
 * A caching_sha2_password answer that is no fast-path token: empty is an
 * empty password (the server answers OK at once, no 0x03); over TLS,
 * a NUL-terminated string is the password itself (libmariadb 3.3+ sends
 * it at once after an AuthSwitchRequest on a TLS connection).
 */
static void
sha2_settle_proof(struct sl_dcb *dcb, struct mdb_client *cl)
{
    struct mdb_hello *h = cl->hello;

    if (cl->proof != PROOF_SHA2 || h->auth_len == MDB_SHA256_LEN) {
        return;
    }
    if (h->auth_len == 0) {
        cl->proof = PROOF_NATIVE;
    } else if (secure_transport(dcb) && h->auth[h->auth_len - 1] == '\0') {
        cl->proof = PROOF_CLEAR;
        h->auth_len--;
    }
}

/* A client opening with caching_sha2_password (its token over our
 * scramble, or none for an empty password): answered in its own
 * plugin. */
static bool
opens_with_sha2(const struct mdb_hello *h)
{
    return (h->caps & SL_CAP_PLUGIN_AUTH) &&
           strcmp(h->plugin, MDB_SHA2_CLIENT_PLUGIN) == 0 &&
           (h->auth_len == 0 || h->auth_len == MDB_SHA256_LEN);
}

/* AuthSwitchRequest to client_ed25519 with a fresh nonce (raw random
 * bytes, as the server's plugin sends them); caching_sha2_password on
 * an ed_mode=sha256 listener. */
static int
send_ed_switch(struct sl_dcb *dcb, struct mdb_client *cl, uint8_t seq)
{
    unsigned char p[1 + sizeof(MDB_ED25519_CLIENT_PLUGIN) +
                    MDB_ED25519_NONCE_LEN];
    size_t n = 0;

    if (listener_sha256(dcb)) {
        return send_sha256_switch(dcb, cl, seq);
    }
    if (RAND_bytes(cl->ed_nonce, MDB_ED25519_NONCE_LEN) != 1) {
        sl_log_error("no random bytes for the ed25519 nonce of client %s: "
                     "connection refused", sl_dcb_remote(dcb));
        send_err(dcb, seq, 1105, "HY000", "Cannot generate a random nonce");
        return SL_ERROR;
    }
    p[n++] = 0xfe;
    memcpy(p + n, MDB_ED25519_CLIENT_PLUGIN,
           sizeof(MDB_ED25519_CLIENT_PLUGIN));
    n += sizeof(MDB_ED25519_CLIENT_PLUGIN);
    memcpy(p + n, cl->ed_nonce, MDB_ED25519_NONCE_LEN);
    n += MDB_ED25519_NONCE_LEN;
    cl->proof = PROOF_ED25519;
    return send_payload(dcb, seq, p, n);
}

static int
send_switch(struct sl_dcb *dcb, uint8_t seq, const uint8_t *scramble)
{
    unsigned char p[1 + sizeof(MDB_NATIVE_PLUGIN) + MDB_SCRAMBLE_LEN + 1];
    size_t n = 0;

    p[n++] = 0xfe;
    memcpy(p + n, MDB_NATIVE_PLUGIN, sizeof(MDB_NATIVE_PLUGIN));
    n += sizeof(MDB_NATIVE_PLUGIN);
    memcpy(p + n, scramble, MDB_SCRAMBLE_LEN);
    n += MDB_SCRAMBLE_LEN;
    p[n++] = 0;
    return send_payload(dcb, seq, p, n);
}

/* Count a failed login for /metrics: the reason from the refusal. */
static void
count_auth_failure(struct sl_dcb *dcb, enum mdb_auth_rc rc,
                   const struct mdb_refusal *why)
{
    enum sl_auth_failure r = SL_AUTH_FAIL_OTHER;

    if (why->no_credential) {
        r = SL_AUTH_FAIL_OTHER;
    } else if (rc != MDB_AUTH_REFUSED) {
        r = why->code == 1 ? SL_AUTH_FAIL_DENIED
            : why->unknown_user ? SL_AUTH_FAIL_UNKNOWN_USER
                                : SL_AUTH_FAIL_WRONG_PASSWORD;
    } else if (why->code == 1045) {
        r = SL_AUTH_FAIL_TLS_REQUIRED;
    } else if (why->code == 4151) {
        r = SL_AUTH_FAIL_ACCOUNT_LOCKED;
    } else if (why->code == 1862) {
        r = SL_AUTH_FAIL_PASSWORD_EXPIRED;
    } else if (why->code == 1226) {
        r = SL_AUTH_FAIL_RESOURCE_LIMIT;
    }
    sl_service_auth_failed(sl_dcb_service(dcb), r);
}

/* Send the error of a refused login (1045 with the usual message), and
 * log it like a failed authentication. */
static void
send_refusal(struct sl_dcb *dcb, uint8_t seq, const struct mdb_hello *h,
             const struct mdb_refusal *why)
{
    const struct sl_params *params = sl_service_params(sl_dcb_service(dcb));
    const char *reason = why->code == 1045 && !why->no_credential
                             ? "account's REQUIRE clause not met"
                             : why->msg;

    if (params == NULL || sl_params_bool(params, "log_auth_warnings")) {
        sl_log_warn("login of '%s'@'%s' refused: %d %s", h->user,
                    sl_dcb_remote(dcb), why->code, reason);
    } else {
        sl_log_info("login of '%s'@'%s' refused: %d %s", h->user,
                    sl_dcb_remote(dcb), why->code, reason);
    }
    if (why->code == 1045) {
        send_access_denied(dcb, seq, h);
    } else {
        send_err(dcb, seq, why->code, why->sqlstate, why->msg);
    }
}

/* Check the token of cl->hello; on success out gets SHA1(pw), on a
 * refusal why says which error to send. */
static enum mdb_auth_rc
check_token(struct sl_dcb *dcb, struct mdb_client *cl,
            struct mdb_session *out, struct mdb_refusal *why)
{
    struct mdb_auth_req req = {
        .user = cl->hello->user,
        .client = sl_dcb_remote(dcb),
        .is_unix = sl_dcb_is_unix(dcb),
        .token = cl->hello->auth,
        .token_len = cl->hello->auth_len,
        .scramble = cl->scramble,
        .may_reload = !cl->reloaded,
        .caps = cl->hello->caps,
        .ed25519 = cl->proof == PROOF_ED25519,
        .nonce = cl->ed_nonce,
        .cleartext = cl->proof == PROOF_CLEAR,
        .sha2 = cl->proof == PROOF_SHA2,
        .ed_cleartext_ok = listener_sha256(dcb),
        .pam_done = cl->pam_done,
        .map_path = listener_map(dcb),
    };
    struct sl_service *service = sl_dcb_service(dcb);
    struct mdb_service *svc = sl_service_protocol_data(service);
    const struct sl_params *params = sl_service_params(service);

    why->code = 1;   /* denied before the account is looked at */
    why->unknown_user = false;
    why->no_credential = false;
    listener_auth(dcb, &req.native_ok, &req.ed25519_ok, &req.pam_ok);
    if (svc == NULL || cl->sha2_bad) {
        return MDB_AUTH_DENIED;
    }
    /* MaxScale's rule: root only where the service allows it. */
    if (strcmp(req.user, "root") == 0 && params != NULL &&
        !sl_params_bool(params, "enable_root_user")) {
        return MDB_AUTH_DENIED;
    }
    why->code = 0;
    return mdb_service_authenticate(svc, dcb, &req, out, why);
}

/* Remember what the backends need from the client's hello. */
static void
note_client(struct mdb_client *cl, const struct mdb_hello *h)
{
    const unsigned char *v;
    size_t vlen;

    cl->sd->caps = h->caps & MDB_SERVER_CAPS;
    cl->zcaps = h->caps & (SL_CAP_COMPRESS | MDB_CAP_ZSTD);
    cl->zstd_level = h->zstd_level;
    cl->sd->ext_caps = h->ext_caps & cl->ext_offered;
    cl->sd->charset = h->charset;
    if (h->attrs != NULL &&
        mdb_attrs_find(h->attrs, h->attrs_len, "program_name", &v, &vlen)) {
        if (vlen >= sizeof(cl->sd->program_name)) {
            vlen = sizeof(cl->sd->program_name) - 1;
        }
        memcpy(cl->sd->program_name, v, vlen);
        cl->sd->program_name[vlen] = '\0';
    }
}

static int
start_session(struct sl_dcb *dcb, struct mdb_client *cl)
{
    struct sl_session *ses;
    struct mdb_hello *h = cl->hello;

    cl->hello = NULL;
    cl->state = CS_STARTING;
    /* Known to KILL before the session connects its backends: in the
     * shared event model another worker can finish a backend's login
     * (mdb_kill_add_backend) before sl_session_create() returns. */
    mdb_kill_register(dcb, h->user);
    ses = sl_session_create(dcb);
    if (ses == NULL) {
        free_hello(h);
        return SL_ERROR;
    }
    sl_session_set_user(ses, h->user);
    sl_session_set_db(ses, h->db);
    sl_session_set_protocol_data(ses, cl->sd);
    /* With CLIENT_COMPRESS (either algorithm): the session is compressed
     * from its OK on, which kernel forwarding (splice.c) must know now. */
    sl_session_set_client_caps(ses, cl->sd->caps |
                                        (cl->zcaps != 0 ? SL_CAP_COMPRESS
                                                        : 0) |
                                        (uint64_t)cl->sd->ext_caps << 32);
    free_hello(h);
    return SL_OK;
}

/* ---- PAM accounts (PAMAuth listeners) ---- */

static void
drop_pam_answers(struct mdb_session *sd)
{
    if (sd->pam_answers != NULL) {
        OPENSSL_cleanse(sd->pam_answers, MDB_PAM_ANSWERS_MAX);
        free(sd->pam_answers);
    }
    sd->pam_answers = NULL;
    sd->pam_len = 0;
}

/* Keep an answer for the backends' logins. -1: too many answers. */
static int
keep_pam_answer(struct mdb_session *sd, const char *a, size_t len)
{
    if (sd->pam_answers == NULL &&
        (sd->pam_answers = calloc(1, MDB_PAM_ANSWERS_MAX)) == NULL) {
        return -1;
    }
    return mdb_pam_answers_add(sd->pam_answers, MDB_PAM_ANSWERS_MAX,
                               &sd->pam_len, a, len);
}

static int login(struct sl_dcb *dcb, struct mdb_client *cl);
static int bad_handshake(struct sl_dcb *dcb, uint8_t seq);
static unsigned char *login_packet(struct sl_buf *rq, size_t *len,
                                   size_t *total, bool *bad);

static int change_user_failed(struct sl_dcb *dcb, struct mdb_client *cl);
static int change_user_check(struct sl_dcb *dcb, struct mdb_client *cl);
static int process_commands(struct sl_dcb *dcb, struct mdb_client *cl);

/* A PAM login that cannot go on (no thread, a refused conversation).
 * For a COM_CHANGE_USER the session goes on as the old user. */
static int
pam_denied(struct sl_dcb *dcb, struct mdb_client *cl, bool wrong_password)
{
    if (cl->cu_pam) {
        sl_service_auth_failed(sl_dcb_service(dcb),
                               wrong_password ? SL_AUTH_FAIL_WRONG_PASSWORD
                                              : SL_AUTH_FAIL_OTHER);
        log_denied(dcb, cl->hello);
        if (wrong_password) {
            mdb_host_auth_failed(sl_dcb_service(dcb), sl_dcb_remote(dcb));
        }
        send_access_denied(dcb, cl->seq, cl->hello);
        return change_user_failed(dcb, cl);   /* the caller goes on */
    }
    sl_service_auth_failed(sl_dcb_service(dcb),
                           wrong_password ? SL_AUTH_FAIL_WRONG_PASSWORD
                                          : SL_AUTH_FAIL_OTHER);
    log_denied(dcb, cl->hello);
    if (wrong_password) {
        mdb_host_auth_failed(sl_dcb_service(dcb), sl_dcb_remote(dcb));
    }
    send_access_denied(dcb, cl->seq, cl->hello);
    return SL_ERROR;
}

/* pam_mode=password_2FA: the two questions (type 4: not echoed). */
#define MDB_PAM_2FA_PASSWORD "Password: "
#define MDB_PAM_2FA_CODE "Verification code: "

static int
pam_ask_2fa(struct sl_dcb *dcb, struct mdb_client *cl, bool first,
            const char *text)
{
    unsigned char pkt[1 + sizeof(MDB_DIALOG_PLUGIN) + 1 + 32];
    size_t n = mdb_dialog_question(pkt, sizeof(pkt), first, false, text,
                                   strlen(text));

    cl->state = CS_PAM_ASK;
    cl->seq += 2;
    return send_payload(dcb, (uint8_t)(cl->seq - 2), pkt, n);
}

/*
 * The account is a pam one: with pam_use_cleartext_plugin=true ask for
 * the password with mysql_clear_password (refused on a plain connection
 * unless pam_allow_plain_cleartext=true), else start the conversation,
 * whose questions go to the client's dialog plugin.
 */
static int
pam_begin(struct sl_dcb *dcb, struct mdb_client *cl, const char *service)
{
    static const unsigned char clear[] = "\xfe" MDB_CLEAR_PLUGIN;
    char map[512];

    snprintf(cl->pam_service, sizeof(cl->pam_service), "%s", service);
    drop_pam_answers(cl->sd);
    cl->sd->pam_first_echo = false;
    cl->sd->pam_2fa = false;
    cl->pam_2fa_ask = 0;
    cl->pam_mapped = false;
    if (listener_option(dcb, "pam_mode=password_2fa")) {
        /* MaxScale's two questions, whatever the PAM service asks; the
         * conversation starts once both are answered (the configuration
         * refused pam_use_cleartext_plugin=true with this mode) */
        cl->sd->pam_2fa = true;
        cl->pam_clear = false;
        cl->pam_2fa_ask = 1;
        return pam_ask_2fa(dcb, cl, true, MDB_PAM_2FA_PASSWORD);
    }
    if (listener_option(dcb, "pam_use_cleartext_plugin=true")) {
        if (!sl_dcb_is_tls(dcb) &&
            !listener_option(dcb, "pam_allow_plain_cleartext=true")) {
            sl_log_warn("client %s@%s refused: its pam account logs in "
                        "with mysql_clear_password on listener '%s' "
                        "(pam_use_cleartext_plugin=true), which sends the "
                        "password and needs TLS", cl->hello->user,
                        sl_dcb_remote(dcb),
                        sl_listener_name(sl_dcb_listener(dcb)));
            send_err(dcb, cl->seq, 3159, "08004", "Connections using "
                     "insecure transport are prohibited: this account logs "
                     "in with mysql_clear_password, which needs TLS "
                     "(connect with --ssl)");
            sl_service_auth_failed(sl_dcb_service(dcb), SL_AUTH_FAIL_OTHER);
            return SL_ERROR;
        }
        cl->pam_clear = true;
        cl->state = CS_PAM_ASK;
        cl->seq += 2;
        /* sizeof(clear) counts the plugin name's NUL: no data follows */
        return send_payload(dcb, (uint8_t)(cl->seq - 2), clear,
                            sizeof(clear));
    }
    cl->pam_clear = false;
    cl->pam_first = true;
    cl->pam = mdb_pam_start(dcb, service, cl->hello->user, NULL, 0, NULL,
                            0, pam_map_file(dcb, map, sizeof(map)));
    if (cl->pam == NULL) {
        return pam_denied(dcb, cl, false);
    }
    cl->state = CS_PAM;
    return SL_OK;
}

/* The client's answer to a question (or its cleartext password). */
static int
pam_read_answer(struct sl_dcb *dcb, struct mdb_client *cl, struct sl_buf *rq)
{
    char a[MDB_PAM_ANSWER_MAX];
    char map[512];
    size_t len, total, alen = 0;
    bool bad;
    unsigned char *p = login_packet(rq, &len, &total, &bad);
    int rc = SL_OK;

    if (p == NULL) {
        return bad ? bad_handshake(dcb, cl->seq) : SL_OK;
    }
    if (mdb_dialog_answer(p, len, a, sizeof(a), &alen) != 0 ||
        keep_pam_answer(cl->sd, a, alen) != 0) {
        OPENSSL_cleanse(p, len);
        OPENSSL_cleanse(a, sizeof(a));
        return bad_handshake(dcb, cl->seq);
    }
    OPENSSL_cleanse(p, len);
    sl_buf_consume(rq, total);
    cl->state = CS_PAM;
    if (cl->pam_2fa_ask == 1) {
        cl->pam_2fa_ask = 2;
        rc = pam_ask_2fa(dcb, cl, false, MDB_PAM_2FA_CODE);
    } else if (cl->pam_2fa_ask == 2) {
        size_t pw_len = 0;
        const char *pw = mdb_pam_answer_at(cl->sd->pam_answers,
                                           cl->sd->pam_len, 0, &pw_len);

        cl->pam_2fa_ask = 0;
        cl->pam = pw == NULL ? NULL
                             : mdb_pam_start(dcb, cl->pam_service,
                                             cl->hello->user, pw, pw_len, a,
                                             alen, pam_map_file(dcb, map,
                                                                sizeof(map)));
        if (cl->pam == NULL) {
            rc = pam_denied(dcb, cl, false);
        }
    } else if (cl->pam_clear) {
        cl->pam_clear = false;
        cl->pam = mdb_pam_start(dcb, cl->pam_service, cl->hello->user, a,
                                alen, NULL, 0,
                                pam_map_file(dcb, map, sizeof(map)));
        if (cl->pam == NULL) {
            rc = pam_denied(dcb, cl, false);
        }
    } else if (cl->pam != NULL) {
        mdb_pam_answer(cl->pam, a, alen);
    }
    OPENSSL_cleanse(a, sizeof(a));
    return rc;
}

void
mdb_client_pam_event(struct sl_dcb *dcb, struct mdb_pam_job *j)
{
    struct mdb_client *cl = client_of(dcb);
    unsigned char pkt[1 + sizeof(MDB_DIALOG_PLUGIN) + 1 + 1024];
    char text[1024];
    bool echo;
    size_t n;
    int r, rc = SL_OK;
    bool cu;

    if (cl == NULL || cl->pam != j) {
        return;   /* an abandoned conversation's late news */
    }
    cu = cl->cu_pam;
    r = mdb_pam_result(j);
    if (r >= 0) {
        cl->pam_mapped = mdb_pam_mapped(j, cl->pam_map_user,
                                        sizeof(cl->pam_map_user),
                                        cl->pam_map_sha1,
                                        &cl->pam_map_has_pw);
        mdb_pam_release(j);
        cl->pam = NULL;
        if (cl->state != CS_PAM) {
            rc = pam_denied(dcb, cl, false);   /* it gave up waiting */
        } else if (r == 1 && cl->cu_pam) {
            cl->pam_done = true;
            cl->cu_seq = (int8_t)cl->seq;
            rc = change_user_check(dcb, cl);
        } else if (r == 1) {
            cl->pam_done = true;
            rc = login(dcb, cl);
        } else {
            rc = pam_denied(dcb, cl, true);
        }
    } else if (cl->state == CS_PAM &&
               mdb_pam_question(j, text, sizeof(text), &echo)) {
        n = mdb_dialog_question(pkt, sizeof(pkt), cl->pam_first, echo,
                                text, strlen(text));
        if (cl->pam_first) {
            cl->sd->pam_first_echo = echo;   /* for the backends' replay */
        }
        cl->pam_first = false;
        cl->state = CS_PAM_ASK;
        cl->seq += 2;
        rc = send_payload(dcb, (uint8_t)(cl->seq - 2), pkt, n);
    }
    if (rc == SL_OK && cu && cl->state == CS_READY) {
        rc = process_commands(dcb, cl);   /* the change is done */
    }
    if (rc == SL_ERROR) {
        sl_dcb_close(dcb);
    }
}

/*
 * pam_backend_map=mariadb: the servers are logged in to with standard
 * MariaDB authentication as the user PAM mapped the client to, with its
 * pam_mapped_pw_file password (or none), not with the PAM answers. A
 * user_mapping_file entry for the client's user wins (its explicit
 * backend account).
 */
static void
pam_apply_mapping(struct mdb_client *cl)
{
    struct mdb_session *sd = cl->sd;

    if (sd->backend_user[0] == '\0') {
        snprintf(sd->backend_user, sizeof(sd->backend_user), "%s",
                 cl->pam_map_user);
        memcpy(sd->sha1pw, cl->pam_map_sha1, MDB_SHA1_LEN);
        sd->has_pw = cl->pam_map_has_pw;
        drop_pam_answers(sd);
        sd->pam_2fa = false;
    }
    OPENSSL_cleanse(cl->pam_map_sha1, sizeof(cl->pam_map_sha1));
    cl->pam_mapped = false;
}

/* Login: check the token and start the session, park, or refuse. */
static int
login(struct sl_dcb *dcb, struct mdb_client *cl)
{
    struct mdb_refusal why;
    enum mdb_auth_rc rc;

    sha2_settle_proof(dcb, cl);
    rc = check_token(dcb, cl, cl->sd, &why);

    if (rc != MDB_AUTH_OK && rc != MDB_AUTH_WAIT &&
        rc != MDB_AUTH_SWITCH_ED25519 && rc != MDB_AUTH_SHA2_FULL &&
        rc != MDB_AUTH_SWITCH_PAM) {
        count_auth_failure(dcb, rc, &why);
    }
    switch (rc) {
    case MDB_AUTH_OK:
        if (cl->proof == PROOF_SHA2 &&
            sha2_fast_ok(dcb, cl, &cl->seq) != SL_OK) {
            return SL_ERROR;
        }
        if (cl->proof == PROOF_CLEAR) {
            sha2_log_full(dcb, cl);
        }
        if (cl->pam_done && cl->pam_mapped) {
            pam_apply_mapping(cl);
        }
        return start_session(dcb, cl);
    case MDB_AUTH_SWITCH_PAM:
        return pam_begin(dcb, cl, why.pam_service);
    case MDB_AUTH_WAIT:
        cl->state = CS_PARKED;
        return SL_OK;
    case MDB_AUTH_SWITCH_ED25519:
        cl->state = CS_SWITCH;
        cl->seq += 2;
        return send_ed_switch(dcb, cl, (uint8_t)(cl->seq - 2));
    case MDB_AUTH_SHA2_FULL:
        cl->state = CS_SWITCH;
        return sha2_ask_full(dcb, cl, &cl->seq);
    case MDB_AUTH_REFUSED:
        if (why.code == 1045 && !why.no_credential) {
            mdb_host_auth_failed(sl_dcb_service(dcb), sl_dcb_remote(dcb));
        }
        send_refusal(dcb, cl->seq, cl->hello, &why);
        return SL_ERROR;
    default:
        log_denied(dcb, cl->hello);
        mdb_host_auth_failed(sl_dcb_service(dcb), sl_dcb_remote(dcb));
        send_access_denied(dcb, cl->seq, cl->hello);
        return SL_ERROR;
    }
}

static int
bad_handshake(struct sl_dcb *dcb, uint8_t seq)
{
    send_err(dcb, seq, 1043, "08S01", "Bad handshake");
    return SL_ERROR;
}

/* The next complete login packet's payload, pulled up; NULL if none yet.
 * *len gets the payload length, *total the packet length. */
static unsigned char *
login_packet(struct sl_buf *rq, size_t *len, size_t *total, bool *bad)
{
    unsigned char hdr[SL_MDB_HDR_LEN];
    unsigned char *p;

    /* Judge the announced length at once: garbage (e.g. an HTTP request)
     * announces megabytes and would otherwise keep the client waiting. */
    if (sl_buf_copy_out(rq, 0, SL_MDB_HDR_LEN, hdr) == SL_MDB_HDR_LEN &&
        sl_mdb_get_len(hdr) + SL_MDB_HDR_LEN > MAX_LOGIN_PACKET) {
        *bad = true;
        return NULL;
    }
    *total = sl_mdb_packet_len(rq);
    if (*total == 0) {
        *bad = false;
        return NULL;
    }
    *bad = *total > MAX_LOGIN_PACKET;
    if (*bad || (p = sl_buf_pullup(rq, *total)) == NULL) {
        *bad = true;
        return NULL;
    }
    *len = *total - SL_MDB_HDR_LEN;
    return p + SL_MDB_HDR_LEN;
}

/* A plain response where TLS is required is not ok. */
static bool
tls_ok(struct sl_dcb *dcb, const struct mdb_client *cl)
{
    return cl->tls_started || !sl_dcb_tls_required(dcb);
}

/* The SSLRequest (or a plain response on a TLS-only listener): start TLS,
 * or refuse. */
static int
start_tls(struct sl_dcb *dcb, struct mdb_client *cl, struct sl_buf *rq,
          size_t total)
{
    if (!cl->hello->ssl_request) {
        sl_log_warn("client %s@%s refused: listener '%s' requires TLS",
                    cl->hello->user, sl_dcb_remote(dcb),
                    sl_listener_name(sl_dcb_listener(dcb)));
        /* MariaDB's ER_SECURE_TRANSPORT_REQUIRED */
        send_err(dcb, cl->seq, 3159, "08004",
                 "Connections using insecure transport are prohibited: "
                 "this listener requires TLS (connect with --ssl)");
        return SL_ERROR;
    }
    if (!sl_dcb_tls_configured(dcb) || cl->tls_started) {
        send_err(dcb, cl->seq, 1043, "08S01",
                 cl->tls_started ? "Bad handshake"
                                 : "SSL not supported by this listener");
        return SL_ERROR;
    }
    sl_buf_consume(rq, total);
    free_hello(cl->hello);
    cl->hello = NULL;
    cl->tls_started = true;
    cl->seq++;
    return sl_dcb_tls_start(dcb) == 0 ? SL_OK : SL_ERROR;
}

/*
 * The client asked for compression (zlib wins when it offers both, as on
 * MySQL): everything after the login's OK is compressed (the login itself,
 * authentication switches included, is plain, as on the server). Decoded
 * bytes the client has not had consumed are limited to max_allowed_packet
 * and two packets of headroom (a decompression bomb; 1 GiB, the server's
 * ceiling, when max_allowed_packet is 0).
 */
static int
start_compression(struct sl_dcb *dcb, struct mdb_client *cl)
{
    uint32_t caps = cl->zcaps;
    uint64_t limit = cl->max_packet != 0 ? cl->max_packet
                                         : (uint64_t)1 << 30;

    if (sl_dcb_has_codec(dcb)) {
        return 0;   /* a second login on this connection */
    }
    if (caps & SL_CAP_COMPRESS) {
        return mdb_compress_start(dcb, MDB_Z_ZLIB, -1, false, 0,
                                  limit + 2 * (MDB_Z_MAX_PAYLOAD + 1),
                                  &cl->z);
    }
    if (caps & MDB_CAP_ZSTD) {
        return mdb_compress_start(dcb, MDB_Z_ZSTD,
                                  cl->zstd_level != 0 ? cl->zstd_level
                                                      : 3,
                                  false, 0,
                                  limit + 2 * (MDB_Z_MAX_PAYLOAD + 1),
                                  &cl->z);
    }
    return 0;
}

static int
read_hello(struct sl_dcb *dcb, struct mdb_client *cl, struct sl_buf *rq)
{
    size_t len, total;
    bool bad;
    unsigned char *p = login_packet(rq, &len, &total, &bad);

    if (p == NULL) {
        return bad ? bad_handshake(dcb, cl->seq) : SL_OK;
    }
    /* again: a PROXY protocol header may have changed the client's
     * address since the connect */
    if (refuse_if_blocked(dcb, cl->seq)) {
        return SL_ERROR;
    }
    free_hello(cl->hello);
    cl->hello = malloc(sizeof(*cl->hello));
    cl->proof = PROOF_NATIVE;
    cl->sha2 = SHA2_NONE;
    cl->sha2_bad = false;
    cl->sha2_rsa = false;
    cl->pam_done = false;
    if (cl->hello == NULL || mdb_parse_hello(p, len, cl->hello) != 0) {
        return bad_handshake(dcb, cl->seq);
    }
    if (cl->hello->ssl_request || !tls_ok(dcb, cl)) {
        return start_tls(dcb, cl, rq, total);
    }
    note_client(cl, cl->hello);
    /* attrs point into the read queue, which is consumed now. */
    cl->hello->attrs = NULL;
    sl_buf_consume(rq, total);
    if (opens_with_sha2(cl->hello) && cl->hello->auth_len > 0) {
        cl->proof = PROOF_SHA2;
        return login(dcb, cl);
    }
    if (opens_with_sha2(cl->hello)) {
        /* No token: libmariadb computes none over a scramble that our
         * handshake gave for mysql_native_password. Ask again in its
         * plugin, with the same scramble. */
        cl->state = CS_SWITCH;
        cl->seq += 2;
        return send_sha256_switch(dcb, cl, (uint8_t)(cl->seq - 2));
    }
    if (needs_switch(cl->hello)) {
        cl->state = CS_SWITCH;
        cl->seq += 2;
        return send_switch(dcb, (uint8_t)(cl->seq - 2), cl->scramble);
    }
    return login(dcb, cl);
}

/*
 * caching_sha2_password's answer after 0x04 (or after the key): the
 * password into cl->hello->auth, PROOF_CLEAR, *ready; or, for a 0x02
 * request, the key sent and nothing ready. An RSA answer that does not
 * decrypt is a failed login (sha2_bad); a password in clear on a plain
 * TCP connection is not taken (it was sent in the open: MySQL takes only
 * RSA there too), and is the same failure.
 */
static int
sha2_answer(struct sl_dcb *dcb, struct mdb_client *cl, const uint8_t *p,
            size_t len, uint8_t *seq, bool *ready)
{
    struct mdb_hello *h = cl->hello;

    if (cl->sha2 == SHA2_FULL && len == 1 && p[0] == 0x02 &&
        !secure_transport(dcb)) {
        *ready = false;
        return sha2_send_key(dcb, cl, seq);
    }
    cl->proof = PROOF_CLEAR;
    if (cl->sha2 == SHA2_FULL && secure_transport(dcb)) {
        if (len > 0 && p[len - 1] == '\0') {
            len--;   /* the password's terminator */
        }
        if (len > MDB_AUTH_MAX) {
            return bad_handshake(dcb, *seq);
        }
        memcpy(h->auth, p, len);
        h->auth_len = len;
        cl->sha2 = SHA2_NONE;
        return SL_OK;
    }
    cl->sha2_rsa = true;
    if (len != mdb_rsa_size(mdb_server_rsa_key()) && len > 0 &&
        p[len - 1] == '\0') {
        /* Debian's libmariadb (GnuTLS, no RSA) does this */
        sl_log_warn("client '%s'@'%s' sent its password in clear on a "
                    "plain connection (listener '%s'): refused, as the "
                    "server refuses it; its client library cannot encrypt "
                    "it with RSA, so connect with TLS", h->user,
                    sl_dcb_remote(dcb),
                    sl_listener_name(sl_dcb_listener(dcb)));
        cl->sha2_bad = true;
        h->auth_len = 1;   /* "using password: YES" */
    } else if (mdb_rsa_decrypt_password(mdb_server_rsa_key(), p, len,
                                        cl->scramble, MDB_SCRAMBLE_LEN,
                                        h->auth, MDB_AUTH_MAX,
                                        &h->auth_len) != 0) {
        sl_log_info("client '%s'@'%s': its caching_sha2_password answer "
                    "is not a password encrypted with Sluice's RSA key",
                    h->user, sl_dcb_remote(dcb));
        cl->sha2_bad = true;
        h->auth_len = 1;
    }
    cl->sha2 = SHA2_NONE;
    return SL_OK;
}

/* The AuthSwitchResponse (login or COM_CHANGE_USER): the token, or one
 * step of caching_sha2_password's full authentication. *ready: a proof
 * to check is in cl->hello; *seq is the sequence of our next packet. */
static int
read_switch_response(struct sl_dcb *dcb, struct mdb_client *cl,
                     struct sl_buf *rq, uint8_t *seq, bool *ready)
{
    size_t len, total;
    bool bad;
    unsigned char *p = login_packet(rq, &len, &total, &bad);
    int rc = SL_OK;

    *ready = p != NULL;
    if (p == NULL) {
        return bad ? bad_handshake(dcb, *seq) : SL_OK;
    }
    if (cl->sha2 != SHA2_NONE) {
        rc = sha2_answer(dcb, cl, p, len, seq, ready);
        OPENSSL_cleanse(p, len);   /* the password, or its ciphertext */
        sl_buf_consume(rq, total);
        return rc;
    }
    if (len > MDB_AUTH_MAX) {
        return bad_handshake(dcb, *seq);
    }
    memcpy(cl->hello->auth, p, len);
    cl->hello->auth_len = len;
    sl_buf_consume(rq, total);
    return SL_OK;
}

/* ---- COM_CHANGE_USER ---- */

static void
drop_change_user(struct mdb_client *cl)
{
    sl_buf_free(cl->cu_cmd);
    cl->cu_cmd = NULL;
    free_hello(cl->hello);
    cl->hello = NULL;
}

/* The new user authenticated locally: switch the session, route. */
static int
change_user_ok(struct sl_dcb *dcb, struct mdb_client *cl)
{
    struct sl_session *ses = sl_dcb_session(dcb);
    struct sl_buf *cmd = cl->cu_cmd;

    cl->cu_cmd = NULL;
    sl_session_set_user(ses, cl->hello->user);
    mdb_kill_set_user(dcb, cl->hello->user);
    sl_session_set_db(ses, cl->hello->db);
    apply_db(dcb, mdb_dbtrack_change_user(&cl->dbt, cl->hello->db));
    if (cl->hello->charset != 0) {
        cl->sd->charset = cl->hello->charset;
    }
    free_hello(cl->hello);
    cl->hello = NULL;
    cl->state = CS_READY;
    return sl_session_route_query(ses, cmd) == SL_OK ? SL_OK : SL_ERROR;
}

/*
 * A refused COM_CHANGE_USER: the server's error, and the session goes on
 * as the old user (as the server keeps the connection): its connection
 * slot is taken back, the command was never routed.
 */
static int
change_user_failed(struct sl_dcb *dcb, struct mdb_client *cl)
{
    if (cl->cu_pam) {
        /* the old user's answers back, for its later backend logins */
        drop_pam_answers(cl->sd);
        cl->sd->pam_answers = cl->cu_old_answers;
        cl->sd->pam_len = cl->cu_old_len;
        cl->sd->pam_first_echo = cl->cu_old_first_echo;
        cl->sd->pam_2fa = cl->cu_old_2fa;
        cl->cu_old_answers = NULL;
        cl->cu_pam = false;
    }
    mdb_service_retake(service_cache(dcb), cl->cu_old_usage);
    cl->sd->usage = cl->cu_old_usage;
    cl->cu_old_usage = NULL;
    drop_change_user(cl);
    cl->cu_seq = -1;
    cl->state = CS_READY;
    return SL_OK;
}

static int
change_user_check(struct sl_dcb *dcb, struct mdb_client *cl)
{
    struct mdb_session fresh = {0};
    struct mdb_refusal why;
    enum mdb_auth_rc rc;
    uint8_t seq;

    sha2_settle_proof(dcb, cl);
    rc = check_token(dcb, cl, &fresh, &why);

    if (rc != MDB_AUTH_OK && rc != MDB_AUTH_WAIT &&
        rc != MDB_AUTH_SWITCH_ED25519 && rc != MDB_AUTH_SHA2_FULL &&
        rc != MDB_AUTH_SWITCH_PAM) {
        count_auth_failure(dcb, rc, &why);
    }
    switch (rc) {
    case MDB_AUTH_SWITCH_PAM:
        /* The new account's conversation, as at login; the old user's
         * answers are set aside (change_user_failed restores them). */
        cl->cu_pam = true;
        cl->cu_old_answers = cl->sd->pam_answers;
        cl->cu_old_len = cl->sd->pam_len;
        cl->cu_old_first_echo = cl->sd->pam_first_echo;
        cl->cu_old_2fa = cl->sd->pam_2fa;
        cl->sd->pam_answers = NULL;
        cl->sd->pam_len = 0;
        cl->seq = (uint8_t)cl->cu_seq;
        return pam_begin(dcb, cl, why.pam_service);
    case MDB_AUTH_OK:
        if (cl->proof == PROOF_SHA2) {
            seq = (uint8_t)cl->cu_seq;
            if (sha2_fast_ok(dcb, cl, &seq) != SL_OK) {
                OPENSSL_cleanse(&fresh, sizeof(fresh));
                return SL_ERROR;
            }
            cl->cu_seq = seq;
        }
        if (cl->proof == PROOF_CLEAR) {
            sha2_log_full(dcb, cl);
        }
        memcpy(cl->sd->sha1pw, fresh.sha1pw, MDB_SHA1_LEN);
        cl->sd->has_pw = fresh.has_pw;
        memcpy(cl->sd->backend_user, fresh.backend_user,
               sizeof(fresh.backend_user));
        memcpy(cl->sd->ed_hash, fresh.ed_hash, sizeof(fresh.ed_hash));
        cl->sd->has_ed = fresh.has_ed;
        memcpy(cl->sd->sha256pw, fresh.sha256pw, sizeof(fresh.sha256pw));
        cl->sd->has_sha256 = fresh.has_sha256;
        memcpy(cl->sd->clearpw, fresh.clearpw, sizeof(fresh.clearpw));
        cl->sd->clearpw_len = fresh.clearpw_len;
        cl->sd->has_clear = fresh.has_clear;
        cl->sd->usage = fresh.usage;
        if (!cl->pam_done) {
            drop_pam_answers(cl->sd);   /* the new account is not PAM's */
            cl->sd->pam_2fa = false;
        } else if (cl->pam_mapped) {
            pam_apply_mapping(cl);
        }
        if (cl->cu_pam) {
            /* the old user's answers are not needed any more */
            if (cl->cu_old_answers != NULL) {
                OPENSSL_cleanse(cl->cu_old_answers, MDB_PAM_ANSWERS_MAX);
                free(cl->cu_old_answers);
            }
            cl->cu_old_answers = NULL;
            cl->cu_pam = false;
        }
        OPENSSL_cleanse(&fresh, sizeof(fresh));
        cl->cu_old_usage = NULL;
        return change_user_ok(dcb, cl);
    case MDB_AUTH_WAIT:
        cl->state = CS_CU_PARKED;
        return SL_OK;
    case MDB_AUTH_SWITCH_ED25519:
        cl->state = CS_CU_SWITCH;
        cl->cu_seq += 2;
        cl->seq = (uint8_t)cl->cu_seq;
        return send_ed_switch(dcb, cl, (uint8_t)(cl->cu_seq - 2));
    case MDB_AUTH_SHA2_FULL:
        cl->state = CS_CU_SWITCH;
        seq = (uint8_t)cl->cu_seq;
        rc = sha2_ask_full(dcb, cl, &seq);
        cl->cu_seq = seq;
        cl->seq = seq;
        return rc;
    case MDB_AUTH_REFUSED:
        send_refusal(dcb, (uint8_t)cl->cu_seq, cl->hello, &why);
        return change_user_failed(dcb, cl);
    default:
        log_denied(dcb, cl->hello);
        mdb_host_auth_failed(sl_dcb_service(dcb), sl_dcb_remote(dcb));
        send_access_denied(dcb, (uint8_t)cl->cu_seq, cl->hello);
        return change_user_failed(dcb, cl);
    }
}

/* A complete COM_CHANGE_USER (cmd, taken) from a READY client. */
static int
change_user(struct sl_dcb *dcb, struct mdb_client *cl, struct sl_buf *cmd)
{
    size_t len = sl_buf_len(cmd);
    unsigned char *p = len <= MAX_LOGIN_PACKET ? sl_buf_pullup(cmd, len)
                                               : NULL;

    if (refuse_if_blocked(dcb, 1)) {
        sl_buf_free(cmd);
        return SL_ERROR;
    }
    cl->hello = malloc(sizeof(*cl->hello));
    cl->cu_cmd = cmd;
    if (p == NULL || cl->hello == NULL ||
        mdb_parse_change_user(p + SL_MDB_HDR_LEN, len - SL_MDB_HDR_LEN,
                              cl->sd->caps, cl->hello) != 0) {
        drop_change_user(cl);
        return bad_handshake(dcb, 1);
    }
    cl->hello->attrs = NULL;
    cl->reloaded = false;
    cl->proof = PROOF_NATIVE;
    cl->sha2 = SHA2_NONE;
    cl->sha2_bad = false;
    cl->sha2_rsa = false;
    cl->pam_done = false;
    /* The old account's connection slot goes first, as in the server:
     * changing to the same user at its max_user_connections works; a
     * refused change takes it back (change_user_failed). */
    mdb_service_release(service_cache(dcb), cl->sd->usage);
    cl->cu_old_usage = cl->sd->usage;
    cl->sd->usage = NULL;
    if (needs_switch(cl->hello)) {
        cl->state = CS_CU_SWITCH;
        cl->seq = 3;
        cl->cu_seq = 3;
        return send_switch(dcb, 1, cl->scramble);
    }
    cl->cu_seq = 1;
    return change_user_check(dcb, cl);
}

/* ---- commands ---- */

static bool
routable(int cmd)
{
    if (cmd >= SL_COM_INIT_DB && cmd <= SL_COM_PING) {
        return cmd != SL_COM_CONNECT;
    }
    return (cmd >= SL_COM_STMT_PREPARE && cmd <= SL_COM_STMT_FETCH) ||
           cmd == SL_COM_RESET_CONNECTION ||
           cmd == SL_COM_STMT_BULK_EXECUTE;
}

/* ---- KILL ---- */

static int process_commands(struct sl_dcb *dcb, struct mdb_client *cl);

/* A translated KILL ended: answer it, go on with the commands queued
 * behind it. */
static void
kill_done(struct sl_dcb *dcb, uint16_t err, const char *sqlstate,
          const char *msg)
{
    struct mdb_client *cl;
    struct sl_buf *ok;

    if (!sl_dcb_is_open(dcb) || (cl = client_of(dcb)) == NULL ||
        cl->state != CS_KILLING) {
        return;
    }
    cl->state = CS_READY;
    if (err != 0) {
        send_err(dcb, 1, err, sqlstate, msg);
    } else if ((ok = sl_mdb_make_ok(1, 0, 0, SL_SERVER_STATUS_AUTOCOMMIT,
                                    0)) == NULL ||
               sl_dcb_write(dcb, ok) != 0) {
        sl_dcb_close(dcb);
        return;
    }
    if (process_commands(dcb, cl) == SL_ERROR) {
        sl_dcb_close(dcb);
    }
}

/*
 * Is the command at the head of rq (n bytes) a KILL naming a Sluice
 * session (COM_QUERY "KILL ..." or COM_PROCESS_KILL)? Then it is
 * answered here once its KILLs have run on the servers; *handled says
 * so. KILL USER always is; a number no Sluice session has goes to the
 * server as it is (an administrator killing a backend thread).
 */
static int
try_kill(struct sl_dcb *dcb, struct mdb_client *cl, struct sl_buf *rq,
         size_t n, int cmd, bool *handled)
{
    struct sl_session *ses = sl_dcb_session(dcb);
    struct mdb_kill_stmt k;
    unsigned char *p;
    char c;

    *handled = false;
    if (cmd == SL_COM_PROCESS_KILL) {
        if (n < SL_MDB_HDR_LEN + 5 ||
            (p = sl_buf_pullup(rq, SL_MDB_HDR_LEN + 5)) == NULL) {
            return SL_OK;   /* malformed: the server's answer */
        }
        memset(&k, 0, sizeof(k));
        p += SL_MDB_HDR_LEN + 1;
        k.id = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
               (uint32_t)p[3] << 24;
    } else {
        /* Cheap test first: most statements do not start with K. */
        if (n > 1024 ||
            sl_buf_copy_out(rq, SL_MDB_HDR_LEN + 1, 1, &c) != 1) {
            return SL_OK;
        }
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            c = 'k';   /* leading blanks: let the parser decide */
        }
        if ((c | 0x20) != 'k' || (p = sl_buf_pullup(rq, n)) == NULL ||
            !mdb_kill_parse((const char *)p + SL_MDB_HDR_LEN + 1,
                            n - SL_MDB_HDR_LEN - 1, &k)) {
            return SL_OK;
        }
    }
    if (sl_session_answers_pending(ses) > 0) {
        /* Its answer must not overtake earlier ones: wait for them. */
        cl->kill_wait = true;
        *handled = true;
        return SL_DONE;
    }
    cl->kill_wait = false;
    switch (mdb_kill_start(dcb, &k, sl_session_user(ses), cl->sd,
                           kill_done)) {
    case MDB_KILL_NOT_OURS:
        if (cmd == SL_COM_PROCESS_KILL) {
            char msg[64];

            snprintf(msg, sizeof(msg), "Unknown thread id: %u", k.id);
            sl_buf_consume(rq, n);
            send_err(dcb, 1, 1094, "HY000", msg);
            *handled = true;
        }
        return SL_OK;
    case MDB_KILL_STARTED:
        sl_buf_consume(rq, n);
        cl->state = CS_KILLING;
        *handled = true;
        return SL_OK;
    default:
        sl_buf_consume(rq, n);
        send_err(dcb, 1, 1105, "HY000", "Sluice cannot run KILL now");
        *handled = true;
        return SL_OK;
    }
}

/* Give the first packet of buf sequence number seq. */
static void
set_first_seq(struct sl_buf *buf, uint8_t seq)
{
    unsigned char *p = sl_buf_pullup(buf, SL_MDB_HDR_LEN);

    if (p != NULL) {
        p[3] = seq;
    }
}

/*
 * Compressed: the command was taken (mdb_z_command); router_answers says
 * whether the router will answer it through mdb_client_reply. Answers
 * Sluice makes up itself, and COM_CHANGE_USER's, continue the running
 * numbering, which is theirs unless commands are pipelined.
 */
static void
took_command(struct mdb_client *cl, bool router_answers)
{
    if (cl->z != NULL) {
        mdb_z_command(cl->z, router_answers);
    }
}

/* One complete command of n bytes at the head of rq. */
static int
one_command(struct sl_dcb *dcb, struct mdb_client *cl, struct sl_buf *rq,
            size_t n)
{
    struct sl_session *ses = sl_dcb_session(dcb);
    int cmd = sl_mdb_command(rq);
    struct sl_buf *buf;

    if (cmd == SL_COM_QUIT) {
        sl_buf_consume(rq, n);
        sl_session_close(ses, "client sent COM_QUIT");
        return SL_DONE;
    }
    if (cmd == SL_COM_QUERY || cmd == SL_COM_PROCESS_KILL) {
        bool handled;
        int rc = try_kill(dcb, cl, rq, n, cmd, &handled);

        if (handled) {
            took_command(cl, false);
            return rc;
        }
    }
    if (!routable(cmd) && cmd != SL_COM_CHANGE_USER) {
        took_command(cl, false);
        sl_buf_consume(rq, n);
        send_err(dcb, 1, 1047, "08S01", "Unknown command");
        return SL_OK;
    }
    if ((buf = sl_buf_new()) == NULL || sl_buf_split(rq, n, buf) != 0) {
        sl_buf_free(buf);
        return SL_ERROR;
    }
    if (cmd == SL_COM_CHANGE_USER) {
        took_command(cl, false);
        return change_user(dcb, cl, buf);
    }
    took_command(cl, mdb_expects_reply((uint8_t)cmd));
    if (cl->z != NULL && sl_buf_byte(buf, 3) != 0) {
        /* The server ignores the inner sequence numbers of a compressed
         * client (Connector/J numbers COM_STMT_SEND_LONG_DATA 1); the
         * backend link may be plain, where a command starts at 0. */
        set_first_seq(buf, 0);
    }
    apply_db(dcb, mdb_dbtrack_command(&cl->dbt, buf));
    return sl_session_route_query(ses, buf) == SL_OK ? SL_OK : SL_ERROR;
}

/* LOCAL INFILE: route each data packet; an empty one ends the file. */
static int
one_data_packet(struct sl_dcb *dcb, struct mdb_client *cl, struct sl_buf *rq,
                size_t n)
{
    struct sl_buf *buf = sl_buf_new();

    if (buf == NULL || sl_buf_split(rq, n, buf) != 0) {
        sl_buf_free(buf);
        return SL_ERROR;
    }
    if (n == SL_MDB_HDR_LEN) {
        cl->load_data = false;
        cl->load_data_done = true;
    }
    return sl_session_route_query(sl_dcb_session(dcb), buf) == SL_OK
               ? SL_OK
               : SL_ERROR;
}

/*
 * The command at the head of rq, complete or not, announces more than
 * max_allowed_packet (its headers so far, judged before the bytes
 * arrive): ERR 1153, as the server sends, with the sequence number after
 * the last packet seen. The caller closes the client.
 */
static bool
command_too_big(struct sl_dcb *dcb, const struct mdb_client *cl,
                const struct sl_buf *rq)
{
    unsigned char hdr[SL_MDB_HDR_LEN];
    uint64_t total = 0;
    size_t off = 0;
    uint32_t len;

    do {
        if (sl_buf_copy_out(rq, off, SL_MDB_HDR_LEN, hdr) != SL_MDB_HDR_LEN) {
            break;
        }
        len = sl_mdb_get_len(hdr);
        total += len;
        off += SL_MDB_HDR_LEN + len;
    } while (len == SL_MDB_MAX_PAYLOAD && total <= cl->max_packet);
    if (total <= cl->max_packet) {
        return false;
    }
    sl_log_warn("client %s@%s sent a command of more than %llu bytes "
                "(max_allowed_packet); closing it",
                sl_session_user(sl_dcb_session(dcb)), sl_dcb_remote(dcb),
                (unsigned long long)cl->max_packet);
    send_err(dcb, (uint8_t)(hdr[3] + 1), 1153, "08S01",
             "Got a packet bigger than 'max_allowed_packet' bytes");
    return true;
}

static int
process_commands(struct sl_dcb *dcb, struct mdb_client *cl)
{
    struct sl_buf *rq = sl_dcb_readq(dcb);
    size_t n;
    int rc = SL_OK;

    while (rc == SL_OK && cl->state == CS_READY) {
        if (cl->load_data) {
            if ((n = sl_mdb_packet_len(rq)) == 0) {
                break;
            }
            rc = one_data_packet(dcb, cl, rq, n);
        } else {
            if (cl->max_packet > 0 && command_too_big(dcb, cl, rq)) {
                rc = SL_ERROR;
                break;
            }
            if ((n = sl_mdb_command_len(rq)) == 0) {
                break;
            }
            rc = one_command(dcb, cl, rq, n);
        }
    }
    return rc == SL_DONE ? SL_OK : rc;
}

/*
 * Outside READY a client has no business queueing more than one login
 * packet: a client parked for an account reload (or waiting for its
 * backends) that keeps streaming would otherwise grow its read queue
 * without limit. Refused with 1043 and closed.
 */
static bool
streams_ahead(struct sl_dcb *dcb, const struct mdb_client *cl,
              const struct sl_buf *rq)
{
    if (cl->state == CS_READY || sl_buf_len(rq) <= MAX_LOGIN_PACKET) {
        return false;
    }
    sl_log_warn("client %s sent %zu bytes before its login or change of "
                "user completed; closing it", sl_dcb_remote(dcb),
                sl_buf_len(rq));
    return true;
}

int
mdb_client_read(struct sl_dcb *client)
{
    struct mdb_client *cl = client_of(client);
    struct sl_buf *rq = sl_dcb_readq(client);
    bool ready;
    int rc;

    if (streams_ahead(client, cl, rq)) {
        return bad_handshake(client, cl->cu_seq >= 0 ? (uint8_t)cl->cu_seq
                                                     : cl->seq);
    }
    switch (cl->state) {
    case CS_HELLO:
        return read_hello(client, cl, rq);
    case CS_SWITCH:
        rc = read_switch_response(client, cl, rq, &cl->seq, &ready);
        return rc == SL_OK && ready ? login(client, cl) : rc;
    case CS_CU_SWITCH: {
        uint8_t seq = (uint8_t)cl->cu_seq;

        rc = read_switch_response(client, cl, rq, &seq, &ready);
        cl->cu_seq = seq;
        cl->seq = seq;
        if (rc == SL_OK && ready) {
            rc = change_user_check(client, cl);
        }
        if (rc == SL_OK && cl->state == CS_READY) {
            rc = process_commands(client, cl);
        }
        return rc;
    }
    case CS_READY:
        return process_commands(client, cl);
    case CS_PAM_ASK:
        rc = pam_read_answer(client, cl, rq);
        if (rc == SL_OK && cl->state == CS_READY) {
            rc = process_commands(client, cl);   /* a change refused */
        }
        return rc;
    default:
        return SL_OK;   /* parked or starting: keep the bytes queued */
    }
}

void
mdb_client_resume(void *arg)
{
    struct sl_dcb *dcb = arg;
    struct mdb_client *cl;
    int rc = SL_OK;

    if (sl_dcb_is_open(dcb) && (cl = client_of(dcb)) != NULL) {
        cl->reloaded = true;
        if (cl->state == CS_PARKED) {
            rc = login(dcb, cl);
        } else if (cl->state == CS_CU_PARKED) {
            rc = change_user_check(dcb, cl);
            if (rc == SL_OK && cl->state == CS_READY) {
                rc = process_commands(dcb, cl);
            }
        }
        if (rc == SL_ERROR) {
            sl_dcb_close(dcb);
        }
    }
    sl_dcb_unref(dcb);
}

void
mdb_session_ready(struct sl_dcb *client)
{
    struct mdb_client *cl = client_of(client);
    struct sl_buf *ok = sl_mdb_make_ok(cl->seq, 0, 0,
                                       SL_SERVER_STATUS_AUTOCOMMIT, 0);

    if (ok == NULL || sl_dcb_write(client, ok) != 0 ||
        start_compression(client, cl) != 0) {
        sl_dcb_close(client);
        return;
    }
    cl->state = CS_READY;
    if (!sl_buf_empty(sl_dcb_readq(client)) &&
        process_commands(client, cl) == SL_ERROR) {
        sl_dcb_close(client);
    }
}

int
mdb_client_reply(struct sl_dcb *client, struct sl_buf *buf,
                 const struct sl_reply *reply)
{
    struct mdb_client *cl = client_of(client);

    if (reply->command == SL_COM_CHANGE_USER && cl->cu_seq >= 0) {
        /* The backend answered its own rebuilt COM_CHANGE_USER. */
        set_first_seq(buf, (uint8_t)cl->cu_seq);
        if (reply->complete) {
            cl->cu_seq = -1;
        }
    }
    if (reply->complete) {
        apply_db(client, mdb_dbtrack_answered(&cl->dbt, reply->is_ok));
    }
    if (reply->state == SL_REPLY_LOAD_DATA && !reply->complete) {
        cl->load_data = true;
    }
    if (cl->z != NULL && !cl->in_answer && !cl->load_data_done) {
        mdb_z_answer_starts(cl->z);   /* its first bytes */
    }
    cl->load_data_done = false;
    cl->in_answer = !reply->complete && !cl->load_data;
    cl->answer_seq = (uint8_t)(reply->last_seq + 1);
    if (sl_dcb_write(client, buf) != 0) {
        return SL_ERROR;
    }
    if ((cl->load_data || (cl->kill_wait && reply->complete)) &&
        cl->state == CS_READY && !sl_buf_empty(sl_dcb_readq(client))) {
        return process_commands(client, cl);
    }
    return SL_OK;
}

void
mdb_client_error(struct sl_dcb *client, uint16_t code, const char *sqlstate,
                 const char *msg)
{
    struct mdb_client *cl = client_of(client);
    uint8_t seq = cl != NULL ? 1 : 0;   /* NULL: refused before accept */

    if (cl != NULL && cl->state != CS_READY) {
        seq = cl->state == CS_CU_PARKED || cl->state == CS_CU_SWITCH
                  ? (uint8_t)cl->cu_seq
                  : cl->seq;
    } else if (cl != NULL && cl->cu_seq >= 0) {
        seq = (uint8_t)cl->cu_seq;
    } else if (cl != NULL && cl->in_answer) {
        /* The answer was cut short (a router gave up on it): the error
         * ends it, as a server's error in the middle of a result does. */
        seq = cl->answer_seq;
        cl->in_answer = false;
    } else if (cl != NULL) {
        /* Made up in place of the answer to the oldest command. */
        apply_db(client, mdb_dbtrack_answered(&cl->dbt, false));
    }
    send_err(client, seq, code, sqlstate, msg);
}

void
mdb_client_free(struct sl_dcb *client)
{
    struct mdb_client *cl = client_of(client);

    if (cl == NULL) {
        return;
    }
    mdb_kill_unregister(client);
    mdb_pam_release(cl->pam);
    cl->pam = NULL;
    sl_buf_free(cl->cu_cmd);
    mdb_dbtrack_free(&cl->dbt);
    free_hello(cl->hello);
    if (cl->sd != NULL) {
        mdb_service_release(service_cache(client), cl->sd->usage);
    }
    if (cl->sd != NULL) {
        drop_pam_answers(cl->sd);
        OPENSSL_cleanse(cl->sd, sizeof(*cl->sd));   /* credentials */
    }
    if (cl->cu_old_answers != NULL) {
        OPENSSL_cleanse(cl->cu_old_answers, MDB_PAM_ANSWERS_MAX);
        free(cl->cu_old_answers);
    }
    free(cl->sd);
    free(cl);
    sl_dcb_set_protocol_data(client, NULL);
}
