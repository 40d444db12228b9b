/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal contract of the mariadbprotocol module: the per-session data
 * shared by the client and backend sides, the per-service account cache
 * (mdb_users.c), and the entry points each side exports to the module
 * table (mdb_module.c).
 *
 * Context: everything here runs on the worker owning the DCB, except the
 * account cache, which has its own loader thread and a mutex (taken only
 * during authentication, never on the query path).
 */
#ifndef MDB_H
#define MDB_H

#include <sluice/buf-t.h>
#include <sluice/ccdefs.h>
#include <sluice/reply.h>

#include "mdb_parse.h"

struct sl_dcb;
struct sl_service;
struct sl_backend;

#define MDB_DEFAULT_VERSION "5.5.5-10.11.6-MariaDB-sluice"
#define MDB_DEFAULT_CHARSET 45   /* utf8mb4_general_ci */
#define MDB_CLEARPW_MAX 256      /* longest password kept in clear */

/*
 * What the backend side needs to log in on the client's behalf. Owned by
 * the client side (freed in client_free); published to backends through
 * sl_session_set_protocol_data. User and db come from the session.
 */
struct mdb_session {
    uint8_t sha1pw[MDB_SHA1_LEN];   /* SHA1(password), when has_pw */
    bool has_pw;
    /* The backend account when user_mapping_file maps the client's
     * user ("" = the client's own), and for a backend ed25519 login
     * SHA-512(its password) (mdb_ed25519_sign_hash). Wiped with the
     * session (mdb_client_free). */
    char backend_user[MDB_USER_MAX];
    uint8_t ed_hash[MDB_ED25519_HASH_LEN];
    bool has_ed;
    /* A backend's caching_sha2_password: SHA-256(password) for its fast
     * path, and the password itself for its full authentication, when
     * Sluice got them (a password in clear from the client, the cache of
     * SHA-256s, user_mapping_file). Wiped with the session. */
    uint8_t sha256pw[MDB_SHA256_LEN];
    bool has_sha256;
    char clearpw[MDB_CLEARPW_MAX];
    size_t clearpw_len;
    bool has_clear;
    /* A PAM login: the client's answers to the conversation, in order
     * (NUL-separated, mdb_pam_answers_add), replayed to each server's
     * auth_pam; NULL otherwise. Wiped and freed with the session. */
    char *pam_answers;
    size_t pam_len;
    bool pam_first_echo;            /* the first question was echoed */
    bool pam_2fa;                   /* pam_mode=password_2FA: the answers
                                     * are the password and the code,
                                     * given by the prompt's text */
    uint32_t caps;                  /* client caps & MDB_SERVER_CAPS */
    uint32_t ext_caps;              /* MariaDB extended caps, client's &
                                     * the ones offered (MDB_EXT_CAPS) */
    uint8_t charset;
    char program_name[64];          /* client's connect attr, or "" */
    struct mdb_usage *usage;        /* the account's connection slot */
};

/* ---- account cache (mdb_users.c) ---- */

struct mdb_service;

enum mdb_auth_rc {
    MDB_AUTH_OK,
    MDB_AUTH_DENIED,
    MDB_AUTH_WAIT,    /* parked: mdb_client_resume(dcb) will be posted */
    MDB_AUTH_REFUSED, /* right password, but the account may not log in
                         now: send the mdb_refusal's error */
    MDB_AUTH_SWITCH_ED25519, /* ask the client for a client_ed25519
                                signature and check again */
    MDB_AUTH_SHA2_FULL, /* caching_sha2_password: no cached SHA-256 (or
                           a token that does not match it): ask for the
                           full authentication, check the password */
    MDB_AUTH_SWITCH_PAM,     /* run the PAM conversation (service in
                                why->pam_service), then check again with
                                req->pam_done */
};

/* Why a login with the right password is refused, with MariaDB's error. */
struct mdb_refusal {
    uint16_t code;      /* 1045 (REQUIRE not met), 4151, 1862, 1226 */
    char sqlstate[6];
    char msg[256];
    bool unknown_user;  /* MDB_AUTH_DENIED: no account (else: password) */
    bool no_credential; /* right password, but Sluice has no credential
                         * to log in to the servers (msg says why) */
    char pam_service[128]; /* MDB_AUTH_SWITCH_PAM: the account's */
};

/* Per-account connection counts, for MAX_USER_CONNECTIONS and
 * MAX_CONNECTIONS_PER_HOUR (opaque; owned by the service's cache). */
