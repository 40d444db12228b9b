/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the client-side state machine of the MariaDB protocol
 * module, driven through its protocol callbacks by a sequence of events.
 *
 * mdb_client.c is compiled in unchanged (no seam in it) and runs its own
 * code: mdb_client_accept, mdb_client_read (HandshakeResponse, SSLRequest,
 * auth switch, commands, COM_CHANGE_USER and its auth switch, LOCAL
 * INFILE data), mdb_client_resume (after an account reload),
 * mdb_session_ready, mdb_client_reply and mdb_client_error. The parsers
 * it calls (mdb_handshake.c, mdb_auth.c, mdb_dbtrack.c) are the real ones
 * from sl_mariadb_parse. What lies around it -- the DCB, the session, the
 * account cache and the host block list -- is defined here: the
 * executable's definitions take precedence over libsluice's, the same
 * seam fuzz_client_packet.c uses. Behind the session sits a fake backend:
 * what the session routes is pushed on a real reply tracker (mdb_reply.c)
 * and "backend bytes" events are cut into answers by that tracker and
 * passed to mdb_client_reply, as mdb_backend.c and the core would.
 *
 * Input: byte 0 configures the listener (bit 0 TLS offered, bit 1 TLS
 * required, bit 2 unix socket, bit 3 a small max_allowed_packet, bit 4
 * the backend negotiated CLIENT_DEPRECATE_EOF, bit 5 an ok verdict first
 * asks for a PAM conversation, bit 6 the PAM thread cannot start, bit 7
 * the listener's PAM is pam_mode=password_2FA with pam_backend_map=mariadb
 * (two answers, then a mapped user)); then
 * events, each an op
 * byte (low 3 bits the kind) and for the kinds carrying data a length
 * byte and that many bytes:
 *   0 client bytes   appended to the read queue, then mdb_client_read
 *                    (op bit 3: the bytes 300 times over, a flood)
 *   1 backend bytes  answers to the routed commands, via the tracker
 *   2 ready          the session's backends logged in: mdb_session_ready
 *   3 verdict        the account cache's next answer (op >> 3: ok, denied,
 *                    wait for a reload, refused with 1045/4151/1226; with
 *                    op bit 7: ok first asks for a client_ed25519
 *                    signature, refused has no backend credential; with
 *                    op bit 5: ok answers a caching_sha2_password
 *                    fast-path token with "perform full authentication",
 *                    after which the client's answers are a password in
 *                    clear (TLS), a 0x02 key request or an RSA answer,
 *                    decrypted with a fixed 1024-bit key)
 *   4 resume         the reload finished: mdb_client_resume; during a
 *                    PAM conversation, its event instead
 *                    (mdb_client_pam_event: a question, or after the
 *                    answer the end, accepted for a non-empty answer)
 *   5 error          a backend failed: mdb_client_error
 *   6 block          toggle the host block (max_auth_errors_until_block)
 *   7 close          the client hangs up: end of the sequence
 *
 * Invariants (abort on violation): everything written to the client is
 * whole packets; everything routed is one complete command (or, during
 * LOCAL INFILE, one packet) and only while the session is ready; one
 * session at most; nothing is read, routed or written after close; every
 * connection slot taken is given back exactly once (ASan catches the
 * rest); the DCB references taken for a reload are dropped by resume;
 * every PAM job started is released exactly once, and an answer handed
 * to it fits MDB_PAM_ANSWER_MAX.
 */
#include <openssl/pem.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../server/modules/protocol/mariadb/mdb_client.c"
#include "fake_kill.h"
#include "fake_compress.h"
#include "fake_cfg.h"
#include "mdb_reply.h"

#include "internal.h"

/* A flooding data event repeats its bytes this often: 255 * 300 bytes
 * pass the 64 KiB bounds on what a peer may queue. */
#define FLOOD 300

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum verdict {
    V_OK,
    V_DENIED,
    V_WAIT,
    V_REFUSED,
};

