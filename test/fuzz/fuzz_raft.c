/*
 * fuzz_raft.c - raft messages (consensus/raft_msg.c): decoding trusts
 * nothing, and what it accepts encodes back to the very same bytes (the
 * format has one spelling of each message).
 */
#include "consensus/raft_msg.h"
#include "test/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct raft_msg m;
    unsigned char *again;
    int rc = raft_msg_decode(data, size, &m);

    if (rc != 0) {
        FUZZ_CHECK(rc == -EBADMSG || rc == -EPROTO || rc == -ENOMEM, "rc %d",
                   rc);
        FUZZ_CHECK(m.entries == NULL && m.data == NULL,
                   "a refusal holds memory");
        return 0;
    }
    FUZZ_CHECK(raft_msg_size(&m) == size, "%zu bytes encode as %zu", size,
               raft_msg_size(&m));
    again = malloc(size);
    FUZZ_CHECK(again != NULL, "out of memory");
    FUZZ_CHECK(raft_msg_encode(&m, again, size) == 0, "decoded, not encoded");
    FUZZ_CHECK(memcmp(again, data, size) == 0, "encodes to other bytes");
    free(again);
    raft_msg_free(&m);
    return 0;
}
