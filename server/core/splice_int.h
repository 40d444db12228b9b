/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel forwarding, the core's side (splice.c): hooks called by
 * session.c, dcb.c and admin_json.c. Worker-owned unless said.
 */
#ifndef SLUICE_SPLICE_INT_H
#define SLUICE_SPLICE_INT_H

#include <stdbool.h>
#include <stddef.h>
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
/* A spliced client DCB read bytes. If the BPF program diverted the
 * client's socket (a command Sluice must see: COM_QUIT,
 * COM_PROCESS_KILL, COM_CHANGE_USER, a KILL statement; or the program
 * could not tell), take the session back to user space for good: the
 * server's bytes stop going to the client, the counters are folded into
 * the statistics, and once TCP has everything the kernel redirected, 1
 * with *skip the bytes at the head of what was read that end a packet
 * the kernel forwarded the start of (the caller sends them to the server
 * as they are, then the protocol reads the rest). 0: not diverted (the
 * bytes go to the peer as they are); -1: the session must close. */
int sl__splice_take_back(struct sl_dcb *client, size_t *skip);
/* The backend DCB a session was spliced with (NULL: none). */
struct sl_dcb *sl__splice_backend(const struct sl_session *ses);
/* The backend of a session failed: if it is kernel-forwarded and the
 * server had not started to answer the last command the kernel forwarded,
 * send the client what the user-space path sends then (1927 "Lost
 * connection to backend server: reason", as the answer to that command).
 * Worker-owned, before sl_session_close. */
void sl__splice_lost_answer(struct sl_session *ses, const char *reason);
/* Sessions kernel-forwarded since start, and now. Any thread. */
void sl__splice_counts(uint64_t *total, int64_t *now);
/* One-second sweep of a spliced client DCB: KEEP, ROLE_LOST (its server
 * lost the role the router asked for: sl__splice_role_lost) or TIMED_OUT
 * (net_write_timeout: the client reads nothing; why says so). Also marks
 * forwarded bytes as activity for connection_timeout. Always under the
 * session's lock: first with the worker's DCB list lock held too (taken
 * only if free, no closing there), then again before acting. */
enum { SL__SPLICE_KEEP, SL__SPLICE_ROLE_LOST, SL__SPLICE_TIMED_OUT };
int sl__splice_sweep(struct sl_dcb *client, uint64_t now, char *why,
                     size_t len);
/* Close the session of client whose server lost its role (error 1105 as
 * the answer to the client's next command). Under the session's lock. */
void sl__splice_role_lost(struct sl_dcb *client);
/* Graceful shutdown, once per drain pass: is the spliced session of
 * client busy? Sluice cannot see a statement in flight, so: yes if the
 * client sent bytes after the server last did (a statement waits for its
 * answer) or the server sent within the last 200 ms (an answer may still
 * be streaming). */
bool sl__splice_drain_busy(const struct sl_dcb *client);
/* Unload the BPF program and its maps (exit; every session is gone).
 * Main thread. */
void sl__splice_finish(void);

/* Whether ses was ever kernel-forwarded (its bytes may have passed
 * without Sluice seeing them): such a connection is never pooled. */
bool sl__splice_ever(const struct sl_session *ses);

#endif
