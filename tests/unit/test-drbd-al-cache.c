/*
 * drbd: the activity log's set of hot extents (block/drbd/al-cache.c)
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "../../block/drbd/al-cache.h"

#define NONE DRBD_AL_EXTENT_NONE

/* The cache's own consistency check must pass */
static void assert_consistent(const DrbdAlCache *c)
{
    g_autofree char *err = drbd_al_cache_check(c);

    g_assert_cmpstr(err, ==, NULL);
}

/* A cache of @n slots loaded with @slots */
static DrbdAlCache *new_loaded(uint32_t n, const uint32_t *slots)
{
    DrbdAlCache *c = drbd_al_cache_new(n);

    g_assert_cmpint(drbd_al_cache_load(c, slots, &error_abort), ==, 0);
    assert_consistent(c);
    return c;
}

static void assert_slots(const DrbdAlCache *c, const uint32_t *want)
{
    uint32_t n = drbd_al_cache_nr_slots(c);
    g_autofree uint32_t *got = g_new(uint32_t, n);

    drbd_al_cache_slots(c, got);
    for (uint32_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            g_test_message("slot %" PRIu32 ": %" PRIu32 ", expected %"
                           PRIu32, i, got[i], want[i]);
        }
        g_assert_cmpuint(got[i], ==, want[i]);
    }
}

/* Begin @extent and check the result and the evicted extent */
static void begin(DrbdAlCache *c, uint32_t extent, DrbdAlBeginResult want,
                  uint32_t want_evicted)
{
    uint32_t evicted = 12345;
    DrbdAlBeginResult got = drbd_al_cache_begin(c, extent, &evicted);

    g_assert_cmpint(got, ==, want);
    g_assert_cmpuint(evicted, ==, want_evicted);
    assert_consistent(c);
}

static void assert_update(const DrbdAlCacheUpdate *u, uint32_t slot,
                          uint32_t old_extent, uint32_t new_extent)
{
    g_assert_cmpuint(u->slot, ==, slot);
    g_assert_cmpuint(u->old_extent, ==, old_extent);
    g_assert_cmpuint(u->new_extent, ==, new_extent);
}

/* Write a transaction of exactly @n updates and commit it */
static void commit(DrbdAlCache *c, unsigned n)
{
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];

    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, n);
    g_assert_true(drbd_al_cache_in_transaction(c));
    drbd_al_cache_commit(c);
    g_assert_false(drbd_al_cache_in_transaction(c));
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 0);
    assert_consistent(c);
}

/* Open a transaction of exactly @n updates: nothing is left queued */
static void open_tx(DrbdAlCache *c, DrbdAlCacheUpdate *u, unsigned n)
{
    g_assert_false(drbd_al_cache_in_transaction(c));
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, n);
    g_assert_cmpint(drbd_al_cache_in_transaction(c), ==, n > 0);
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 0);
    assert_consistent(c);
}

/* Commit the open transaction; @queued updates wait for the next one */
static void commit_open(DrbdAlCache *c, unsigned queued)
{
    g_assert_true(drbd_al_cache_in_transaction(c));
    drbd_al_cache_commit(c);
    g_assert_false(drbd_al_cache_in_transaction(c));
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, queued);
    assert_consistent(c);
}

/* Begin and end @extent: it becomes the most recently used */
static void touch(DrbdAlCache *c, uint32_t extent)
{
    begin(c, extent, DRBD_AL_HOT, NONE);
    drbd_al_cache_end(c, extent);
    assert_consistent(c);
}

static void test_new(void)
{
    DrbdAlCache *c = drbd_al_cache_new(5);
    const uint32_t empty[5] = { NONE, NONE, NONE, NONE, NONE };
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    DrbdAlCacheStats st;

    assert_consistent(c);
    g_assert_cmpuint(drbd_al_cache_nr_slots(c), ==, 5);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 0);
    g_assert_false(drbd_al_cache_is_hot(c, 0));
    g_assert_false(drbd_al_cache_is_pending(c, 0));
    assert_slots(c, empty);
    /* nothing queued: no transaction is opened */
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 0);
    g_assert_false(drbd_al_cache_in_transaction(c));
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 0);
    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.hits + st.misses + st.waits + st.busy, ==, 0);
    g_assert_cmpuint(st.updates + st.transactions, ==, 0);
    drbd_al_cache_free(c);
    drbd_al_cache_free(NULL);
}

static void test_max_range(void)
{
    g_autoptr(GPtrArray) caches = g_ptr_array_new_with_free_func(
        (GDestroyNotify)drbd_al_cache_free);
    const uint32_t n[] = { 1, 7, 63, 64, 65, 6216 };
    const uint32_t want[] = { 1, 7, 63, 64, 64, 64 };

    for (int i = 0; i < ARRAY_SIZE(n); i++) {
        DrbdAlCache *c = drbd_al_cache_new(n[i]);

        g_ptr_array_add(caches, c);
        g_assert_cmpuint(drbd_al_cache_max_range(c), ==, want[i]);
    }
}

static void test_fill_from_empty(void)
{
    DrbdAlCache *c = drbd_al_cache_new(4);
    const uint32_t empty[4] = { NONE, NONE, NONE, NONE };
    const uint32_t full[4] = { 10, 11, 12, 13 };
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    DrbdAlCacheStats st;

    for (uint32_t e = 10; e < 14; e++) {
        begin(c, e, DRBD_AL_NEEDS_COMMIT, NONE);
        g_assert_false(drbd_al_cache_is_hot(c, e));
        g_assert_true(drbd_al_cache_is_pending(c, e));
        g_assert_cmpuint(drbd_al_cache_refcount(c, e), ==, 1);
        g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, e - 9);
    }
    /* nothing is on disk yet */
    assert_slots(c, empty);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 4);

    /* the empty slots are taken in order, the updates listed in order */
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 4);
    for (int i = 0; i < 4; i++) {
        assert_update(&u[i], i, NONE, 10 + i);
    }
    assert_slots(c, empty);
    drbd_al_cache_commit(c);
    assert_consistent(c);

    assert_slots(c, full);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 4);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 4);
    for (uint32_t e = 10; e < 14; e++) {
        g_assert_true(drbd_al_cache_is_hot(c, e));
        g_assert_false(drbd_al_cache_is_pending(c, e));
        drbd_al_cache_end(c, e);
        assert_consistent(c);
        g_assert_cmpuint(drbd_al_cache_refcount(c, e), ==, 0);
        g_assert_true(drbd_al_cache_is_hot(c, e));
    }
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 4);
    assert_slots(c, full);

    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.misses, ==, 4);
    g_assert_cmpuint(st.hits, ==, 0);
    g_assert_cmpuint(st.updates, ==, 4);
    g_assert_cmpuint(st.transactions, ==, 1);
    drbd_al_cache_free(c);
}

static void test_hit_refcount(void)
{
    const uint32_t slots[3] = { 7, NONE, 9 };
    DrbdAlCache *c = new_loaded(3, slots);
    DrbdAlCacheStats st;

    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 2);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 7), ==, 0);
    for (int i = 1; i <= 3; i++) {
        begin(c, 7, DRBD_AL_HOT, NONE);
        g_assert_cmpuint(drbd_al_cache_refcount(c, 7), ==, i);
        g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 1);
    }
    begin(c, 9, DRBD_AL_HOT, NONE);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 2);
    /* a hit changes nothing on disk */
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 0);
    assert_slots(c, slots);

    for (int i = 2; i >= 0; i--) {
        drbd_al_cache_end(c, 7);
        assert_consistent(c);
        g_assert_cmpuint(drbd_al_cache_refcount(c, 7), ==, i);
    }
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 1);
    drbd_al_cache_end(c, 9);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 2);
    assert_slots(c, slots);

    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.hits, ==, 4);
    g_assert_cmpuint(st.misses, ==, 0);
    g_assert_cmpuint(st.transactions, ==, 0);
    drbd_al_cache_free(c);
}

static void test_lru_order(void)
{
    const uint32_t slots[4] = { 3, 2, 1, 0 };
    DrbdAlCache *c = new_loaded(4, slots);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    /* after the touches, least recently used first */
    const uint32_t order[4] = { 1, 2, 0, 3 };
    const uint32_t slot_of[4] = { 3, 2, 1, 0 };

    /* loaded in slot order (3, 2, 1, 0 least recently used first) */
    touch(c, 2);
    touch(c, 0);
    touch(c, 3);

    for (uint32_t i = 0; i < 4; i++) {
        uint32_t victim = order[i];

        begin(c, 100 + i, DRBD_AL_NEEDS_COMMIT, victim);
        /* the evicted extent is cold at once, the new one pending */
        g_assert_false(drbd_al_cache_is_hot(c, victim));
        g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 3);
        g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 1);
        assert_update(&u[0], slot_of[victim], victim, 100 + i);
        drbd_al_cache_commit(c);
        assert_consistent(c);
        drbd_al_cache_end(c, 100 + i);
        assert_consistent(c);
    }
    /* the new extents were used in order 100..103: that is the LRU now */
    for (uint32_t i = 0; i < 4; i++) {
        begin(c, 200 + i, DRBD_AL_NEEDS_COMMIT, 100 + i);
    }
    commit(c, 4);
    drbd_al_cache_free(c);
}

