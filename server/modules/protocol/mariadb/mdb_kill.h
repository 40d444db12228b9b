/* SPDX-License-Identifier: Apache-2.0 */
/*
 * KILL across Sluice (mdb_kill.c): every client session gets a thread id
 * unique within Sluice (its client DCB's id, the one in the handshake);
 * a registry maps it to the session's user and its backend threads
 * (server, the server's thread id), so that KILL statements naming a
 * Sluice id become KILLs of those backend threads, sent on a separate
 * connection logged in as the killing user (the server judges the
 * permission). The same jobs send KILL QUERY for a statement still
 * running when a backend is closed under it (kill_on_client_close).
 *
 * Context: registry calls from any worker (a global mutex, taken at
 * session start/end, backend login/close and KILL only); jobs run in
 * detached threads and answer through sl_dcb_post.
 */
#ifndef MDB_KILL_H
#define MDB_KILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mdb.h"

struct sl_dcb;
struct sl_server;

/* Sluice thread ids are MDB_KILL_ID_BASE + the client DCB's id (modulo
 * 2^30): above any thread id a server hands out in practice. */
#define MDB_KILL_ID_BASE 0x40000000u

/* The Sluice thread id of a client (what its handshake said). */
uint32_t mdb_kill_id(const struct sl_dcb *client);

void mdb_kill_register(struct sl_dcb *client, const char *user);
void mdb_kill_set_user(struct sl_dcb *client, const char *user);
void mdb_kill_unregister(struct sl_dcb *client);
/* At module unload: wait for the KILL job threads still running (they
 * run this module's code), at most 30 s. */
void mdb_kill_wait_jobs(void);
void mdb_kill_add_backend(uint32_t id, struct sl_server *srv,
                          uint32_t tid);
void mdb_kill_remove_backend(uint32_t id, struct sl_server *srv,
                             uint32_t tid);

/* A KILL statement Sluice translates. */
struct mdb_kill_stmt {
    bool query;          /* KILL QUERY (else CONNECTION) */
    bool hard;           /* KILL HARD (the default) or SOFT */
    bool by_user;        /* KILL ... USER spec */
    uint32_t id;         /* thread id named, unless by_user */
    char user_spec[MDB_USER_MAX + 64];   /* as written, unless !by_user */
};

/*
 * Is sql[len] a KILL [HARD|SOFT] [CONNECTION|QUERY] n or ... USER spec
 * (trailing blanks and ';' allowed)? KILL QUERY ID, expressions and
 * anything else are not: they go to the server as they are.
 */
bool mdb_kill_parse(const char *sql, size_t len, struct mdb_kill_stmt *k);

/* The answer for the killer: err 0 = OK, else the error to send. Runs on
 * the killer's worker (session lock held); check sl_dcb_is_open. */
typedef void (*mdb_kill_done_fn)(struct sl_dcb *killer, uint16_t err,
                                 const char *sqlstate, const char *msg);

enum mdb_kill_rc {
    MDB_KILL_STARTED,    /* done() will be called */
    MDB_KILL_NOT_OURS,   /* no Sluice session has this id: route it */
    MDB_KILL_FAILED,     /* out of memory / no thread: answer 1105 */
};

/* Start k for killer, logged in as user with sd's password hash. */
enum mdb_kill_rc mdb_kill_start(struct sl_dcb *killer,
                                const struct mdb_kill_stmt *k,
                                const char *user,
                                const struct mdb_session *sd,
                                mdb_kill_done_fn done);

/* KILL QUERY tid on srv, as user (nobody waits for the answer). */
void mdb_kill_backend_query(struct sl_server *srv, uint32_t tid,
                            const char *user, const struct mdb_session *sd);

#endif
