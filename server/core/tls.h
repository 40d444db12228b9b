/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS for listeners (Sluice is the TLS server) and servers (Sluice is the
 * TLS client): configuration from the ssl* parameters, and the per-DCB
 * non-blocking TLS connection that dcb.c reads and writes through.
 * Core-only header.
 */
#ifndef SLUICE_CORE_TLS_H
#define SLUICE_CORE_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <sluice/ccdefs.h>

struct sl_cfg_diag;
struct sl_params;
struct sl_tls;        /* a configured SSL_CTX, shared, immutable */
struct sl_tls_conn;   /* one connection's TLS state, worker-owned */
struct sl_buf;

/*
 * Read the ssl* parameters of a listener (listener=true) or a server into
 * *out: NULL when ssl is off. Errors (missing or unreadable certificate or
 * key, bad ssl_version or ssl_cipher) go to d with the parameter's line.
 * Main only (configuration load).
 */
void sl__tls_configure(struct sl_cfg_diag *d, const struct sl_params *p,
                       bool listener, const char *what, struct sl_tls **out);
void sl__tls_free(struct sl_tls *t);
/* Listener: plain clients are refused (MaxScale's ssl=true). */
bool sl__tls_required(const struct sl_tls *t);

/*
 * A TLS connection over fd. pre (may be NULL) holds bytes already read
 * from the socket that belong to TLS; they are taken over. host names the
 * peer for ssl_verify_peer_host (client side). NULL on failure.
 */
struct sl_tls_conn *sl__tls_conn_new(struct sl_tls *t, int fd, bool accept,
                                     struct sl_buf *pre, const char *host);
void sl__tls_conn_free(struct sl_tls_conn *c);

/* Handshake step: SL_OK done, SL_AGAIN in progress (wait for I/O),
 * SL_ERROR failed (the reason is logged, prefixed with who). */
enum sl_rc sl__tls_handshake(struct sl_tls_conn *c, const char *who);
bool sl__tls_handshaking(const struct sl_tls_conn *c);

/*
 * As read(2) / write(2) on a non-blocking socket: > 0 bytes, 0 end of
 * stream (read), -1 with errno EAGAIN (wait for I/O: see the wants_*
 * flags) or another errno (fatal).
 */
ssize_t sl__tls_read(struct sl_tls_conn *c, void *buf, size_t len);
ssize_t sl__tls_write(struct sl_tls_conn *c, const void *buf, size_t len);
/* A read that needs the socket writable, a write that needs it
 * readable (renegotiation, key update). Cleared by the next call. */
bool sl__tls_read_wants_write(const struct sl_tls_conn *c);
bool sl__tls_write_wants_read(const struct sl_tls_conn *c);
/* Best-effort close_notify, never blocks. */
void sl__tls_shutdown(struct sl_tls_conn *c);
/* The negotiated cipher ("" before the handshake). */
const char *sl__tls_cipher(const struct sl_tls_conn *c);
/* The peer certificate's issuer and subject (X509_NAME_oneline form, as
 * MariaDB compares them); false, with both "", when the peer sent none or
 * it did not verify. */
bool sl__tls_peer_names(const struct sl_tls_conn *c, char *issuer,
                        size_t ilen, char *subject, size_t slen);

#endif
