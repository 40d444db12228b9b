/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mariadbmon's monitor scripts (MaxScale's common monitor parameters
 * `script`, `events`, `script_timeout`): which event a server's status
 * change is, how the command line is split into argv (never through a
 * shell) and how $INITIATOR, $EVENT, ... are substituted, and running the
 * command with a time limit, its output logged line by line.
 *
 * The splitting, the event and the substitution are pure (the unit test
 * compiles mmon_script.c directly); mmon_script_run forks (posix_spawn)
 * and blocks its caller for at most the timeout plus one second.
 *
 * Context: any thread; mariadbmon calls them from the monitor thread.
 */
#ifndef SLUICE_MMON_SCRIPT_H
#define SLUICE_MMON_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* MaxScale's event names, in the order of its documentation. The donor
 * and synced events are Galera's: accepted in `events`, never raised by
 * mariadbmon. */
enum mmon_event {
    MMON_EV_MASTER_DOWN,
    MMON_EV_MASTER_UP,
    MMON_EV_SLAVE_DOWN,
    MMON_EV_SLAVE_UP,
    MMON_EV_SERVER_DOWN,
    MMON_EV_SERVER_UP,
    MMON_EV_SYNCED_DOWN,
    MMON_EV_SYNCED_UP,
    MMON_EV_DONOR_DOWN,
    MMON_EV_DONOR_UP,
    MMON_EV_LOST_MASTER,
    MMON_EV_LOST_SLAVE,
    MMON_EV_LOST_SYNCED,
    MMON_EV_LOST_DONOR,
    MMON_EV_NEW_MASTER,
    MMON_EV_NEW_SLAVE,
    MMON_EV_NEW_SYNCED,
    MMON_EV_NEW_DONOR,
    MMON_EV_COUNT,
    MMON_EV_NONE = -1,
};

/* The names, NULL-terminated, then "all" (the `events` enum values: bit i
 * is event i, bit MMON_EV_COUNT is "all"). */
extern const char *const mmon_event_names[];

/*
 * The event a status change is (sl_server status bits), or MMON_EV_NONE:
 * down/up by the Running bit (the role before going down, the role after
 * coming up); while running, a changed role is lost_<old role> when the
 * old role bit is gone, else new_<new role>. Roles: Master, Slave, Synced.
 */
enum mmon_event mmon_event_of(uint32_t before, uint32_t after);

/*
 * Split a command line into argv as MaxScale does: words separated by
 * spaces or tabs; within '...' or "..." spaces are kept and the quotes
 * dropped; a backslash keeps the next character as it is. *argv is
 * malloc'd (NULL-terminated, each string malloc'd; free with
 * mmon_script_free_argv). 0; -EINVAL (empty, or an unclosed quote; err[]
 * says which) or -ENOMEM.
 */
int mmon_script_split(const char *cmd, char ***argv, char *err,
                      size_t errlen);
void mmon_script_free_argv(char **argv);

/* What the variables stand for in one run. Lists are "[host]:port"
 * entries separated by commas, "" when empty. */
struct mmon_script_vars {
    const char *initiator;    /* $INITIATOR */
    const char *parent;       /* $PARENT */
    const char *children;     /* $CHILDREN */
    const char *event;        /* $EVENT */
    const char *credentials;  /* $CREDENTIALS: user:password */
    const char *nodelist;     /* $NODELIST: running servers */
    const char *list;         /* $LIST: every server */
    const char *masterlist;   /* $MASTERLIST */
    const char *slavelist;    /* $SLAVELIST */
    const char *syncedlist;   /* $SYNCEDLIST */
};

/* One argument with every $NAME of vars replaced (longest names first, so
 * $NODELIST is not $NODE...; an unknown $WORD is kept as written).
 * malloc'd, NULL on out of memory. */
char *mmon_script_subst(const char *arg, const struct mmon_script_vars *v);

/*
 * Run argv (argv[0] a path, or a name looked up in PATH) with stdin from
 * /dev/null and stdout and stderr into one pipe whose lines are logged
 * as they come (a line starting "alert:", "error:", "warning:",
 * "notice:", "info:" or "debug:", case and spaces ignored, at that level;
 * others at notice), prefixed with `who`. After timeout_ms the process
 * gets SIGTERM, one second later SIGKILL. Returns the exit status (0-255),
 * -1 if it could not be started, -2 if it was killed by a signal (the
 * timeout's or another). `hide` (may be NULL or "") is masked in what is
 * logged of the command line.
 */
int mmon_script_run(char *const argv[], uint64_t timeout_ms,
                    const char *who, const char *hide);

/* Is argv0 executable (as is, or found in PATH when it has no '/')? */
bool mmon_script_executable(const char *argv0);

#endif
