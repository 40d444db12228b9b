/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel forwarding of sessions (include/sluice/splice.h): the BPF program
 * from bpf/sluice_splice.bpf.c, built at build time and embedded in
 * libsluice, is loaded once; a spliced session's two sockets go into its
 * sockhash at the session's quiet point (session_started, before the
 * client's OK), and out of it when the session closes.
 *
 * While spliced, the DCBs stay in epoll: the verdict program takes the
 * data before it reaches the receive queue, so an event on them means a
 * close (read returns 0) or, rarely, bytes the program passed (a socket
 * whose peer entry is not there): those are written to the peer as they
 * are (sl__splice_read), never parsed, so the byte stream stays intact.
 *
 * Context: load in the main thread at startup; everything else on the
 * session's worker (under its lock in the shared model). The map updates
 * are syscalls on the spliced session's cold path only.
 */
#define SL_LOG_TAG "splice"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <unistd.h>
#include <jansson.h>

#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/server.h>
#include <sluice/splice.h>

#include "dcb_int.h"
#include "splice_int.h"
#include "stats.h"

#ifdef SLUICE_HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* The BPF object, embedded (SLUICE_BPF_OBJECT is its path at build time). */
__asm__(".pushsection .rodata\n"
        ".balign 8\n"
        "sl_splice_bpf_obj:\n"
        ".incbin \"" SLUICE_BPF_OBJECT "\"\n"
        "sl_splice_bpf_obj_end:\n"
        ".popsection\n");
extern const unsigned char sl_splice_bpf_obj[] __asm__("sl_splice_bpf_obj");
extern const unsigned char sl_splice_bpf_obj_end[]
    __asm__("sl_splice_bpf_obj_end");
#endif

/* Mirrors struct kf_peer of the BPF program. */
struct kf_peer {
    uint64_t peer;
    uint64_t bytes;
    uint64_t packets;
    uint64_t is_client;
    uint64_t last_ns;
    uint64_t rem;
    uint64_t diverted;
    uint64_t div_skip;
    uint64_t div_broken;
    uint64_t part;
    uint64_t part_len;
    uint64_t last_seq;
    uint64_t cmds;
    uint64_t pending;
    uint64_t req_ns;
    uint64_t timed;
    uint64_t sum_ns;
    uint64_t hist[SL_HIST_BUCKETS];
};

/* A service max_allowed_packet below this (the default, and MariaDB's)
 * keeps sessions in user space, where Sluice enforces it; at or above it
 * a kernel-forwarded session is bound by the server's own limit. */
#define SPLICE_MIN_PACKET_LIMIT (16u * 1024 * 1024)
/* Graceful shutdown: a session whose server sent this recently counts as
 * busy (its answer may still be streaming). */
#define SPLICE_STREAMING_NS (200u * 1000 * 1000)

struct sl_splice {
    struct sl_backend *b;
    uint32_t status_mask;
    uint32_t status_ok;
    bool active;
    bool ever;                   /* was spliced at some point */
    bool mapped;                 /* both sockets in the maps (taken back:
                                  * still there, see sl__splice_take_back) */
    bool is_write;               /* the server was Master when spliced */
    /* What of the BPF statement counters went into the statistics
     * (fold): compare-and-swapped, as the sweep may look from another
     * worker in the shared model. */
    uint64_t f_cmds, f_timed, f_sum;
    uint64_t f_hist[SL_HIST_BUCKETS];
    uint64_t ccookie;            /* client socket's cookie */
    uint64_t bcookie;            /* backend socket's cookie */
    struct sl_splice_stats last; /* counters when it was unspliced */
    uint64_t seen_bytes;         /* sweep: counters at the last look */
    uint64_t drain_bytes;        /* drain: counters at the last pass */
    uint64_t stall_bytes;        /* net_write_timeout: server bytes and */
    int stall_outq;              /* the client's unsent bytes when the */
    uint64_t stall_ms;           /* stall began (0: not stalled) */
    bool drain_seen;             /* drain: a pass looked already */
};

static int socks_fd = -1;    /* kf_socks; -1: no kernel forwarding */
/* Sessions kernel-forwarded since start, and now (REST). */
static uint64_t forwarded_total;
static int64_t forwarded_now;
static bool load_tried;
static char unavailable[1024] = "not loaded";