static void test_empty_first(void)
{
    const uint32_t slots[4] = { 5, NONE, 6, NONE };
    const uint32_t after[4] = { 5, 7, 6, 8 };
    DrbdAlCache *c = new_loaded(4, slots);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];

    /* an empty slot is taken before the least recently used extent */
    begin(c, 7, DRBD_AL_NEEDS_COMMIT, NONE);
    begin(c, 8, DRBD_AL_NEEDS_COMMIT, NONE);
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 2);
    assert_update(&u[0], 1, NONE, 7);
    assert_update(&u[1], 3, NONE, 8);
    drbd_al_cache_commit(c);
    assert_slots(c, after);
    drbd_al_cache_end(c, 7);
    drbd_al_cache_end(c, 8);
    /* now the least recently used one: 5, loaded in slot 0 */
    begin(c, 9, DRBD_AL_NEEDS_COMMIT, 5);
    commit(c, 1);
    drbd_al_cache_free(c);
}

static void test_in_use_never_evicted(void)
{
    const uint32_t slots[4] = { 0, 1, 2, 3 };
    const uint32_t after[4] = { 0, 12, 2, 11 };
    DrbdAlCache *c = new_loaded(4, slots);

    begin(c, 0, DRBD_AL_HOT, NONE);
    begin(c, 1, DRBD_AL_HOT, NONE);
    begin(c, 2, DRBD_AL_HOT, NONE);
    /* 0, 1 and 2 are older than 3, but in use: 3 goes */
    begin(c, 10, DRBD_AL_NEEDS_COMMIT, 3);
    commit(c, 1);
    /* every slot in use */
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 4);
    begin(c, 11, DRBD_AL_BUSY, NONE);
    drbd_al_cache_end(c, 10);
    /* 10 is idle now, but 1 became idle later: 10 goes */
    drbd_al_cache_end(c, 1);
    begin(c, 11, DRBD_AL_NEEDS_COMMIT, 10);
    begin(c, 12, DRBD_AL_NEEDS_COMMIT, 1);
    commit(c, 2);
    assert_slots(c, after);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 0), ==, 1);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 2), ==, 1);
    drbd_al_cache_free(c);
}

/* The state that a refused begin must leave as it was */
typedef struct Snapshot {
    uint32_t slots[8];
    uint32_t refcnt[16];
    uint32_t nr_hot, nr_in_use;
    unsigned nr_pending;
} Snapshot;

static void snapshot(const DrbdAlCache *c, Snapshot *s)
{
    g_assert_cmpuint(drbd_al_cache_nr_slots(c), <=, ARRAY_SIZE(s->slots));
    memset(s, 0, sizeof(*s));
    drbd_al_cache_slots(c, s->slots);
    for (uint32_t e = 0; e < ARRAY_SIZE(s->refcnt); e++) {
        s->refcnt[e] = drbd_al_cache_refcount(c, e);
    }
    s->nr_hot = drbd_al_cache_nr_hot(c);
    s->nr_in_use = drbd_al_cache_nr_in_use(c);
    s->nr_pending = drbd_al_cache_nr_pending(c);
}

static void assert_unchanged(const DrbdAlCache *c, const Snapshot *before)
{
    Snapshot now;

    snapshot(c, &now);
    g_assert_cmpmem(&now, sizeof(now), before, sizeof(*before));
}

static void test_busy_all_in_use(void)
{
    DrbdAlCache *c = drbd_al_cache_new(2);
    DrbdAlCacheStats st;
    Snapshot snap;

    /* queued slots count as taken, committed or not */
    begin(c, 1, DRBD_AL_NEEDS_COMMIT, NONE);
    begin(c, 2, DRBD_AL_NEEDS_COMMIT, NONE);
    snapshot(c, &snap);
    begin(c, 3, DRBD_AL_BUSY, NONE);
    assert_unchanged(c, &snap);
    commit(c, 2);

    /* in use by writes in flight */
    snapshot(c, &snap);
    begin(c, 3, DRBD_AL_BUSY, NONE);
    assert_unchanged(c, &snap);
    /* hits still work */
    begin(c, 1, DRBD_AL_HOT, NONE);
    drbd_al_cache_end(c, 1);
    drbd_al_cache_end(c, 1);
    begin(c, 3, DRBD_AL_NEEDS_COMMIT, 1);
    commit(c, 1);

    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.busy, ==, 2);
    g_assert_cmpuint(st.misses, ==, 3);
    g_assert_cmpuint(st.hits, ==, 1);
    drbd_al_cache_end(c, 2);
    drbd_al_cache_end(c, 3);
    drbd_al_cache_free(c);
}

static void test_busy_max_updates(void)
{
    DrbdAlCache *c = drbd_al_cache_new(100);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    uint32_t e;

    for (e = 0; e < DRBD_AL_CACHE_MAX_UPDATES; e++) {
        begin(c, e, DRBD_AL_NEEDS_COMMIT, NONE);
    }
    /* 36 slots are free, but the next transaction is full */
    begin(c, e, DRBD_AL_BUSY, NONE);
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 64);
    g_assert_false(drbd_al_cache_is_pending(c, e));
    g_assert_cmpint(drbd_al_cache_begin_range(c, e, e + 1), ==,
                    DRBD_AL_BUSY);
    /* waiting for a queued one needs no room */
    begin(c, 5, DRBD_AL_PENDING, NONE);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 5), ==, 2);

    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 64);
    for (uint32_t i = 0; i < 64; i++) {
        assert_update(&u[i], i, NONE, i);
    }
    drbd_al_cache_commit(c);
    assert_consistent(c);
    begin(c, e, DRBD_AL_NEEDS_COMMIT, NONE);
    commit(c, 1);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 65);
    drbd_al_cache_free(c);
}

/*
 * While a transaction is being written, begins go on: hits and waits as
 * ever, and a cold extent is queued for the next transaction, not for the
 * one being written.  BUSY still means that no slot is left.
 */
static void test_begin_during_transaction(void)
{
    const uint32_t slots[3] = { 0, 1, NONE };
    const uint32_t first[3] = { 0, 1, 5 };
    const uint32_t second[3] = { 4, 6, 5 };
    DrbdAlCache *c = new_loaded(3, slots);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    DrbdAlCacheStats st;
    Snapshot snap;

    begin(c, 5, DRBD_AL_NEEDS_COMMIT, NONE);
    open_tx(c, u, 1);
    assert_update(&u[0], 2, NONE, 5);

    /* hits and waits go on */
    begin(c, 0, DRBD_AL_HOT, NONE);
    begin(c, 5, DRBD_AL_PENDING, NONE);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 0, 1), ==, DRBD_AL_HOT);
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 0);
    drbd_al_cache_end(c, 0);
    drbd_al_cache_end_range(c, 0, 1);       /* LRU: 0, 1 */
    assert_consistent(c);

    /* cold extents are queued for the next transaction */
    g_assert_cmpint(drbd_al_cache_begin_range(c, 4, 5), ==,
                    DRBD_AL_NEEDS_COMMIT);
    assert_consistent(c);
    g_assert_true(drbd_al_cache_in_transaction(c));
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 1);
    g_assert_true(drbd_al_cache_is_pending(c, 4));
    g_assert_false(drbd_al_cache_is_hot(c, 0));
    begin(c, 6, DRBD_AL_NEEDS_COMMIT, 1);
    begin(c, 4, DRBD_AL_PENDING, NONE);
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 2);
    assert_slots(c, slots);

    /* every slot is taken now: that is still BUSY */
    snapshot(c, &snap);
    begin(c, 7, DRBD_AL_BUSY, NONE);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 6, 7), ==, DRBD_AL_BUSY);
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 0);
    assert_unchanged(c, &snap);

    /* the commit applies the update that was written, and only that */
    commit_open(c, 2);
    assert_slots(c, first);
    g_assert_true(drbd_al_cache_is_hot(c, 5));
    g_assert_cmpuint(drbd_al_cache_refcount(c, 5), ==, 3);
    g_assert_true(drbd_al_cache_is_pending(c, 4));
    g_assert_true(drbd_al_cache_is_pending(c, 6));
    g_assert_cmpuint(drbd_al_cache_refcount(c, 4), ==, 2);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 6), ==, 1);
    g_assert_false(drbd_al_cache_is_hot(c, 0));
    g_assert_false(drbd_al_cache_is_hot(c, 1));
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 1);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 3);
    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.transactions, ==, 1);
    g_assert_cmpuint(st.updates, ==, 1);
    g_assert_cmpuint(st.misses, ==, 3);
    g_assert_cmpuint(st.waits, ==, 3);
    g_assert_cmpuint(st.hits, ==, 3);
    g_assert_cmpuint(st.busy, ==, 2);

    /* the queued updates are the next transaction */
    open_tx(c, u, 2);
    assert_update(&u[0], 0, 0, 4);
    assert_update(&u[1], 1, 1, 6);
    commit_open(c, 0);
    assert_slots(c, second);
    drbd_al_cache_end_range(c, 4, 5);
    drbd_al_cache_end(c, 4);
    drbd_al_cache_end(c, 5);
    drbd_al_cache_end(c, 5);
    drbd_al_cache_end(c, 6);
    assert_consistent(c);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 3);
    drbd_al_cache_free(c);
}

