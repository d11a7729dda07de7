/*
 * declared.h - the declared queues: the state machine the raft log drives.
 *
 * A committed entry is a command, declare (name, options) or delete (name),
 * encoded in a small versioned binary form.  Every node applies the same
 * commands in the same order, so every node holds the same set; a snapshot
 * is the whole set encoded as declare commands.  Master only, process
 * memory; the master publishes the set into shm/catalog after each change.
 * Errors: 0 or -errno (-EINVAL for a malformed command or snapshot).
 */
#ifndef MAYFLY_MASTER_DECLARED_H
#define MAYFLY_MASTER_DECLARED_H

#include <stddef.h>
#include <stdint.h>

#include "shm/segment.h"

#define DECL_NAME_MAX 512

enum decl_op { DECL_DECLARE = 1, DECL_DELETE = 2 };

struct decl_queue {
    char *name;
    size_t len;
    struct shm_qopts opts;
    char *dl; /* deadLetter name, SHM_QOPT_DL_LEN(opts.flags) bytes, or NULL */
};

struct decl_set {
    struct decl_queue *q; /* sorted by name (memcmp, then length) */
    size_t n, cap;
};

/* A decoded command. */
struct decl_cmd {
    enum decl_op op;
    const char *name; /* points into the encoded bytes */
    size_t len;
    struct shm_qopts opts; /* DECL_DECLARE only */
    const char *dl;        /* its deadLetter name (SHM_QOPT_DL_LEN(opts.flags)
                       bytes), pointing into the encoded bytes */
};

/* decl_encode - a command into buf (malloc'd, *len bytes).  0/-ENOMEM. */
int decl_encode(const struct decl_cmd *c, void **buf, size_t *len);

/* decl_decode - parse a command; never trusts its input.  0/-EINVAL. */
int decl_decode(const void *buf, size_t len, struct decl_cmd *c);

/*
 * decl_apply - apply a command.  *changed is 1 when the set changed (a
 * delete of an absent queue or a declare with the same options is not).
 */
int decl_apply(struct decl_set *s, const struct decl_cmd *c, int *changed);

/* decl_find - the declared queue name, or NULL. */
const struct decl_queue *decl_find(const struct decl_set *s, const char *name,
                                   size_t len);

/* decl_snapshot - the whole set, encoded (malloc'd).  0 or -ENOMEM. */
int decl_snapshot(const struct decl_set *s, void **buf, size_t *len);

/* decl_restore - replace the set with a snapshot's.  0 or -EINVAL. */
int decl_restore(struct decl_set *s, const void *buf, size_t len);

/* decl_free - release the set; it is empty after. */
void decl_free(struct decl_set *s);

#endif
