/*
 * libFuzzer target for the configuration reader: arbitrary bytes go through
 * the ini parser and the validator ([maxscale], servers, and the core
 * parameters of every other object). Modules are looked up in a directory
 * that does not exist, so no code is ever loaded from fuzz input.
 *
 * The parser and validator sources are compiled into this target (they
 * take precedence over libsluice's copies), because libsluice itself is
 * built without the fuzzer's coverage instrumentation.
 */
#include "../server/core/ini.c"
#include "../server/core/params.c"
#include "../server/core/config.c"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    atomic_store(&sl__log_level, -1);   /* silence ignored-parameter info */
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_cfg_diag d = {
        .file = "fuzz.cnf",
        .quiet = true,
        .module_dir = "/nonexistent/sluice-fuzz-modules",
    };
    struct sl_config *cfg;

    cfg = sl__config_load_text((const char *)data, size, false, &d);
    sl__config_free(cfg);
    sl__cfg_diag_free(&d);
    return 0;
}
