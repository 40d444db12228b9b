/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel forwarding ("splicing") of a session: once a session has started,
 * its client socket and its one backend socket are handed to a BPF
 * sockhash whose sk_skb verdict program redirects each socket's incoming
 * bytes to the other's egress (bpf/sluice_splice.bpf.c), so queries and
 * answers no longer pass through the proxy process. Sluice keeps both
 * sockets: it still sees either side close (and closes the session),
 * closes the session when its server loses a required role, and reports
 * the forwarded bytes and (approximately) packets from BPF counters.
 *
 * Used by readconnroute (kernel_forwarding=auto). See docs/design.md,
 * "Kernel forwarding", for the quiet point and the limits.
 */
#ifndef SLUICE_SPLICE_H
#define SLUICE_SPLICE_H

#include <stdbool.h>
#include <stdint.h>
#include <sluice/ccdefs.h>

struct sl_session;
struct sl_backend;

/*
 * Can this process forward in the kernel? The first call loads the BPF
 * program (main thread, at startup) and logs once, at notice level, either
 * that kernel forwarding is available or why not (built without BPF
 * support, the kernel refused the program or the maps: missing
 * CAP_BPF/CAP_NET_ADMIN, an old kernel; the verifier log is logged too).
 * *why (if not NULL) gets that reason, a static string, "" when available.
 */
SL_EXPORT bool sl_kernel_forwarding_available(const char **why);

/*
 * Router: splice the session's client with backend b when the session
 * starts (the backend has logged in, the client has not yet had its OK:
 * neither side can be sending). The core does so only if nothing needs to
 * see the bytes: no filter, no TLS on either side, TCP on both sides, no
 * command queued; otherwise (or when the kernel refuses the sockets) the
 * session stays on the user-space path, logged at info level.
 *
 * status_mask/status_ok: when status_mask is not 0, a spliced session is
 * closed with error 1105 once (server status & status_mask) != status_ok,
 * as readconnroute closes a master-only session whose server is demoted
 * (checked when the worker's one-second sweep sees the monitor changed the
 * status; the client gets the error as the answer to its next command).
 * Worker-owned, from new_session.
 */
SL_EXPORT void sl_session_request_splice(struct sl_session *ses,
                                         struct sl_backend *b,
                                         uint32_t status_mask,
                                         uint32_t status_ok);

struct sl_splice_stats {
    bool active;               /* the session is kernel-forwarded now */
    uint64_t client_bytes;     /* client -> server, forwarded by BPF */
    uint64_t client_packets;   /* skbs: approximately packets */
    uint64_t server_bytes;     /* server -> client */
    uint64_t server_packets;
};

/* The session's kernel-forwarding counters; false if it was never
 * spliced. Worker-owned (or under the session's lock). */
SL_EXPORT bool sl_session_splice_stats(const struct sl_session *ses,
                                       struct sl_splice_stats *out);

#endif
