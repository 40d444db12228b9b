/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Module commands (include/sluice/modcmd.h): a registry of named operations
 * modules offer to administrators, and the call path that checks and
 * resolves their arguments.
 *
 * The registry is a growing array under one mutex. Registration happens in
 * the main thread while modules load; calls come from any thread (the admin
 * API, the test hook below). Entries are never removed, so a call copies
 * the entry under the lock and runs the command without it: a slow command
 * (a switchover waits for replication) never blocks another lookup.
 *
 * Test hook: when SLUICE_TEST_CMD_FIFO names a FIFO, a thread reads lines
 * "module command arg..." from it and writes each result as one JSON
 * document to SLUICE_TEST_CMD_OUT (written to a temporary file and renamed,
 * so a reader never sees half a result):
 *
 *     {"rc": 0, "output": <command output or null>}
 *     {"rc": -22, "error": "..."}
 *
 * It exists so system tests can run commands without the REST API; nothing
 * else depends on it.
 *
 * Context: see each function.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "modcmd"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sluice/log.h>
#include <sluice/modcmd.h>

#include "internal.h"
#include "modcmd_int.h"

#define MODCMD_MAX_ARGS 16

struct modcmd {
    char *module;
    char *command;
    char *description;
    enum sl_modcmd_kind kind;
    sl_modcmd_fn fn;
    struct sl_modcmd_arg_spec *args;
    int nargs;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct modcmd *registry;
static size_t nregistry;
static size_t registry_cap;

/* Caller holds registry_lock. */
static struct modcmd *
find_locked(const char *module, const char *command)
{
    for (size_t i = 0; i < nregistry; i++) {
        if (strcasecmp(registry[i].module, module) == 0 &&
            strcasecmp(registry[i].command, command) == 0) {
            return &registry[i];
        }
    }
    return NULL;
}

static int
grow_locked(void)
{
    size_t cap = registry_cap ? registry_cap * 2 : 16;
    struct modcmd *n;

    if (nregistry < registry_cap) {
        return 0;
    }
    n = realloc(registry, cap * sizeof(*n));
    if (n == NULL) {
        return -ENOMEM;
    }
    registry = n;
    registry_cap = cap;
    return 0;
}

int
sl_modcmd_register(const char *module, const char *command,
                   enum sl_modcmd_kind kind, sl_modcmd_fn fn,
                   const struct sl_modcmd_arg_spec *args, int nargs,
                   const char *description)
{
    struct modcmd c = {.kind = kind, .fn = fn, .nargs = nargs};
    int rc = -ENOMEM;

    if (module == NULL || command == NULL || fn == NULL || nargs < 0 ||
        nargs > MODCMD_MAX_ARGS) {
        return -EINVAL;
    }
    c.module = strdup(module);
    c.command = strdup(command);
    c.description = strdup(description ? description : "");
    c.args = calloc(nargs ? (size_t)nargs : 1, sizeof(*c.args));
    if (!c.module || !c.command || !c.description || !c.args) {
        goto out_free;
    }
    for (int i = 0; i < nargs; i++) {
        c.args[i] = args[i];
    }
    pthread_mutex_lock(&registry_lock);
    if (find_locked(module, command) != NULL) {
        rc = -EEXIST;
    } else if ((rc = grow_locked()) == 0) {
        registry[nregistry++] = c;
    }
    pthread_mutex_unlock(&registry_lock);
    if (rc == 0) {
        return 0;
    }
out_free:
    free(c.module);
    free(c.command);
    free(c.description);
    free(c.args);
    return rc;
}

bool
sl_modcmd_next(size_t *it, const char **module, const char **command,
               const char **description, enum sl_modcmd_kind *kind,
               const struct sl_modcmd_arg_spec **args, int *nargs)
{
    struct modcmd *c = NULL;

    pthread_mutex_lock(&registry_lock);
    if (*it < nregistry) {
        c = &registry[(*it)++];
    }
    /* Entries are immutable and never freed while the process runs; only
     * the array may move, so copy the fields out under the lock. */
    if (c != NULL) {
        *module = c->module;
        *command = c->command;
        *description = c->description;
        *kind = c->kind;
        *args = c->args;
        *nargs = c->nargs;
    }
    pthread_mutex_unlock(&registry_lock);
    return c != NULL;
}

static char *
format_error(const char *fmt, ...) SL_PRINTF(1, 2);

static char *
format_error(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) {
        s = NULL;
    }
    va_end(ap);
    return s;
}

