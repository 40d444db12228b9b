/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stand-ins for the configuration diagnostics (config_diag.c) in the
 * state-machine fuzz targets: params.c (linked for sl_params_bool) reports
 * through them. They were written when the diagnostics lived in config.c,
 * whose link would have pulled in the whole core (workers, DCBs,
 * sessions) that these targets fake. The targets never load a
 * configuration.
 */
#ifndef FAKE_CFG_H
#define FAKE_CFG_H

#include "config_int.h"

void
sl__cfg_error(struct sl_cfg_diag *d, int line, const char *fmt, ...)
{
}

void
sl__cfg_warn(struct sl_cfg_diag *d, int line, const char *fmt, ...)
{
}

void
sl__cfg_ignored(struct sl_cfg_diag *d, int line, const char *name,
                const char *what, const char *reason)
{
}

#endif
