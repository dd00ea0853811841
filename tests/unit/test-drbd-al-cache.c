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
    /* 36 slots are free, but the transaction is full */
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

static void test_busy_during_transaction(void)
{
    const uint32_t slots[3] = { 0, 1, NONE };
    DrbdAlCache *c = new_loaded(3, slots);
    DrbdAlCacheUpdate u[DRBD_AL_CACHE_MAX_UPDATES];
    Snapshot snap;

    begin(c, 5, DRBD_AL_NEEDS_COMMIT, NONE);
    g_assert_cmpuint(drbd_al_cache_prepare(c, u), ==, 1);
    assert_update(&u[0], 2, NONE, 5);

    /* no update may join the transaction being written */
    snapshot(c, &snap);
    begin(c, 6, DRBD_AL_BUSY, NONE);
    g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, 0);
    assert_unchanged(c, &snap);
    /* but hits and waits go on */
    begin(c, 0, DRBD_AL_HOT, NONE);
    begin(c, 5, DRBD_AL_PENDING, NONE);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 0, 1), ==, DRBD_AL_HOT);
    g_assert_cmpint(drbd_al_cache_begin_range(c, 4, 5), ==, DRBD_AL_BUSY);
    drbd_al_cache_end(c, 0);
    drbd_al_cache_end_range(c, 0, 1);
    assert_consistent(c);

    drbd_al_cache_commit(c);
    assert_consistent(c);
    g_assert_cmpuint(drbd_al_cache_refcount(c, 5), ==, 2);
    begin(c, 6, DRBD_AL_NEEDS_COMMIT, 0);
    commit(c, 1);
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
 * LRU order: a slot that becomes IDLE gets a new stamp; the victim is the
 * IDLE slot with the smallest stamp.  Among EMPTY slots the one that
 * became empty last goes first (slot 0 first initially).  A slot keeps
 * its stamp while PENDING, so that an abort puts it back in its place.
 */
typedef struct Model {
    uint32_t n;
    uint32_t *extent;       /* committed */
    uint32_t *next;
    bool *pending;
    uint32_t *refcnt;
    uint64_t *stamp;
    uint64_t clock;
    uint32_t queue[DRBD_AL_CACHE_MAX_UPDATES];
    unsigned nr_queued;
    bool in_transaction;
    GArray *held;           /* extents of committed begins, not ended */
    GArray *waiting;        /* extents of begins waiting for a commit */
} Model;