static struct fake {
    uint8_t config;
    struct sl_buf rq;            /* the client DCB's read queue */
    void *proto;                 /* its protocol data */
    bool closed;                 /* sl_dcb_close or sl_session_close */
    bool session;                /* sl_session_create succeeded */
    bool ready;                  /* mdb_session_ready called */
    bool blocked;                /* mdb_host_blocked answers true */
    enum verdict verdict;        /* next mdb_service_authenticate */
    uint8_t refusal;             /* which error a V_REFUSED sends */
    int refs;                    /* DCB refs held by a parked login */
    int slots;                   /* connection slots taken, not released */
    struct mdb_tracker trk;      /* the fake backend's reply tracker */
    struct sl_buf bq;            /* backend bytes not yet answered */
    bool load_data;              /* routed packets are LOCAL INFILE data */
    uint64_t pending;            /* sl_session_set_answers_pending */
} f;

/* ---- the process's RSA key (mdb_module.c): a fixed 1024-bit test key,
 * so an RSA answer costs little ---- */

static const char RSA_KEY[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIICdgIBADANBgkqhkiG9w0BAQEFAASCAmAwggJcAgEAAoGBAKVeJ23f/9ACX4Gq\n"
    "AIE60HXtcGbaf11X6IJaKIXgmV3AifAckrv9yRDPrsWMT3NQ4loE0EZZAyT5bFgN\n"
    "efl6htPC5VIo5cEPHpmYJtmnPMDEpkDSR+9NgiZ9knj+Yz/lxhmth/OthfNPfV6W\n"
    "7aZ8WblRQYO8ZPQeitb94XuD9ne9AgMBAAECgYB0hQ0/TFBR3vowwPquFCUCkxVa\n"
    "Q6buvJxmDOT0wDcQajRHbbqun7nnEI9TPvRUiq+TQkUG7H1ctirzODuz3/PTa/XM\n"
    "b007hdEvQ5f/3gqAjYvUvrHLeGyaaLuvkRauwHVLyqUKsaWZrItqQ1XpHhgIgpIm\n"
    "D+kKix+tclTd0RjGeQJBANhDaP/i5EohRoVObQ+vgmut+V/VKLHs4dgsS4EtlaxX\n"
    "MtEQT45a50vTngouumfsEhUTz4KNNiKbIX19Jb6Sl98CQQDDwLiJB/Jtv7ou7ygX\n"
    "z2v2HH1GLD9C07VgbyVV4XprcA2zfoqM0nvGm+6/U34aQQXJQ4J50qDVhyaBbrN4\n"
    "09PjAkEAmvEhB0Qd32abyeJ4jOZoAJHyutBTibZ30JNbvT9VntYSmGqhNRK36EHD\n"
    "VvRHpTEje2poH9bgVEbk5a2GH1WT7QJAXBMIOZw9UZX/Exh2uUxdMbQQ0LL7Romi\n"
    "JKvi2dRm6qYYK7d3n+lZQwARenjhNaQj/pj8hCSodgdN+0+Ap3KrlQJAW154wADL\n"
    "v9pkDYxUci5RiLZd0HUdcmhQ99gjDP7YvLQYvTOX6V43HSQndNRBfY6p7nN42JOc\n"
    "2FANOFXKobCOEw==\n"
    "-----END PRIVATE KEY-----\n";
static struct evp_pkey_st *rsa_key;
static char rsa_pem[1024];

struct evp_pkey_st *
mdb_server_rsa_key(void)
{
    return rsa_key;
}

const char *
mdb_server_rsa_pem(void)
{
    return rsa_pem;
}

/* Opaque stand-ins: mdb_client.c never dereferences them. */
static char dcb_obj, ses_obj, svc_obj, mdbsvc_obj, lst_obj, slot_obj;
#define DCB ((struct sl_dcb *)&dcb_obj)

/* ---- the client DCB ---- */

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
    return f.session ? (struct sl_session *)&ses_obj : NULL;
}

