/*
 * presence.h - the master's part of presence (SPEC §12): it makes the
 * table (shm/presence.h) before the first fork, sized from the options,
 * and its tick lets the members whose grace or ttl passed leave.
 */
#ifndef MAYFLY_MASTER_PRESENCE_H
#define MAYFLY_MASTER_PRESENCE_H

#include <stdint.h>

struct master;

/* master_presence_start - map the table; exits (logged) when it cannot. */
void master_presence_start(struct master *m);

/* master_presence_worker_gone - worker slot died: the connections its
 * streams held (presence_stream.c keys them "<node id>/<slot>") are
 * dropped, and a member left with none starts its grace (now, or at a
 * later tick when the lock could not be taken). */
void master_presence_worker_gone(struct master *m, int slot);

/* master_presence_tick - the members due leave (one load when none is). */
void master_presence_tick(struct master *m, uint64_t now);

#endif
