/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stand-ins for mdb_kill.c (the registry and the kill threads) in the
 * state-machine fuzz targets, which #include mdb_client.c or
 * mdb_backend.c: no thread, no registry. The KILL parser itself is real
 * (mdb_killparse.c, in sl_mariadb_parse); a parsed KILL is routed as the
 * server would get it (MDB_KILL_NOT_OURS).
 */
#ifndef FAKE_KILL_H
#define FAKE_KILL_H

#include "mdb_kill.h"

uint32_t
mdb_kill_id(const struct sl_dcb *client)
{
    return 1;
}

void
mdb_kill_register(struct sl_dcb *client, const char *user)
{
    (void)strlen(user);
}

void
mdb_kill_set_user(struct sl_dcb *client, const char *user)
{
    (void)strlen(user);
}

void
mdb_kill_unregister(struct sl_dcb *client)
{
}

void
mdb_kill_add_backend(uint32_t id, struct sl_server *srv, uint32_t tid)
{
}

void
mdb_kill_remove_backend(uint32_t id, struct sl_server *srv, uint32_t tid)
{
}

enum mdb_kill_rc
mdb_kill_start(struct sl_dcb *killer, const struct mdb_kill_stmt *k,
               const char *user, const struct mdb_session *sd,
               mdb_kill_done_fn done)
{
    if (!k->by_user && k->user_spec[0] != '\0') {
        abort();   /* the parser left a user spec on a numbered KILL */
    }
    (void)strlen(user);
    return MDB_KILL_NOT_OURS;
}

void
mdb_kill_backend_query(struct sl_server *srv, uint32_t tid, const char *user,
                       const struct mdb_session *sd)
{
    (void)strlen(user);
}

#endif
