/*
 * raft_msg.c - the raft wire format: encode and decode peer messages.
 *
 * Every integer is big-endian.  A message is a 52-byte header and a body:
 *   off  size  field
 *     0     1  version   RAFT_MSG_VERSION
 *     1     1  type      enum raft_msg_type
 *     2     1  from      node index < RAFT_MAX_NODES
 *     3     1  to        node index < RAFT_MAX_NODES
 *     4     4  flags     bit 0: reject; other bits must be zero
 *     8     8  term
 *    16     8  index
 *    24     8  log_term
 *    32     8  commit    APPEND: leader's; APPEND_RESP: sender's, applied
 *    40     8  hint
 *    48     4  count     APPEND: entries; SNAPSHOT: blob bytes; else 0
 *    52        body      APPEND: count x { u64 term, u8 type, u32 len, len
 *                        bytes }, entry i has index = index + 1 + i;
 *                        SNAPSHOT: the blob; other types: nothing
 * The decoder never trusts a length: it checks each against the bytes left
 * before allocating, and refuses trailing bytes.  No locking.
 */
#include "consensus/raft_msg.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MSG_HEADER      52
#define MSG_ENTRY_HDR   13 /* u64 term, u8 type, u32 len */
#define MSG_FLAG_REJECT 1u

/* struct msg_cursor - a bounded reader over untrusted bytes. */
struct msg_cursor {
    const unsigned char *p;
    size_t left;
};

/* put_u32 - big-endian, advancing *p. */
static void
put_u32(unsigned char **p, uint32_t v)
{
    v = htobe32(v);
    memcpy(*p, &v, 4);
    *p += 4;
}

/* put_u64 - big-endian, advancing *p. */
static void
put_u64(unsigned char **p, uint64_t v)
{
    v = htobe64(v);
    memcpy(*p, &v, 8);
    *p += 8;
}

/* take - consume n bytes; false (nothing consumed) when fewer are left. */
static bool
take(struct msg_cursor *c, void *out, size_t n)
{
    if (c->left < n)
        return false;
    memcpy(out, c->p, n);
    c->p += n;
    c->left -= n;
    return true;
}

/* take_u8 - false when the input is exhausted. */
static bool
take_u8(struct msg_cursor *c, uint8_t *v)
{
    return take(c, v, 1);
}

/* take_u32 - big-endian; false when fewer than 4 bytes are left. */
static bool
take_u32(struct msg_cursor *c, uint32_t *v)
{
    if (!take(c, v, 4))
        return false;
    *v = be32toh(*v);
    return true;
}

/* take_u64 - big-endian; false when fewer than 8 bytes are left. */
static bool
take_u64(struct msg_cursor *c, uint64_t *v)
{
    if (!take(c, v, 8))
        return false;
    *v = be64toh(*v);
    return true;
}

/* msg_type_valid - one of enum raft_msg_type. */
static bool
msg_type_valid(unsigned t)
{
    return t >= RAFT_MSG_PREVOTE && t <= RAFT_MSG_TIMEOUT_NOW;
}

/* entry_type_valid - one of enum raft_entry_type. */
static bool
entry_type_valid(unsigned t)
{
    return t == RAFT_ENTRY_NOOP || t == RAFT_ENTRY_DATA;
}

/* msg_check - what decode would refuse, checked before encoding too. */
static bool
msg_check(const struct raft_msg *m)
{
    if (!msg_type_valid(m->type) || m->from < 0 || m->to < 0 ||
        m->from >= RAFT_MAX_NODES || m->to >= RAFT_MAX_NODES)
        return false;
    if (m->type != RAFT_MSG_APPEND && m->n_entries != 0)
        return false;
    if (m->type != RAFT_MSG_SNAPSHOT && m->len != 0)
        return false;
    if (m->len > RAFT_SNAPSHOT_MAX || m->n_entries > UINT32_MAX ||
        m->index > UINT64_MAX - m->n_entries)
        return false;
    for (size_t i = 0; i < m->n_entries; i++) {
        if (!entry_type_valid(m->entries[i].type) ||
            m->entries[i].len > RAFT_ENTRY_MAX)
            return false;
    }
    return true;
}

/* raft_entry_dup - a deep copy; -ENOMEM leaves dst->data NULL. */
int
raft_entry_dup(struct raft_entry *dst, const struct raft_entry *src)
{
    *dst = *src;
    dst->data = NULL;
    if (src->len == 0)
        return 0;
    if ((dst->data = malloc(src->len)) == NULL)
        return -ENOMEM;
    memcpy(dst->data, src->data, src->len);
    return 0;
}

/* raft_msg_free - entries, their data, the blob. */
void
raft_msg_free(struct raft_msg *m)
{
    for (size_t i = 0; i < m->n_entries; i++)
        free(m->entries[i].data);
    free(m->entries);
    free(m->data);
    memset(m, 0, sizeof(*m));
}

/* raft_msg_size - header, entry headers and bytes, blob. */
size_t
raft_msg_size(const struct raft_msg *m)
{
    size_t n = MSG_HEADER + m->len;

    for (size_t i = 0; i < m->n_entries; i++)
        n += MSG_ENTRY_HDR + m->entries[i].len;
    return n;
}

