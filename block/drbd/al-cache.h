/*
 * DRBD-style replication: the activity log's set of hot extents
 *
 * Pure code: the in-memory state machine of the activity log, with no
 * I/O, no locks and no QEMU globals.  The caller (meta.c) holds the lock
 * that protects the cache, writes the bitmap and the AL transactions, and
 * wakes whoever waits.
 *
 * The device is divided into extents of 4 MiB.  At most nr_slots of them
 * are "hot": they are recorded in the on-disk activity log, and after a
 * crash of the primary exactly they are resynced.  A write may only be
 * issued once every extent it touches is hot, and an extent may only
 * leave the log once no write to it is in flight.  Changing the hot set
 * takes a transaction on disk (one block, at most
 * DRBD_AL_CACHE_MAX_UPDATES slot updates); before the transaction that
 * evicts an extent is written, that extent's part of the out-of-sync
 * bitmap must be on disk.
 *
 * States of a slot
 * ----------------
 *
 * Each slot has a committed content (what the on-disk log says: an extent
 * or empty), a reference count (writes in flight, or waiting for the
 * transaction, to its extent) and possibly a queued replacement:
 *
 *   EMPTY    committed empty, nothing queued, refcount 0.
 *   IDLE     committed extent E, nothing queued, refcount 0.  E is hot;
 *            the slot is a candidate for eviction, least recently used
 *            first.
 *   ACTIVE   committed extent E, nothing queued, refcount > 0.  E is hot;
 *            the slot cannot be evicted.
 *   PENDING  committed O (an extent or empty), queued to hold N (an
 *            extent, or empty for evict_idle), in the open transaction
 *            or in the next one.  N is "pending": begins of
 *            N wait for the commit.  O is neither hot nor pending any
 *            more: a begin of O treats it as cold, and may queue it into
 *            another slot in the same transaction.  The refcount counts
 *            the begins of N (>= 1 if N is an extent, 0 if N is empty).
 *
 * Legal transitions (event: from -> to):
 *
 *   begin of a cold extent:  EMPTY -> PENDING, else IDLE -> PENDING
 *                            (the least recently used IDLE slot)
 *   begin of a hot extent:   IDLE -> ACTIVE, ACTIVE -> ACTIVE
 *   begin of a pending one:  PENDING -> PENDING (refcount + 1)
 *   end:                     ACTIVE -> ACTIVE (refcount - 1), or
 *                            ACTIVE -> IDLE (most recently used end)
 *   evict_idle:              IDLE -> PENDING (N empty)
 *   commit:                  PENDING -> ACTIVE (N an extent),
 *                            PENDING -> EMPTY (N empty)
 *   abort:                   PENDING -> IDLE (O an extent; it becomes
 *                            the least recently used again), or
 *                            PENDING -> EMPTY (O empty)
 *   load:                    EMPTY or IDLE -> EMPTY or IDLE (no slot
 *                            may be ACTIVE or PENDING)
 *
 * Every other combination is a programming error and asserts.
 *
 * Transactions
 * ------------
 *
 * A begin that queues an update returns DRBD_AL_NEEDS_COMMIT; the updates
 * accumulate until the transaction writer calls drbd_al_cache_prepare(),
 * which hands them out and opens the transaction.  Begins go on queueing
 * updates while it is written: they form the next transaction, so that
 * however many writes wait, one transaction carries the extents of all
 * that arrived while the previous one was on its way to disk (up to
 * DRBD_AL_CACHE_MAX_UPDATES; a begin that would need more gets
 * DRBD_AL_BUSY).  Commit applies exactly the updates that were handed
 * out; abort (the metadata can't be written) drops the queued ones too.
 * Hits on hot extents and on the extents being written go on all along.
 *
 * The writer, between prepare and commit: writes the bitmap part of every
 * update's old_extent (all of them, not only the one its own begin
 * evicted: the transaction evicts them all at once), then the transaction
 * block, then calls commit and wakes the waiters.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef BLOCK_DRBD_AL_CACHE_H
#define BLOCK_DRBD_AL_CACHE_H

#include "qapi/error.h"
#include "md-format.h"      /* DRBD_AL_EXTENT_NONE, DRBD_AL_MAX_UPDATES */

