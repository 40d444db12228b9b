/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-keys [DIRECTORY]: create DIRECTORY/.secrets (default
 * /var/lib/sluice), the key file for encrypted passwords, in MaxScale's
 * format (maxkeys of MaxScale 2.5+): JSON with an AES-256-CBC key, mode
 * 0400. An existing key file is never overwritten: passwords encrypted
 * with it would no longer decrypt.
 */
#include <stdio.h>
#include <string.h>

#include "config_files.h"

int
main(int argc, char **argv)
{
    const char *dir = SL_DEFAULT_DATADIR;
    char path[4200];
    char err[4400];

    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("sluice-keys %s\n", SLUICE_VERSION);
        return 0;
    }
    if (argc > 2 || (argc == 2 && (strcmp(argv[1], "-h") == 0 ||
                                   strcmp(argv[1], "--help") == 0))) {
        fprintf(argc > 2 ? stderr : stdout,
                "Usage: sluice-keys [DIRECTORY]\n"
                "Create DIRECTORY/.secrets (default %s), the key for "
                "passwords\nencrypted with sluice-passwd, in MaxScale's "
                "format (maxkeys). An existing\nkey file is never "
                "overwritten.\n\n"
                "  -h, --help     show this help and exit\n"
                "      --version  show the version and exit\n",
                SL_DEFAULT_DATADIR);
        return argc > 2 ? 2 : 0;
    }
    if (argc == 2) {
        dir = argv[1];
    }
    snprintf(path, sizeof(path), "%s/.secrets", dir);
    if (sl__secrets_write(path, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice-keys: %s\n", err);
        return 1;
    }
    printf("Encryption key written to '%s' (mode 0400).\n", path);
    return 0;
}
