/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the backend-side state machine of the MariaDB
 * protocol module, driven through its protocol callbacks by a sequence of
 * events.
 *
 * mdb_backend.c is compiled in unchanged (no seam in it) and runs its own
 * code: mdb_backend_init, mdb_backend_read (greeting, login response,
 * AuthSwitchRequest, caching_sha2_password's token and AuthMoreData
 * (fast path, full authentication in clear or with the server's RSA
 * key), the TLS switch, ERR during login, then replies cut
 * by the real tracker of mdb_reply.c, the COM_CHANGE_USER auth switch
 * answered in place, LOCAL INFILE), mdb_backend_write (commands queued
 * before the login and flushed after it, COM_CHANGE_USER rebuilt),
 * mdb_backend_pending, mdb_backend_close and mdb_backend_free. The DCB,
 * the session and the core's sl_backend_* callbacks are defined here (the
 * executable's definitions take precedence over libsluice's).
 * sl_dcb_tls_start behaves as the core's: it refuses (-EBADMSG) when
 * plaintext bytes are already queued behind the greeting.
 *
 * Input: byte 0 configures the server and session (bit 0 ssl=true, bit 1
 * the session has a password, bit 2 a current database, bit 3 the router
 * closes the session on an error answer, bit 4 the session logged in
 * with PAM: two answers to replay to the server's auth_pam, bit 5 the
 * session holds SHA-256 of the password and the password in clear for
 * caching_sha2_password, bit 6 the backend is a unix socket); then
 * events, each an op byte
 * (low 3 bits the kind) and for the kinds carrying data a length byte and
 * that many bytes:
 *   0 server bytes   appended to the read queue, then mdb_backend_read
 *                    (op bit 3: the bytes 300 times over, a flood)
 *   1 command        a packet (seq 0) with those bytes as payload, routed
 *                    with mdb_backend_write (empty: end of LOCAL INFILE)
 *   2 pending        mdb_backend_pending
 *   3 session        toggle the password (bit 3) or database (bit 4)
 *   4 close          mdb_backend_close: end of the sequence
 *   5..7             end of the sequence (the server hangs up)
 *
 * Invariants (abort on violation): everything written to the server is
 * whole packets; no command written before sl_backend_ready; with
 * ssl=true nothing but the SSLRequest is written before TLS starts, and
 * TLS never starts with plaintext queued; ready at most once and never
 * after a failure; answers passed up only after ready, whole packets,
 * never after the DCB closed; pending is never negative.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../server/modules/protocol/mariadb/mdb_backend.c"
#include "fake_kill.h"
#include "fake_compress.h"
#include "fake_cfg.h"

#include "internal.h"

/* What kill_on_client_close and the KILL registry ask about the session
 * (no client: an internal session; no service parameters: off). */
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
    return "fuzz-server";
}

/* No server parameters: compression=false, so the backend is never
 * compressed here (the codec has its own target, fuzz_decompress). */
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

/* A flooding data event repeats its bytes this often: 255 * 300 bytes
 * pass the 64 KiB bounds on what a peer may queue. */
#define FLOOD 300

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fake {
    uint8_t config;
    struct sl_buf rq;            /* the backend DCB's read queue */
    void *proto;                 /* its protocol data */
    bool closed;                 /* dropped by the core */
    bool tls;                    /* sl_dcb_tls_start succeeded */
    bool ready;                  /* sl_backend_ready called */
    bool failed;                 /* sl_backend_failed called */
    unsigned writes;             /* sl_dcb_write calls */
    struct mdb_session sd;       /* the client's login data */
    const char *db;              /* the session's current database */
} f;

/* Opaque stand-ins: mdb_backend.c never dereferences them. */
static char dcb_obj, ses_obj, be_obj;
#define DCB ((struct sl_dcb *)&dcb_obj)
#define BACKEND ((struct sl_backend *)&be_obj)

/* ---- the backend DCB ---- */

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
    return f.config & 1;
}

bool
sl_dcb_is_unix(const struct sl_dcb *d)
{
    return f.config & 64;
}

/* As the core: plaintext queued behind the greeting is an injection. */
int
sl_dcb_tls_start(struct sl_dcb *d)
{
    if (!(f.config & 1) || f.closed) {
        abort();
    }
    if (f.tls) {
        return -EINVAL;
    }
    if (sl_buf_len(&f.rq) > 0) {
        return -EBADMSG;
    }
    f.tls = true;
    return 0;
}

int
sl_dcb_write(struct sl_dcb *d, struct sl_buf *buf)
{
    size_t len = sl_buf_len(buf);
    unsigned char hdr[SL_MDB_HDR_LEN + 2] = {0};

    if (f.closed || len == 0 || sl_mdb_complete_packets_len(buf, NULL) != len ||
        sl_buf_copy_out(buf, 0, SL_MDB_HDR_LEN, hdr) != SL_MDB_HDR_LEN) {
        abort();                /* a partial packet, or after close */
    }
    sl_buf_copy_out(buf, SL_MDB_HDR_LEN, 2, hdr + SL_MDB_HDR_LEN);
    if ((f.config & 1) && !f.tls &&
        (len != SL_MDB_HDR_LEN + 32 ||
         !(hdr[SL_MDB_HDR_LEN + 1] & (SL_CAP_SSL >> 8)))) {
        abort();                /* the login went out in the clear */
    }
    f.writes++;
    sl_buf_free(buf);
    return 0;
}