#ifdef SLUICE_HAVE_BPF
static int peers_fd = -1;    /* kf_peers */
static struct bpf_object *kf_obj;
/* libbpf's messages while loading (the verifier log among them). */
static char load_log[8192];
static size_t load_log_len;

static int
libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    int n;

    if (level == LIBBPF_DEBUG || load_log_len >= sizeof(load_log) - 1) {
        return 0;
    }
    n = vsnprintf(load_log + load_log_len, sizeof(load_log) - load_log_len,
                  fmt, ap);
    if (n > 0) {
        load_log_len += (size_t)n;
        if (load_log_len > sizeof(load_log) - 1) {
            load_log_len = sizeof(load_log) - 1;
        }
    }
    return 0;
}

static void
load(void)
{
    struct bpf_object *obj;
    struct bpf_program *prog;
    struct bpf_map *socks, *peers;
    int err;

    libbpf_set_print(libbpf_print);
    obj = bpf_object__open_mem(sl_splice_bpf_obj,
                               (size_t)(sl_splice_bpf_obj_end -
                                        sl_splice_bpf_obj), NULL);
    if (obj == NULL) {
        snprintf(unavailable, sizeof(unavailable),
                 "the embedded BPF object did not open: %s",
                 strerror(errno));
        return;
    }
    err = bpf_object__load(obj);
    prog = bpf_object__find_program_by_name(obj, "kf_verdict");
    socks = bpf_object__find_map_by_name(obj, "kf_socks");
    peers = bpf_object__find_map_by_name(obj, "kf_peers");
    if (err == 0 && (prog == NULL || socks == NULL || peers == NULL)) {
        err = -ENOENT;
    }
    if (err == 0) {
        err = bpf_prog_attach(bpf_program__fd(prog), bpf_map__fd(socks),
                              BPF_SK_SKB_VERDICT, 0);
        if (err != 0) {
            err = -errno;
        }
    }
    if (err != 0) {
        snprintf(unavailable, sizeof(unavailable),
                 "the kernel refused the BPF program or its maps: %s%s",
                 strerror(-err),
                 err == -EPERM || err == -EACCES
                     ? " (needs CAP_BPF and CAP_NET_ADMIN)" : "");
        if (load_log_len > 0) {
            char *save = NULL;

            sl_log_warn("BPF load log (libbpf and the verifier) follows");
            for (char *l = strtok_r(load_log, "\n", &save); l != NULL;
                 l = strtok_r(NULL, "\n", &save)) {
                sl_log_warn("BPF: %s", l);
            }
        }
        bpf_object__close(obj);
        return;
    }
    if (bpf_map__value_size(peers) != sizeof(struct kf_peer)) {
        /* the program and this file disagree: a build error, in effect */
        snprintf(unavailable, sizeof(unavailable),
                 "the BPF map kf_peers has values of %u bytes, Sluice "
                 "expects %zu", bpf_map__value_size(peers),
                 sizeof(struct kf_peer));
        bpf_object__close(obj);
        return;
    }
    kf_obj = obj;
    socks_fd = bpf_map__fd(socks);
    peers_fd = bpf_map__fd(peers);
    unavailable[0] = '\0';
}
#else
static void
load(void)
{
    snprintf(unavailable, sizeof(unavailable),
             "Sluice was built without BPF support (clang and libbpf-dev "
             "were not found at build time)");
}
#endif

bool
sl_kernel_forwarding_available(const char **why)
{
    if (!load_tried) {
        load_tried = true;
        load();
        if (unavailable[0] == '\0') {
            sl_log_notice("kernel forwarding available (BPF sockhash with "
                          "an sk_skb verdict program)");
        } else {
            sl_log_notice("kernel forwarding unavailable, sessions are "
                          "forwarded in user space: %s", unavailable);
        }
    }
    if (why != NULL) {
        *why = unavailable;
    }
    return unavailable[0] == '\0';
}

void
sl_session_request_splice(struct sl_session *ses, struct sl_backend *b,
                          uint32_t status_mask, uint32_t status_ok)
{
    struct sl_splice *sp;

    if (socks_fd < 0 || ses->client == NULL || ses->splice != NULL) {
        return;
    }
    sp = calloc(1, sizeof(*sp));
    if (sp == NULL) {
        return;   /* user space it is */
    }
    sp->b = b;
    sp->status_mask = status_mask;
    sp->status_ok = status_ok;
    ses->splice = sp;
}

