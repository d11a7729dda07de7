/*
 * raft_msg.h - raft log entries and peer messages, and their wire format.
 *
 * A message is what one raft core asks the master to carry to another node;
 * the master moves it as bytes (raft_msg_encode) over the cluster port and
 * hands the decoded message to the peer's raft_step().  Decoding trusts
 * nothing: lengths, counts, types and node indices are all checked.
 * No locking (plain values).  Errors: 0 or -errno.
 */
#ifndef MAYFLY_CONSENSUS_RAFT_MSG_H
#define MAYFLY_CONSENSUS_RAFT_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RAFT_MAX_NODES    32          /* node indices are 0..n-1, n <= this */
#define RAFT_ENTRY_MAX    (1u << 20)  /* bytes in one proposed entry */
#define RAFT_SNAPSHOT_MAX (64u << 20) /* bytes in one snapshot blob */
#define RAFT_MSG_VERSION  1

enum raft_entry_type {
    RAFT_ENTRY_NOOP = 1, /* appended by a new leader; nothing to apply */
    RAFT_ENTRY_DATA = 2, /* an opaque command for the state machine */
};

/* struct raft_entry - one log entry; data is owned by whoever holds it. */
struct raft_entry {
    uint64_t index;
    uint64_t term;
    enum raft_entry_type type;
    size_t len;
    void *data; /* NULL when len == 0 */
};

enum raft_msg_type {
    RAFT_MSG_PREVOTE = 1,  /* "would you vote for me at term?" (no change) */
    RAFT_MSG_PREVOTE_RESP, /* reject = no */
    RAFT_MSG_VOTE,         /* RequestVote */
    RAFT_MSG_VOTE_RESP,    /* reject = no */
    RAFT_MSG_APPEND,       /* AppendEntries; heartbeat when n_entries == 0 */
    RAFT_MSG_APPEND_RESP,  /* ack (index = match) or reject with a hint */
    RAFT_MSG_SNAPSHOT,     /* InstallSnapshot, the whole blob at once */
    RAFT_MSG_TIMEOUT_NOW,  /* leader transfer: start an election now */
};

/*
 * struct raft_msg - one message; field use by type:
 *   index     PREVOTE/VOTE: sender's last log index; APPEND: prev index;
 *             APPEND_RESP: match index, or the prev index rejected;
 *             SNAPSHOT: last index the snapshot covers
 *   log_term  PREVOTE/VOTE: term of that last entry; APPEND: prev term;
 *             APPEND_RESP reject: term of the follower's conflicting entry;
 *             SNAPSHOT: term of its last index
 *   commit    APPEND: leader's commit index; APPEND_RESP: the sender's
 *             commit index, applied by the time the answer left (0 from a
 *             node of an earlier build, which left the field unset)
 *   hint      APPEND_RESP reject: the first index the leader should retry
 * entries and data are owned by the message: raft_msg_free() releases them.
 */
struct raft_msg {
    enum raft_msg_type type;
    int from;
    int to;
    uint64_t term;
    uint64_t index;
    uint64_t log_term;
    uint64_t commit;
    uint64_t hint;
    bool reject;
    struct raft_entry *entries; /* APPEND */
    size_t n_entries;
    void *data; /* SNAPSHOT blob */
    size_t len;
};

/* raft_entry_dup - dst = src with its own copy of the data. */
int raft_entry_dup(struct raft_entry *dst, const struct raft_entry *src);

/* raft_msg_free - release what m owns and zero it; m itself stays. */
void raft_msg_free(struct raft_msg *m);

/* raft_msg_size - bytes raft_msg_encode() writes for m. */
size_t raft_msg_size(const struct raft_msg *m);

/*
 * raft_msg_encode - write m into buf (cap bytes).  Returns 0, -ENOBUFS when
 * cap < raft_msg_size(m), or -EINVAL for a message decode would refuse.
 */
int raft_msg_encode(const struct raft_msg *m, void *buf, size_t cap);

/*
 * raft_msg_decode - parse len bytes into *m, which then owns copies of the
 * entries and blob (buf may go away).  Returns 0; -EPROTO for another
 * version; -EBADMSG for anything malformed (truncated, trailing bytes, bad
 * type, flag, node index or length); -ENOMEM.  On error *m is zeroed.
 */
int raft_msg_decode(const void *buf, size_t len, struct raft_msg *m);

#endif
