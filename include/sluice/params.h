/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Typed parameter specifications and validated parameter sets.
 *
 * Every configured object (the [maxscale] section, servers, services,
 * listeners, monitors, filters) is validated against tables of
 * struct sl_param_spec: the core's own table for the object type plus the
 * module's table. Unknown names, missing mandatory parameters, values of the
 * wrong type and enum values not in the list are configuration errors,
 * reported with file and line. Defaults are applied, so a getter always
 * finds a value for a declared parameter.
 *
 * Context: a struct sl_params is immutable once the object that holds it is
 * published; getters may be called from any thread.
 */
#ifndef SLUICE_PARAMS_H
#define SLUICE_PARAMS_H

#include <sluice/ccdefs.h>

enum sl_param_type {
    SL_PARAM_STRING,     /* any text */
    SL_PARAM_PASSWORD,   /* text, never printed in diagnostics */
    SL_PARAM_INT,        /* signed 64-bit decimal */
    SL_PARAM_COUNT,      /* unsigned 64-bit decimal */
    SL_PARAM_BOOL,       /* true/false, yes/no, on/off, 1/0 */
    SL_PARAM_SIZE,       /* bytes with optional suffix k, M, G (x1024),
                          * Ki, Mi, Gi also accepted */
    SL_PARAM_DURATION,   /* milliseconds; suffix h, m, s, ms; a bare number
                          * means the spec's SL_PARAM_F_SECONDS unit if set */
    SL_PARAM_ENUM,       /* one of spec->enum_values */
    SL_PARAM_ENUM_MASK,  /* comma separated subset of spec->enum_values */
    SL_PARAM_SERVERS,    /* comma separated server names (must exist) */
    SL_PARAM_TARGETS,    /* comma separated servers or services */
    SL_PARAM_SERVICE,    /* one service name (must exist) */
    SL_PARAM_FILTERS,    /* '|' separated filter names (must exist) */
    SL_PARAM_PATH,       /* a filesystem path */
    SL_PARAM_REGEX,      /* a pcre2 pattern, compiled at validation */
};

enum sl_param_flags {
    SL_PARAM_F_MANDATORY = 1u << 0,
    SL_PARAM_F_SECONDS = 1u << 1,   /* bare durations are seconds */
    SL_PARAM_F_DEPRECATED = 1u << 2,/* accepted with a warning */
    SL_PARAM_F_IGNORED = 1u << 3,   /* accepted for MaxScale compatibility,
                                     * has no effect: a warning at start-up
                                     * and in --config-check, giving the
                                     * spec's description as the reason.
                                     * Only for cosmetic/tuning names. */
    SL_PARAM_F_REFUSED = 1u << 4,   /* a MaxScale name Sluice does not
                                     * implement: setting it is a
                                     * configuration error naming file, line
                                     * and parameter, with the description
                                     * as the reason */
};

struct sl_param_spec {
    const char *name;
    enum sl_param_type type;
    const char *default_value;        /* NULL: no default */
    unsigned flags;                   /* enum sl_param_flags */
    const char *const *enum_values;   /* NULL-terminated, for ENUM types */
    const char *description;
};

/* Terminates a spec table. */
#define SL_PARAM_END {NULL, 0, NULL, 0, NULL, NULL}

struct sl_params;   /* opaque: validated name/value pairs */

/* Raw text of a parameter (after defaults), NULL if unset and no default. */
SL_EXPORT const char *sl_params_get(const struct sl_params *p,
                                    const char *name);
SL_EXPORT bool sl_params_has(const struct sl_params *p, const char *name);
SL_EXPORT const char *sl_params_string(const struct sl_params *p,
                                       const char *name);
SL_EXPORT int64_t sl_params_int(const struct sl_params *p, const char *name);
SL_EXPORT uint64_t sl_params_count(const struct sl_params *p,
                                   const char *name);
SL_EXPORT bool sl_params_bool(const struct sl_params *p, const char *name);
SL_EXPORT uint64_t sl_params_size(const struct sl_params *p,
                                  const char *name);
/* Duration in milliseconds. */
SL_EXPORT uint64_t sl_params_duration_ms(const struct sl_params *p,
                                         const char *name);
/* Index into the spec's enum_values; -1 if unset. */
SL_EXPORT int sl_params_enum(const struct sl_params *p, const char *name);
/* Bit i set when enum_values[i] was listed. */
SL_EXPORT uint64_t sl_params_enum_mask(const struct sl_params *p,
                                       const char *name);
/* Iterate all set parameters: returns false past the end. *it starts at 0. */
SL_EXPORT bool sl_params_next(const struct sl_params *p, size_t *it,
                              const char **name, const char **value);

/* Parse helpers shared with the validator (0 or -EINVAL). */
SL_EXPORT int sl_param_parse_bool(const char *s, bool *out);
SL_EXPORT int sl_param_parse_size(const char *s, uint64_t *out);
SL_EXPORT int sl_param_parse_duration(const char *s, bool bare_seconds,
                                      uint64_t *ms_out);

/* The validated [maxscale] section of the running configuration (NULL
 * before one is loaded). Immutable; any thread. */
SL_EXPORT const struct sl_params *sl_global_params(void);

#endif