static bool
read_peer(uint64_t cookie, struct kf_peer *out)
{
#ifdef SLUICE_HAVE_BPF
    return bpf_map_lookup_elem(peers_fd, &cookie, out) == 0;
#else
    (void)cookie;
    (void)out;
    return false;
#endif
}

/* The counters of both sockets into *st (and the client's whole entry
 * into *c when not NULL; zeroed if it could not be read). */
static void
read_stats_c(const struct sl_splice *sp, struct sl_splice_stats *st,
             struct kf_peer *c)
{
    struct kf_peer p;

    *st = sp->last;
    if (c != NULL) {
        memset(c, 0, sizeof(*c));
    }
    if (!sp->active) {
        return;
    }
    st->active = true;
    if (read_peer(sp->ccookie, &p)) {
        st->client_bytes = p.bytes;
        st->client_packets = p.packets;
        if (c != NULL) {
            *c = p;
        }
    }
    if (read_peer(sp->bcookie, &p)) {
        st->server_bytes = p.bytes;
        st->server_packets = p.packets;
    }
}

static void
read_stats(const struct sl_splice *sp, struct sl_splice_stats *st)
{
    read_stats_c(sp, st, NULL);
}

/* What a counter moved since *f last took it (0 if another thread took
 * it already). */
static uint64_t
take_delta(uint64_t *f, uint64_t now)
{
    uint64_t old = __atomic_load_n(f, __ATOMIC_RELAXED);

    while (now > old) {
        if (__atomic_compare_exchange_n(f, &old, now, false,
                                        __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            return now - old;
        }
    }
    return 0;
}

/* Add what the BPF program counted for the client since the last fold to
 * the statistics: the commands to the server's routed reads or writes
 * (as readconnroute counts them), the request -> first-response-byte
 * times to the service's and the server's response-time histograms.
 * Worker thread (the calling worker's slots). */
static void
fold(struct sl_session *ses, struct sl_splice *sp, const struct kf_peer *c)
{
    struct sl_hist h;
    uint64_t d;

    if (c->is_client == 0 || sp->b == NULL || sp->b->server == NULL) {
        return;   /* not read */
    }
    d = take_delta(&sp->f_cmds, c->cmds);
    if (d > 0) {
        atomic_fetch_add_explicit(sp->is_write ? &sp->b->server->routed_writes
                                               : &sp->b->server->routed_reads,
                                  d, memory_order_relaxed);
    }
    memset(&h, 0, sizeof(h));
    h.count = take_delta(&sp->f_timed, c->timed);
    h.sum_ns = take_delta(&sp->f_sum, c->sum_ns);
    for (int i = 0; i < SL_HIST_BUCKETS; i++) {
        h.bucket[i] = take_delta(&sp->f_hist[i], c->hist[i]);
    }
    if (h.count > 0 && sl__stats_cfg.histograms) {
        sl__stats_obj_add(&ses->service->stats, &h);
        sl__stats_obj_add(&sp->b->server->stats, &h);
    }
}

bool
sl_session_splice_stats(const struct sl_session *ses,
                        struct sl_splice_stats *out)
{
    if (ses->splice == NULL || !ses->splice->ever) {
        return false;
    }
    read_stats(ses->splice, out);
    return true;
}

bool
sl__splice_ever(const struct sl_session *ses)
{
    return ses->splice != NULL && ses->splice->ever;
}

/* Why dcb's socket cannot be spliced now ("" if it can). */
static const char *
dcb_unfit(const struct sl_dcb *dcb)
{
    int inq = 0;

    if (dcb == NULL || dcb->state != DCB_POLLING || dcb->fd < 0) {
        return "connection not open";
    }
    if (dcb->tls != NULL) {
        return "TLS";
    }
    if (dcb->is_unix) {
        return "unix socket";
    }
    if (dcb->codec != NULL) {
        return "protocol compression";
    }
    if (dcb->readq.len > 0 || dcb->writeq.len > 0) {
        return "bytes queued in Sluice";
    }
    if (ioctl(dcb->fd, SIOCINQ, &inq) != 0 || inq != 0) {
        return "bytes waiting in the socket";
    }
    return "";
}

static int
cookie_of(int fd, uint64_t *cookie)
{
    socklen_t len = sizeof(*cookie);

    return getsockopt(fd, SOL_SOCKET, SO_COOKIE, cookie, &len) == 0 ? 0
                                                                     : -errno;
}

#ifdef SLUICE_HAVE_BPF
static void
unmap(struct sl_splice *sp)
{
    /* Peers first: from then on the program passes data to the socket's
     * own queue, where Sluice reads it. */
    bpf_map_delete_elem(peers_fd, &sp->ccookie);
    bpf_map_delete_elem(peers_fd, &sp->bcookie);
    bpf_map_delete_elem(socks_fd, &sp->ccookie);
    bpf_map_delete_elem(socks_fd, &sp->bcookie);
}

/* Both sockets in, then the peer entries that start the redirection.
 * 0 or -errno (nothing left in the maps). */
static int
map(struct sl_splice *sp, int cfd, int bfd)
{
    struct kf_peer cp = {.peer = sp->bcookie, .is_client = 1};
    struct kf_peer bp = {.peer = sp->ccookie};
    uint64_t fd;
    int err = 0;

    fd = (uint64_t)cfd;
    if (bpf_map_update_elem(socks_fd, &sp->ccookie, &fd, BPF_NOEXIST) != 0) {
        return -errno;
    }
    fd = (uint64_t)bfd;
    if (bpf_map_update_elem(socks_fd, &sp->bcookie, &fd, BPF_NOEXIST) != 0 ||
        bpf_map_update_elem(peers_fd, &sp->ccookie, &cp, BPF_ANY) != 0 ||
        bpf_map_update_elem(peers_fd, &sp->bcookie, &bp, BPF_ANY) != 0) {
        err = -errno;
        unmap(sp);
    }
    return err;
}
#else
static void
unmap(struct sl_splice *sp)
{
    (void)sp;
}

static int
map(struct sl_splice *sp, int cfd, int bfd)
{
    (void)sp;
    (void)cfd;
    (void)bfd;
    return -EOPNOTSUPP;
}
#endif

void
sl__splice_started(struct sl_session *ses)
{
    struct sl_splice *sp = ses->splice;
    struct sl_dcb *c = ses->client;
    struct sl_dcb *bd;
    const char *why = "";
    int err;

    if (sp == NULL || sp->active) {
        return;
    }
    bd = sp->b != NULL ? sp->b->dcb : NULL;
    if (ses->nfilters > 0) {
        why = "the service has filters";
    } else if (ses->history != NULL) {
        why = "the session keeps its statements (retain_last_statements)";
    } else if (sl_params_size(sl_service_params(ses->service),
                              "max_allowed_packet") <
               SPLICE_MIN_PACKET_LIMIT) {
        why = "max_allowed_packet below 16Mi is enforced in user space";
    } else if (ses->client_caps & SL_CAP_COMPRESS) {
        why = "protocol compression";   /* the client's, from its OK on */
    } else if (sp->b == NULL || sp->b->state != SL_BACKEND_READY) {
        why = "the backend is not ready";
    } else if (sp->b->server->persistpoolmax > 0) {
        why = "its server pools connections (persistpoolmax)";
    } else if (ses->protocol->backend_pending != NULL && bd != NULL &&
               ses->protocol->backend_pending(bd) > 0) {
        why = "commands are queued for the backend";
    } else if ((why = dcb_unfit(c))[0] != '\0') {
        /* client side: why says it */
    } else if ((why = dcb_unfit(bd))[0] != '\0') {
        /* backend side */
    }
    if (why[0] == '\0') {
        if ((err = cookie_of(c->fd, &sp->ccookie)) != 0 ||
            (err = cookie_of(bd->fd, &sp->bcookie)) != 0 ||
            (err = map(sp, c->fd, bd->fd)) != 0) {
            sl_log_ses_info(ses, "kernel forwarding refused by the kernel "
                            "(%s): forwarding in user space", strerror(-err));
            return;
        }
        sp->active = sp->ever = sp->mapped = true;
        sp->is_write = (sl_server_status(sp->b->server) & SL_SRV_MASTER) != 0;
        __atomic_add_fetch(&forwarded_total, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&forwarded_now, 1, __ATOMIC_RELAXED);
        sl__dcb_set_spliced(c, true);
        sl__dcb_set_spliced(bd, true);
        sl_log_ses_info(ses, "kernel forwarding to server '%s'",
                        sp->b->server->name);
        return;
    }
    sl_log_ses_info(ses, "no kernel forwarding (%s): forwarding in user "
                    "space", why);
}

/* Wait (at most 500 ms) until TCP has been handed every byte the kernel
 * redirected to socket fd: expected in all (Sluice's own writes
 * included). */
static bool
egress_done(int fd, uint64_t expected)
{
    for (int i = 0; i < 5000; i++) {
        struct tcp_info ti;
        socklen_t len = sizeof(ti);

        memset(&ti, 0, sizeof(ti));
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
            len < offsetof(struct tcp_info, tcpi_bytes_retrans) +
                      sizeof(ti.tcpi_bytes_retrans)) {
            return true;   /* cannot tell: an old kernel */
        }
        if (ti.tcpi_bytes_sent - ti.tcpi_bytes_retrans +
                ti.tcpi_notsent_bytes >= expected) {
            return true;
        }
        usleep(100);
    }
    return false;
}

