/*
 * test_fuzz_replay.c - make test replays every fuzz target's seeds and
 * regressions (test/fuzz/<name>/ and its regressions/): one test a target,
 * which runs the target on each file, as libFuzzer runs a file given as an
 * argument.  A broken property aborts, a memory error is ASan's report;
 * either way the last file named on stderr is the input.
 *
 * fuzz.mk builds each test/fuzz/fuzz_<name>.c with its entry points renamed
 * fuzz_one_<name> and fuzz_init_<name>, and passes FUZZ_TARGETS
 * ("X(ack) X(config) ...") and FUZZ_DIR (the absolute test/fuzz).
 */
#include <sys/stat.h>

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

typedef int fuzz_one_fn(const uint8_t *data, size_t size);
typedef int fuzz_init_fn(int *argc, char ***argv);

/* read_file - the whole of path in a buffer of exactly its size (so ASan
 * sees a read past the end); NULL for an empty file, with *len 0. */
static uint8_t *
read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    uint8_t *b;

    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fstat(fileno(f), &st), 0);
    *len = (size_t)st.st_size;
    b = *len > 0 ? malloc(*len) : NULL;
    cr_assert(*len == 0 || (b != NULL && fread(b, 1, *len, f) == *len), "%s",
              path);
    fclose(f);
    return b;
}

/* replay_dir - run one on every regular file of dir; how many ran. */
static unsigned
replay_dir(const char *dir, fuzz_one_fn *one)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    unsigned ran = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        char path[4096];
        struct stat st;
        uint8_t *data;
        size_t len;

        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        fprintf(stderr, "fuzz replay: %s\n", path);
        data = read_file(path, &len);
        one(data != NULL ? data : (const uint8_t *)"", len);
        free(data);
        ran++;
    }
    closedir(d);
    return ran;
}

/* replay - the target's init, then its seeds and regressions. */
static void
replay(const char *name, fuzz_one_fn *one, fuzz_init_fn *init)
{
    char dir[4096];
    unsigned seeds;
    int argc = 1;
    char *args[] = {(char *)name, NULL}, **argv = args;

    if (init != NULL)
        init(&argc, &argv);
    snprintf(dir, sizeof(dir), "%s/%s", FUZZ_DIR, name);
    seeds = replay_dir(dir, one);
    cr_assert_gt(seeds, 0, "no seeds in %s", dir);
    snprintf(dir, sizeof(dir), "%s/%s/regressions", FUZZ_DIR, name);
    replay_dir(dir, one);
}

#define X(name)                                                                \
    int fuzz_one_##name(const uint8_t *data, size_t size);                     \
    int fuzz_init_##name(int *argc, char ***argv) __attribute__((weak));       \
    Test(fuzz_replay, name)                                                    \
    {                                                                          \
        replay(#name, fuzz_one_##name, fuzz_init_##name);                      \
    }
FUZZ_TARGETS