static const char *
type_name(enum sl_modcmd_arg_type t)
{
    switch (t) {
    case SL_MODCMD_ARG_STRING:
        return "string";
    case SL_MODCMD_ARG_BOOL:
        return "boolean";
    case SL_MODCMD_ARG_MONITOR:
        return "monitor";
    case SL_MODCMD_ARG_SERVER:
        return "server";
    case SL_MODCMD_ARG_SERVICE:
        return "service";
    case SL_MODCMD_ARG_FILTER:
        return "filter";
    }
    return "?";
}

/* Resolve one object name against the running configuration. */
static void *
lookup(enum sl_modcmd_arg_type t, const char *name)
{
    const struct sl_config *cfg = sl__config;

    switch (t) {
    case SL_MODCMD_ARG_MONITOR:
        return sl__find_monitor(cfg, name);
    case SL_MODCMD_ARG_SERVER:
        return sl__find_server(cfg, name);
    case SL_MODCMD_ARG_SERVICE:
        return sl__find_service(cfg, name);
    case SL_MODCMD_ARG_FILTER:
        return sl__find_filter(cfg, name);
    default:
        return NULL;
    }
}

/* Check and resolve argv[i] against spec into out. 0 or -EINVAL. */
static int
resolve_arg(const struct sl_modcmd_arg_spec *spec, int i, const char *text,
            struct sl_modcmd_arg *out, char **error)
{
    void *obj;

    out->type = spec->type;
    out->string = text;
    if (text == NULL) {
        return 0;
    }
    switch (spec->type) {
    case SL_MODCMD_ARG_STRING:
        return 0;
    case SL_MODCMD_ARG_BOOL:
        if (sl_param_parse_bool(text, &out->v.boolean) < 0) {
            *error = format_error("argument %d: '%s' is not a boolean",
                                  i + 1, text);
            return -EINVAL;
        }
        return 0;
    default:
        break;
    }
    obj = lookup(spec->type, text);
    if (obj == NULL) {
        *error = format_error("argument %d: no %s named '%s'", i + 1,
                              type_name(spec->type), text);
        return -EINVAL;
    }
    switch (spec->type) {
    case SL_MODCMD_ARG_MONITOR:
        out->v.monitor = obj;
        break;
    case SL_MODCMD_ARG_SERVER:
        out->v.server = obj;
        break;
    case SL_MODCMD_ARG_SERVICE:
        out->v.service = obj;
        break;
    default:
        out->v.filter = obj;
        break;
    }
    return 0;
}

int
sl_modcmd_call(const char *module, const char *command,
               const char *const *argv, int argc, void **output,
               char **error)
{
    return sl__modcmd_call(module, command, true, argv, argc, output, error);
}

int
sl__modcmd_call(const char *module, const char *command, bool may_modify,
                const char *const *argv, int argc, void **output,
                char **error)
{
    struct sl_modcmd_arg args[MODCMD_MAX_ARGS];
    struct modcmd c;
    struct modcmd *found;
    int required = 0;

    *output = NULL;
    *error = NULL;
    pthread_mutex_lock(&registry_lock);
    found = find_locked(module, command);
    if (found != NULL) {
        c = *found;
    }
    pthread_mutex_unlock(&registry_lock);
    if (found == NULL) {
        *error = format_error("no command '%s' in module '%s'", command,
                              module);
        return -ENOENT;
    }
    if (c.kind != SL_MODCMD_PASSIVE && !may_modify) {
        *error = format_error("%s %s changes state: it needs POST and an "
                              "admin account", c.module, c.command);
        return -EACCES;
    }
    for (int i = 0; i < c.nargs; i++) {
        required += c.args[i].optional ? 0 : 1;
    }
    if (argc < required || argc > c.nargs) {
        *error = format_error("%s %s takes %d to %d arguments, got %d",
                              c.module, c.command, required, c.nargs, argc);
        return -EINVAL;
    }
    memset(args, 0, sizeof(args));
    for (int i = 0; i < c.nargs; i++) {
        const char *text = i < argc ? argv[i] : NULL;

        if (text != NULL && text[0] == '\0' && c.args[i].optional) {
            text = NULL;
        }
        if (resolve_arg(&c.args[i], i, text, &args[i], error) < 0) {
            return -EINVAL;
        }
    }
    return c.fn(args, c.nargs, output, error);
}