/* The protocol treats the backend as running a statement the kernel
 * forwarded (kill_on_client_close when it closes). */
static void
mark_running(struct sl_session *ses, struct sl_splice *sp)
{
    const struct sl_protocol_ops *p = ses->protocol;

    if (p != NULL && sp->b != NULL && sp->b->dcb != NULL &&
        p->size >= offsetof(struct sl_protocol_ops,
                            backend_forwarded_running) + sizeof(void *) &&
        p->backend_forwarded_running != NULL) {
        p->backend_forwarded_running(sp->b->dcb);
    }
}

/* The session's DCBs leave the spliced event mode; the counters of the
 * last look (sp->last) are final. */
static void
end_active(struct sl_session *ses, struct sl_splice *sp, const char *how)
{
    sp->last.active = false;
    sp->active = false;
    __atomic_sub_fetch(&forwarded_now, 1, __ATOMIC_RELAXED);
    if (ses->client != NULL) {
        sl__dcb_set_spliced(ses->client, false);
    }
    if (sp->b != NULL && sp->b->dcb != NULL) {
        sl__dcb_set_spliced(sp->b->dcb, false);
    }
    sl_log_ses_info(ses, "kernel forwarding ended (%s): %llu bytes (%llu "
                    "skbs) from the client, %llu bytes (%llu skbs) from "
                    "the server", how,
                    (unsigned long long)sp->last.client_bytes,
                    (unsigned long long)sp->last.client_packets,
                    (unsigned long long)sp->last.server_bytes,
                    (unsigned long long)sp->last.server_packets);
}

