/*
 * Core-internal part of module commands: the system tests' command hook
 * (see modcmd.c). Main thread only.
 */
#ifndef SLUICE_CORE_MODCMD_INT_H
#define SLUICE_CORE_MODCMD_INT_H

/* Start the hook thread when SLUICE_TEST_CMD_FIFO and SLUICE_TEST_CMD_OUT
 * are set; 0 (also when unset) or -errno. */
int sl__modcmd_test_hook_start(void);
/* Stop and join it (no-op when not started). */
void sl__modcmd_test_hook_stop(void);

#endif
