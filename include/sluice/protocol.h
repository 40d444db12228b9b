/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Protocol modules: the client side (handshake, authentication, command
 * decoding, errors to the client) and the backend side (login on the
 * client's behalf, reply tracking).
 *
 * The core owns sockets and buffers: it reads into the DCB's read queue
 * and calls on_read; the protocol consumes what it handled from the read
 * queue (sl_dcb_readq) and leaves partial packets there.
 *
 * Every callback runs on the worker processing the DCB (worker-owned).
 */
#ifndef SLUICE_PROTOCOL_H
#define SLUICE_PROTOCOL_H

#include <sluice/buf-t.h>
#include <sluice/ccdefs.h>
#include <sluice/reply.h>

struct sl_dcb;
struct sl_service;
struct sl_listener;
struct sl_session;
struct sl_backend;

struct sl_protocol_ops {
    size_t size;   /* sizeof(struct sl_protocol_ops) the module was built with */

    /* Per-service data (user accounts cache); main thread at startup.
     * NULL return is a fatal startup error. */
    void *(*service_data_create)(struct sl_service *svc);
    void (*service_data_free)(void *data);

    /* ---- client side ---- */

    /* A client connected: allocate state (sl_dcb_set_protocol_data) and
     * send the greeting. SL_OK or SL_ERROR (the core closes the DCB). */
    int (*client_accept)(struct sl_dcb *client);
    /* Bytes are in the read queue. SL_OK, or SL_ERROR to close. */
    int (*client_read)(struct sl_dcb *client);
    /* The session is STARTED: send the client its OK. */
    void (*session_ready)(struct sl_dcb *client);
    /* An answer (or part of one) for the client; takes buf. The reply view
     * tells the protocol e.g. that a LOCAL INFILE transfer starts. */
    int (*client_reply)(struct sl_dcb *client, struct sl_buf *buf,
                        const struct sl_reply *reply);
    /* Send an error packet with the right sequence number. The core also
     * calls it before client_accept (no protocol data yet) to refuse a
     * connection in place of the greeting (sequence 0). */
    void (*client_error)(struct sl_dcb *client, uint16_t code,
                         const char *sqlstate, const char *msg);
    /* The client DCB is being freed: release the protocol data and the
     * session's protocol data if this side owns it. */
    void (*client_free)(struct sl_dcb *client);

    /* ---- backend side ---- */

    /* A connect() to the server was started for backend b: allocate state.
     * The server speaks first. SL_OK or SL_ERROR. */
    int (*backend_init)(struct sl_dcb *dcb, struct sl_backend *b);
    /* Bytes are in the read queue: run the login, or track replies and
     * pass them on with sl_backend_reply(). SL_OK or SL_ERROR. */
    int (*backend_read)(struct sl_dcb *dcb);
    /* A command from the router; takes buf. Queue it until logged in. */
    int (*backend_write)(struct sl_dcb *dcb, struct sl_buf *buf);
    /* Polite goodbye before close (e.g. COM_QUIT); may be NULL. */
    void (*backend_close)(struct sl_dcb *dcb);
    void (*backend_free)(struct sl_dcb *dcb);
    /* Number of answers still expected (0 = idle). */
    int (*backend_pending)(const struct sl_dcb *dcb);

    /* Diagnostics of the per-service data (users loaded, reloads...). */
    void *(*service_diagnostics)(void *data);   /* returns json_t * */

    /* ---- ABI 2.4: backend connection pooling (both may be NULL) ---- */

    /* The session owning backend dcb is closing: may the connection serve
     * another session? True only when it is logged in and idle (no answer
     * pending, nothing queued, no transaction open by the last status the
     * server sent); the protocol then forgets the session (its backend
     * pointer, KILL registration) and the core parks the DCB in the
     * pool. False leaves everything as it was (the core closes it). */
    bool (*backend_park)(struct sl_dcb *dcb);
    /* A parked dcb now serves backend b of a new session (the DCB's
     * session is already b's): reset the connection for that session
     * (MariaDB: COM_CHANGE_USER as its user, database and charset, so
     * nothing of the previous session survives), then report
     * sl_backend_ready() or sl_backend_failed() as after a login. SL_OK,
     * or SL_ERROR if nothing could be sent (the core then connects
     * afresh). */
    int (*backend_reuse)(struct sl_dcb *dcb, struct sl_backend *b);

    /* ---- ABI 2.5 ---- */
    /* Kernel forwarding of the backend's session ended (include/sluice/
     * splice.h) while the server had not yet started to answer a command
     * the kernel forwarded: the protocol treats the backend as running a
     * statement (kill_on_client_close when it closes) until the server
     * sends again. May be NULL. */
    void (*backend_forwarded_running)(struct sl_dcb *dcb);
};

#endif