/* ---- the test hook ---- */

static pthread_t hook_thread;
static atomic_bool hook_stop;
static bool hook_running;
static int hook_fd = -1;

static void
write_result(const char *path, int rc, void *output, const char *error)
{
    char tmp[4200];
    json_t *doc = json_pack("{s:i}", "rc", rc);

    if (rc == 0) {
        json_object_set_new(doc, "output",
                            output ? (json_t *)output : json_null());
    } else {
        json_object_set_new(doc, "error", json_string(error ? error : ""));
        json_decref(output);
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (json_dump_file(doc, tmp, JSON_COMPACT) == 0) {
        rename(tmp, path);
    } else {
        sl_log_warn("test hook: cannot write '%s'", tmp);
    }
    json_decref(doc);
}

static void
run_line(char *line, const char *out_path)
{
    const char *words[MODCMD_MAX_ARGS + 2];
    int n = 0;
    char *save = NULL;
    void *output = NULL;
    char *error = NULL;
    int rc;

    for (char *w = strtok_r(line, " \t\r", &save);
         w != NULL && n < MODCMD_MAX_ARGS + 2;
         w = strtok_r(NULL, " \t\r", &save)) {
        words[n++] = w;
    }
    if (n < 2) {
        write_result(out_path, -EINVAL, NULL, "expected: module command...");
        return;
    }
    sl_log_notice("test hook: calling %s %s", words[0], words[1]);
    rc = sl_modcmd_call(words[0], words[1], words + 2, n - 2, &output,
                        &error);
    write_result(out_path, rc, output, error);
    free(error);
}

static void *
hook_main(void *arg)
{
    const char *out_path = arg;
    char buf[4096];
    size_t len = 0;

    while (!atomic_load(&hook_stop)) {
        struct pollfd pfd = {.fd = hook_fd, .events = POLLIN};
        ssize_t r;
        char *nl;

        if (poll(&pfd, 1, 200) <= 0) {
            continue;
        }
        r = read(hook_fd, buf + len, sizeof(buf) - 1 - len);
        if (r <= 0) {
            continue;
        }
        len += (size_t)r;
        buf[len] = '\0';
        while ((nl = strchr(buf, '\n')) != NULL) {
            *nl = '\0';
            run_line(buf, out_path);
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len + 1);
        }
        if (len == sizeof(buf) - 1) {
            len = 0;   /* an overlong line: drop it */
        }
    }
    return NULL;
}

int
sl__modcmd_test_hook_start(void)
{
    const char *fifo = getenv("SLUICE_TEST_CMD_FIFO");
    const char *out = getenv("SLUICE_TEST_CMD_OUT");
    int rc;

    if (fifo == NULL || out == NULL || fifo[0] == '\0' || out[0] == '\0') {
        return 0;
    }
    /* O_RDWR: the FIFO always has a writer, so reads never see EOF
     * between two test clients. */
    hook_fd = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (hook_fd < 0) {
        sl_log_error("test hook: cannot open '%s': %s", fifo,
                     strerror(errno));
        return -errno;
    }
    atomic_store(&hook_stop, false);
    rc = pthread_create(&hook_thread, NULL, hook_main, (void *)out);
    if (rc != 0) {
        close(hook_fd);
        hook_fd = -1;
        return -rc;
    }
    hook_running = true;
    sl_log_notice("test hook: module commands read from '%s'", fifo);
    return 0;
}

void
sl__modcmd_test_hook_stop(void)
{
    if (!hook_running) {
        return;
    }
    atomic_store(&hook_stop, true);
    pthread_join(hook_thread, NULL);
    close(hook_fd);
    hook_fd = -1;
    hook_running = false;
}