/* raft_msg_encode - the layout at the top of this file. */
int
raft_msg_encode(const struct raft_msg *m, void *buf, size_t cap)
{
    unsigned char *p = buf;

    if (!msg_check(m))
        return -EINVAL;
    if (cap < raft_msg_size(m))
        return -ENOBUFS;
    *p++ = RAFT_MSG_VERSION;
    *p++ = (unsigned char)m->type;
    *p++ = (unsigned char)m->from;
    *p++ = (unsigned char)m->to;
    put_u32(&p, m->reject ? MSG_FLAG_REJECT : 0);
    put_u64(&p, m->term);
    put_u64(&p, m->index);
    put_u64(&p, m->log_term);
    put_u64(&p, m->commit);
    put_u64(&p, m->hint);
    put_u32(&p, (uint32_t)(m->type == RAFT_MSG_APPEND ? m->n_entries : m->len));
    for (size_t i = 0; i < m->n_entries; i++) {
        const struct raft_entry *e = &m->entries[i];

        put_u64(&p, e->term);
        *p++ = (unsigned char)e->type;
        put_u32(&p, (uint32_t)e->len);
        if (e->len > 0)
            memcpy(p, e->data, e->len);
        p += e->len;
    }
    if (m->len > 0)
        memcpy(p, m->data, m->len);
    return 0;
}

/* decode_blob - copy n bytes out of c into a fresh allocation in *out. */
static int
decode_blob(struct msg_cursor *c, size_t n, void **out)
{
    if (n == 0)
        return 0;
    if (c->left < n)
        return -EBADMSG;
    if ((*out = malloc(n)) == NULL)
        return -ENOMEM;
    take(c, *out, n);
    return 0;
}

/* decode_entries - count entries of an APPEND body; m->index is set. */
static int
decode_entries(struct msg_cursor *c, uint32_t count, struct raft_msg *m)
{
    int rc;

    /* Each entry takes at least its header: bound count before calloc. */
    if (count > c->left / MSG_ENTRY_HDR || m->index > UINT64_MAX - count)
        return -EBADMSG;
    if (count == 0)
        return 0;
    if ((m->entries = calloc(count, sizeof(*m->entries))) == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < count; i++) {
        struct raft_entry *e = &m->entries[i];
        uint8_t type;
        uint32_t len;

        m->n_entries = i + 1; /* so raft_msg_free sees what was filled */
        if (!take_u64(c, &e->term) || !take_u8(c, &type) ||
            !take_u32(c, &len) || !entry_type_valid(type) ||
            len > RAFT_ENTRY_MAX)
            return -EBADMSG;
        e->index = m->index + 1 + i;
        e->type = type;
        e->len = len;
        if ((rc = decode_blob(c, len, &e->data)) != 0)
            return rc;
    }
    return 0;
}

/* decode_header - the fixed 52 bytes; *count is the body count field. */
static int
decode_header(struct msg_cursor *c, struct raft_msg *m, uint32_t *count)
{
    uint8_t version, type, from, to;
    uint32_t flags;

    if (c->left < MSG_HEADER)
        return -EBADMSG;
    take_u8(c, &version);
    if (version != RAFT_MSG_VERSION)
        return -EPROTO;
    take_u8(c, &type);
    take_u8(c, &from);
    take_u8(c, &to);
    take_u32(c, &flags);
    if (!msg_type_valid(type) || from >= RAFT_MAX_NODES ||
        to >= RAFT_MAX_NODES || (flags & ~MSG_FLAG_REJECT) != 0)
        return -EBADMSG;
    m->type = type;
    m->from = from;
    m->to = to;
    m->reject = (flags & MSG_FLAG_REJECT) != 0;
    take_u64(c, &m->term);
    take_u64(c, &m->index);
    take_u64(c, &m->log_term);
    take_u64(c, &m->commit);
    take_u64(c, &m->hint);
    take_u32(c, count);
    return 0;
}

/* raft_msg_decode - header, then the body its type allows, exactly. */
int
raft_msg_decode(const void *buf, size_t len, struct raft_msg *m)
{
    struct msg_cursor c = {buf, len};
    uint32_t count;
    int rc;

    memset(m, 0, sizeof(*m));
    if ((rc = decode_header(&c, m, &count)) != 0)
        goto fail;
    if (m->type == RAFT_MSG_APPEND) {
        rc = decode_entries(&c, count, m);
    } else if (m->type == RAFT_MSG_SNAPSHOT) {
        rc = count > RAFT_SNAPSHOT_MAX ? -EBADMSG
                                       : decode_blob(&c, count, &m->data);
        m->len = m->data != NULL ? count : 0;
    } else {
        rc = count != 0 ? -EBADMSG : 0;
    }
    if (rc == 0 && c.left != 0)
        rc = -EBADMSG;
    if (rc == 0)
        return 0;
fail:
    raft_msg_free(m);
    return rc;
}
