/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Monitor scripts: events, argv splitting, substitution, and running the
 * command under a time limit (see mmon_script.h).
 *
 *   mmon_script_run: pipe -> posix_spawnp (stdin /dev/null, stdout and
 *   stderr the pipe, every other descriptor closed) -> poll the pipe,
 *   logging whole lines, until EOF and exit -> at the deadline SIGTERM,
 *   one second later SIGKILL -> waitpid.
 *
 * posix_spawn, not fork: the monitor runs in a threaded process with many
 * descriptors, and the child must inherit none of them.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "mariadbmon"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sluice/log.h>
#include <sluice/server.h>
#include <sluice/worker.h>

#include "mmon_script.h"

extern char **environ;

const char *const mmon_event_names[] = {
    "master_down", "master_up", "slave_down", "slave_up", "server_down",
    "server_up", "synced_down", "synced_up", "donor_down", "donor_up",
    "lost_master", "lost_slave", "lost_synced", "lost_donor", "new_master",
    "new_slave", "new_synced", "new_donor", "all", NULL,
};

_Static_assert(sizeof(mmon_event_names) / sizeof(mmon_event_names[0]) ==
                   MMON_EV_COUNT + 2,
               "one name per event, then all and NULL");

#define ROLE_BITS (SL_SRV_MASTER | SL_SRV_SLAVE | SL_SRV_SYNCED)

/* 0 master, 1 slave, 2 synced, -1 none (the first role bit set). */
static int
role_of(uint32_t st)
{
    return (st & SL_SRV_MASTER) ? 0 : (st & SL_SRV_SLAVE) ? 1
         : (st & SL_SRV_SYNCED) ? 2 : -1;
}

static const uint32_t role_bit[] = {SL_SRV_MASTER, SL_SRV_SLAVE,
                                    SL_SRV_SYNCED};

enum mmon_event
mmon_event_of(uint32_t before, uint32_t after)
{
    static const enum mmon_event down[] = {
        MMON_EV_MASTER_DOWN, MMON_EV_SLAVE_DOWN, MMON_EV_SYNCED_DOWN};
    static const enum mmon_event up[] = {
        MMON_EV_MASTER_UP, MMON_EV_SLAVE_UP, MMON_EV_SYNCED_UP};
    static const enum mmon_event lost[] = {
        MMON_EV_LOST_MASTER, MMON_EV_LOST_SLAVE, MMON_EV_LOST_SYNCED};
    static const enum mmon_event gained[] = {
        MMON_EV_NEW_MASTER, MMON_EV_NEW_SLAVE, MMON_EV_NEW_SYNCED};
    bool was = (before & SL_SRV_RUNNING) != 0;
    bool is = (after & SL_SRV_RUNNING) != 0;
    int rb = role_of(before);
    int ra = role_of(after);

    if (was && !is) {
        return rb >= 0 ? down[rb] : MMON_EV_SERVER_DOWN;
    }
    if (!was && is) {
        return ra >= 0 ? up[ra] : MMON_EV_SERVER_UP;
    }
    if (!was || (before & ROLE_BITS) == (after & ROLE_BITS)) {
        return MMON_EV_NONE;
    }
    if (rb >= 0 && !(after & role_bit[rb])) {
        return lost[rb];
    }
    return ra >= 0 ? gained[ra] : MMON_EV_NONE;
}

void
mmon_script_free_argv(char **argv)
{
    if (argv == NULL) {
        return;
    }
    for (char **a = argv; *a != NULL; a++) {
        free(*a);
    }
    free(argv);
}

int
mmon_script_split(const char *cmd, char ***argv_out, char *err,
                  size_t errlen)
{
    size_t len = strlen(cmd);
    char **argv = calloc(len / 2 + 2, sizeof(*argv));
    char *word = malloc(len + 1);
    size_t n = 0;
    const char *p = cmd;

    *argv_out = NULL;
    if (argv == NULL || word == NULL) {
        free(argv);
        free(word);
        return -ENOMEM;
    }
    for (;;) {
        size_t w = 0;
        char quote = 0;

        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (*p == '\0') {
            break;
        }
        for (; *p != '\0'; p++) {
            if (*p == '\\' && p[1] != '\0') {
                word[w++] = *++p;
            } else if (quote != 0) {
                if (*p == quote) {
                    quote = 0;
                } else {
                    word[w++] = *p;
                }
            } else if (*p == '\'' || *p == '"') {
                quote = *p;
            } else if (*p == ' ' || *p == '\t') {
                break;
            } else {
                word[w++] = *p;
            }
        }
        if (quote != 0) {
            snprintf(err, errlen, "unclosed %c quote in the script's "
                     "command line", quote);
            goto out_fail;
        }
        word[w] = '\0';
        if ((argv[n] = strdup(word)) == NULL) {
            snprintf(err, errlen, "out of memory");
            goto out_fail;
        }
        n++;
    }
    free(word);
    if (n == 0) {
        snprintf(err, errlen, "the script's command line is empty");
        free(argv);
        return -EINVAL;
    }
    *argv_out = argv;
    return 0;

out_fail:
    free(word);
    mmon_script_free_argv(argv);
    return -EINVAL;
}