/* The most slot updates one AL transaction carries */
#define DRBD_AL_CACHE_MAX_UPDATES   DRBD_AL_MAX_UPDATES

typedef struct DrbdAlCache DrbdAlCache;

typedef enum DrbdAlBeginResult {
    /* Every extent is hot; its refcount was taken: issue the write. */
    DRBD_AL_HOT,
    /*
     * At least one extent was queued into a slot (its refcount taken):
     * a transaction must be written and committed before the write.
     */
    DRBD_AL_NEEDS_COMMIT,
    /*
     * Nothing was queued by this call, but at least one extent is pending
     * in the next or current transaction (its refcount taken): wait for
     * the commit, then issue the write.
     */
    DRBD_AL_PENDING,
    /*
     * Nothing was changed: no slot can be taken now (every slot is in use
     * or pending, or DRBD_AL_CACHE_MAX_UPDATES updates are queued for the
     * next transaction).  Wait for an end or a commit and
     * try again.
     */
    DRBD_AL_BUSY,
} DrbdAlBeginResult;

/* One slot update of a transaction */
typedef struct DrbdAlCacheUpdate {
    uint32_t slot;
    uint32_t old_extent;    /* evicted (or NONE): write its bitmap first */
    uint32_t new_extent;    /* what the slot holds after the commit */
} DrbdAlCacheUpdate;

/* Counters for query-drbd and `info drbd` */
typedef struct DrbdAlCacheStats {
    uint64_t hits;          /* extents found hot by a begin */
    uint64_t misses;        /* extents a begin queued into a slot */
    uint64_t waits;         /* extents a begin found pending */
    uint64_t busy;          /* begins refused with DRBD_AL_BUSY */
    uint64_t updates;       /* slot updates committed */
    uint64_t transactions;  /* transactions committed */
} DrbdAlCacheStats;

/* A cache of @nr_slots (>= 1) slots, all empty */
DrbdAlCache *drbd_al_cache_new(uint32_t nr_slots);
void drbd_al_cache_free(DrbdAlCache *c);
uint32_t drbd_al_cache_nr_slots(const DrbdAlCache *c);

/*
 * Replace the content with the hot set recovered from disk: slot i holds
 * extent @slots[i] (nr_slots entries; DRBD_AL_EXTENT_NONE for an empty
 * slot).  Loaded extents are IDLE, slot 0 the least recently used.  An
 * extent found in two slots fails with -EINVAL and @errp set, and leaves
 * the cache as it was.  No slot may be ACTIVE or PENDING.
 */
int drbd_al_cache_load(DrbdAlCache *c, const uint32_t *slots, Error **errp);

/*
 * A write to the extents @first..@last (inclusive) begins.  All or
 * nothing: either a reference on every extent of the range is taken
 * (HOT, NEEDS_COMMIT or PENDING) or nothing changes (BUSY), so that two
 * writes never hold part of their ranges each while waiting for the rest.
 * A range may span at most drbd_al_cache_max_range() extents: split
 * larger requests.  After HOT, and after NEEDS_COMMIT or PENDING once the
 * transaction was committed, the caller owes one drbd_al_cache_end_range()
 * for the same range.
 */
DrbdAlBeginResult drbd_al_cache_begin_range(DrbdAlCache *c, uint32_t first,
                                            uint32_t last);

/*
 * drbd_al_cache_begin_range() of a single extent; on NEEDS_COMMIT,
 * @evicted (if not NULL) receives the extent the slot held, or
 * DRBD_AL_EXTENT_NONE; otherwise DRBD_AL_EXTENT_NONE.
 */