/*
 * What is queued while a transaction is open goes into the next prepare,
 * not into the commit of the open one; more may join it until then.
 */
static void test_next_transaction(void)
{
    const uint32_t slots[4] = { 100, 101, NONE, NONE };
    const uint32_t first[4] = { NONE, NONE, 10, NONE };
    const uint32_t second[4] = { NONE, 12, 10, 11 };
    DrbdAlCache *c = new_loaded(4, slots);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    DrbdAlCacheStats st;

    begin(c, 10, DRBD_AL_NEEDS_COMMIT, NONE);   /* slot 2 */
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 2);
    open_tx(c, u, 3);
    assert_update(&u[0], 2, NONE, 10);
    assert_update(&u[1], 0, 100, NONE);
    assert_update(&u[2], 1, 101, NONE);

    begin(c, 11, DRBD_AL_NEEDS_COMMIT, NONE);   /* slot 3, next one */
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 1);
    begin(c, 12, DRBD_AL_BUSY, NONE);
    begin(c, 10, DRBD_AL_PENDING, NONE);
    begin(c, 11, DRBD_AL_PENDING, NONE);

    commit_open(c, 1);
    assert_slots(c, first);
    g_assert_true(drbd_al_cache_is_hot(c, 10));
    g_assert_cmpuint(drbd_al_cache_refcount(c, 10), ==, 2);
    g_assert_true(drbd_al_cache_is_pending(c, 11));
    g_assert_cmpuint(drbd_al_cache_refcount(c, 11), ==, 2);
    g_assert_false(drbd_al_cache_is_hot(c, 100));
    g_assert_false(drbd_al_cache_is_hot(c, 101));
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 1);
    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.transactions, ==, 1);
    g_assert_cmpuint(st.updates, ==, 3);

    /* the slot the commit emptied last joins the queued update */
    begin(c, 12, DRBD_AL_NEEDS_COMMIT, NONE);   /* slot 1 */
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 2);
    open_tx(c, u, 2);
    assert_update(&u[0], 3, NONE, 11);
    assert_update(&u[1], 1, NONE, 12);
    begin(c, 13, DRBD_AL_NEEDS_COMMIT, NONE);   /* slot 0, next one */
    commit_open(c, 1);
    assert_slots(c, second);
    g_assert_true(drbd_al_cache_is_hot(c, 11));
    g_assert_true(drbd_al_cache_is_hot(c, 12));
    g_assert_true(drbd_al_cache_is_pending(c, 13));
    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.transactions, ==, 2);
    g_assert_cmpuint(st.updates, ==, 5);

    open_tx(c, u, 1);
    assert_update(&u[0], 0, NONE, 13);
    commit_open(c, 0);
    /* nothing queued: nothing to open */
    open_tx(c, u, 0);
    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.transactions, ==, 3);
    g_assert_cmpuint(st.updates, ==, 6);
    for (uint32_t e = 10; e <= 13; e++) {
        drbd_al_cache_end(c, e);
    }
    drbd_al_cache_end(c, 10);
    drbd_al_cache_end(c, 11);
    assert_consistent(c);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 4);
    drbd_al_cache_free(c);
}

/*
 * The open transaction evicts 0; a begin of 0 while it is written finds
 * 0 cold and queues it into another slot for the next transaction.
 */
static void test_evicted_rebegun_during_transaction(void)
{
    const uint32_t slots[3] = { 0, 1, 2 };
    const uint32_t first[3] = { 10, 1, 2 };
    const uint32_t second[3] = { 10, 0, 1 };
    DrbdAlCache *c = new_loaded(3, slots);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];

    begin(c, 10, DRBD_AL_NEEDS_COMMIT, 0);      /* slot 0: 0 -> 10 */
    open_tx(c, u, 1);
    assert_update(&u[0], 0, 0, 10);
    g_assert_false(drbd_al_cache_is_hot(c, 0));

    begin(c, 0, DRBD_AL_NEEDS_COMMIT, 1);       /* slot 1: 1 -> 0 */
    g_assert_true(drbd_al_cache_is_pending(c, 0));
    g_assert_cmpuint(drbd_al_cache_refcount(c, 0), ==, 1);
    /* and the extent the next one evicts, in the same next one */
    begin(c, 1, DRBD_AL_NEEDS_COMMIT, 2);       /* slot 2: 2 -> 1 */
    begin(c, 0, DRBD_AL_PENDING, NONE);
    begin(c, 2, DRBD_AL_BUSY, NONE);
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 2);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 3);
    /* the on-disk log still holds 0 in slot 0 */
    assert_slots(c, slots);

    commit_open(c, 2);
    assert_slots(c, first);
    g_assert_true(drbd_al_cache_is_hot(c, 10));
    g_assert_false(drbd_al_cache_is_hot(c, 0));
    g_assert_true(drbd_al_cache_is_pending(c, 0));
    g_assert_true(drbd_al_cache_is_pending(c, 1));
    g_assert_cmpuint(drbd_al_cache_refcount(c, 0), ==, 2);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 1);

    open_tx(c, u, 2);
    assert_update(&u[0], 1, 1, 0);
    assert_update(&u[1], 2, 2, 1);
    commit_open(c, 0);
    assert_slots(c, second);
    g_assert_true(drbd_al_cache_is_hot(c, 0));
    g_assert_true(drbd_al_cache_is_hot(c, 1));
    g_assert_false(drbd_al_cache_is_hot(c, 2));
    g_assert_cmpuint(drbd_al_cache_refcount(c, 0), ==, 2);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 1), ==, 1);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 10), ==, 1);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 3);
    drbd_al_cache_end(c, 0);
    drbd_al_cache_end(c, 0);
    drbd_al_cache_end(c, 1);
    drbd_al_cache_end(c, 10);
    assert_consistent(c);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    drbd_al_cache_free(c);
}

/*
 * An abort while the next transaction is queued reverts both: every slot
 * holds what it held, every queued reference is dropped, and the slots
 * are taken again in the order they were taken.
 */
static void test_abort_with_next_transaction(void)
{
    const uint32_t slots[6] = { 0, 1, 2, 3, 4, NONE };
    DrbdAlCache *c = new_loaded(6, slots);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    DrbdAlCacheStats st;

    touch(c, 0);                                /* LRU: 1, 2, 3, 4, 0 */
    begin(c, 3, DRBD_AL_HOT, NONE);             /* a write in flight */
    begin(c, 10, DRBD_AL_NEEDS_COMMIT, NONE);   /* slot 5 */
    begin(c, 11, DRBD_AL_NEEDS_COMMIT, 1);      /* slot 1 */
    open_tx(c, u, 2);
    assert_update(&u[0], 5, NONE, 10);
    assert_update(&u[1], 1, 1, 11);

    /* the next transaction: 1 again, then the idle ones go */
    begin(c, 1, DRBD_AL_NEEDS_COMMIT, 2);       /* slot 2: 2 -> 1 */
    begin(c, 1, DRBD_AL_PENDING, NONE);
    begin(c, 10, DRBD_AL_PENDING, NONE);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 10, 11), ==,
                    DRBD_AL_PENDING);
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 2);   /* 4, 0 */
    assert_consistent(c);
    begin(c, 12, DRBD_AL_BUSY, NONE);
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 3);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 1);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 4);

    drbd_al_cache_abort(c);
    assert_consistent(c);
    g_assert_false(drbd_al_cache_in_transaction(c));
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 0);
    assert_slots(c, slots);
    for (uint32_t e = 0; e <= 4; e++) {
        g_assert_true(drbd_al_cache_is_hot(c, e));
        g_assert_false(drbd_al_cache_is_pending(c, e));
        g_assert_cmpuint(drbd_al_cache_refcount(c, e), ==, e == 3);
    }
    for (uint32_t e = 10; e <= 12; e++) {
        g_assert_false(drbd_al_cache_is_hot(c, e));
        g_assert_false(drbd_al_cache_is_pending(c, e));
        g_assert_cmpuint(drbd_al_cache_refcount(c, e), ==, 0);
    }
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 5);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 1);
    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.transactions, ==, 0);
    g_assert_cmpuint(st.updates, ==, 0);

    /* the retry takes the same slots in the same order */
    begin(c, 20, DRBD_AL_NEEDS_COMMIT, NONE);
    begin(c, 21, DRBD_AL_NEEDS_COMMIT, 1);
    begin(c, 22, DRBD_AL_NEEDS_COMMIT, 2);
    begin(c, 23, DRBD_AL_NEEDS_COMMIT, 4);
    begin(c, 24, DRBD_AL_NEEDS_COMMIT, 0);
    begin(c, 25, DRBD_AL_BUSY, NONE);
    open_tx(c, u, 5);
    assert_update(&u[0], 5, NONE, 20);
    assert_update(&u[1], 1, 1, 21);
    assert_update(&u[2], 2, 2, 22);
    assert_update(&u[3], 4, 4, 23);
    assert_update(&u[4], 0, 0, 24);
    commit_open(c, 0);
    drbd_al_cache_end_range(c, 20, 24);
    drbd_al_cache_end(c, 3);
    assert_consistent(c);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 6);
    drbd_al_cache_free(c);
}