char *
mmon_script_subst(const char *arg, const struct mmon_script_vars *v)
{
    /* Longest first where one name starts another ($NODELIST, $LIST). */
    const struct {
        const char *name;
        const char *value;
    } vars[] = {
        {"$INITIATOR", v->initiator},   {"$PARENT", v->parent},
        {"$CHILDREN", v->children},     {"$EVENT", v->event},
        {"$CREDENTIALS", v->credentials}, {"$NODELIST", v->nodelist},
        {"$MASTERLIST", v->masterlist}, {"$SLAVELIST", v->slavelist},
        {"$SYNCEDLIST", v->syncedlist}, {"$LIST", v->list},
    };
    size_t n = sizeof(vars) / sizeof(vars[0]);
    size_t maxval = 0;
    size_t cap;
    char *out;
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        size_t l = vars[i].value ? strlen(vars[i].value) : 0;

        maxval = l > maxval ? l : maxval;
    }
    /* Every $NAME is at least 5 bytes: at most len/5 substitutions. */
    cap = strlen(arg) + (strlen(arg) / 5 + 1) * maxval + 1;
    if ((out = malloc(cap)) == NULL) {
        return NULL;
    }
    for (const char *p = arg; *p != '\0';) {
        bool done = false;

        for (size_t i = 0; *p == '$' && i < n && !done; i++) {
            size_t nl = strlen(vars[i].name);

            if (strncmp(p, vars[i].name, nl) == 0) {
                const char *val = vars[i].value ? vars[i].value : "";

                memcpy(out + o, val, strlen(val));
                o += strlen(val);
                p += nl;
                done = true;
            }
        }
        if (!done) {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

bool
mmon_script_executable(const char *argv0)
{
    const char *path;
    char buf[4096];

    if (strchr(argv0, '/') != NULL) {
        return access(argv0, X_OK) == 0;
    }
    path = getenv("PATH");
    for (const char *d = path ? path : "/usr/bin:/bin"; *d != '\0';) {
        size_t dl = strcspn(d, ":");

        if (snprintf(buf, sizeof(buf), "%.*s/%s", (int)dl, d, argv0) <
                (int)sizeof(buf) &&
            access(buf, X_OK) == 0) {
            return true;
        }
        d += dl + (d[dl] == ':');
    }
    return false;
}

/* Log one line of the script's output at the level its prefix names. */
static void
log_line(const char *who, char *line)
{
    static const struct {
        const char *word;
        int level;
    } levels[] = {
        {"alert", SL_LOG_ERROR}, {"error", SL_LOG_ERROR},
        {"warning", SL_LOG_WARN}, {"notice", SL_LOG_NOTICE},
        {"info", SL_LOG_INFO},   {"debug", SL_LOG_DEBUG},
    };
    char *p = line;
    int level = SL_LOG_NOTICE;

    while (*p == ' ' || *p == '\t') {
        p++;
    }
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        size_t wl = strlen(levels[i].word);
        char *q = p + wl;

        if (strncasecmp(p, levels[i].word, wl) != 0) {
            continue;
        }
        while (*q == ' ' || *q == '\t') {
            q++;
        }
        if (*q == ':') {
            level = levels[i].level;
            for (q++; *q == ' ' || *q == '\t'; q++) {
            }
            p = q;
            break;
        }
    }
    switch (level) {
    case SL_LOG_ERROR:
        sl_log_error("%s: %s", who, p);
        break;
    case SL_LOG_WARN:
        sl_log_warn("%s: %s", who, p);
        break;
    case SL_LOG_INFO:
        sl_log_info("%s: %s", who, p);
        break;
    case SL_LOG_DEBUG:
        sl_log_debug("%s: %s", who, p);
        break;
    default:
        sl_log_notice("%s: %s", who, p);
        break;
    }
}

/* Log the whole lines in buf[*len]; keep the rest. A line longer than the
 * buffer is logged in pieces. */
static void
drain_lines(const char *who, char *buf, size_t *len, size_t cap, bool eof)
{
    size_t start = 0;

    for (size_t i = 0; i < *len; i++) {
        if (buf[i] == '\n') {
            buf[i] = '\0';
            if (i > start && buf[i - 1] == '\r') {
                buf[i - 1] = '\0';
            }
            log_line(who, buf + start);
            start = i + 1;
        }
    }
    if (start == 0 && (*len == cap - 1 || (eof && *len > 0))) {
        buf[*len] = '\0';
        log_line(who, buf);
        start = *len;
    } else if (eof && start < *len) {
        buf[*len] = '\0';
        log_line(who, buf + start);
        start = *len;
    }
    memmove(buf, buf + start, *len - start);
    *len -= start;
}

int
mmon_script_run(char *const argv[], uint64_t timeout_ms, const char *who,
                const char *hide)
{
    posix_spawn_file_actions_t fa;
    int fds[2];
    pid_t pid;
    int rc;
    int status = 0;
    char buf[4096];
    size_t blen = 0;
    bool eof = false;
    bool exited = false;
    bool termed = false;
    bool killed = false;
    uint64_t start = sl_monotonic_ms();
    uint64_t term_at = start + timeout_ms;
    uint64_t kill_at = term_at + 1000;
    char cmdline[2048];
    char shown[2048];
    size_t cl = 0;

    for (int i = 0; argv[i] != NULL && cl + 1 < sizeof(cmdline); i++) {
        cl += (size_t)snprintf(cmdline + cl, sizeof(cmdline) - cl, "%s%s",
                               i ? " " : "", argv[i]);
    }
    sl_log_mask_passwords(cmdline, hide, shown, sizeof(shown));
    if (pipe2(fds, O_CLOEXEC) != 0) {
        sl_log_error("%s: cannot run '%s': pipe: %s", who, shown,
                     strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        sl_log_error("%s: cannot run '%s': %s", who, shown, strerror(rc));
        return -1;
    }
    sl_log_info("%s: started '%s' (pid %d)", who, shown, (int)pid);
    for (;;) {
        uint64_t now;
        int wait_ms = 100;

        if (!exited) {
            pid_t w = waitpid(pid, &status, WNOHANG);

            exited = w == pid || (w < 0 && errno == ECHILD);
        }
        if (exited && eof) {
            break;
        }
        now = sl_monotonic_ms();
        if (exited && now >= term_at) {
            break;   /* gone; a descendant still holds its output */
        }
        if (!exited && !termed && now >= term_at) {
            sl_log_error("%s: '%s' still running after script_timeout "
                         "(%llu ms): SIGTERM", who, shown,
                         (unsigned long long)timeout_ms);
            kill(pid, SIGTERM);
            termed = true;
        }
        if (!exited && !killed && now >= kill_at) {
            sl_log_error("%s: '%s' did not stop on SIGTERM: SIGKILL", who,
                         shown);
            kill(pid, SIGKILL);
            killed = true;
        }
        if (killed) {
            break;   /* SIGKILL cannot be ignored: reaped below */
        }
        if (!termed && term_at - now < (uint64_t)wait_ms) {
            wait_ms = (int)(term_at - now);
        }
        if (eof) {
            poll(NULL, 0, 10);
            continue;
        }
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};

        if (poll(&pfd, 1, wait_ms) > 0) {
            ssize_t r = read(fds[0], buf + blen, sizeof(buf) - 1 - blen);

            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
                eof = true;
            } else if (r > 0) {
                blen += (size_t)r;
            }
            drain_lines(who, buf, &blen, sizeof(buf), eof);
        }
    }
    if (!exited) {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    drain_lines(who, buf, &blen, sizeof(buf), true);
    close(fds[0]);
    if (WIFEXITED(status)) {
        int code = WEXITSTATUS(status);

        if (code == 0) {
            sl_log_notice("%s: '%s' exited with status 0 (%llu ms)", who,
                          shown,
                          (unsigned long long)(sl_monotonic_ms() - start));
        } else {
            sl_log_error("%s: '%s' exited with status %d", who, shown,
                         code);
        }
        return code;
    }
    sl_log_error("%s: '%s' was killed by signal %d", who, shown,
                 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return -2;
}
