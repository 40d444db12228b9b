/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Descriptor control blocks: one per socket (listener, client, backend,
 * internal). Modules see DCBs through this opaque interface.
 *
 * State machine:
 *
 *     ALLOC --add to poll--> POLLING --sl_dcb_close()--> CLOSED (zombie)
 *                                                           |
 *                      every worker passed its poll loop -> FREED
 *
 * Context: worker-owned. Only the worker processing the DCB touches it
 * (in the shared event model, the one currently processing it). Another
 * thread that must keep a pointer takes a reference (sl_dcb_ref) and
 * checks sl_dcb_is_open() when it comes back through sl_worker_post().
 */
#ifndef SLUICE_DCB_H
#define SLUICE_DCB_H

#include <sluice/buf-t.h>
#include <sluice/ccdefs.h>

struct sl_dcb;
struct sl_session;
struct sl_service;
struct sl_listener;
struct sl_server;
struct sl_worker;
struct sl_backend;

enum sl_dcb_role {
    SL_DCB_LISTENER,
    SL_DCB_CLIENT,
    SL_DCB_BACKEND,
    SL_DCB_INTERNAL,
};

/*
 * Queue a chain for sending; takes ownership of buf. The chain is appended
 * to the write queue's tail and sent at once as far as the kernel takes it;
 * the rest waits for EPOLLOUT. 0, or -EPIPE if the DCB is closed (buf is
 * freed either way).
 */
SL_EXPORT int sl_dcb_write(struct sl_dcb *dcb, struct sl_buf *buf);
/*
 * Close: stop I/O now, remove from polling and free later. Queued output is
 * flushed best-effort (non-blocking). Never blocks; safe to call twice.
 * Closing a client DCB closes its session; closing a backend DCB is
 * reported to the router through sl_backend_failed() unless the router
 * closed it itself.
 */
SL_EXPORT void sl_dcb_close(struct sl_dcb *dcb);
SL_EXPORT bool sl_dcb_is_open(const struct sl_dcb *dcb);
/* References keep the memory (not the connection) alive. Any thread. */
SL_EXPORT void sl_dcb_ref(struct sl_dcb *dcb);
SL_EXPORT void sl_dcb_unref(struct sl_dcb *dcb);
/*
 * Run fn(dcb, arg) on the DCB's worker, soon, as if it were an event of
 * the DCB: in the shared event model its session's lock is held, so fn
 * may touch the session, its router and the DCB's protocol state. The
 * DCB is referenced until fn has run; fn is called even if the DCB has
 * closed meanwhile (check sl_dcb_is_open) so it can free arg. Any
 * thread. 0, or -ENOMEM (fn is then never called).
 */
typedef void (*sl_dcb_fn)(struct sl_dcb *dcb, void *arg);
SL_EXPORT int sl_dcb_post(struct sl_dcb *dcb, sl_dcb_fn fn, void *arg);

/* The read queue: bytes received and not yet consumed by the protocol. The
 * protocol consumes (sl_buf_consume/split) what it has handled. */
SL_EXPORT struct sl_buf *sl_dcb_readq(struct sl_dcb *dcb);
SL_EXPORT size_t sl_dcb_writeq_len(const struct sl_dcb *dcb);

SL_EXPORT enum sl_dcb_role sl_dcb_role(const struct sl_dcb *dcb);
SL_EXPORT int sl_dcb_fd(const struct sl_dcb *dcb);
SL_EXPORT uint64_t sl_dcb_id(const struct sl_dcb *dcb);
SL_EXPORT struct sl_worker *sl_dcb_worker(const struct sl_dcb *dcb);

/* The protocol's per-connection state. */
SL_EXPORT void *sl_dcb_protocol_data(const struct sl_dcb *dcb);
SL_EXPORT void sl_dcb_set_protocol_data(struct sl_dcb *dcb, void *data);
SL_EXPORT struct sl_session *sl_dcb_session(const struct sl_dcb *dcb);
/* Client DCBs: the listener and service they came in on. */
SL_EXPORT struct sl_listener *sl_dcb_listener(const struct sl_dcb *dcb);
SL_EXPORT struct sl_service *sl_dcb_service(const struct sl_dcb *dcb);
/* Backend DCBs: the server and the backend object. */
SL_EXPORT struct sl_backend *sl_dcb_backend(const struct sl_dcb *dcb);
SL_EXPORT struct sl_server *sl_dcb_server(const struct sl_dcb *dcb);
/* Peer address as text ("127.0.0.1", "::1", "localhost" for unix sockets). */
SL_EXPORT const char *sl_dcb_remote(const struct sl_dcb *dcb);
SL_EXPORT bool sl_dcb_is_unix(const struct sl_dcb *dcb);