/*
 * The limit is on the next transaction: with one transaction of
 * DRBD_AL_CACHE_MAX_UPDATES open, as many more may be queued, and no
 * more until the queued ones are handed out.
 */
static void test_busy_next_full(void)
{
    const uint32_t n = 200, max = DRBD_AL_CACHE_MAX_UPDATES;
    g_autofree uint32_t *slots = g_new(uint32_t, n);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    DrbdAlCacheStats st;
    DrbdAlCache *c;
    uint32_t e;

    for (uint32_t i = 0; i < n; i++) {
        slots[i] = i < 10 ? 1000 + i : NONE;
    }
    c = new_loaded(n, slots);
    for (e = 0; e < max; e++) {
        begin(c, e, DRBD_AL_NEEDS_COMMIT, NONE);
    }
    open_tx(c, u, max);
    for (; e < 2 * max; e++) {
        begin(c, e, DRBD_AL_NEEDS_COMMIT, NONE);
        g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, e - max + 1);
    }

    /* 62 slots are empty and 10 idle, but the next transaction is full */
    begin(c, e, DRBD_AL_BUSY, NONE);
    g_assert_cmpint(drbd_al_cache_begin_range(c, e, e + 1), ==,
                    DRBD_AL_BUSY);
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 0);
    assert_consistent(c);
    g_assert_false(drbd_al_cache_is_pending(c, e));
    g_assert_cmpuint(drbd_al_cache_refcount(c, e), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, max);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 2 * max);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 10);
    /* hits and waits need no room, in either transaction */
    begin(c, 1000, DRBD_AL_HOT, NONE);
    begin(c, 5, DRBD_AL_PENDING, NONE);
    begin(c, max + 5, DRBD_AL_PENDING, NONE);

    /* the commit leaves the next transaction as full as it was */
    commit_open(c, max);
    begin(c, e, DRBD_AL_BUSY, NONE);
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 0);

    /* handed out, it makes room */
    open_tx(c, u, max);
    for (uint32_t i = 0; i < max; i++) {
        assert_update(&u[i], 10 + max + i, NONE, max + i);
    }
    begin(c, e, DRBD_AL_NEEDS_COMMIT, NONE);
    commit_open(c, 1);
    commit(c, 1);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 10 + 2 * max + 1);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 5), ==, 2);
    g_assert_cmpuint(drbd_al_cache_refcount(c, max + 5), ==, 2);
    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.busy, ==, 3);
    g_assert_cmpuint(st.transactions, ==, 3);
    g_assert_cmpuint(st.updates, ==, 2 * max + 1);
    drbd_al_cache_free(c);
}

/*
 * evict_idle while a transaction is open queues into the next one, as
 * far as it has room, and leaves the open one alone.
 */
static void test_evict_idle_during_transaction(void)
{
    const uint32_t n = 100;
    g_autofree uint32_t *slots = g_new(uint32_t, n);
    g_autofree uint32_t *after = g_new(uint32_t, n);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    DrbdAlCache *c;
    uint32_t i, k;

    for (i = 0; i < n; i++) {
        slots[i] = 1000 + i;
    }
    c = new_loaded(n, slots);
    for (uint32_t e = 1; e <= 5; e++) {
        begin(c, e, DRBD_AL_NEEDS_COMMIT, 999 + e);     /* slots 0..4 */
    }
    open_tx(c, u, 5);

    /* writes in flight on three extents, one cold begin */
    begin(c, 1010, DRBD_AL_HOT, NONE);
    begin(c, 1020, DRBD_AL_HOT, NONE);
    begin(c, 1030, DRBD_AL_HOT, NONE);
    begin(c, 7, DRBD_AL_NEEDS_COMMIT, 1005);            /* slot 5 */
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 63);
    assert_consistent(c);
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 64);
    g_assert_false(drbd_al_cache_is_hot(c, 1006));
    g_assert_false(drbd_al_cache_is_pending(c, 1006));
    for (uint32_t e = 1; e <= 5; e++) {
        g_assert_true(drbd_al_cache_is_pending(c, e));
    }
    assert_slots(c, slots);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 100 - 5 - 64);

    /* the commit applies the five, not the evictions */
    commit_open(c, 64);
    for (i = 0; i < n; i++) {
        after[i] = i < 5 ? i + 1 : 1000 + i;
    }
    assert_slots(c, after);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 100 - 64);

    open_tx(c, u, 64);
    assert_update(&u[0], 5, 1005, 7);
    k = 1;
    for (i = 6; k < 64; i++) {
        if (i % 10 == 0 && i <= 30) {
            continue;
        }
        assert_update(&u[k], i, 1000 + i, NONE);
        after[i] = NONE;
        k++;
    }
    after[5] = 7;
    g_assert_cmpuint(i, ==, 72);

    /* 1..5 go idle while it is written: they go after 72..99 */
    for (uint32_t e = 1; e <= 5; e++) {
        drbd_al_cache_end(c, e);
    }
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 28 + 5);
    g_assert_true(drbd_al_cache_is_pending(c, 7));
    commit_open(c, 33);
    assert_slots(c, after);
    g_assert_true(drbd_al_cache_is_hot(c, 7));

    open_tx(c, u, 33);
    for (k = 0; k < 28; k++) {
        assert_update(&u[k], 72 + k, 1072 + k, NONE);
    }
    for (k = 0; k < 5; k++) {
        assert_update(&u[28 + k], k, k + 1, NONE);
    }
    commit_open(c, 0);
    for (i = 0; i < n; i++) {
        after[i] = NONE;
    }
    after[5] = 7;
    after[10] = 1010;
    after[20] = 1020;
    after[30] = 1030;
    assert_slots(c, after);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 4);

    /* the writes end: the log empties */
    drbd_al_cache_end(c, 7);
    drbd_al_cache_end(c, 1010);
    drbd_al_cache_end(c, 1020);
    drbd_al_cache_end(c, 1030);
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 4);
    commit(c, 4);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 0);
    drbd_al_cache_free(c);
}

static void test_pending_second_begin(void)
{
    DrbdAlCache *c = drbd_al_cache_new(2);
    DrbdAlCacheStats st;

    begin(c, 7, DRBD_AL_NEEDS_COMMIT, NONE);
    begin(c, 7, DRBD_AL_PENDING, NONE);
    begin(c, 7, DRBD_AL_PENDING, NONE);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 7), ==, 3);
    /* one slot, one update */
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 1);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 1);
    commit(c, 1);
    g_assert_true(drbd_al_cache_is_hot(c, 7));
    g_assert_cmpuint(drbd_al_cache_refcount(c, 7), ==, 3);
    for (int i = 0; i < 3; i++) {
        drbd_al_cache_end(c, 7);
        assert_consistent(c);
    }
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.misses, ==, 1);
    g_assert_cmpuint(st.waits, ==, 2);
    g_assert_cmpuint(st.hits, ==, 0);
    g_assert_cmpuint(st.busy, ==, 0);
    g_assert_cmpuint(st.updates, ==, 1);
    g_assert_cmpuint(st.transactions, ==, 1);
    drbd_al_cache_free(c);
}

static void test_abort_restores(void)
{
    const uint32_t slots[4] = { 0, 1, NONE, 3 };
    DrbdAlCache *c = new_loaded(4, slots);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    DrbdAlCacheStats st;

    touch(c, 0);                /* LRU now: 1, 3, 0 */
    begin(c, 3, DRBD_AL_HOT, NONE);   /* a write in flight on 3 */
    begin(c, 10, DRBD_AL_NEEDS_COMMIT, NONE);
    begin(c, 11, DRBD_AL_NEEDS_COMMIT, 1);
    begin(c, 12, DRBD_AL_NEEDS_COMMIT, 0);
    begin(c, 11, DRBD_AL_PENDING, NONE);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 4);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 1);
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 3);
    assert_update(&u[0], 2, NONE, 10);
    assert_update(&u[1], 1, 1, 11);
    assert_update(&u[2], 0, 0, 12);

    drbd_al_cache_abort(c);
    assert_consistent(c);
    g_assert_false(drbd_al_cache_in_transaction(c));
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, 0);
    assert_slots(c, slots);
    for (uint32_t e = 10; e <= 12; e++) {
        g_assert_false(drbd_al_cache_is_hot(c, e));
        g_assert_false(drbd_al_cache_is_pending(c, e));
        g_assert_cmpuint(drbd_al_cache_refcount(c, e), ==, 0);
    }
    g_assert_true(drbd_al_cache_is_hot(c, 0));
    g_assert_true(drbd_al_cache_is_hot(c, 1));
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 3);
    /* the write on 3 is untouched */
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 1);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 3), ==, 1);
    drbd_al_cache_stats(c, &st);
    g_assert_cmpuint(st.transactions, ==, 0);
    g_assert_cmpuint(st.updates, ==, 0);

    /* the retry picks the same slots in the same order */
    begin(c, 20, DRBD_AL_NEEDS_COMMIT, NONE);
    begin(c, 21, DRBD_AL_NEEDS_COMMIT, 1);
    begin(c, 22, DRBD_AL_NEEDS_COMMIT, 0);
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 3);
    assert_update(&u[0], 2, NONE, 20);
    assert_update(&u[1], 1, 1, 21);
    assert_update(&u[2], 0, 0, 22);
    drbd_al_cache_commit(c);
    assert_consistent(c);
    drbd_al_cache_free(c);
}