struct sl_service *
sl_dcb_service(const struct sl_dcb *d)
{
    return (struct sl_service *)&svc_obj;
}

const char *
sl_service_name(const struct sl_service *s)
{
    return "svc";
}

struct sl_listener *
sl_dcb_listener(const struct sl_dcb *d)
{
    return (struct sl_listener *)&lst_obj;
}

const char *
sl_listener_name(const struct sl_listener *l)
{
    return "fuzz-listener";
}

/* No listener parameters: the defaults (native authenticator, no
 * user_mapping_file); the verdicts decide the rest. Byte 0 bit 7: PAM's
 * pam_mode=password_2FA and pam_backend_map=mariadb (no password file). */
const struct sl_params *
sl_listener_params(const struct sl_listener *l)
{
    static struct sl_params *opts;

    if (!(f.config & 128)) {
        return NULL;
    }
    if (opts == NULL) {
        opts = sl__params_new();
        if (opts == NULL ||
            sl__params_set(opts, "authenticator_options",
                           "pam_mode=password_2FA,pam_backend_map=mariadb",
                           1) != 0) {
            abort();
        }
    }
    return opts;
}

uint64_t
sl_dcb_id(const struct sl_dcb *d)
{
    return 7;
}

/* No codec is ever installed here (fake_compress.h). */
bool
sl_dcb_has_codec(const struct sl_dcb *d)
{
    return false;
}

/* Authentication failures are only counted by the service. */
void
sl_service_auth_failed(struct sl_service *svc, enum sl_auth_failure why)
{
}

bool
sl_dcb_is_open(const struct sl_dcb *d)
{
    return !f.closed;
}

bool
sl_dcb_is_unix(const struct sl_dcb *d)
{
    return f.config & 4;
}

const char *
sl_dcb_remote(const struct sl_dcb *d)
{
    return "192.0.2.1";
}

bool
sl_dcb_tls_configured(const struct sl_dcb *d)
{
    return f.config & 1;
}

bool
sl_dcb_tls_required(const struct sl_dcb *d)
{
    return (f.config & 3) == 3;
}

bool
sl_dcb_is_tls(const struct sl_dcb *d)
{
    return f.config & 1;
}

/* TLS itself is not fuzzed here: the handshake "succeeds" and later
 * bytes stand for the decrypted stream. */
int
sl_dcb_tls_start(struct sl_dcb *d)
{
    if (!(f.config & 1) || f.closed) {
        abort();                /* TLS started where it was not offered */
    }
    return 0;
}

void
sl_dcb_unref(struct sl_dcb *d)
{
    if (--f.refs < 0) {
        abort();                /* dropped a reference nobody took */
    }
}

void
sl_dcb_close(struct sl_dcb *d)
{
    f.closed = true;
}

int
sl_dcb_write(struct sl_dcb *d, struct sl_buf *buf)
{
    size_t len = sl_buf_len(buf);

    if (f.closed || len == 0 || sl_mdb_complete_packets_len(buf, NULL) != len) {
        abort();                /* a partial packet, or after close */
    }
    sl_buf_free(buf);
    return 0;
}

/* ---- service, account cache, host block list ---- */

const struct sl_params *
sl_service_params(const struct sl_service *s)
{
    return NULL;                /* every parameter at its default */
}

void *
sl_service_protocol_data(const struct sl_service *s)
{
    return &mdbsvc_obj;
}

bool
mdb_host_blocked(const struct sl_service *s, const char *h)
{
    return f.blocked;
}

void
mdb_host_auth_failed(const struct sl_service *s, const char *h)
{
}

static void
refuse(struct mdb_refusal *why)
{
    static const uint16_t codes[] = {1045, 4151, 1862, 1226};

    why->code = codes[f.refusal % 4];
    why->no_credential = (f.refusal & 4) != 0;
    strcpy(why->sqlstate, "42000");
    strcpy(why->msg, "refused by the fuzzer");
}

