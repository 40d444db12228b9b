/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the client side of the protocol module, driven for
 * real. mdb_client.c is compiled in unchanged and runs its own loop --
 * mdb_client_accept, mdb_client_read (handshake response, login, auth
 * switch), mdb_session_ready, process_commands/one_command with COM_QUIT,
 * COM_CHANGE_USER, COM_INIT_DB, "USE db" and unknown commands -- on a
 * byte stream cut into reads of varying sizes. Only what lies around it
 * is faked, by defining the libsluice functions it calls here (the
 * executable's definitions take precedence over the shared library's):
 * the DCB (its read queue, writes, close), the session (create, route,
 * close) and the account check (mdb_service_authenticate).
 *
 * Input: byte 0 the read size (1..64), byte 1 flags (bit 0 denies the
 * login, bit 1 offers TLS, bit 2 a unix socket, bit 3 starts at "session
 * ready": the rest is commands, no handshake), then the client's bytes.
 *
 * Invariants (abort on violation): everything routed is exactly one
 * complete command or packet; everything written to the client is whole
 * packets; nothing is routed before login or after close; a closed
 * client is not read again.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../server/modules/protocol/mariadb/mdb_client.c"
#include "fake_kill.h"
#include "fake_compress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fake {
    struct sl_buf rq;
    void *proto;
    bool closed;
    bool session;
    bool ready;
    uint8_t flags;
} f;

/* Opaque stand-ins: never dereferenced by mdb_client.c. */
static char dcb_obj, ses_obj, svc_obj, mdbsvc_obj, lst_obj;
#define DCB ((struct sl_dcb *)&dcb_obj)

/* ---- PAM and the RSA key: never reached here (the account cache below
 * never asks for a PAM conversation; no key, so an RSA request gets the
 * refusal) ---- */

struct mdb_pam_job *
mdb_pam_start(struct sl_dcb *d, const char *service, const char *user,
              const char *password, size_t pw_len, const char *code,
              size_t code_len, const char *map_pw_file)
{
    return NULL;
}
bool
mdb_pam_mapped(struct mdb_pam_job *j, char *user, size_t cap,
               uint8_t sha1[MDB_SHA1_LEN], bool *has_pw)
{
    return false;
}
bool
mdb_pam_question(struct mdb_pam_job *j, char *text, size_t cap, bool *echo)
{
    return false;
}
void mdb_pam_answer(struct mdb_pam_job *j, const char *a, size_t len) {}
int mdb_pam_result(struct mdb_pam_job *j) { return 0; }
void mdb_pam_release(struct mdb_pam_job *j) {}
struct evp_pkey_st *mdb_server_rsa_key(void) { return NULL; }
const char *mdb_server_rsa_pem(void) { return NULL; }

/* ---- the DCB ---- */

void *sl_dcb_protocol_data(const struct sl_dcb *d) { return f.proto; }
void sl_dcb_set_protocol_data(struct sl_dcb *d, void *p) { f.proto = p; }
struct sl_buf *sl_dcb_readq(struct sl_dcb *d) { return &f.rq; }
struct sl_session *
sl_dcb_session(const struct sl_dcb *d)
{
    return f.session ? (struct sl_session *)&ses_obj : NULL;
}
struct sl_service *
sl_dcb_service(const struct sl_dcb *d)
{
    return (struct sl_service *)&svc_obj;
}
struct sl_listener *
sl_dcb_listener(const struct sl_dcb *d)
{
    return (struct sl_listener *)&lst_obj;
}
const char *sl_listener_name(const struct sl_listener *l) { return "L"; }
/* No listener parameters: the default (native) authenticator. */
const struct sl_params *
sl_listener_params(const struct sl_listener *l)
{
    return NULL;
}
uint64_t sl_dcb_id(const struct sl_dcb *d) { return 1; }
bool sl_dcb_is_open(const struct sl_dcb *d) { return !f.closed; }
bool sl_dcb_is_unix(const struct sl_dcb *d) { return f.flags & 4; }
const char *sl_dcb_remote(const struct sl_dcb *d) { return "127.0.0.1"; }
bool sl_dcb_tls_configured(const struct sl_dcb *d) { return f.flags & 2; }
bool sl_dcb_tls_required(const struct sl_dcb *d) { return false; }
bool sl_dcb_is_tls(const struct sl_dcb *d) { return f.flags & 2; }
int sl_dcb_tls_start(struct sl_dcb *d) { return 0; }
void sl_dcb_unref(struct sl_dcb *d) {}
void sl_dcb_close(struct sl_dcb *d) { f.closed = true; }