/*
 * A begin of the extent that a queued update evicts: the extent is cold
 * from the moment its slot was chosen, even before the commit.
 */
static void test_old_extent_is_cold(void)
{
    const uint32_t slots[3] = { 0, 1, NONE };
    const uint32_t moved[3] = { 11, 0, 10 };
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    DrbdAlCache *c;

    /* no slot is free: 0 must wait, although it is in the on-disk log */
    c = new_loaded(3, slots);
    begin(c, 10, DRBD_AL_NEEDS_COMMIT, NONE);   /* slot 2 */
    begin(c, 1, DRBD_AL_HOT, NONE);
    begin(c, 11, DRBD_AL_NEEDS_COMMIT, 0);      /* slot 0 */
    g_assert_false(drbd_al_cache_is_hot(c, 0));
    g_assert_false(drbd_al_cache_is_pending(c, 0));
    begin(c, 0, DRBD_AL_BUSY, NONE);            /* not HOT: cold */
    drbd_al_cache_free(c);

    /* a slot is free: 0 moves there, in the same transaction */
    c = new_loaded(3, slots);
    begin(c, 1, DRBD_AL_HOT, NONE);
    begin(c, 10, DRBD_AL_NEEDS_COMMIT, NONE);   /* empty slot 2 */
    drbd_al_cache_end(c, 1);
    commit(c, 1);
    drbd_al_cache_end(c, 10);
    touch(c, 1);                                /* LRU: 0, 10, 1 */
    begin(c, 10, DRBD_AL_HOT, NONE);
    begin(c, 11, DRBD_AL_NEEDS_COMMIT, 0);      /* slot 0: 0 -> 11 */
    begin(c, 0, DRBD_AL_NEEDS_COMMIT, 1);       /* slot 1: 1 -> 0 */
    g_assert_true(drbd_al_cache_is_pending(c, 0));
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 2);
    assert_update(&u[0], 0, 0, 11);
    assert_update(&u[1], 1, 1, 0);
    drbd_al_cache_commit(c);
    assert_consistent(c);
    g_assert_true(drbd_al_cache_is_hot(c, 0));
    g_assert_true(drbd_al_cache_is_hot(c, 11));
    g_assert_false(drbd_al_cache_is_hot(c, 1));
    assert_slots(c, moved);
    drbd_al_cache_free(c);

    /* the same, aborted: 0 goes back to slot 0, and only there */
    c = new_loaded(3, slots);
    begin(c, 1, DRBD_AL_HOT, NONE);
    begin(c, 10, DRBD_AL_NEEDS_COMMIT, NONE);   /* slot 2 */
    begin(c, 0, DRBD_AL_HOT, NONE);
    drbd_al_cache_end(c, 0);                    /* LRU: 0 */
    begin(c, 11, DRBD_AL_NEEDS_COMMIT, 0);      /* slot 0: 0 -> 11 */
    g_assert_cmpint(drbd_al_cache_begin(c, 0, NULL), ==, DRBD_AL_BUSY);
    drbd_al_cache_end(c, 1);
    begin(c, 0, DRBD_AL_NEEDS_COMMIT, 1);       /* slot 1: 1 -> 0 */
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 3);
    assert_update(&u[2], 1, 1, 0);
    drbd_al_cache_abort(c);
    assert_consistent(c);
    assert_slots(c, slots);
    g_assert_true(drbd_al_cache_is_hot(c, 0));
    g_assert_true(drbd_al_cache_is_hot(c, 1));
    g_assert_cmpuint(drbd_al_cache_refcount(c, 0), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    drbd_al_cache_free(c);
}

static void test_range(void)
{
    const uint32_t slots[4] = { 0, 1, 2, 3 };
    const uint32_t three[3] = { 5, 6, 7 };
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    DrbdAlCache *c;
    Snapshot snap;

    /* all hot: HOT, one reference each */
    c = new_loaded(4, slots);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 0, 2), ==, DRBD_AL_HOT);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 0), ==, 1);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 2), ==, 1);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 3), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 3);
    /*
     * All or nothing: 3 is idle and 4 cold, but the only idle slot holds
     * 3 itself; 4 and 5 need two slots and there is one.
     */
    snapshot(c, &snap);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 3, 4), ==, DRBD_AL_BUSY);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 4, 5), ==, DRBD_AL_BUSY);
    assert_unchanged(c, &snap);
    /* 2 is in use, 3 idle: still no slot for 4 */
    g_assert_cmpint(drbd_al_cache_begin_range(c, 2, 4), ==, DRBD_AL_BUSY);
    assert_unchanged(c, &snap);
    /* without 3 in the range, its slot goes */
    begin(c, 4, DRBD_AL_NEEDS_COMMIT, 3);
    commit(c, 1);
    drbd_al_cache_end(c, 4);
    drbd_al_cache_end_range(c, 0, 2);
    assert_consistent(c);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    drbd_al_cache_free(c);

    /* 3 is the LRU extent but in the range: 0 is evicted instead */
    c = new_loaded(4, slots);
    touch(c, 0);
    touch(c, 1);
    touch(c, 2);                /* LRU: 3, 0, 1, 2 */
    g_assert_cmpint(drbd_al_cache_begin_range(c, 3, 4), ==,
                    DRBD_AL_NEEDS_COMMIT);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 3), ==, 1);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 4), ==, 1);
    g_assert_true(drbd_al_cache_is_hot(c, 3));
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 1);
    assert_update(&u[0], 0, 0, 4);
    drbd_al_cache_commit(c);
    assert_consistent(c);
    drbd_al_cache_end_range(c, 3, 4);   /* LRU: 1, 2, 3, 4 */

    /* a pending extent and a cold one */
    begin(c, 5, DRBD_AL_NEEDS_COMMIT, 1);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 5, 6), ==,
                    DRBD_AL_NEEDS_COMMIT);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 5), ==, 2);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 6), ==, 1);
    /* a pending extent and a hot one */
    g_assert_cmpint(drbd_al_cache_begin_range(c, 4, 5), ==,
                    DRBD_AL_PENDING);
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 2);
    assert_update(&u[0], 1, 1, 5);
    assert_update(&u[1], 2, 2, 6);
    drbd_al_cache_commit(c);
    assert_consistent(c);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 3, 6), ==, DRBD_AL_HOT);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 5), ==, 4);
    drbd_al_cache_end_range(c, 3, 6);
    drbd_al_cache_end_range(c, 4, 5);
    drbd_al_cache_end_range(c, 5, 6);
    drbd_al_cache_end(c, 5);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    assert_consistent(c);
    drbd_al_cache_free(c);

    /* the whole cache in one range */
    c = new_loaded(3, three);
    g_assert_cmpuint(drbd_al_cache_max_range(c), ==, 3);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 4, 6), ==,
                    DRBD_AL_NEEDS_COMMIT);
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 1);
    assert_update(&u[0], 2, 7, 4);
    drbd_al_cache_commit(c);
    assert_consistent(c);
    g_assert_cmpint(drbd_al_cache_begin(c, 8, NULL), ==, DRBD_AL_BUSY);
    drbd_al_cache_end_range(c, 4, 6);   /* LRU: 4, 5, 6 */
    g_assert_cmpint(drbd_al_cache_begin_range(c, 7, 8), ==,
                    DRBD_AL_NEEDS_COMMIT);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 6, 8), ==,
                    DRBD_AL_PENDING);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 7), ==, 2);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 8), ==, 2);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 6), ==, 1);
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 2);
    assert_update(&u[0], 2, 4, 7);
    assert_update(&u[1], 0, 5, 8);
    drbd_al_cache_commit(c);
    assert_consistent(c);
    drbd_al_cache_end_range(c, 7, 8);
    drbd_al_cache_end_range(c, 6, 8);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    assert_consistent(c);
    drbd_al_cache_free(c);
}

