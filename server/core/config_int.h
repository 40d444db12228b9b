/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the configuration units -- the loader (config.c,
 * config_objects.c), the diagnostics (config_diag.c), the spec tables
 * (config_spec.c), the validator (params.c), persistence (persist.c) --
 * shared with main.c, the REST layer, the unit tests and the fuzz target.
 * The module loader has its own header (module_int.h).
 *
 * Diagnostics: every configuration message goes through sl__cfg_error() or
 * sl__cfg_warn(), which prefix "FILE:LINE: " (or "FILE: " for line 0),
 * count it, keep it in d->text (tests look at it) and print it on stderr
 * unless d->quiet; when sl__config_errors_to_log is set they also go to the
 * log (main sets it when the log is a file, so a terminal does not show
 * each line twice).
 *
 * Context: main thread only (configuration is loaded before any worker).
 */
#ifndef SLUICE_CORE_CONFIG_INT_H
#define SLUICE_CORE_CONFIG_INT_H

#include "internal.h"

struct sl_cfg_diag {
    const char *file;          /* name used in "FILE:LINE:" */
    int errors;
    int warnings;
    bool quiet;                /* do not print to stderr */
    const char *module_dir;    /* if set, overrides every other source */
    bool skip_unknown;         /* set while validating an object whose
                                * module failed to load: its parameters
                                * cannot be told from typos */
    char *text;                /* every message, '\n'-terminated */
    size_t len;
    size_t cap;
    /* Parameters accepted and ignored (SL_PARAM_F_IGNORED): one line
     * each, "FILE:LINE: NAME in WHAT: REASON", for --config-check's
     * summary. */
    char *ignored;
    size_t ignored_len;
    size_t ignored_cap;
    int nignored;
    /* Where the lines of a merged text came from (the main file, then
     * <config>.d/ files): line L with srcs[i].first <= L maps to
     * srcs[i].file, line L - first + 1. Empty: every line is d->file's. */
    struct sl_cfg_src {
        int first;
        char *file;
    } *srcs;
    size_t nsrcs;
};

extern bool sl__config_errors_to_log;

void sl__cfg_error(struct sl_cfg_diag *d, int line, const char *fmt, ...)
    SL_PRINTF(3, 4);
void sl__cfg_warn(struct sl_cfg_diag *d, int line, const char *fmt, ...)
    SL_PRINTF(3, 4);
void sl__cfg_diag_free(struct sl_cfg_diag *d);

/* config_objects.c, for the loader and the REST API alike:
 * admin_audit_exclude_methods: the bit mask of a comma list of HTTP
 * methods (bit i for sl__http_methods[i]); 0, or -1 for an unknown name. */
extern const char *const sl__http_methods[];
int sl__http_methods_parse(const char *list, unsigned *mask);
/* admin_readwrite_hosts / admin_readonly_hosts: addresses, address/prefix,
 * "localhost", "%" (any); as sl__pp_networks_parse (proxyproto.h). */
struct sl_pp_net;
int sl__host_list_parse(const char *value, struct sl_pp_net **out,
                        size_t *n, char *err, size_t errlen);
/* A parameter accepted for MaxScale compatibility with no effect: a
 * warning, and a line in d->ignored for the --config-check summary. */
void sl__cfg_ignored(struct sl_cfg_diag *d, int line, const char *name,
                     const char *what, const char *reason);

/* As sl__config_load, collecting messages into d (d->file is set here). */
struct sl_config *sl__config_load_diag(const char *path, bool create_instances,
                                       struct sl_cfg_diag *d);
/* Load from memory; d->file names the source in messages. */
struct sl_config *sl__config_load_text(const char *text, size_t len,
                                       bool create_instances,
                                       struct sl_cfg_diag *d);

/*
 * Add the objects of an ini text (no [maxscale]) to a running cfg: the
 * same validation as at start-up, module instances created; new names
 * only. On any error nothing is added and -EINVAL is returned with the
 * messages in d. Admin thread (the only writer of the arrays at run time).
 */
int sl__config_add_text(struct sl_config *cfg, const char *text, size_t len,
                        struct sl_cfg_diag *d);

/* ---- persist.c ---- */

/* Lay PERSISTDIR/ *.cnf (objects created or changed through the REST
 * API, runtime.c) over a main configuration text: takes text, returns the
 * merged text with *len updated. Main thread, while loading. */
char *sl__persist_merge(char *text, size_t *len);
/* Write PERSISTDIR/NAME.cnf: [name] with p's explicit values (line > 0)
 * plus overrides "key=value\n..." (which win). 0 or -errno (logged).
 * Admin thread. */
int sl__persist_write(const char *name, const struct sl_params *p,
                      const char *overrides);
/* Remove PERSISTDIR/NAME.cnf if it exists. Admin thread. */
void sl__persist_remove(const char *name);

/* The core's own spec table for an object type ("maxscale", "server",
 * "service", "listener", "monitor", "filter"), or NULL. */
const struct sl_param_spec *sl__config_core_specs(const char *type);

/*
 * Validate p against up to `ntables` spec tables (first match wins):
 * unknown names (with a did-you-mean suggestion), values of the wrong
 * type, missing mandatory parameters (reported at section_line); then add
 * defaults. `what` names the object, e.g. "server 'db1'". Returns the
 * number of errors added to d.
 */
int sl__params_validate(struct sl_params *p,
                        const struct sl_param_spec *const *tables,
                        size_t ntables, struct sl_cfg_diag *d,
                        const char *what, int section_line);
/* Check one value against a spec: 0, or -EINVAL with why[] saying what was
 * expected ("expected an integer"). */
int sl__param_check(const struct sl_param_spec *spec, const char *value,
                    char *why, size_t whylen);
/* The other name of a setting known under two names
 * ("max_replication_lag" <-> "max_slave_replication_lag"), or NULL. */
const char *sl__params_same_setting(const char *name);
/* Remove a parameter (no-op when absent). */
void sl__params_unset(struct sl_params *p, const char *name);
/* Line where a parameter was set, 0 for a default or unknown name. */
int sl__params_line(const struct sl_params *p, const char *name);
/* The row of one spec table (NULL: none) named name, or NULL. */
const struct sl_param_spec *sl__param_spec_find(
    const struct sl_param_spec *table, const char *name);
/* The spec the validator matched for name, or NULL. */
const struct sl_param_spec *sl__params_spec(const struct sl_params *p,
                                            const char *name);
/* Levenshtein distance (case-insensitive), SIZE_MAX for long strings. */
size_t sl__edit_distance(const char *a, const char *b);
int sl__param_parse_int(const char *s, int64_t *out);
int sl__param_parse_count(const char *s, uint64_t *out);

/* A service's user_accounts_file(_usage): 0, or -1 with err and the
 * parameter at fault (config_objects.c). */
int sl__check_accounts_file(const struct sl_params *p, const char **param,
                            char *err, size_t errlen);

#endif
