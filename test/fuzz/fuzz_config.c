/*
 * fuzz_config.c - the configuration file (master/config.c,
 * config_read_lines() over the bytes as a memory stream): no crash, every
 * string setting terminated inside its field, the peer count in bounds,
 * and a refusal that says something.
 */
#include "master/config.h"
#include "test/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config c;
    char err[512] = "";
    char *copy;
    FILE *f;
    int rc;

    if (size == 0)
        return 0;
    copy = fuzz_cstr(data, size);
    f = fmemopen(copy, size, "r");
    FUZZ_CHECK(f != NULL, "fmemopen");
    config_defaults(&c);
    rc = config_read_lines(&c, f, "fuzz.conf", err, sizeof(err));
    fclose(f);
    free(copy);
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && strncmp(err, "fuzz.conf:", 10) == 0, "rc %d: %s",
                   rc, err);
        return 0;
    }
    FUZZ_CHECK(c.npeers >= 0 && c.npeers <= CONFIG_PEERS_MAX, "%d peers",
               c.npeers);
    FUZZ_CHECK(
        strnlen(c.node_id, sizeof(c.node_id)) < sizeof(c.node_id) &&
            strnlen(c.listen, sizeof(c.listen)) < sizeof(c.listen) &&
            strnlen(c.data_dir, sizeof(c.data_dir)) < sizeof(c.data_dir) &&
            strnlen(c.log_level, sizeof(c.log_level)) < sizeof(c.log_level),
        "a setting not terminated");
    return 0;
}