static void test_load(void)
{
    const uint32_t good[4] = { 9, NONE, 4, NONE };
    const uint32_t dup[4] = { 3, NONE, 8, 3 };
    const uint32_t other[4] = { 1, 2, 3, 4 };
    DrbdAlCache *c = drbd_al_cache_new(4);
    Error *err = NULL;

    g_assert_cmpint(drbd_al_cache_load(c, good, &error_abort), ==, 0);
    assert_consistent(c);
    assert_slots(c, good);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 2);
    g_assert_true(drbd_al_cache_is_hot(c, 9));
    g_assert_true(drbd_al_cache_is_hot(c, 4));
    g_assert_cmpuint(drbd_al_cache_refcount(c, 9), ==, 0);

    /* a duplicate is refused, and the cache keeps what it had */
    g_assert_cmpint(drbd_al_cache_load(c, dup, &err), ==, -EINVAL);
    g_assert_nonnull(err);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "activity log damaged: extent 3 is in both slot 0 "
                    "and slot 3");
    error_free(err);
    err = NULL;
    assert_consistent(c);
    assert_slots(c, good);
    g_assert_false(drbd_al_cache_is_hot(c, 3));

    /* a second load replaces the content */
    g_assert_cmpint(drbd_al_cache_load(c, other, &error_abort), ==, 0);
    assert_consistent(c);
    assert_slots(c, other);
    g_assert_false(drbd_al_cache_is_hot(c, 9));
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 4);
    /* LRU in slot order */
    begin(c, 20, DRBD_AL_NEEDS_COMMIT, 1);
    begin(c, 21, DRBD_AL_NEEDS_COMMIT, 2);
    commit(c, 2);
    drbd_al_cache_end(c, 20);
    drbd_al_cache_end(c, 21);

    /* empty slots may repeat; the largest extent number is fine */
    {
        const uint32_t edge[4] = { NONE, 0xfffffffe, NONE, 0 };

        g_assert_cmpint(drbd_al_cache_load(c, edge, &error_abort), ==, 0);
        assert_consistent(c);
        assert_slots(c, edge);
        begin(c, 0xfffffffe, DRBD_AL_HOT, NONE);
        begin(c, 0xfffffffd, DRBD_AL_NEEDS_COMMIT, NONE);
        commit(c, 1);
    }
    drbd_al_cache_free(c);
}

static void test_evict_idle(void)
{
    const uint32_t n = 100;
    g_autofree uint32_t *slots = g_new(uint32_t, n);
    g_autofree uint32_t *after = g_new(uint32_t, n);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    DrbdAlCache *c;
    uint32_t k;

    for (uint32_t i = 0; i < n; i++) {
        slots[i] = 1000 + i;
    }
    c = new_loaded(n, slots);
    /* writes in flight on five extents */
    for (uint32_t i = 0; i < 5; i++) {
        begin(c, 1000 + i * 10, DRBD_AL_HOT, NONE);
    }
    /* one cold begin already queued: 63 places remain */
    begin(c, 7, DRBD_AL_NEEDS_COMMIT, 1001);
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 63);
    assert_consistent(c);
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 64);
    assert_update(&u[0], 1, 1001, 7);
    /* LRU order, skipping the in-use ones */
    k = 1;
    for (uint32_t i = 2; k < 64; i++) {
        if (i % 10 == 0 && i < 50) {
            continue;
        }
        assert_update(&u[k], i, 1000 + i, NONE);
        k++;
    }
    drbd_al_cache_commit(c);
    assert_consistent(c);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 100 - 63);

    /* the rest, then nothing */
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 100 - 63 - 6);
    commit(c, 31);
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 0);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 6);
    for (uint32_t i = 0; i < n; i++) {
        after[i] = NONE;
    }
    for (uint32_t i = 0; i < 5; i++) {
        after[i * 10] = 1000 + i * 10;
    }
    after[1] = 7;
    assert_slots(c, after);

    /* the writes end: a second pass empties the log */
    for (uint32_t i = 0; i < 5; i++) {
        drbd_al_cache_end(c, 1000 + i * 10);
    }
    drbd_al_cache_end(c, 7);
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 6);
    /* an evicted extent is cold at once */
    g_assert_false(drbd_al_cache_is_hot(c, 7));
    commit(c, 6);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 0);
    for (uint32_t i = 0; i < n; i++) {
        after[i] = NONE;
    }
    assert_slots(c, after);
    drbd_al_cache_free(c);
}

