/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Core-internal part of module commands: the checked call the admin API
 * uses, and the system tests' command hook (see modcmd.c).
 */
#ifndef SLUICE_CORE_MODCMD_INT_H
#define SLUICE_CORE_MODCMD_INT_H

#include <stdbool.h>

/*
 * sl_modcmd_call that refuses, when may_modify is false, every command not
 * registered SL_MODCMD_PASSIVE: -EACCES with *error set, before arguments
 * are even resolved. The REST API passes false for GET/HEAD and for
 * read-only users, so only an admin's POST can change state. Any thread.
 */
int sl__modcmd_call(const char *module, const char *command, bool may_modify,
                    const char *const *argv, int argc, void **output,
                    char **error);

/* Start the hook thread when SLUICE_TEST_CMD_FIFO and SLUICE_TEST_CMD_OUT
 * are set; 0 (also when unset) or -errno. */
int sl__modcmd_test_hook_start(void);  /* main only */
/* Stop and join it (no-op when not started). */
void sl__modcmd_test_hook_stop(void);

#endif