/* ---- a fake PAM thread (mdb_pam.c) ---- */

struct mdb_pam_job {
    int unused;
};

static struct mdb_pam_job pam_obj;
static struct {
    int jobs;                   /* started and not released */
    bool mapping;               /* pam_backend_map=mariadb */
    bool asked;
    bool answered;
    int result;
} fp;

struct mdb_pam_job *
mdb_pam_start(struct sl_dcb *dcb, const char *service, const char *user,
              const char *password, size_t pw_len, const char *code,
              size_t code_len, const char *map_pw_file)
{
    if (f.config & 64) {
        return NULL;
    }
    if (fp.jobs != 0 || (password != NULL && pw_len >= MDB_PAM_ANSWER_MAX) ||
        (code != NULL && code_len >= MDB_PAM_ANSWER_MAX)) {
        abort();                /* one conversation at a time */
    }
    memset(&fp, 0, sizeof(fp));
    fp.jobs = 1;
    fp.mapping = map_pw_file != NULL;
    if (password != NULL) {
        fp.answered = true;
        fp.result = pw_len > 0;
    }
    return &pam_obj;
}

bool
mdb_pam_question(struct mdb_pam_job *j, char *text, size_t cap, bool *echo)
{
    if (fp.jobs != 1 || fp.asked || fp.answered) {
        return false;
    }
    fp.asked = true;
    snprintf(text, cap, "Password: ");
    *echo = false;
    return true;
}

void
mdb_pam_answer(struct mdb_pam_job *j, const char *a, size_t len)
{
    if (fp.jobs != 1 || len >= MDB_PAM_ANSWER_MAX || strlen(a) != len) {
        abort();
    }
    fp.answered = true;
    fp.result = len > 0;
}

int
mdb_pam_result(struct mdb_pam_job *j)
{
    return fp.answered ? fp.result : -1;
}

/* pam_backend_map=mariadb: an accepted conversation ends as "mapped",
 * without a password in the file. */
bool
mdb_pam_mapped(struct mdb_pam_job *j, char *user, size_t cap,
               uint8_t sha1[MDB_SHA1_LEN], bool *has_pw)
{
    if (!fp.mapping || !fp.answered || fp.result != 1) {
        return false;
    }
    snprintf(user, cap, "mapped");
    memset(sha1, 0, MDB_SHA1_LEN);
    *has_pw = false;
    return true;
}

void
mdb_pam_release(struct mdb_pam_job *j)
{
    if (j == NULL) {
        return;
    }
    if (fp.jobs != 1) {
        abort();                /* released twice */
    }
    fp.jobs = 0;
}

enum mdb_auth_rc
mdb_service_authenticate(struct mdb_service *s, struct sl_dcb *d,
                         const struct mdb_auth_req *req,
                         struct mdb_session *sd, struct mdb_refusal *why)
{
    if (f.closed || strlen(req->user) >= MDB_USER_MAX ||
        req->token_len > MDB_AUTH_MAX) {
        abort();                /* decoded beyond its bounds */
    }
    if (req->ed25519 && req->nonce == NULL) {
        abort();                /* a signature needs its nonce */
    }
    if (req->sha2 + req->cleartext + req->ed25519 > 1) {
        abort();                /* one kind of proof at a time */
    }
    if (req->sha2 && req->token_len == 0) {
        abort();                /* no token is an empty password */
    }
    switch (f.verdict) {
    case V_OK:
        if ((f.config & 32) && !req->pam_done) {
            snprintf(why->pam_service, sizeof(why->pam_service), "mysql");
            return MDB_AUTH_SWITCH_PAM;
        }
        if ((f.refusal & 4) && !req->ed25519) {
            return MDB_AUTH_SWITCH_ED25519;
        }
        if ((f.refusal & 1) && req->sha2) {
            return MDB_AUTH_SHA2_FULL;
        }
        sd->usage = (struct mdb_usage *)&slot_obj;
        f.slots++;              /* checked at the end of each input */
        sd->has_pw = req->token_len > 0;
        memset(sd->sha1pw, 0x5a, sizeof(sd->sha1pw));
        return MDB_AUTH_OK;
    case V_WAIT:
        if (req->may_reload) {
            f.refs++;           /* the cache keeps the DCB for resume */
            return MDB_AUTH_WAIT;
        }
        return MDB_AUTH_DENIED;
    case V_REFUSED:
        refuse(why);
        return MDB_AUTH_REFUSED;
    default:
        return MDB_AUTH_DENIED;
    }
}

