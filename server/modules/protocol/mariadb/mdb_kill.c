/* SPDX-License-Identifier: Apache-2.0 */
/*
 * KILL across Sluice (see mdb_kill.h): the registry of sessions and their
 * backend threads, the parser of KILL statements, and the kill jobs that
 * log in to a server on a separate connection and send the KILL there.
 *
 *   client: KILL [QUERY|CONNECTION] <sluice id>   (or COM_PROCESS_KILL)
 *     -> registry lookup (global mutex, copies targets)
 *     -> job thread: for each (server, backend thread id) of the target
 *        session: connect, log in as the *killing* user (its SHA1(pw)
 *        and this server's scramble), "KILL [QUERY] <backend id>",
 *        COM_QUIT. The server applies its own permission rules.
 *     -> post the result (OK or the server's error) to the killer's DCB,
 *        and for a connection kill, close the target sessions.
 *   backend closed while a statement runs (kill_on_client_close):
 *     -> the same job with the session's own user, "KILL QUERY <id>",
 *        nobody to answer.
 *
 * Context: the registry is touched at session start/end, backend login
 * and close (mutex, never on the query path); jobs run in their own
 * detached threads with blocking sockets (timeouts of KILL_TIMEOUT_S).
 */
#include <errno.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

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

#define KILL_TIMEOUT_S 5
#define BUCKETS 1024
#define MAX_PACKET 65536

/* ---- registry ---- */

struct kreg_be {
    struct sl_server *srv;
    uint32_t tid;
};

struct kreg {
    uint32_t id;
    struct sl_dcb *client;
    struct sl_service *svc;
    char user[MDB_USER_MAX];
    struct kreg_be *be;
    size_t n, cap;
    struct kreg *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kreg *buckets[BUCKETS];

static struct kreg **
slot_of(uint32_t id)
{
    struct kreg **pp = &buckets[id % BUCKETS];

    while (*pp != NULL && (*pp)->id != id) {
        pp = &(*pp)->next;
    }
    return pp;
}

uint32_t
mdb_kill_id(const struct sl_dcb *client)
{
    /* Bit 30 set: never a server's own thread id in practice, so a KILL
     * naming a backend thread (read from a server's processlist) is
     * never mistaken for a Sluice session. */
    return MDB_KILL_ID_BASE | ((uint32_t)sl_dcb_id(client) &
                               (MDB_KILL_ID_BASE - 1));
}

void
mdb_kill_register(struct sl_dcb *client, const char *user)
{
    struct kreg *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        return;   /* the session just cannot be named by KILL */
    }
    r->id = mdb_kill_id(client);
    r->client = client;
    r->svc = sl_dcb_service(client);
    snprintf(r->user, sizeof(r->user), "%s", user != NULL ? user : "");
    pthread_mutex_lock(&reg_lock);
    r->next = buckets[r->id % BUCKETS];
    buckets[r->id % BUCKETS] = r;
    pthread_mutex_unlock(&reg_lock);
}

void
mdb_kill_set_user(struct sl_dcb *client, const char *user)
{
    struct kreg *r;

    pthread_mutex_lock(&reg_lock);
    if ((r = *slot_of(mdb_kill_id(client))) != NULL &&
        r->client == client) {
        snprintf(r->user, sizeof(r->user), "%s", user != NULL ? user : "");
    }
    pthread_mutex_unlock(&reg_lock);
}

void
mdb_kill_unregister(struct sl_dcb *client)
{
    struct kreg **pp, *r = NULL;

    pthread_mutex_lock(&reg_lock);
    pp = slot_of(mdb_kill_id(client));
    if (*pp != NULL && (*pp)->client == client) {
        r = *pp;
        *pp = r->next;
    }
    pthread_mutex_unlock(&reg_lock);
    if (r != NULL) {
        free(r->be);
        free(r);
    }
}

void
mdb_kill_add_backend(uint32_t id, struct sl_server *srv,
                     uint32_t tid)
{
    struct kreg *r;

    pthread_mutex_lock(&reg_lock);
    r = *slot_of(id);
    if (r != NULL) {
        if (r->n == r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 4;
            struct kreg_be *be = realloc(r->be, cap * sizeof(*be));

            if (be != NULL) {
                r->be = be;
                r->cap = cap;
            }
        }
        if (r->n < r->cap) {
            r->be[r->n].srv = srv;
            r->be[r->n].tid = tid;
            r->n++;
        }
    }
    pthread_mutex_unlock(&reg_lock);
}

