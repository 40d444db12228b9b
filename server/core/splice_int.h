/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel forwarding, the core's side (splice.c): hooks called by
 * session.c, dcb.c and admin_json.c. Worker-owned unless said.
 */
#ifndef SLUICE_SPLICE_INT_H
#define SLUICE_SPLICE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

struct sl_session;
struct sl_dcb;

/* The session started (before the client's OK): splice it if the router
 * asked and nothing stands in the way. */
void sl__splice_started(struct sl_session *ses);
/* Take the session's sockets out of the maps (session closing). */
void sl__splice_stop(struct sl_session *ses);
/* Free the session's splice state (session freed). */
void sl__splice_free(struct sl_session *ses);
/* The other DCB of a spliced dcb, NULL if not spliced (any more). */
struct sl_dcb *sl__splice_peer(const struct sl_dcb *dcb);
/* The bytes a spliced client DCB read are one whole COM_CHANGE_USER,
 * which the BPF program leaves to Sluice: the session must go back to
 * user space (sl__splice_stop) and the protocol handle it. */
bool sl__splice_user_command(struct sl_dcb *client);
/* One-second sweep of a spliced client DCB (under the worker's DCB list
 * lock: no closing here): true if its server lost the role the router
 * asked for (then call sl__splice_role_lost out of the lock); also marks
 * forwarded bytes as activity for connection_timeout. */
bool sl__splice_sweep(struct sl_dcb *client, uint64_t now);
/* Close the session of client whose server lost its role (error 1105 as
 * the answer to the client's next command). Under the session's lock. */
void sl__splice_role_lost(struct sl_dcb *client);
/* Graceful shutdown, once per drain pass: is the spliced session of
 * client busy? Sluice cannot see a statement in flight, so: the first
 * pass says yes, later ones whether bytes moved since the previous one. */
bool sl__splice_drain_busy(const struct sl_dcb *client);
/* The session's kernel_forwarding object for the REST API (null if it
 * was never spliced). */
json_t *sl__splice_json(const struct sl_session *ses);

#endif