void
sl__splice_stop(struct sl_session *ses)
{
    struct sl_splice *sp = ses->splice;
    struct kf_peer c;

    if (sp == NULL || !sp->mapped) {
        return;
    }
    if (sp->active) {
        read_stats_c(sp, &sp->last, &c);
        fold(ses, sp, &c);
        if (c.pending > 0) {
            /* the client leaves (or the session is closed) while the
             * server has not started to answer */
            mark_running(ses, sp);
        }
        end_active(ses, sp, "session closing");
    }
    /* Taking the client's socket out of the sockhash drops what the
     * kernel redirected to it but has not sent yet (a killed server's
     * last error packet): wait (briefly) until TCP has it. */
    if (ses->client != NULL && ses->client->fd >= 0 &&
        !egress_done(ses->client->fd,
                     ses->client->bytes_written + sp->last.server_bytes)) {
        sl_log_ses_info(ses, "kernel forwarding: the last bytes from the "
                        "server were not sent within 500 ms");
    }
    unmap(sp);
    sp->mapped = false;
}

int
sl__splice_take_back(struct sl_dcb *client, size_t *skip)
{
    struct sl_session *ses = client->session;
    struct sl_splice *sp = ses != NULL ? ses->splice : NULL;
    struct sl_dcb *bd;
    struct kf_peer c, b;

    *skip = 0;
    if (sp == NULL || !sp->active || sp->b == NULL ||
        (bd = sp->b->dcb) == NULL || !read_peer(sp->ccookie, &c) ||
        !c.diverted) {
        return 0;
    }
#ifdef SLUICE_HAVE_BPF
    /* The server's bytes stop going to the client: from now on they stay
     * with its socket, which Sluice reads. Both sockets stay in the
     * sockhash until the session ends: taking a socket out drops what
     * the kernel still holds for it (bytes passed to it, and bytes
     * redirected to it but not yet sent). */
    memset(&b, 0, sizeof(b));
    if (bpf_map_lookup_and_delete_elem(peers_fd, &sp->bcookie, &b) != 0) {
        (void)read_peer(sp->bcookie, &b);
        bpf_map_delete_elem(peers_fd, &sp->bcookie);
    }
#else
    memset(&b, 0, sizeof(b));
#endif
    sp->last.client_bytes = c.bytes;
    sp->last.client_packets = c.packets;
    sp->last.server_bytes = b.bytes;
    sp->last.server_packets = b.packets;
    fold(ses, sp, &c);
    if (c.pending > 0) {
        mark_running(ses, sp);
    }
    end_active(ses, sp, "a command for Sluice");
    /* Before Sluice writes to either socket, TCP must have what the
     * kernel redirected to it (the redirect is queued and sent by a
     * kernel worker): else Sluice's bytes could overtake them. */
    if (!egress_done(bd->fd, bd->bytes_written + c.bytes) ||
        !egress_done(client->fd, client->bytes_written + b.bytes)) {
        sl_log_ses_error(ses, "kernel forwarding: the kernel did not send "
                         "what it forwarded within 500 ms, closing the "
                         "session");
        return -1;
    }
    if (c.div_broken) {
        sl_log_ses_error(ses, "kernel forwarding: a command Sluice must see "
                         "(KILL, COM_QUIT, COM_CHANGE_USER) had its packet "
                         "header cut between two TCP reads, and the server "
                         "has its start: closing the session");
        return -1;
    }
    *skip = (size_t)c.div_skip;
    return 1;
}