void
mdb_kill_remove_backend(uint32_t id, struct sl_server *srv,
                        uint32_t tid)
{
    struct kreg *r;

    pthread_mutex_lock(&reg_lock);
    r = *slot_of(id);
    if (r != NULL) {
        for (size_t i = 0; i < r->n; i++) {
            if (r->be[i].srv == srv && r->be[i].tid == tid) {
                r->be[i] = r->be[--r->n];
                break;
            }
        }
    }
    pthread_mutex_unlock(&reg_lock);
}

/* The user name of a KILL USER spec ('u'@'h', `u`, u@h, "u"). */
static void
spec_user(const char *spec, char *out, size_t cap)
{
    size_t n = 0;
    char quote = 0;

    if (*spec == '\'' || *spec == '`' || *spec == '"') {
        quote = *spec++;
    }
    while (*spec != '\0' && n + 1 < cap) {
        if (quote ? *spec == quote : (*spec == '@' || *spec == ' ')) {
            break;
        }
        out[n++] = *spec++;
    }
    out[n] = '\0';
}

/* ---- jobs ---- */

struct kill_target {
    char name[128];        /* server name, for the log */
    char host[256];
    char sock[108];
    int port;
    bool tls;              /* the server has ssl=true: not supported */
    bool proxy;            /* proxy_protocol=true: send "PROXY UNKNOWN" */
    uint32_t tid;          /* 0: send sql as is (KILL USER) */
};

struct kill_job {
    struct kill_target *t;
    size_t n;
    char verb[40];         /* "KILL QUERY", "KILL HARD CONNECTION" ... */
    char user_spec[MDB_USER_MAX + 64];
    char user[MDB_USER_MAX];
    uint8_t sha1pw[MDB_SHA1_LEN];
    bool has_pw;
    uint8_t ed_hash[MDB_ED25519_HASH_LEN];   /* ed25519 backend login */
    bool has_ed;
    char *pam_answers;     /* a PAM session's answers (a copy), or NULL */
    size_t pam_len;
    bool pam_first_echo;
    bool pam_2fa;
    uint32_t named_id;     /* the Sluice id the client named */
    struct sl_dcb *reply_to;   /* referenced; NULL: nobody waits */
    mdb_kill_done_fn done;
    struct sl_dcb **close;     /* sessions to close on success (refs) */
    size_t nclose;
    /* result */
    uint16_t err;
    char sqlstate[6];
    char msg[512];
};

/* Log in as the session's backends do: its backend account (the client's,
 * or the one user_mapping_file maps it to) with its credential. */
static void
set_credential(struct kill_job *j, const char *user,
               const struct mdb_session *sd)
{
    snprintf(j->user, sizeof(j->user), "%s",
             sd->backend_user[0] != '\0' ? sd->backend_user : user);
    memcpy(j->sha1pw, sd->sha1pw, MDB_SHA1_LEN);
    j->has_pw = sd->has_pw;
    memcpy(j->ed_hash, sd->ed_hash, MDB_ED25519_HASH_LEN);
    j->has_ed = sd->has_ed;
    if (sd->pam_answers != NULL &&
        (j->pam_answers = malloc(sd->pam_len)) != NULL) {
        memcpy(j->pam_answers, sd->pam_answers, sd->pam_len);
        j->pam_len = sd->pam_len;
        j->pam_first_echo = sd->pam_first_echo;
        j->pam_2fa = sd->pam_2fa;
    }
}

static void
job_free(struct kill_job *j)
{
    if (j->pam_answers != NULL) {
        OPENSSL_cleanse(j->pam_answers, j->pam_len);
        free(j->pam_answers);
    }
    for (size_t i = 0; i < j->nclose; i++) {
        sl_dcb_unref(j->close[i]);
    }
    free(j->close);
    free(j->t);
    OPENSSL_cleanse(j, sizeof(*j));   /* its credentials */
    free(j);
}

