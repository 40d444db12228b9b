/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-passwd [-d DIRECTORY] PASSWORD, or sluice-passwd DIRECTORY
 * PASSWORD (maxpasswd's form): print PASSWORD encrypted with the key in
 * DIRECTORY/.secrets (default /var/lib/sluice), as hex to put in a
 * password= parameter. With '-' as PASSWORD it is read from standard
 * input (first line), which keeps it out of the process list.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "config_files.h"

static int
usage(FILE *f, int status)
{
    fprintf(f, "Usage: sluice-passwd [-d DIRECTORY | DIRECTORY] "
            "PASSWORD|-\nPrint PASSWORD encrypted with the key in "
            "DIRECTORY/.secrets (default %s;\ncreate it with "
            "sluice-keys), in MaxScale's format (maxpasswd). With '-' the\n"
            "password is read from standard input.\n\n"
            "  -d DIRECTORY   the directory of the .secrets file\n"
            "  -h, --help     show this help and exit\n"
            "      --version  show the version and exit\n",
            SL_DEFAULT_DATADIR);
    return status;
}

int
main(int argc, char **argv)
{
    const char *dir = SL_DEFAULT_DATADIR;
    const char *pw;
    char line[4096];
    char path[4200];
    char err[4400];
    unsigned char key[SL_SECRETS_KEY_LEN];
    char *hex;
    int rc;

    if (argc == 2 && (strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "--help") == 0)) {
        return usage(stdout, 0);
    }
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("sluice-passwd %s\n", SLUICE_VERSION);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "-d") == 0) {
        dir = argv[2];
        pw = argv[3];
    } else if (argc == 3 && argv[1][0] != '-') {
        dir = argv[1];
        pw = argv[2];
    } else if (argc == 2) {
        pw = argv[1];
    } else {
        return usage(stderr, 2);
    }
    if (strcmp(pw, "-") == 0) {
        if (fgets(line, sizeof(line), stdin) == NULL) {
            fprintf(stderr, "sluice-passwd: no password on standard "
                    "input\n");
            return 1;
        }
        line[strcspn(line, "\r\n")] = '\0';
        pw = line;
    }
    snprintf(path, sizeof(path), "%s/.secrets", dir);
    rc = sl__secrets_read(path, key, err, sizeof(err));
    if (rc == -ENOENT) {
        fprintf(stderr, "sluice-passwd: no key file '%s' (create it with "
                "sluice-keys)\n", path);
        return 1;
    }
    if (rc < 0) {
        fprintf(stderr, "sluice-passwd: %s\n", err);
        return 1;
    }
    hex = sl__secret_encrypt(key, pw);
    OPENSSL_cleanse(key, sizeof(key));
    OPENSSL_cleanse(line, sizeof(line));
    if (hex == NULL) {
        fprintf(stderr, "sluice-passwd: encryption failed\n");
        return 1;
    }
    printf("%s\n", hex);
    free(hex);
    return 0;
}