void
sl__splice_lost_answer(struct sl_session *ses, const char *reason)
{
    struct sl_splice *sp = ses->splice;
    struct kf_peer c;
    struct sl_buf *err;
    char text[512];

    if (sp == NULL || !sp->active || ses->client == NULL ||
        !read_peer(sp->ccookie, &c)) {
        return;
    }
    if (c.pending == 0 || c.diverted) {
        return;
    }
    snprintf(text, sizeof(text), "Lost connection to backend server: %s",
             reason != NULL ? reason : "connection closed");
    sl_log_ses_info(ses, "kernel forwarding: the server went away before "
                    "answering a forwarded command: 1927 to the client");
    /* Out of the sockhash first (once TCP has what the kernel forwarded):
     * written through the socket's psock, the error was lost at times. */
    sl__splice_stop(ses);
    /* sequence 1: the answer to the command the kernel forwarded */
    err = sl_mdb_make_err(1, 1927, "70100", text);
    if (err != NULL) {
        (void)sl_dcb_write(ses->client, err);
    }
}

void
sl__splice_counts(uint64_t *total, int64_t *now)
{
    *total = __atomic_load_n(&forwarded_total, __ATOMIC_RELAXED);
    *now = __atomic_load_n(&forwarded_now, __ATOMIC_RELAXED);
}

void
sl__splice_free(struct sl_session *ses)
{
    sl__splice_stop(ses);
    free(ses->splice);
    ses->splice = NULL;
}

struct sl_dcb *
sl__splice_peer(const struct sl_dcb *dcb)
{
    struct sl_session *ses = dcb->session;
    struct sl_splice *sp = ses != NULL ? ses->splice : NULL;

    if (sp == NULL || !sp->active || sp->b == NULL) {
        return NULL;
    }
    return dcb->role == SL_DCB_CLIENT ? sp->b->dcb : ses->client;
}

struct sl_dcb *
sl__splice_backend(const struct sl_session *ses)
{
    const struct sl_splice *sp = ses->splice;

    return sp != NULL && sp->b != NULL ? sp->b->dcb : NULL;
}