static int
io_all(int fd, void *buf, size_t len, bool wr)
{
    unsigned char *p = buf;

    while (len > 0) {
        ssize_t n = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);

        if (n <= 0) {
            if (n < 0 && errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int
write_packet(int fd, uint8_t seq, const void *p, size_t len)
{
    unsigned char hdr[4] = {(unsigned char)len, (unsigned char)(len >> 8),
                            (unsigned char)(len >> 16), seq};

    return io_all(fd, hdr, 4, true) == 0 && io_all(fd, (void *)p, len, true) == 0
               ? 0
               : -1;
}

/* One packet into buf[MAX_PACKET]: its length, or -1. */
static long
read_packet(int fd, unsigned char *buf, uint8_t *seq)
{
    unsigned char hdr[4];
    size_t len;

    if (io_all(fd, hdr, 4, false) != 0) {
        return -1;
    }
    len = hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16;
    if (len > MAX_PACKET || io_all(fd, buf, len, false) != 0) {
        return -1;
    }
    *seq = hdr[3];
    return (long)len;
}

static int
connect_to(const struct kill_target *t)
{
    struct timeval tv = {.tv_sec = KILL_TIMEOUT_S};
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai, *a;
    char port[16];
    int fd = -1;

    if (t->sock[0] != '\0') {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", t->sock);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
            if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
                close(fd);
                fd = -1;
            }
        }
        return fd;
    }
    snprintf(port, sizeof(port), "%d", t->port);
    if (getaddrinfo(t->host, port, &hints, &ai) != 0) {
        return -1;
    }
    for (a = ai; a != NULL && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                    a->ai_protocol);
        if (fd < 0) {
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    return fd;
}

/* Keep the server's ERR packet p[len] as the job's result (the first
 * one wins). */
static void
take_err(struct kill_job *j, const unsigned char *p, size_t len)
{
    uint16_t code;
    size_t off = 3;

    if (j->err != 0 || len < 3) {
        return;
    }
    code = (uint16_t)(p[1] | p[2] << 8);
    memcpy(j->sqlstate, "HY000", 6);
    if (len >= 9 && p[3] == '#') {
        memcpy(j->sqlstate, p + 4, 5);
        j->sqlstate[5] = '\0';
        off = 9;
    }
    j->err = code;
    if (code == 1095 && j->named_id != 0) {
        /* The server names its own thread; the client named ours. */
        snprintf(j->msg, sizeof(j->msg), "You are not owner of thread %u",
                 j->named_id);
    } else {
        snprintf(j->msg, sizeof(j->msg), "%.*s", (int)(len - off), p + off);
    }
}

static void
local_err(struct kill_job *j, const char *fmt, const char *name)
{
    if (j->err == 0) {
        j->err = 1105;
        memcpy(j->sqlstate, "HY000", 6);
        snprintf(j->msg, sizeof(j->msg), fmt, name);
    }
}

/* Log in to t as the job's user; 0, or -1 with the job's error set. */
static int
login(struct kill_job *j, const struct kill_target *t, int fd,
      unsigned char *buf)
{
    struct mdb_server_hello h;
    struct mdb_login l = {0};
    uint8_t token[MDB_SHA1_LEN];
    unsigned char out[1024], attrs[128];
    size_t n, alen = 0;
    uint8_t seq;
    long len;

    if ((len = read_packet(fd, buf, &seq)) <= 0 || buf[0] == 0xff ||
        mdb_parse_server_hello(buf, (size_t)len, &h) != 0) {
        if (len > 0 && buf[0] == 0xff) {
            take_err(j, buf, (size_t)len);
        }
        return -1;
    }
    mdb_attrs_put(attrs, sizeof(attrs), &alen, "_client_name", "sluice", 6);
    mdb_attrs_put(attrs, sizeof(attrs), &alen, "program_name", "sluice-kill",
                  11);
    l.caps = (SL_CAP_LONG_PASSWORD | SL_CAP_PROTOCOL_41 |
              SL_CAP_SECURE_CONNECTION | SL_CAP_PLUGIN_AUTH |
              SL_CAP_TRANSACTIONS | SL_CAP_CONNECT_ATTRS) &
             h.caps;
    l.charset = MDB_DEFAULT_CHARSET;
    l.user = j->user;
    l.db = "";
    if (j->has_pw) {
        mdb_native_token(j->sha1pw, h.scramble, token);
        l.token = token;
    }
    l.attrs = attrs;
    l.attrs_len = alen;
    n = mdb_build_login(out, sizeof(out), &l);
    if (n == 0 || write_packet(fd, (uint8_t)(seq + 1), out, n) != 0) {
        return -1;
    }
    struct mdb_pam_replay pam = {.two_factor = j->pam_2fa};

    for (int round = 0; round < 3 + 16; round++) {
        char plugin[MDB_PLUGIN_MAX];
        uint8_t data[512];
        uint8_t sig[MDB_ED25519_SIG_LEN];
        size_t dlen;
        int step = -1;
        const char *a;

        if ((len = read_packet(fd, buf, &seq)) <= 0) {
            return -1;
        }
        if (buf[0] == 0x00) {
            return 0;
        }
        if (buf[0] == 0xff) {
            take_err(j, buf, (size_t)len);
            return -1;
        }
        /* a PAM session: the server's auth_pam gets its answers */
        if (buf[0] == 0xfe &&
            mdb_parse_auth_switch_data(buf, (size_t)len, plugin, data,
                                       sizeof(data), &dlen) == 0) {
            step = strcmp(plugin, MDB_DIALOG_PLUGIN) == 0
                       ? MDB_PAM_SWITCH_DIALOG
                   : strcmp(plugin, MDB_CLEAR_PLUGIN) == 0
                       ? MDB_PAM_SWITCH_CLEAR
                       : -1;
        } else if (pam.dialog && buf[0] != 0xfe) {
            step = MDB_PAM_QUESTION;
            dlen = (size_t)len < sizeof(data) ? (size_t)len : sizeof(data);
            memcpy(data, buf, dlen);
        }
        if (step >= 0) {
            size_t an = 0;

            a = mdb_pam_replay(&pam, j->pam_answers, j->pam_len,
                               j->pam_first_echo, (enum mdb_pam_step)step,
                               data, dlen, &an);
            if (a == NULL ||
                write_packet(fd, (uint8_t)(seq + 1), a, an + 1) != 0) {
                local_err(j, "server '%s' asked for a PAM answer Sluice "
                             "does not have for KILL", t->name);
                return -1;
            }
            continue;
        }
        if (buf[0] == 0xfe &&
            mdb_parse_auth_switch_data(buf, (size_t)len, plugin, data,
                                       sizeof(data), &dlen) == 0 &&
            strcmp(plugin, MDB_ED25519_CLIENT_PLUGIN) == 0 && j->has_ed &&
            dlen == MDB_ED25519_NONCE_LEN) {
            if (mdb_ed25519_sign_hash(j->ed_hash, data, dlen, sig) != 0 ||
                write_packet(fd, (uint8_t)(seq + 1), sig, sizeof(sig)) !=
                    0) {
                return -1;
            }
            continue;
        }
        if (buf[0] != 0xfe ||
            mdb_parse_auth_switch(buf, (size_t)len, plugin, data, &dlen) !=
                0 ||
            strcmp(plugin, MDB_NATIVE_PLUGIN) != 0 ||
            dlen != MDB_SCRAMBLE_LEN) {
            local_err(j, "server '%s' asked for an authentication Sluice "
                         "cannot do for KILL", t->name);
            return -1;
        }
        if (j->has_pw) {
            mdb_native_token(j->sha1pw, data, token);
        }
        if (write_packet(fd, (uint8_t)(seq + 1), token,
                         j->has_pw ? MDB_SHA1_LEN : 0) != 0) {
            return -1;
        }
    }
    return -1;
}

/* Send the job's KILL to one target. */
static void
kill_one(struct kill_job *j, const struct kill_target *t)
{
    unsigned char *buf = malloc(MAX_PACKET);
    char sql[MDB_USER_MAX + 128];
    int fd = -1;
    uint8_t seq;
    long len;
    int n;

    if (buf == NULL) {
        local_err(j, "out of memory killing on server '%s'", t->name);
        return;
    }
    if (t->tid != 0) {
        n = snprintf(sql + 1, sizeof(sql) - 1, "%s %u", j->verb, t->tid);
    } else {
        n = snprintf(sql + 1, sizeof(sql) - 1, "%s USER %s", j->verb,
                     j->user_spec);
    }
    sql[0] = SL_COM_QUERY;
    if (t->tls) {
        /* The kill connection speaks plain text only: never send a login
         * in the clear to a server configured for TLS. */
        local_err(j, "cannot send KILL to server '%s': kill connections to "
                     "servers with ssl=true are not supported", t->name);
        sl_log_warn("%s", j->msg);
    } else if ((fd = connect_to(t)) < 0) {
        local_err(j, "cannot connect to server '%s' to send KILL", t->name);
    } else if (t->proxy &&
               io_all(fd, (unsigned char *)"PROXY UNKNOWN\r\n", 15, true) !=
                   0) {
        local_err(j, "cannot send the PROXY header to server '%s' to send "
                     "KILL", t->name);
    } else if (login(j, t, fd, buf) != 0) {
        local_err(j, "cannot log in to server '%s' to send KILL", t->name);
    } else if (write_packet(fd, 0, sql, (size_t)n + 1) != 0 ||
               (len = read_packet(fd, buf, &seq)) <= 0) {
        local_err(j, "no answer to KILL from server '%s'", t->name);
    } else if (buf[0] == 0xff) {
        /* 1094: the backend thread ended meanwhile; nothing to kill. */
        if (!(t->tid != 0 && len >= 3 && (buf[1] | buf[2] << 8) == 1094)) {
            take_err(j, buf, (size_t)len);
        }
    }
    if (fd >= 0) {
        unsigned char quit = SL_COM_QUIT;

        (void)write_packet(fd, 0, &quit, 1);
        close(fd);
    }
    if (t->tid != 0) {
        sl_log_info("%s %u on server '%s' for '%s': %s", j->verb, t->tid,
                    t->name, j->user, j->err != 0 ? j->msg : "done");
    } else {
        sl_log_info("%s USER %s on server '%s' for '%s': %s", j->verb,
                    j->user_spec, t->name, j->user,
                    j->err != 0 ? j->msg : "done");
    }
    free(buf);
}

static void
close_session(struct sl_dcb *dcb, void *arg)
{
    struct sl_session *ses;

    (void)arg;
    if (sl_dcb_is_open(dcb)) {
        sl_log_info("closing session of client %s: killed",
                    sl_dcb_remote(dcb));
        /* A statement still waits for its answer (its backend's end has
         * not been seen yet): the client gets what the server sends a
         * killed connection, not a bare close (2013, or 2027 from
         * libmariadb). */
        ses = sl_dcb_session(dcb);
        if (ses != NULL && sl_session_answers_pending(ses) > 0) {
            sl_session_send_error(ses, 1927, "70100",
                                  "Connection was killed");
        }
        sl_dcb_close(dcb);
    }
}

static void
deliver(struct sl_dcb *dcb, void *arg)
{
    struct kill_job *j = arg;

    if (j->done != NULL) {
        j->done(dcb, j->err, j->sqlstate, j->msg);
    }
    job_free(j);
}

/* Job threads still running: the module must not be unloaded under them
 * (mdb_kill_wait_jobs, from the module's process_finish). */
static atomic_int jobs_running;

static void *
job_main(void *arg)
{
    struct kill_job *j = arg;
    struct sl_dcb *reply_to = j->reply_to;

    for (size_t i = 0; i < j->n; i++) {
        kill_one(j, &j->t[i]);
    }
    if (j->err == 0) {
        for (size_t i = 0; i < j->nclose; i++) {
            (void)sl_dcb_post(j->close[i], close_session, NULL);
        }
    }
    if (reply_to != NULL) {
        if (sl_dcb_post(reply_to, deliver, j) != 0) {
            job_free(j);
        }
        sl_dcb_unref(reply_to);
    } else {
        job_free(j);
    }
    atomic_fetch_sub(&jobs_running, 1);   /* the last thing it does */
    return NULL;
}

static int
start_job(struct kill_job *j)
{
    pthread_attr_t attr;
    pthread_t th;
    int rc;

    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&jobs_running, 1);
    rc = pthread_create(&th, &attr, job_main, j);
    if (rc != 0) {
        atomic_fetch_sub(&jobs_running, 1);
    }
    pthread_attr_destroy(&attr);
    return rc;
}

void
mdb_kill_wait_jobs(void)
{
    /* Each job is bounded by its sockets' timeouts (KILL_TIMEOUT_S per
     * step and target); wait for them, at most 30 s. */
    for (int i = 0; atomic_load(&jobs_running) > 0; i++) {
        if (i == 3000) {
            sl_log_warn("%d KILL jobs still running at exit",
                        atomic_load(&jobs_running));
            return;
        }
        usleep(10 * 1000);
    }
    usleep(10 * 1000);   /* the last one's return from job_main */
}

static bool
add_target(struct kill_job *j, size_t *cap, struct sl_server *srv,
           uint32_t tid)
{
    struct kill_target *t;
    const char *sock = sl_server_socket(srv);

    if (j->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;

        if ((t = realloc(j->t, ncap * sizeof(*t))) == NULL) {
            return false;
        }
        j->t = t;
        *cap = ncap;
    }
    t = &j->t[j->n++];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", sl_server_name(srv));
    snprintf(t->host, sizeof(t->host), "%s",
             sl_server_address(srv) ? sl_server_address(srv) : "");
    snprintf(t->sock, sizeof(t->sock), "%s", sock != NULL ? sock : "");
    t->port = sl_server_port(srv);
    t->tls = sl_server_params(srv) != NULL &&
             sl_params_bool(sl_server_params(srv), "ssl");
    t->proxy = sl_server_params(srv) != NULL &&
               sl_params_bool(sl_server_params(srv), "proxy_protocol");
    t->tid = tid;
    return true;
}

static bool
add_close(struct kill_job *j, struct sl_dcb *dcb)
{
    struct sl_dcb **v = realloc(j->close, (j->nclose + 1) * sizeof(*v));

    if (v == NULL) {
        return false;
    }
    j->close = v;
    sl_dcb_ref(dcb);
    j->close[j->nclose++] = dcb;
    return true;
}

static void
set_verb(struct kill_job *j, const struct mdb_kill_stmt *k)
{
    snprintf(j->verb, sizeof(j->verb), "KILL%s %s",
             k->hard ? " HARD" : "", k->query ? "QUERY" : "CONNECTION");
}

enum mdb_kill_rc
mdb_kill_start(struct sl_dcb *killer, const struct mdb_kill_stmt *k,
               const char *user, const struct mdb_session *sd,
               mdb_kill_done_fn done)
{
    struct kill_job *j = calloc(1, sizeof(*j));
    size_t cap = 0;
    bool ok = true;
    struct kreg *r;

    if (j == NULL) {
        return MDB_KILL_FAILED;
    }
    set_verb(j, k);
    set_credential(j, user, sd);
    j->done = done;
    if (k->by_user) {
        struct sl_service *svc = sl_dcb_service(killer);
        size_t nsrv = 0;
        struct sl_server *const *srv = sl_service_servers(svc, &nsrv);
        char name[MDB_USER_MAX];

        snprintf(j->user_spec, sizeof(j->user_spec), "%s", k->user_spec);
        spec_user(k->user_spec, name, sizeof(name));
        for (size_t i = 0; ok && srv != NULL && i < nsrv; i++) {
            ok = add_target(j, &cap, srv[i], 0);
        }
        pthread_mutex_lock(&reg_lock);
        for (size_t b = 0; ok && !k->query && b < BUCKETS; b++) {
            for (r = buckets[b]; ok && r != NULL; r = r->next) {
                if (strcmp(r->user, name) == 0 && r->client != killer) {
                    ok = add_close(j, r->client);
                }
            }
        }
        pthread_mutex_unlock(&reg_lock);
    } else {
        pthread_mutex_lock(&reg_lock);
        r = *slot_of(k->id);
        if (r == NULL) {
            pthread_mutex_unlock(&reg_lock);
            job_free(j);
            return MDB_KILL_NOT_OURS;
        }
        j->named_id = k->id;
        if (r->n == 0 && strcmp(r->user, user) != 0) {
            /* No backend whose server could judge: the server's rule for
             * another user's thread without privileges. */
            j->err = 1095;
            memcpy(j->sqlstate, "HY000", 6);
            snprintf(j->msg, sizeof(j->msg),
                     "You are not owner of thread %u", k->id);
        }
        for (size_t i = 0; ok && j->err == 0 && i < r->n; i++) {
            ok = add_target(j, &cap, r->be[i].srv, r->be[i].tid);
        }
        if (ok && j->err == 0 && !k->query && r->client != killer) {
            ok = add_close(j, r->client);
        }
        pthread_mutex_unlock(&reg_lock);
    }
    if (!ok) {
        job_free(j);
        return MDB_KILL_FAILED;
    }
    sl_dcb_ref(killer);
    j->reply_to = killer;
    if (start_job(j) != 0) {
        sl_dcb_unref(killer);
        job_free(j);
        return MDB_KILL_FAILED;
    }
    return MDB_KILL_STARTED;
}

void
mdb_kill_backend_query(struct sl_server *srv, uint32_t tid, const char *user,
                       const struct mdb_session *sd)
{
    struct kill_job *j = calloc(1, sizeof(*j));
    size_t cap = 0;

    if (j == NULL) {
        return;
    }
    snprintf(j->verb, sizeof(j->verb), "KILL QUERY");
    set_credential(j, user, sd);
    if (!add_target(j, &cap, srv, tid) || start_job(j) != 0) {
        sl_log_warn("cannot start KILL QUERY %u on server '%s'", tid,
                    sl_server_name(srv));
        job_free(j);
    }
}