DrbdAlBeginResult drbd_al_cache_begin(DrbdAlCache *c, uint32_t extent,
                                      uint32_t *evicted);

/*
 * The write to @first..@last ended: drop each extent's reference; an
 * extent that is no longer in use moves to the most recently used end.
 * Each extent must be hot with a reference (asserts otherwise).
 */
void drbd_al_cache_end_range(DrbdAlCache *c, uint32_t first, uint32_t last);
void drbd_al_cache_end(DrbdAlCache *c, uint32_t extent);

/* The most extents one begin may take: min(nr_slots, MAX_UPDATES) */
uint32_t drbd_al_cache_max_range(const DrbdAlCache *c);

/*
 * Clean shutdown: queue the emptying of the least recently used IDLE
 * slots, as many as the next transaction has room for.  Returns how many
 * were queued.  Call it, prepare, write
 * and commit until it returns 0; then only ACTIVE slots remain hot.
 */
unsigned drbd_al_cache_evict_idle(DrbdAlCache *c);

/* Updates queued for the next transaction (not the open one) */
unsigned drbd_al_cache_nr_pending(const DrbdAlCache *c);

/*
 * Open a transaction: copy the queued updates to @updates, in the order
 * they were queued, and return their number.  If there are none, return 0
 * and open nothing.  No transaction may be open already.  @updates has
 * room for DRBD_AL_CACHE_MAX_UPDATES entries.
 */
unsigned drbd_al_cache_prepare(DrbdAlCache *c,
                               DrbdAlCacheUpdate *updates);
bool drbd_al_cache_in_transaction(const DrbdAlCache *c);

/* The open transaction is on disk: its new extents become hot */
void drbd_al_cache_commit(DrbdAlCache *c);

/*
 * The open transaction did not reach the disk: every slot of it and of
 * the next one goes back to its old content, and the references that the
 * begins of their new extents took are dropped.  Those begins
 * (NEEDS_COMMIT and PENDING) fail: their callers must not call end for
 * them (a failed range keeps the references it took on extents that were
 * hot: the metadata has failed for good).  A caller learns which way its
 * wait ended from drbd_al_cache_is_hot() of its extents, or from the
 * writer's own result.  The slots it empties become the first victims.
 */
void drbd_al_cache_abort(DrbdAlCache *c);

/*
 * The committed content of every slot (nr_slots entries), as the on-disk
 * log has it: the context of the next transaction, and what a crash now
 * would resync.
 */
void drbd_al_cache_slots(const DrbdAlCache *c, uint32_t *slots);

/*
 * The extents that the next cold begins would evict, first victim first:
 * at most @max of them into @extents, returned how many (empty slots are
 * taken before these, and evict nothing)
 */
unsigned drbd_al_cache_next_victims(const DrbdAlCache *c, uint32_t *extents,
                                    unsigned max);

/* Whether a begin of @extent would return HOT */
bool drbd_al_cache_is_hot(const DrbdAlCache *c, uint32_t extent);
/* Whether @extent waits for a transaction */
bool drbd_al_cache_is_pending(const DrbdAlCache *c, uint32_t extent);
/* References on @extent (hot or pending); 0 if it is neither */
uint32_t drbd_al_cache_refcount(const DrbdAlCache *c, uint32_t extent);
/* Slots holding a hot extent (IDLE and ACTIVE) */
uint32_t drbd_al_cache_nr_hot(const DrbdAlCache *c);
/* Slots with a reference (ACTIVE, and PENDING ones with waiters) */
uint32_t drbd_al_cache_nr_in_use(const DrbdAlCache *c);
void drbd_al_cache_stats(const DrbdAlCache *c, DrbdAlCacheStats *stats);

/*
 * Check every internal invariant; NULL if they hold, else a description
 * of the first that does not, which the caller frees (for unit tests and
 * debugging).
 */
char *drbd_al_cache_check(const DrbdAlCache *c);

#endif