typedef struct Coverage {
    unsigned results[DRBD_AL_BUSY + 1];
    unsigned busy_full;     /* BUSY because the transaction was full */
    unsigned busy_slots;    /* BUSY because every slot was taken */
    unsigned evicted;       /* NEEDS_COMMIT that evicted an extent */
    unsigned aborts, commits, evict_idle, old_recalled;
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
    m->nr_queued = 0;
    m->in_transaction = false;
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

static void model_queue(Model *m, uint32_t i, uint32_t next)
{
    g_assert_cmpuint(m->nr_queued, <, DRBD_AL_CACHE_MAX_UPDATES);
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
        if (m->in_transaction) {
            return DRBD_AL_BUSY;
        }
        if (m->nr_queued + cold > DRBD_AL_CACHE_MAX_UPDATES) {
            cov->busy_full++;
            return DRBD_AL_BUSY;
        }
        if (idle_slots < cold) {
            cov->busy_slots++;
            return DRBD_AL_BUSY;
        }
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

static unsigned model_evict_idle(Model *m)
{
    unsigned k = 0;

    if (m->in_transaction) {
        return 0;
    }
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

static void model_commit(Model *m)
{
    for (unsigned k = 0; k < m->nr_queued; k++) {
        uint32_t i = m->queue[k];

        m->pending[i] = false;
        m->extent[i] = m->next[i];
        m->next[i] = NONE;
        if (m->extent[i] == NONE) {
            m->stamp[i] = ++m->clock;
        }
    }
    g_array_append_vals(m->held, m->waiting->data, m->waiting->len);
    g_array_set_size(m->waiting, 0);
    m->nr_queued = 0;
    m->in_transaction = false;
}

static void model_abort(Model *m)
{
    for (unsigned k = 0; k < m->nr_queued; k++) {
        uint32_t i = m->queue[k];

        m->pending[i] = false;
        m->next[i] = NONE;
        m->refcnt[i] = 0;
    }
    g_array_set_size(m->waiting, 0);
    m->nr_queued = 0;
    m->in_transaction = false;
}

/* Everything the cache shows must be what the model says */
static void compare(const DrbdAlCache *c, const Model *m, uint32_t universe)
{
    g_autofree uint32_t *slots = g_new(uint32_t, m->n);
    uint32_t nr_hot = 0, nr_in_use = 0;

    assert_consistent(c);
    drbd_al_cache_slots(c, slots);
    for (uint32_t i = 0; i < m->n; i++) {
        g_assert_cmpuint(slots[i], ==, m->extent[i]);
        nr_hot += !m->pending[i] && m->extent[i] != NONE;
        nr_in_use += m->refcnt[i] > 0;
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
    g_assert_cmpuint(drbd_al_cache_nr_hot(c), ==, nr_hot);
    g_assert_cmpuint(nr_hot, <=, m->n);
    g_assert_cmpuint(drbd_al_cache_nr_in_use(c), ==, nr_in_use);
    g_assert_cmpuint(drbd_al_cache_nr_pending(c), ==, m->nr_queued);
    g_assert_cmpint(drbd_al_cache_in_transaction(c), ==, m->in_transaction);
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
            int old = -1;

            for (unsigned k = 0; k < m.nr_queued; k++) {
                if (m.extent[m.queue[k]] == e) {
                    old = m.queue[k];
                }
            }
            want = model_begin(&m, e, e, &want_ev, cov);
            got = drbd_al_cache_begin(c, e, &ev);
            g_assert_cmpint(got, ==, want);
            g_assert_cmpuint(ev, ==, want_ev);
            cov->results[got]++;
            if (old >= 0) {
                /* the extent a queued update evicts is not hot */
                g_assert_cmpint(got, !=, DRBD_AL_HOT);
                cov->old_recalled++;
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
            if (m.in_transaction) {
                if (g_test_rand_int_range(0, 8) == 0) {
                    model_abort(&m);
                    drbd_al_cache_abort(c);
                    cov->aborts++;
                } else {
                    model_commit(&m);
                    drbd_al_cache_commit(c);
                    cov->commits++;
                }
            } else {
                unsigned k = drbd_al_cache_prepare(c, u);

                g_assert_cmpuint(k, ==, m.nr_queued);
                for (unsigned j = 0; j < k; j++) {
                    uint32_t i = m.queue[j];

                    assert_update(&u[j], i, m.extent[i], m.next[i]);
                }
                m.in_transaction = k > 0;
            }
        } else if (op < 905 + commit_permille) {
            unsigned k = model_evict_idle(&m);

            g_assert_cmpuint(drbd_al_cache_evict_idle(c), ==, k);
            cov->evict_idle += k;
        }
        compare(c, &m, universe);
    }

    /* drain: every write ends, every transaction commits */
    if (m.in_transaction) {
        model_commit(&m);
        drbd_al_cache_commit(c);
    }
    if (drbd_al_cache_prepare(c, u)) {
        model_commit(&m);
        drbd_al_cache_commit(c);
    }
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
    g_test_message("hot %u needs-commit %u pending %u busy %u "
                   "(full %u, no slot %u), evicted %u, commits %u, "
                   "aborts %u, evict_idle %u, old extent recalled %u",
                   cov.results[DRBD_AL_HOT],
                   cov.results[DRBD_AL_NEEDS_COMMIT],
                   cov.results[DRBD_AL_PENDING], cov.results[DRBD_AL_BUSY],
                   cov.busy_full, cov.busy_slots, cov.evicted, cov.commits,
                   cov.aborts, cov.evict_idle, cov.old_recalled);
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
    g_test_add_func("/drbd-al-cache/busy/during-transaction",
                    test_busy_during_transaction);
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