void
mdb_service_release(struct mdb_service *s, struct mdb_usage *u)
{
    if (u != NULL && --f.slots < 0) {
        abort();                /* given back twice */
    }
}

void
mdb_service_retake(struct mdb_service *s, struct mdb_usage *u)
{
    if (u != NULL) {
        f.slots++;
    }
}

struct sl_server *const *
sl_service_servers(const struct sl_service *s, size_t *count)
{
    if (count != NULL) {
        *count = 0;
    }
    return NULL;
}

/* ---- the session and the fake backend behind it ---- */

struct sl_session *
sl_session_create(struct sl_dcb *d)
{
    if (f.session || f.closed) {
        abort();                /* a second session, or after close */
    }
    f.session = true;
    return (struct sl_session *)&ses_obj;
}

void
sl_session_set_user(struct sl_session *s, const char *u)
{
    (void)strlen(u);
}

void
sl_session_set_db(struct sl_session *s, const char *db)
{
    (void)strlen(db);
}

void
sl_session_set_db_unsure(struct sl_session *s, bool unsure)
{
}

void
sl_session_set_answers_pending(struct sl_session *s, uint64_t n)
{
    f.pending = n;
}

uint64_t
sl_session_answers_pending(const struct sl_session *s)
{
    return f.pending;
}

void
sl_session_set_protocol_data(struct sl_session *s, void *p)
{
}

void
sl_session_set_client_caps(struct sl_session *s, uint64_t c)
{
}

const char *
sl_session_user(const struct sl_session *s)
{
    return "fuzz";
}

void
sl_session_close(struct sl_session *s, const char *why)
{
    f.closed = true;
}

/* What the router would send on: one command, or one LOCAL INFILE
 * packet, pushed on the backend's tracker the way mdb_backend.c does. */
int
sl_session_route_query(struct sl_session *s, struct sl_buf *buf)
{
    size_t len = sl_buf_len(buf);
    int cmd;

    if (!f.ready || f.closed || len < SL_MDB_HDR_LEN) {
        abort();
    }
    if (f.load_data) {
        if (sl_mdb_packet_len(buf) != len) {
            abort();
        }
        f.load_data = len != SL_MDB_HDR_LEN;
    } else {
        if (sl_mdb_command_len(buf) != len) {
            abort();
        }
        cmd = sl_mdb_command(buf);
        if (cmd < 0 || mdb_tracker_expect(&f.trk, (uint8_t)cmd) != 0) {
            sl_buf_free(buf);
            return SL_ERROR;
        }
    }
    sl_buf_free(buf);
    return SL_OK;
}

/* Pass the first n bytes of the backend queue to the client. */
static void
answer(size_t n)
{
    struct sl_buf *chunk = sl_buf_new();

    if (chunk == NULL || sl_buf_split(&f.bq, n, chunk) != 0) {
        abort();
    }
    if (mdb_client_reply(DCB, chunk, &f.trk.reply) == SL_ERROR) {
        f.closed = true;
    }
}

/* Cut the backend's bytes into answers: complete packets only, split
 * where the tracker says an answer is complete. */