/* end() of an extent that is not in use is a programming error */
static void test_end_unused_asserts(void)
{
    if (g_test_subprocess()) {
        DrbdAlCache *c = drbd_al_cache_new(2);

        drbd_al_cache_end(c, 3);
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_failed();
}

/* ... and so is end() of an extent still waiting for its transaction */
static void test_end_pending_asserts(void)
{
    if (g_test_subprocess()) {
        DrbdAlCache *c = drbd_al_cache_new(2);

        drbd_al_cache_begin(c, 3, NULL);
        drbd_al_cache_end(c, 3);
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_failed();
}

/*
 * The randomized test: a plain reference model, O(n) everywhere, that
 * states the policy in the most direct way, run side by side with the
 * cache.
 *
 * Two batches of updates: the open transaction (tx, handed out by
 * prepare) and the next one (queue, what begins and evict_idle add
 * meanwhile, at most DRBD_AL_CACHE_MAX_UPDATES).  Commit applies tx and
 * keeps queue; abort reverts both.
 *
 * LRU order: a slot that becomes IDLE gets a new stamp; the victim is the
 * IDLE slot with the smallest stamp.  A slot keeps its stamp while
 * PENDING, so that an abort puts it back in its place: all that an abort
 * reverts was taken since the previous abort, the least recently used
 * first, so it is older than every IDLE slot.  Among EMPTY slots the one
 * that became empty last goes first (slot 0 first initially); an abort
 * empties its slots again, the first queued last, so that they are taken
 * again in the order they were.
 */
typedef struct Model {
    uint32_t n;
    uint32_t *extent;       /* committed */
    uint32_t *next;
    bool *pending;
    uint32_t *refcnt;
    uint64_t *stamp;
    uint64_t clock;
    uint32_t tx[DRBD_AL_CACHE_MAX_UPDATES];     /* the open transaction */
    unsigned nr_tx;
    uint32_t queue[DRBD_AL_CACHE_MAX_UPDATES];  /* the next one */
    unsigned nr_queued;
    GArray *held;           /* extents of committed begins, not ended */
    GArray *waiting;        /* extents of begins waiting for a commit */
} Model;

typedef struct Coverage {
    unsigned results[DRBD_AL_BUSY + 1];
    unsigned busy_full;     /* BUSY because the next batch was full */
    unsigned busy_slots;    /* BUSY because every slot was taken */
    unsigned evicted;       /* NEEDS_COMMIT that evicted an extent */
    unsigned aborts, commits, evict_idle, old_recalled;
    unsigned queued_in_tx;  /* extents queued while a transaction was open */
    unsigned busy_full_in_tx;   /* busy_full while a transaction was open */
    unsigned evict_idle_in_tx;  /* evict_idle while one was open */
    unsigned commits_next;  /* commits with a next batch queued */
    unsigned aborts_next;   /* aborts with a next batch queued */
    unsigned old_requeued;  /* NEEDS_COMMIT of an extent tx evicts */
} Coverage;

static void model_init(Model *m, uint32_t n)
{
    m->n = n;
    m->extent = g_new(uint32_t, n);
    m->next = g_new(uint32_t, n);
    m->pending = g_new0(bool, n);
    m->refcnt = g_new0(uint32_t, n);
    m->stamp = g_new(uint64_t, n);
    for (uint32_t i = 0; i < n; i++) {
        m->extent[i] = NONE;
        m->next[i] = NONE;
        m->stamp[i] = n - i;
    }
    m->clock = n;
    m->nr_tx = 0;
    m->nr_queued = 0;
    m->held = g_array_new(false, false, sizeof(uint32_t));
    m->waiting = g_array_new(false, false, sizeof(uint32_t));
}

static void model_destroy(Model *m)
{
    g_free(m->extent);
    g_free(m->next);
    g_free(m->pending);
    g_free(m->refcnt);
    g_free(m->stamp);
    g_array_free(m->held, true);
    g_array_free(m->waiting, true);
}

/* The slot of a hot or pending extent, or -1 */
static int model_find(const Model *m, uint32_t e)
{
    for (uint32_t i = 0; i < m->n; i++) {
        if (m->pending[i] ? m->next[i] == e : m->extent[i] == e) {
            return i;
        }
    }
    return -1;
}

/* The slot of @batch (@nr of them) whose committed extent is @e, or -1 */
static int model_old_in(const Model *m, const uint32_t *batch, unsigned nr,
                        uint32_t e)
{
    for (unsigned k = 0; k < nr; k++) {
        if (m->extent[batch[k]] == e) {
            return batch[k];
        }
    }
    return -1;
}

static bool model_idle(const Model *m, uint32_t i)
{
    return !m->pending[i] && m->refcnt[i] == 0;
}

/* The victim for a cold extent, not taking a slot in @first..@last */
static int model_victim(const Model *m, uint32_t first, uint32_t last)
{
    int best = -1;

    for (uint32_t i = 0; i < m->n; i++) {
        if (model_idle(m, i) && m->extent[i] == NONE &&
            (best < 0 || m->stamp[i] > m->stamp[best])) {
            best = i;
        }
    }
    if (best >= 0) {
        return best;
    }
    for (uint32_t i = 0; i < m->n; i++) {
        if (model_idle(m, i) && m->extent[i] != NONE &&
            (m->extent[i] < first || m->extent[i] > last) &&
            (best < 0 || m->stamp[i] < m->stamp[best])) {
            best = i;
        }
    }
    return best;
}

/* Queue slot @i, to hold @next, for the next transaction */
static void model_queue(Model *m, uint32_t i, uint32_t next)
{
    g_assert_cmpuint(m->nr_queued, <, DRBD_AL_CACHE_MAX_UPDATES);
    g_assert_false(m->pending[i]);
    m->pending[i] = true;
    m->next[i] = next;
    m->queue[m->nr_queued++] = i;
}

static DrbdAlBeginResult model_begin(Model *m, uint32_t first, uint32_t last,
                                     uint32_t *evicted, Coverage *cov)
{
    unsigned cold = 0, pending_hits = 0, idle_slots = 0;
    uint32_t e;

    *evicted = NONE;
    for (e = first; e <= last; e++) {
        int i = model_find(m, e);

        if (i < 0) {
            cold++;
        } else if (m->pending[i]) {
            pending_hits++;
        }
    }
    for (uint32_t i = 0; i < m->n; i++) {
        if (model_idle(m, i) &&
            (m->extent[i] == NONE || m->extent[i] < first ||
             m->extent[i] > last)) {
            idle_slots++;
        }
    }
    if (cold) {
        /* an open transaction is no reason: only the next batch counts */
        if (m->nr_queued + cold > DRBD_AL_CACHE_MAX_UPDATES) {
            cov->busy_full++;
            cov->busy_full_in_tx += m->nr_tx > 0;
            return DRBD_AL_BUSY;
        }
        if (idle_slots < cold) {
            cov->busy_slots++;
            return DRBD_AL_BUSY;
        }
        cov->queued_in_tx += m->nr_tx > 0;
    }
    for (e = first; e <= last; e++) {
        int i = model_find(m, e);

        if (i >= 0) {
            m->refcnt[i]++;
            g_array_append_val(m->pending[i] ? m->waiting : m->held, e);
        }
    }
    for (e = first; e <= last; e++) {
        int i = model_find(m, e);

        if (i >= 0) {
            continue;
        }
        i = model_victim(m, first, last);
        g_assert_cmpint(i, >=, 0);
        *evicted = m->extent[i];
        if (m->extent[i] != NONE) {
            cov->evicted++;
        }
        model_queue(m, i, e);
        m->refcnt[i] = 1;
        g_array_append_val(m->waiting, e);
    }
    if (cold) {
        return DRBD_AL_NEEDS_COMMIT;
    }
    return pending_hits ? DRBD_AL_PENDING : DRBD_AL_HOT;
}

static void model_end(Model *m, guint idx)
{
    uint32_t e = g_array_index(m->held, uint32_t, idx);
    int i = model_find(m, e);

    g_array_remove_index_fast(m->held, idx);
    g_assert_cmpint(i, >=, 0);
    g_assert_false(m->pending[i]);
    g_assert_cmpuint(m->refcnt[i], >, 0);
    if (--m->refcnt[i] == 0) {
        m->stamp[i] = ++m->clock;
    }
}

/* Open transaction or not, the next batch takes the LRU IDLE slots */
static unsigned model_evict_idle(Model *m)
{
    unsigned k = 0;

    while (m->nr_queued < DRBD_AL_CACHE_MAX_UPDATES) {
        int best = -1;

        for (uint32_t i = 0; i < m->n; i++) {
            if (model_idle(m, i) && m->extent[i] != NONE &&
                (best < 0 || m->stamp[i] < m->stamp[best])) {
                best = i;
            }
        }
        if (best < 0) {
            break;
        }
        model_queue(m, best, NONE);
        k++;
    }
    return k;
}

/* The next batch becomes the open transaction */
static unsigned model_prepare(Model *m)
{
    g_assert_cmpuint(m->nr_tx, ==, 0);
    memcpy(m->tx, m->queue, m->nr_queued * sizeof(m->queue[0]));
    m->nr_tx = m->nr_queued;
    m->nr_queued = 0;
    return m->nr_tx;
}

/* The open transaction is applied; the next batch stays queued */
static void model_commit(Model *m)
{
    guint k;

    g_assert_cmpuint(m->nr_tx, >, 0);
    for (k = 0; k < m->nr_tx; k++) {
        uint32_t i = m->tx[k];

        g_assert_true(m->pending[i]);
        m->pending[i] = false;
        m->extent[i] = m->next[i];
        m->next[i] = NONE;
        if (m->extent[i] == NONE) {
            g_assert_cmpuint(m->refcnt[i], ==, 0);
            m->stamp[i] = ++m->clock;
        } else {
            g_assert_cmpuint(m->refcnt[i], >, 0);
        }
    }
    m->nr_tx = 0;
    /* the waiters on what is hot now may go; those on the next wait */
    for (k = 0; k < m->waiting->len;) {
        uint32_t e = g_array_index(m->waiting, uint32_t, k);
        int i = model_find(m, e);

        g_assert_cmpint(i, >=, 0);
        if (m->pending[i]) {
            k++;
        } else {
            g_array_append_val(m->held, e);
            g_array_remove_index_fast(m->waiting, k);
        }
    }
}

static void model_revert(Model *m, uint32_t i)
{
    g_assert_true(m->pending[i]);
    m->pending[i] = false;
    m->next[i] = NONE;
    m->refcnt[i] = 0;
    if (m->extent[i] == NONE) {
        m->stamp[i] = ++m->clock;
    }
}

/* Both batches are reverted, the last queued first; every waiter fails */
static void model_abort(Model *m)
{
    g_assert_cmpuint(m->nr_tx, >, 0);
    for (unsigned k = m->nr_queued; k-- > 0;) {
        model_revert(m, m->queue[k]);
    }
    for (unsigned k = m->nr_tx; k-- > 0;) {
        model_revert(m, m->tx[k]);
    }
    g_array_set_size(m->waiting, 0);
    m->nr_tx = 0;
    m->nr_queued = 0;
}

/* Everything the cache shows must be what the model says */
static void compare(const DrbdAlCache *c, const Model *m, uint32_t universe)
{
    g_autofree uint32_t *slots = g_new(uint32_t, m->n);
    uint32_t nr_hot = 0, nr_in_use = 0, nr_pending = 0;

    assert_consistent(c);
    drbd_al_cache_slots(c, slots);
    for (uint32_t i = 0; i < m->n; i++) {
        g_assert_cmpuint(slots[i], ==, m->extent[i]);
        nr_hot += !m->pending[i] && m->extent[i] != NONE;
        nr_in_use += m->refcnt[i] > 0;
        nr_pending += m->pending[i];
        /* no extent in two slots, in either view */
        for (uint32_t j = i + 1; j < m->n; j++) {
            g_assert_true(m->extent[i] == NONE ||
                          m->extent[i] != m->extent[j]);
            g_assert_true(!m->pending[i] || !m->pending[j] ||
                          m->next[i] == NONE || m->next[i] != m->next[j]);
        }
        if (!m->pending[i] && m->extent[i] != NONE) {
            g_assert_cmpint(model_find(m, m->extent[i]), ==, i);
        }
    }
    /* every pending slot is in exactly one of the two batches */
    g_assert_cmpuint(nr_pending, ==, m->nr_tx + m->nr_queued);
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, nr_hot);
    g_assert_cmpuint(nr_hot, <=, m->n);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, nr_in_use);
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, m->nr_queued);
    g_assert_cmpint(drbd_al_cache_in_transaction(c), ==, m->nr_tx > 0);
    for (uint32_t e = 0; e < universe; e++) {
        int i = model_find(m, e);

        g_assert_cmpuint(drbd_al_cache_refcount(c, e), ==,
                         i < 0 ? 0 : m->refcnt[i]);
        g_assert_cmpint(drbd_al_cache_is_hot(c, e), ==,
                        i >= 0 && !m->pending[i]);
        g_assert_cmpint(drbd_al_cache_is_pending(c, e), ==,
                        i >= 0 && m->pending[i]);
    }
    /* a write in flight is on a hot extent; a waiting one on a pending */
    for (guint k = 0; k < m->held->len; k++) {
        g_assert_true(drbd_al_cache_is_hot(c, g_array_index(m->held,
                                                            uint32_t, k)));
    }
    for (guint k = 0; k < m->waiting->len; k++) {
        uint32_t e = g_array_index(m->waiting, uint32_t, k);

        g_assert_true(drbd_al_cache_is_pending(c, e));
    }
}

