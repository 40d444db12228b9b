/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sluice executable: everything is in libsluice (server/core/main.c),
 * which exports sl_daemon_main for this file and nothing internal.
 */
int sl_daemon_main(int argc, char **argv);

int
main(int argc, char **argv)
{
    return sl_daemon_main(argc, argv);
}