/* Stop / resume reading (backpressure). */
SL_EXPORT void sl_dcb_pause_reading(struct sl_dcb *dcb);
SL_EXPORT void sl_dcb_resume_reading(struct sl_dcb *dcb);

/* Counters. */
/*
 * A transform between the socket and the DCB's queues (the MariaDB
 * protocol's compression). decode moves what it can of raw (bytes read,
 * after TLS) to the tail of out (the read queue the protocol sees): 0, or
 * -1 on input it refuses (the DCB closes). encode takes a chain about to
 * be written and returns the chain to queue instead (NULL: out of memory,
 * the DCB closes); it may return its argument. free releases ctx when the
 * DCB is freed.
 */
struct sl_dcb_codec {
    int (*decode)(void *ctx, struct sl_buf *raw, struct sl_buf *out);
    struct sl_buf *(*encode)(void *ctx, struct sl_buf *in);
    void (*free)(void *ctx);
};
/* Install a codec (once per DCB; the DCB owns ctx from now on, even on
 * failure). Bytes already in the read queue, not yet consumed by the
 * protocol, are taken as encoded and decoded at once. 0, -EBUSY (a codec
 * already), or -EPROTO (those bytes were refused). Owner worker only. */
SL_EXPORT int sl_dcb_set_codec(struct sl_dcb *dcb,
                               const struct sl_dcb_codec *codec, void *ctx);
/* A codec is installed (splice.c: kernel forwarding cannot transform). */
SL_EXPORT bool sl_dcb_has_codec(const struct sl_dcb *dcb);
SL_EXPORT uint64_t sl_dcb_bytes_read(const struct sl_dcb *dcb);
SL_EXPORT uint64_t sl_dcb_bytes_written(const struct sl_dcb *dcb);


/*
 * TLS (core tls.c). sl_dcb_tls_configured: the DCB's listener (client
 * DCBs) or server (backend DCBs) has TLS set up. sl_dcb_tls_required: a
 * client DCB whose listener refuses plain connections. sl_dcb_is_tls: TLS
 * was started on this DCB.
 *
 * sl_dcb_tls_start: switch the connection to TLS now -- a client DCB acts
 * as the TLS server (after the client's SSLRequest; bytes already in the
 * read queue are handed to TLS), a backend DCB as the TLS client (after
 * sending its SSLRequest; the protocol must have consumed the server's
 * greeting, and anything else already read is refused with -EBADMSG as
 * plaintext injected ahead of TLS). The handshake runs inside the DCB's
 * events; sl_dcb_write queues until it completes, and a failed handshake
 * closes the DCB like a hangup. 0, or a negative errno (-ENOTSUP when TLS
 * is not configured). Worker-owned.
 */
SL_EXPORT bool sl_dcb_tls_configured(const struct sl_dcb *dcb);
SL_EXPORT bool sl_dcb_tls_required(const struct sl_dcb *dcb);
SL_EXPORT bool sl_dcb_is_tls(const struct sl_dcb *dcb);
SL_EXPORT int sl_dcb_tls_start(struct sl_dcb *dcb);
/*
 * What a protocol needs to enforce an account's TLS requirements (REQUIRE
 * CIPHER / X509 / ISSUER / SUBJECT). sl_dcb_tls_cipher: the negotiated
 * cipher, "" when plain. sl_dcb_tls_peer: true when the peer presented a
 * certificate that verified; its issuer and subject go to the buffers in
 * OpenSSL's one-line form ("/C=FI/CN=name"), "" otherwise. Worker-owned.
 */
SL_EXPORT const char *sl_dcb_tls_cipher(const struct sl_dcb *dcb);
SL_EXPORT bool sl_dcb_tls_peer(const struct sl_dcb *dcb, char *issuer,
                               size_t ilen, char *subject, size_t slen);

#endif