/* prepare on both sides: the updates handed out are the model's batch */
static void prepare_both(DrbdAlCache *c, Model *m)
{
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    unsigned k = drbd_al_cache_prepare(c, u);

    g_assert_cmpuint(k, ==, m->nr_queued);
    for (unsigned j = 0; j < k; j++) {
        uint32_t i = m->queue[j];

        assert_update(&u[j], i, m->extent[i], m->next[i]);
    }
    g_assert_cmpuint(model_prepare(m), ==, k);
}

static void random_run(uint32_t n, unsigned steps, int commit_permille,
                       Coverage *cov)
{
    DrbdAlCache *c = drbd_al_cache_new(n);
    uint32_t universe = 2 * n + 3;
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    Model m;

    model_init(&m, n);
    compare(c, &m, universe);
    for (unsigned step = 0; step < steps; step++) {
        int op = g_test_rand_int_range(0, 1000);

        if (op < 400) {
            uint32_t e = g_test_rand_int_range(0, universe);
            uint32_t ev, want_ev;
            DrbdAlBeginResult want, got;
            int old_tx = model_old_in(&m, m.tx, m.nr_tx, e);
            int old_next = model_old_in(&m, m.queue, m.nr_queued, e);

            want = model_begin(&m, e, e, &want_ev, cov);
            got = drbd_al_cache_begin(c, e, &ev);
            g_assert_cmpint(got, ==, want);
            g_assert_cmpuint(ev, ==, want_ev);
            cov->results[got]++;
            if (old_tx >= 0 || old_next >= 0) {
                /* the extent a queued update evicts is not hot */
                g_assert_cmpint(got, !=, DRBD_AL_HOT);
                cov->old_recalled++;
            }
            if (old_tx >= 0 && got == DRBD_AL_NEEDS_COMMIT) {
                /* it went into another slot, for the next transaction */
                g_assert_cmpint(model_find(&m, e), !=, old_tx);
                g_assert_cmpuint(m.queue[m.nr_queued - 1], ==,
                                 model_find(&m, e));
                cov->old_requeued++;
            }
        } else if (op < 500) {
            uint32_t len = g_test_rand_int_range(1, MIN(n, 4) + 1);
            uint32_t first = g_test_rand_int_range(0, universe - len + 1);
            uint32_t last = first + len - 1;
            uint32_t ev;
            DrbdAlBeginResult want = model_begin(&m, first, last, &ev, cov);

            g_assert_cmpint(drbd_al_cache_begin_range(c, first, last), ==,
                            want);
            cov->results[want]++;
        } else if (op < 900) {
            if (m.held->len) {
                guint idx = g_test_rand_int_range(0, m.held->len);
                uint32_t e = g_array_index(m.held, uint32_t, idx);

                model_end(&m, idx);
                drbd_al_cache_end(c, e);
            }
        } else if (op < 900 + commit_permille) {
            if (m.nr_tx) {
                bool next = m.nr_queued > 0;

                if (g_test_rand_int_range(0, 8) == 0) {
                    model_abort(&m);
                    drbd_al_cache_abort(c);
                    cov->aborts++;
                    cov->aborts_next += next;
                } else {
                    model_commit(&m);
                    drbd_al_cache_commit(c);
                    cov->commits++;
                    cov->commits_next += next;
                }
            } else {
                prepare_both(c, &m);
            }
        } else if (op < 905 + commit_permille) {
            unsigned k = model_evict_idle(&m);

            g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, k);
            cov->evict_idle += k;
            if (m.nr_tx) {
                cov->evict_idle_in_tx += k;
            }
        }
        compare(c, &m, universe);
    }

    /* drain: every transaction commits, every write ends */
    if (m.nr_tx) {
        model_commit(&m);
        drbd_al_cache_commit(c);
        compare(c, &m, universe);
    }
    prepare_both(c, &m);
    if (m.nr_tx) {
        model_commit(&m);
        drbd_al_cache_commit(c);
    }
    compare(c, &m, universe);
    g_assert_cmpuint(m.waiting->len, ==, 0);
    while (m.held->len) {
        uint32_t e = g_array_index(m.held, uint32_t, 0);

        model_end(&m, 0);
        drbd_al_cache_end(c, e);
    }
    compare(c, &m, universe);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, 0);
    while (drbd_al_cache_evict_idle(c)) {
        g_assert_cmpuint(drbd_al_cache_prepare(c, u), >, 0);
        drbd_al_cache_commit(c);
    }
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, 0);
    assert_consistent(c);

    model_destroy(&m);
    drbd_al_cache_free(c);
}

static void test_random(void)
{
    const uint32_t sizes[] = { 1, 2, 3, 7, 16, 100 };
    Coverage cov = { 0 };

    for (int i = 0; i < ARRAY_SIZE(sizes); i++) {
        random_run(sizes[i], 10000, 90, &cov);
        random_run(sizes[i], 10000, 5, &cov);
    }
    /* transactions long enough for the next batch to fill up */
    random_run(200, 10000, 2, &cov);
    g_test_message("hot %u needs-commit %u pending %u busy %u "
                   "(full %u, no slot %u), evicted %u, commits %u, "
                   "aborts %u, evict_idle %u, old extent recalled %u",
                   cov.results[DRBD_AL_HOT],
                   cov.results[DRBD_AL_NEEDS_COMMIT],
                   cov.results[DRBD_AL_PENDING], cov.results[DRBD_AL_BUSY],
                   cov.busy_full, cov.busy_slots, cov.evicted, cov.commits,
                   cov.aborts, cov.evict_idle, cov.old_recalled);
    g_test_message("while a transaction was open: queued %u, busy full "
                   "%u, evict_idle %u, old extent requeued %u; with a "
                   "next batch: commits %u, aborts %u",
                   cov.queued_in_tx, cov.busy_full_in_tx,
                   cov.evict_idle_in_tx, cov.old_requeued,
                   cov.commits_next, cov.aborts_next);
    /* the run went through every path */
    for (int r = 0; r <= DRBD_AL_BUSY; r++) {
        g_assert_cmpuint(cov.results[r], >, 0);
    }
    g_assert_cmpuint(cov.busy_full, >, 0);
    g_assert_cmpuint(cov.busy_slots, >, 0);
    g_assert_cmpuint(cov.evicted, >, 0);
    g_assert_cmpuint(cov.aborts, >, 0);
    g_assert_cmpuint(cov.commits, >, 0);
    g_assert_cmpuint(cov.evict_idle, >, 0);
    g_assert_cmpuint(cov.old_recalled, >, 0);
    g_assert_cmpuint(cov.queued_in_tx, >, 0);
    g_assert_cmpuint(cov.busy_full_in_tx, >, 0);
    g_assert_cmpuint(cov.evict_idle_in_tx, >, 0);
    g_assert_cmpuint(cov.old_requeued, >, 0);
    g_assert_cmpuint(cov.commits_next, >, 0);
    g_assert_cmpuint(cov.aborts_next, >, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/drbd-al-cache/new", test_new);
    g_test_add_func("/drbd-al-cache/max-range", test_max_range);
    g_test_add_func("/drbd-al-cache/fill-from-empty", test_fill_from_empty);
    g_test_add_func("/drbd-al-cache/hit-refcount", test_hit_refcount);
    g_test_add_func("/drbd-al-cache/lru-order", test_lru_order);
    g_test_add_func("/drbd-al-cache/empty-first", test_empty_first);
    g_test_add_func("/drbd-al-cache/in-use-never-evicted",
                    test_in_use_never_evicted);
    g_test_add_func("/drbd-al-cache/busy/all-in-use", test_busy_all_in_use);
    g_test_add_func("/drbd-al-cache/busy/max-updates",
                    test_busy_max_updates);
    g_test_add_func("/drbd-al-cache/busy/next-full", test_busy_next_full);
    g_test_add_func("/drbd-al-cache/next-tx/begins-go-on",
                    test_begin_during_transaction);
    g_test_add_func("/drbd-al-cache/next-tx/queued-for-next",
                    test_next_transaction);
    g_test_add_func("/drbd-al-cache/next-tx/evicted-rebegun",
                    test_evicted_rebegun_during_transaction);
    g_test_add_func("/drbd-al-cache/next-tx/abort-restores",
                    test_abort_with_next_transaction);
    g_test_add_func("/drbd-al-cache/next-tx/evict-idle",
                    test_evict_idle_during_transaction);
    g_test_add_func("/drbd-al-cache/pending-second-begin",
                    test_pending_second_begin);
    g_test_add_func("/drbd-al-cache/abort-restores", test_abort_restores);
    g_test_add_func("/drbd-al-cache/old-extent-is-cold",
                    test_old_extent_is_cold);
    g_test_add_func("/drbd-al-cache/range", test_range);
    g_test_add_func("/drbd-al-cache/load", test_load);
    g_test_add_func("/drbd-al-cache/evict-idle", test_evict_idle);
    g_test_add_func("/drbd-al-cache/end-unused-asserts",
                    test_end_unused_asserts);
    g_test_add_func("/drbd-al-cache/end-pending-asserts",
                    test_end_pending_asserts);
    g_test_add_func("/drbd-al-cache/random", test_random);

    return g_test_run();
}