int
sl__splice_sweep(struct sl_dcb *client, uint64_t now, char *why, size_t len)
{
    struct sl_session *ses = client->session;
    struct sl_splice *sp = ses != NULL ? ses->splice : NULL;
    const struct sl_service *svc = client->service;
    struct sl_splice_stats st;
    struct kf_peer c;
    int outq = 0;
    uint64_t conn_ms;
    uint64_t write_ms;

    why[0] = '\0';
    /* The caller holds the session's lock (dcb.c's sweep: in the shared
     * model another worker may be running the session otherwise). */
    if (client->state != DCB_POLLING || sp == NULL || !sp->active) {
        return SL__SPLICE_KEEP;
    }
    if (sp->status_mask != 0 && sp->b != NULL &&
        (sl_server_status(sp->b->server) & sp->status_mask) !=
            sp->status_ok) {
        return SL__SPLICE_ROLE_LOST;
    }
    /* The statement counters into the statistics, once a second. */
    read_stats_c(sp, &st, &c);
    fold(ses, sp, &c);
    /* The timeouts a REST PATCH may change meanwhile (runtime.c stores
     * them atomically). */
    conn_ms = svc != NULL ? __atomic_load_n(&svc->connection_timeout_ms,
                                            __ATOMIC_RELAXED) : 0;
    write_ms = svc != NULL ? __atomic_load_n(&svc->net_write_timeout_ms,
                                             __ATOMIC_RELAXED) : 0;
    /* connection_timeout: forwarded bytes are activity too. */
    if (conn_ms != 0) {
        if (st.client_bytes + st.server_bytes != sp->seen_bytes) {
            sp->seen_bytes = st.client_bytes + st.server_bytes;
            client->last_read_ms = now;
        }
    }
    /* net_write_timeout: the kernel queues what the client does not
     * read in the client socket's send queue (SIOCOUTQ); no progress is
     * a send queue that neither shrinks nor lets more server bytes in. */
    if (write_ms != 0) {
        if (ioctl(client->fd, SIOCOUTQ, &outq) != 0 || outq <= 0) {
            sp->stall_ms = 0;
        } else if (sp->stall_ms == 0 || outq != sp->stall_outq ||
                   st.server_bytes != sp->stall_bytes) {
            sp->stall_ms = now;
            sp->stall_outq = outq;
            sp->stall_bytes = st.server_bytes;
        } else if (now - sp->stall_ms > write_ms) {
            snprintf(why, len, "no write progress for %llu s "
                     "(net_write_timeout)",
                     (unsigned long long)(now - sp->stall_ms) / 1000);
            return SL__SPLICE_TIMED_OUT;
        }
    }
    return SL__SPLICE_KEEP;
}

void
sl__splice_role_lost(struct sl_dcb *client)
{
    struct sl_session *ses = client->session;
    struct sl_splice *sp = ses != NULL ? ses->splice : NULL;
    struct sl_buf *err;
    char msg[512];

    if (sp == NULL || !sp->active ||
        ses->state == SL_SESSION_CLOSING || sp->b == NULL ||
        (sl_server_status(sp->b->server) & sp->status_mask) ==
            sp->status_ok) {
        return;
    }
    snprintf(msg, sizeof(msg), "Server '%s' is no longer the master of "
             "service '%s', closing the session", sp->b->server->name,
             ses->service->name);
    sl_log_ses_warn(ses, "%s", msg);
    sl__splice_stop(ses);
    /* The answer to the client's next command (sequence 1): what the
     * user-space path sends when that command arrives. */
    err = sl_mdb_make_err(1, 1105, "HY000", msg);
    if (err != NULL) {
        (void)sl_dcb_write(client, err);
    }
    sl_session_close(ses, msg);
}

bool
sl__splice_drain_busy(const struct sl_dcb *client)
{
    struct sl_splice *sp = client->session->splice;
    struct kf_peer c, b;
    struct timespec ts;
    uint64_t now_ns;

    if (sp == NULL || !sp->active || !read_peer(sp->ccookie, &c) ||
        !read_peer(sp->bcookie, &b)) {
        return false;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* bpf_ktime_get_ns's clock */
    now_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    /* The client sent something after the server last did (a statement
     * waits for its answer), or the server sent within the last
     * SPLICE_STREAMING_NS (an answer may still be streaming). */
    return c.pending > 0 || c.last_ns > b.last_ns ||
           (b.last_ns != 0 && now_ns - b.last_ns < SPLICE_STREAMING_NS);
}

void
sl__splice_finish(void)
{
#ifdef SLUICE_HAVE_BPF
    if (kf_obj != NULL) {
        bpf_object__close(kf_obj);   /* detaches the program, frees maps */
        kf_obj = NULL;
    }
    peers_fd = -1;
#endif
    socks_fd = -1;
}