/* ---- the session ---- */

void *
sl_session_protocol_data(const struct sl_session *s)
{
    return &f.sd;
}

const char *
sl_session_user(const struct sl_session *s)
{
    return "fuzz";
}

const char *
sl_session_db(const struct sl_session *s)
{
    return f.db;
}

/* ---- the core's side of the backend ---- */

void
sl_backend_ready(struct sl_backend *b)
{
    if (f.ready || f.failed || f.closed) {
        abort();
    }
    f.ready = true;
}

void
sl_backend_failed(struct sl_backend *b, struct sl_buf *errpkt,
                  const char *reason)
{
    if (f.closed || reason == NULL) {
        abort();
    }
    f.failed = true;
    f.closed = true;            /* the core drops the backend */
    sl_buf_free(errpkt);
}

int
sl_backend_reply(struct sl_backend *b, struct sl_buf *buf,
                 const struct sl_reply *reply)
{
    size_t len = sl_buf_len(buf);

    if (!f.ready || f.closed || len == 0 ||
        sl_mdb_complete_packets_len(buf, NULL) != len) {
        abort();
    }
    sl_buf_free(buf);
    if (reply->is_err && (f.config & 8)) {
        f.closed = true;        /* the router closed the session */
    }
    return SL_OK;
}

/* ---- the driver ---- */

static void
server_bytes(const uint8_t *p, size_t n, bool flood)
{
    for (int i = flood ? FLOOD : 1; i > 0; i--) {
        sl_buf_append_data(&f.rq, p, n);
    }
    if (mdb_backend_read(DCB) == SL_ERROR) {
        f.closed = true;
    }
}

static void
command(const uint8_t *p, size_t n)
{
    struct sl_buf *buf = sl_mdb_make_packet(0, p, n);
    unsigned before = f.writes;

    if (buf == NULL) {
        abort();
    }
    if (mdb_backend_write(DCB, buf) == SL_ERROR) {
        f.closed = true;
    }
    if (!f.ready && f.writes != before) {
        abort();                /* a command before the login finished */
    }
}

static void
session_change(uint8_t op)
{
    if (op & 8) {
        f.sd.has_pw = !f.sd.has_pw;
    }
    if (op & 16) {
        f.db = f.db[0] != '\0' ? "" : "fuzzdb";
    }
}

/* One event at data[*off]; false at the end of the sequence. */
static bool
event(const uint8_t *data, size_t size, size_t *off)
{
    uint8_t op = data[(*off)++];
    size_t n = 0;

    if ((op & 7) <= 1 && *off < size) {
        n = data[(*off)++];
        n = n < size - *off ? n : size - *off;
    }
    switch (op & 7) {
    case 0:
        server_bytes(data + *off, n, op & 8);
        break;
    case 1:
        command(data + *off, n);
        break;
    case 2:
        if (mdb_backend_pending(DCB) < 0) {
            abort();
        }
        break;
    case 3:
        session_change(op);
        break;
    case 4:
        mdb_backend_close(DCB);
        return false;
    default:
        return false;
    }
    *off += n;
    return !f.closed;
}

/* Every log line is still formatted (user names, packet contents) but
 * goes to /dev/null: the refusals would otherwise flood the output. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    return sl__log_init("/dev/null", SL_LOG_DEBUG);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 1;

    if (size < 1) {
        return 0;
    }
    memset(&f, 0, sizeof(f));
    f.config = data[0];
    f.sd.has_pw = f.config & 2;
    memset(f.sd.sha1pw, 0xa5, sizeof(f.sd.sha1pw));
    f.sd.caps = MDB_SERVER_CAPS;
    f.sd.charset = 33;
    strcpy(f.sd.program_name, "fuzz");
    f.db = f.config & 4 ? "fuzzdb" : "";
    if (f.config & 32) {
        static const char pw[] = "fuzz-secret";

        mdb_sha256_password(pw, strlen(pw), f.sd.sha256pw);
        f.sd.has_sha256 = true;
        memcpy(f.sd.clearpw, pw, sizeof(pw));
        f.sd.clearpw_len = strlen(pw);
        f.sd.has_clear = true;
    }
    if (f.config & 16) {
        static char answers[] = "pam-secret\0" "123456";

        f.sd.pam_answers = answers;
        f.sd.pam_len = sizeof(answers);
    }
    if (mdb_backend_init(DCB, BACKEND) != SL_OK) {
        abort();
    }
    while (off < size && event(data, size, &off)) {
    }
    f.closed = true;
    mdb_backend_free(DCB);
    if (f.proto != NULL) {
        abort();
    }
    sl_buf_reset(&f.rq);
    return 0;
}