static void
backend_replies(void)
{
    unsigned char hdr[SL_MDB_HDR_LEN + MDB_PEEK];
    size_t off = 0, got;
    uint32_t len;

    while (!f.closed) {
        got = sl_buf_copy_out(&f.bq, off, sizeof(hdr), hdr);
        if (got < SL_MDB_HDR_LEN) {
            break;
        }
        len = sl_mdb_get_len(hdr);
        if (off + SL_MDB_HDR_LEN + len > sl_buf_len(&f.bq)) {
            break;
        }
        off += SL_MDB_HDR_LEN + len;
        if (mdb_tracker_packet(&f.trk, len, hdr + SL_MDB_HDR_LEN,
                               got - SL_MDB_HDR_LEN) != MDB_TRK_MORE) {
            answer(off);
            off = 0;
        }
        if (f.trk.reply.state == SL_REPLY_LOAD_DATA) {
            f.load_data = true;
        }
    }
    if (off > 0 && !f.closed) {
        answer(off);
    }
}

/* ---- the driver ---- */

static void
client_bytes(const uint8_t *p, size_t n, bool flood)
{
    for (int i = flood ? FLOOD : 1; i > 0; i--) {
        sl_buf_append_data(&f.rq, p, n);
    }
    if (mdb_client_read(DCB) == SL_ERROR) {
        f.closed = true;
    }
}

static void
session_ready(void)
{
    if (f.session && !f.ready && client_of(DCB)->state == CS_STARTING) {
        f.ready = true;
        mdb_session_ready(DCB);
    }
}

static void
resume(void)
{
    enum client_state st = client_of(DCB)->state;

    if (fp.jobs == 1) {
        mdb_client_pam_event(DCB, &pam_obj);
        return;
    }
    if (f.refs > 0 && (st == CS_PARKED || st == CS_CU_PARKED)) {
        mdb_client_resume(DCB);
    }
}

static void
backend_error(uint8_t code)
{
    static const uint16_t codes[] = {1927, 2013, 1049, 1040};

    if (f.session) {
        mdb_client_error(DCB, codes[code % 4], "HY000", "fuzzed failure");
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
        client_bytes(data + *off, n, op & 8);
        break;
    case 1:
        sl_buf_append_data(&f.bq, data + *off, n);
        backend_replies();
        break;
    case 2:
        session_ready();
        break;
    case 3:
        f.verdict = (enum verdict)((op >> 3) & 3);
        f.refusal = op >> 5;
        break;
    case 4:
        resume();
        break;
    case 5:
        backend_error(op >> 3);
        break;
    case 6:
        f.blocked = !f.blocked;
        break;
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
    BIO *b = BIO_new_mem_buf(RSA_KEY, -1);

    rsa_key = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    BIO_free(b);
    if (rsa_key == NULL ||
        mdb_rsa_public_pem(rsa_key, rsa_pem, sizeof(rsa_pem)) == 0) {
        abort();
    }
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
    memset(&fp, 0, sizeof(fp));
    f.config = data[0];
    mdb_tracker_init(&f.trk, data[0] & 16 ? SL_CAP_DEPRECATE_EOF : 0);
    if (mdb_client_accept(DCB) == SL_OK) {
        if (f.config & 8) {
            client_of(DCB)->max_packet = 64;
        }
        while (off < size && event(data, size, &off)) {
        }
    }
    /* The core closes the DCB; a parked login's reference comes back
     * through mdb_client_resume, which sees the DCB closed. */
    f.closed = true;
    while (f.refs > 0) {
        mdb_client_resume(DCB);
    }
    mdb_client_free(DCB);
    if (f.proto != NULL || f.slots != 0 || fp.jobs != 0) {
        abort();                /* protocol data or a slot leaked */
    }
    sl_buf_reset(&f.rq);
    sl_buf_reset(&f.bq);
    mdb_tracker_free(&f.trk);
    return 0;
}
