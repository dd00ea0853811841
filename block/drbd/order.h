/*
 * DRBD-style replication: the order in which a secondary applies writes
 *
 * Pure code: no I/O, no locks, no QEMU globals.  The data receiver
 * (peer.c) feeds it what arrives and what completes, and asks it when a
 * write may start and when a barrier may be acked.
 *
 * The guarantee: the secondary's disk never holds a write without every
 * write that the guest saw complete before it issued that one.  The
 * primary numbers the guest writes it sends on a connection 1, 2, 3, ...
 * (DATA, ZEROES and DISCARD, in the order they are sent) and tells, with
 * each, how many of the writes sent just before it the guest had not seen
 * complete when it issued it (@unordered): the write depends on every
 * write up to number n - 1 - unordered, and on none after.  A write
 * starts once every write it depends on is done (and, after a barrier
 * that asks for a flush, once that flush is done), so the disk sees each
 * write only after its predecessors; writes that do not depend on each
 * other run in parallel, across epochs.
 *
 * Epochs stay what the primary counts on: a BARRIER closes one, and its
 * BARRIER_ACK says that every write of it is done (and flushed when the
 * barrier asked for it).  Acks go out in epoch order, so an ack also
 * covers every earlier epoch.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef BLOCK_DRBD_ORDER_H
#define BLOCK_DRBD_ORDER_H

#include "qapi/error.h"
#include "wire.h"

/* Closed epochs a receiver keeps before it waits for the oldest */
#define DRBD_ORDER_MAX_EPOCHS   1024

typedef struct DrbdOrder DrbdOrder;
typedef struct DrbdOrderWrite DrbdOrderWrite;

DrbdOrder *drbd_order_new(void);
/* Free, with every write and epoch still in it */
void drbd_order_free(DrbdOrder *o);

/*
 * A guest write arrived with @unordered: set *@dep to the number of the
 * newest write it depends on (0: none).  Fails with -EPROTO if the
 * primary claims more writes before it than have arrived.
 */
int drbd_order_arrive(DrbdOrder *o, uint32_t unordered, uint64_t *dep,
                      Error **errp);

/*
 * Whether the write that arrived last, depending on @dep, may start: every
 * write up to @dep is done, and no flush asked for by a barrier since
 * the write before it is outstanding
 */
bool drbd_order_may_start(const DrbdOrder *o, uint64_t dep);

/* The write that arrived last starts, in the open epoch */
DrbdOrderWrite *drbd_order_start(DrbdOrder *o);

/* @w is done (successfully or not); it is freed */
void drbd_order_done(DrbdOrder *o, DrbdOrderWrite *w);

/*
 * A BARRIER closes the open epoch: fails with -EPROTO if it counts other
 * than the writes that arrived in that epoch, or if a write arrived
 * and did not start
 */
int drbd_order_barrier(DrbdOrder *o, const DrbdBarrier *b, Error **errp);

/*
 * The oldest closed epoch, if every write of it is done: remove it and
 * copy its barrier to *@b.  If the barrier asks for a flush, the caller
 * flushes and then calls drbd_order_flushed(); in either case it then
 * acks the barrier.  Call until it returns false.
 */
bool drbd_order_next_ack(DrbdOrder *o, DrbdBarrier *b);

/* The flush of a barrier that drbd_order_next_ack() returned is done */
void drbd_order_flushed(DrbdOrder *o);

/* Writes started and not done */
unsigned drbd_order_inflight(const DrbdOrder *o);
/* Closed epochs not yet returned by drbd_order_next_ack() */
unsigned drbd_order_closed_epochs(const DrbdOrder *o);

/*
 * Check every internal invariant; NULL if they hold, else a description
 * that the caller frees (for unit tests)
 */
char *drbd_order_check(const DrbdOrder *o);

#endif