struct mdb_usage;

struct mdb_auth_req {
    const char *user;
    const char *client;            /* peer address text */
    bool is_unix;
    const uint8_t *token;
    size_t token_len;
    const uint8_t *scramble;       /* MDB_SCRAMBLE_LEN bytes */
    bool may_reload;               /* false once a reload was waited for */
    uint32_t caps;                 /* the client's capabilities */
    bool native_ok;                /* the listener's authenticators: */
    bool ed25519_ok;               /* native, ed25519auth */
    bool pam_ok;                   /* PAMAuth */
    bool pam_done;                 /* the PAM conversation for this user
                                    * succeeded: no token to check */
    bool ed25519;                  /* token is a client_ed25519 signature
                                    * of nonce (else a native token) */
    const uint8_t *nonce;          /* MDB_ED25519_NONCE_LEN bytes */
    bool cleartext;                /* token is the password in clear
                                    * (caching_sha2_password's full
                                    * authentication: TLS or RSA) */
    bool sha2;                     /* token is a caching_sha2_password
                                    * fast-path token of scramble */
    bool ed_cleartext_ok;          /* a password in clear may be checked
                                    * against an ed25519 key
                                    * (ed_mode=sha256) */
    const char *map_path;          /* listener's user_mapping_file, or
                                    * NULL */
};

/* Create the cache and start loading accounts in its own thread. */
struct mdb_service *mdb_service_create(struct sl_service *svc);
void mdb_service_free(struct mdb_service *s);
/* json_t * with the cache's counters. */
void *mdb_service_diagnostics(struct mdb_service *s);
/*
 * Check a mysql_native_password login, then what the account requires
 * beyond its password, as the server would: its REQUIRE clause against
 * the client's own TLS (the server only sees Sluice's link), ACCOUNT
 * LOCK, an expired password (refused only when the server disconnects
 * clients that cannot handle one), and its connection limits.
 * With req->ed25519 the token is instead a client_ed25519 signature of
 * req->nonce, checked against the account's ed25519 public key. A native
 * token that does not match an account with an ed25519 alternative on a
 * listener with ed25519auth gives MDB_AUTH_SWITCH_ED25519: ask the
 * client to sign a nonce (or, ed_mode=sha256, for its password:
 * req->cleartext, checked by deriving the public key, which also gives
 * the backend credential SHA-512(password)), then call again.
 * With req->sha2 the token is a caching_sha2_password fast-path token:
 * MDB_AUTH_OK when the service's cache holds SHA256(pw) for the matched
 * native account and the token matches it (the backend credential comes
 * from the cache), else MDB_AUTH_SHA2_FULL: ask for the password and call
 * again with req->cleartext. A password in clear is checked against the
 * native hash first (and then cached), then, with req->ed_cleartext_ok,
 * against the ed25519 key.
 * On MDB_AUTH_OK, the backend credential (sd->sha1pw and sd->has_pw, or
 * sd->ed_hash and sd->has_ed, and sd->backend_user when the listener's
 * user_mapping_file maps the user) and sd->usage (the connection slot
 * taken, or NULL; give it back with mdb_service_release) are set. An
 * ed25519 login that no mapping gives a credential is MDB_AUTH_REFUSED
 * (why->no_credential). On
 * MDB_AUTH_REFUSED, *why says what to send. On MDB_AUTH_WAIT, the cache
 * holds a reference on dcb and posts mdb_client_resume(dcb) (sl_dcb_post)
 * after the next load. Worker-owned caller; takes the cache's mutex
 * briefly.
 */
enum mdb_auth_rc mdb_service_authenticate(struct mdb_service *s,
                                          struct sl_dcb *dcb,
                                          const struct mdb_auth_req *req,
                                          struct mdb_session *sd,
                                          struct mdb_refusal *why);
/* Give back a connection slot from mdb_service_authenticate (NULL: no-op).
 * Any thread; takes the cache's mutex. */
void mdb_service_release(struct mdb_service *s, struct mdb_usage *u);
/* Take back a slot given back by mdb_service_release (a COM_CHANGE_USER
 * that failed keeps its old account), without checking the limits: the
 * session held it before. NULL: no-op. Any thread; the cache's mutex. */
void mdb_service_retake(struct mdb_service *s, struct mdb_usage *u);

/* ---- the process's RSA key (mdb_module.c) ---- */

/* The key pair made at start-up for caching_sha2_password's RSA
 * exchange, and its public half as PEM; NULL before process_init. */