int
sl_dcb_write(struct sl_dcb *d, struct sl_buf *buf)
{
    size_t len = sl_buf_len(buf);

    if (len == 0 || sl_mdb_complete_packets_len(buf, NULL) != len) {
        abort();                        /* a partial packet to the client */
    }
    sl_buf_free(buf);
    return 0;
}

/* ---- the service and the session ---- */

const struct sl_params *
sl_service_params(const struct sl_service *s)
{
    return NULL;
}
void *sl_service_protocol_data(const struct sl_service *s)
{
    return &mdbsvc_obj;
}
bool mdb_host_blocked(const struct sl_service *s, const char *h)
{
    return false;
}
void mdb_host_auth_failed(const struct sl_service *s, const char *h) {}

enum mdb_auth_rc
mdb_service_authenticate(struct mdb_service *s, struct sl_dcb *d,
                         const struct mdb_auth_req *req,
                         struct mdb_session *sd, struct mdb_refusal *why)
{
    if (strlen(req->user) > 4096 || req->token_len > 255) {
        abort();                        /* decoded beyond its packet */
    }
    return f.flags & 1 ? MDB_AUTH_DENIED : MDB_AUTH_OK;
}

void
mdb_service_release(struct mdb_service *s, struct mdb_usage *u)
{
}

void
mdb_service_retake(struct mdb_service *s, struct mdb_usage *u)
{
}

struct sl_server *const *
sl_service_servers(const struct sl_service *s, size_t *count)
{
    if (count != NULL) {
        *count = 0;
    }
    return NULL;
}

struct sl_session *
sl_session_create(struct sl_dcb *d)
{
    if (f.session) {
        abort();                        /* a second session */
    }
    f.session = true;
    return (struct sl_session *)&ses_obj;
}
void sl_session_set_user(struct sl_session *s, const char *u) { (void)strlen(u); }
void sl_session_set_db(struct sl_session *s, const char *db) { (void)strlen(db); }
void sl_session_set_protocol_data(struct sl_session *s, void *p) {}
void sl_session_set_client_caps(struct sl_session *s, uint64_t c) {}
void sl_session_close(struct sl_session *s, const char *why) { f.closed = true; }

int
sl_session_route_query(struct sl_session *s, struct sl_buf *buf)
{
    size_t len = sl_buf_len(buf);

    if (!f.ready || f.closed || len < SL_MDB_HDR_LEN ||
        (sl_mdb_command_len(buf) != len && sl_mdb_packet_len(buf) != len)) {
        abort();
    }
    sl_buf_free(buf);
    return SL_OK;
}

/* ---- the driver ---- */

static void
make_ready(void)
{
    if (!f.closed && f.session && !f.ready &&
        client_of(DCB)->state == CS_STARTING) {
        f.ready = true;                 /* the backends have logged in */
        mdb_session_ready(DCB);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 2, step;

    if (size < 2) {
        return 0;
    }
    memset(&f, 0, sizeof(f));
    step = (size_t)data[0] % 64 + 1;
    f.flags = data[1];
    if (mdb_client_accept(DCB) != SL_OK) {
        abort();
    }
    if (f.flags & 8) {                  /* skip the login */
        client_of(DCB)->state = CS_STARTING;
        f.session = true;
        make_ready();
    }
    while (off < size && !f.closed) {
        size_t n = size - off < step ? size - off : step;

        sl_buf_append_data(&f.rq, data + off, n);
        off += n;
        if (mdb_client_read(DCB) == SL_ERROR) {
            f.closed = true;
        }
        make_ready();
    }
    mdb_client_free(DCB);
    if (f.proto != NULL) {
        abort();
    }
    sl_buf_reset(&f.rq);
    return 0;
}