struct evp_pkey_st *mdb_server_rsa_key(void);
const char *mdb_server_rsa_pem(void);

/* ---- client side (mdb_client.c) ---- */

void mdb_client_resume(void *dcb);
int mdb_client_accept(struct sl_dcb *client);
int mdb_client_read(struct sl_dcb *client);
void mdb_session_ready(struct sl_dcb *client);
int mdb_client_reply(struct sl_dcb *client, struct sl_buf *buf,
                     const struct sl_reply *reply);
void mdb_client_error(struct sl_dcb *client, uint16_t code,
                      const char *sqlstate, const char *msg);
void mdb_client_free(struct sl_dcb *client);

/* ---- backend side (mdb_backend.c) ---- */

int mdb_backend_init(struct sl_dcb *dcb, struct sl_backend *b);
int mdb_backend_read(struct sl_dcb *dcb);
int mdb_backend_write(struct sl_dcb *dcb, struct sl_buf *buf);
void mdb_backend_close(struct sl_dcb *dcb);
void mdb_backend_free(struct sl_dcb *dcb);
int mdb_backend_pending(const struct sl_dcb *dcb);
bool mdb_backend_park(struct sl_dcb *dcb);
int mdb_backend_reuse(struct sl_dcb *dcb, struct sl_backend *b);
/* Kernel forwarding ended with a forwarded statement unanswered: count
 * the backend as running one (kill_on_client_close). */
void mdb_backend_forwarded_running(struct sl_dcb *dcb);

/* ---- PAM (mdb_pam.c) ---- */

/*
 * One PAM conversation, run by a helper thread (libpam blocks: its
 * modules may read files, run programs, ask the network). The worker
 * owning dcb is told of each question and of the end through
 * mdb_client_pam_event(dcb, job), posted with sl_dcb_post.
 */
struct mdb_pam_job;

/* Start checking user with PAM service service. password NULL: every
 * prompt is asked of the client (dialog); else (mysql_clear_password)
 * every prompt is answered with it, or with code given
 * (pam_mode=password_2FA) a prompt with "password" in it with password
 * and any other with code (mdb_pam_is_password_prompt). map_pw_file
 * not NULL (pam_backend_map=mariadb; "" for no file): after PAM
 * accepted, the user it ended with and that user's password in the file
 * are kept for mdb_pam_mapped. NULL when the
 * thread cannot be started or too many conversations run
 * (MDB_PAM_MAX_RUNNING). Takes a reference on dcb until the job is
 * freed. Worker. */
struct mdb_pam_job *mdb_pam_start(struct sl_dcb *dcb, const char *service,
                                  const char *user, const char *password,
                                  size_t pw_len, const char *code,
                                  size_t code_len, const char *map_pw_file);
/* pam_backend_map=mariadb, once accepted: the mapped user (into
 * user[cap]) and SHA1 of its password (*has_pw false: none); false when
 * not mapping or not accepted. Worker. */
bool mdb_pam_mapped(struct mdb_pam_job *j, char *user, size_t cap,
                    uint8_t sha1[MDB_SHA1_LEN], bool *has_pw);
/* The pending question (copied into text[cap], NUL-terminated, *echo),
 * marked as asked; false when none waits. Worker. */
bool mdb_pam_question(struct mdb_pam_job *j, char *text, size_t cap,
                      bool *echo);
/* The client's answer to the question asked. Worker. */
void mdb_pam_answer(struct mdb_pam_job *j, const char *a, size_t len);
/* 1 accepted, 0 refused, -1 still running. Worker. */
int mdb_pam_result(struct mdb_pam_job *j);
/* The worker is done with j (the conversation is abandoned if it still
 * runs: its pending question fails). Worker. */
void mdb_pam_release(struct mdb_pam_job *j);
/* Posted to dcb's worker: a question waits, or the conversation ended
 * (mdb_client.c). */
void mdb_client_pam_event(struct sl_dcb *dcb, struct mdb_pam_job *j);

/* ---- blocking hosts after failed logins (mdb_block.c) ---- */

/* The host is blocked for svc: refuse with 1129. Any worker. */
bool mdb_host_blocked(const struct sl_service *svc, const char *host);
/* Count a failed login or COM_CHANGE_USER; blocks the host at
 * max_auth_errors_until_block. Any worker. */
void mdb_host_auth_failed(const struct sl_service *svc, const char *host);

#endif
