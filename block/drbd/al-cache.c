/*
 * DRBD-style replication: the activity log's set of hot extents
 *
 * See al-cache.h for the states of a slot and their transitions.  Every
 * operation but load and the queries is O(1) per extent: the extent ->
 * slot map is a hash table, and the eviction candidates sit on two
 * lists whose heads are the next victims.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/queue.h"
#include "qapi/error.h"
#include "al-cache.h"

typedef struct DrbdAlSlot DrbdAlSlot;

struct DrbdAlSlot {
    uint32_t index;
    uint32_t extent;        /* committed content, or NONE */
    uint32_t next;          /* PENDING: the content after the commit */
    uint32_t refcnt;
    bool pending;
    /* EMPTY: on DrbdAlCache.empty; IDLE: on DrbdAlCache.lru; else none */
    QTAILQ_ENTRY(DrbdAlSlot) link;
};

struct DrbdAlCache {
    uint32_t nr_slots;
    DrbdAlSlot *slot;

    /*
     * Hot and pending extents -> their slot: the committed extent of an
     * IDLE or ACTIVE slot, the queued extent of a PENDING one.  The old
     * extent of a PENDING slot is not in it: it counts as cold.
     */
    GHashTable *map;

    /* Eviction candidates: empty slots first, then least recently used */
    QTAILQ_HEAD(, DrbdAlSlot) empty;
    QTAILQ_HEAD(, DrbdAlSlot) lru;
    uint32_t nr_empty;
    uint32_t nr_lru;

    /*
     * PENDING slots, in the order they were queued: the first nr_in_tx
     * are in the open transaction, the rest wait for the next one
     */
    DrbdAlSlot *pending[2 * DRBD_AL_CACHE_MAX_UPDATES];
    unsigned nr_pending;
    unsigned nr_in_tx;
    bool in_transaction;

    uint32_t nr_hot;        /* IDLE and ACTIVE slots */
    uint32_t nr_in_use;     /* slots with refcnt > 0 */
    DrbdAlCacheStats stats;
};

static DrbdAlSlot *lookup(const DrbdAlCache *c, uint32_t extent)
{
    return g_hash_table_lookup(c->map, GUINT_TO_POINTER(extent));
}

static void map_add(DrbdAlCache *c, uint32_t extent, DrbdAlSlot *s)
{
    assert(!g_hash_table_contains(c->map, GUINT_TO_POINTER(extent)));
    g_hash_table_insert(c->map, GUINT_TO_POINTER(extent), s);
}

static void map_remove(DrbdAlCache *c, uint32_t extent)
{
    bool found = g_hash_table_remove(c->map, GUINT_TO_POINTER(extent));

    assert(found);
}

static void empty_push(DrbdAlCache *c, DrbdAlSlot *s)
{
    QTAILQ_INSERT_HEAD(&c->empty, s, link);
    c->nr_empty++;
}

static void lru_remove(DrbdAlCache *c, DrbdAlSlot *s)
{
    QTAILQ_REMOVE(&c->lru, s, link);
    c->nr_lru--;
}

static void ref_get(DrbdAlCache *c, DrbdAlSlot *s)
{
    if (s->refcnt++ == 0) {
        c->nr_in_use++;
        if (!s->pending) {
            lru_remove(c, s);           /* IDLE -> ACTIVE */
        }
    }
}

/* The slot a cold extent takes: an EMPTY one, else the LRU IDLE one */
static DrbdAlSlot *take_victim(DrbdAlCache *c)
{
    DrbdAlSlot *s = QTAILQ_FIRST(&c->empty);

    if (s) {
        QTAILQ_REMOVE(&c->empty, s, link);
        c->nr_empty--;
        return s;
    }
    s = QTAILQ_FIRST(&c->lru);
    assert(s);
    lru_remove(c, s);
    map_remove(c, s->extent);
    c->nr_hot--;
    return s;
}

/* Updates queued for the next transaction, not in the open one */
static unsigned nr_queued(const DrbdAlCache *c)
{
    return c->nr_pending - c->nr_in_tx;
}

/* EMPTY or IDLE -> PENDING, to hold @next after the commit */
static void queue_update(DrbdAlCache *c, DrbdAlSlot *s, uint32_t next)
{
    assert(nr_queued(c) < DRBD_AL_CACHE_MAX_UPDATES);
    s->pending = true;
    s->next = next;
    c->pending[c->nr_pending++] = s;
}

/*
 * Every slot EMPTY or IDLE: slot i holds @slots[i], or nothing if @slots
 * is NULL.  The candidates are in slot order, slot 0 the first victim.
 */
static void reset(DrbdAlCache *c, const uint32_t *slots)
{
    g_hash_table_remove_all(c->map);
    QTAILQ_INIT(&c->empty);
    QTAILQ_INIT(&c->lru);
    c->nr_empty = 0;
    c->nr_lru = 0;
    c->nr_hot = 0;
    for (uint32_t i = 0; i < c->nr_slots; i++) {
        DrbdAlSlot *s = &c->slot[i];

        s->index = i;
        s->extent = slots ? slots[i] : DRBD_AL_EXTENT_NONE;
        s->next = DRBD_AL_EXTENT_NONE;
        s->refcnt = 0;
        s->pending = false;
        if (s->extent == DRBD_AL_EXTENT_NONE) {
            QTAILQ_INSERT_TAIL(&c->empty, s, link);
            c->nr_empty++;
        } else {
            map_add(c, s->extent, s);
            QTAILQ_INSERT_TAIL(&c->lru, s, link);
            c->nr_lru++;
            c->nr_hot++;
        }
    }
}

DrbdAlCache *drbd_al_cache_new(uint32_t nr_slots)
{
    DrbdAlCache *c = g_new0(DrbdAlCache, 1);

    assert(nr_slots >= 1 && nr_slots < DRBD_AL_EXTENT_NONE);
    c->nr_slots = nr_slots;
    c->slot = g_new0(DrbdAlSlot, nr_slots);
    c->map = g_hash_table_new(g_direct_hash, g_direct_equal);
    reset(c, NULL);
    return c;
}

void drbd_al_cache_free(DrbdAlCache *c)
{
    if (!c) {
        return;
    }
    g_hash_table_destroy(c->map);
    g_free(c->slot);
    g_free(c);
}

uint32_t drbd_al_cache_nr_slots(const DrbdAlCache *c)
{
    return c->nr_slots;
}

uint32_t drbd_al_cache_max_range(const DrbdAlCache *c)
{
    return MIN(c->nr_slots, DRBD_AL_CACHE_MAX_UPDATES);
}

int drbd_al_cache_load(DrbdAlCache *c, const uint32_t *slots, Error **errp)
{
    g_autoptr(GHashTable) seen = g_hash_table_new(g_direct_hash,
                                                  g_direct_equal);

    assert(c->nr_in_use == 0 && c->nr_pending == 0 && !c->in_transaction);

    for (uint32_t i = 0; i < c->nr_slots; i++) {
        gpointer key = GUINT_TO_POINTER(slots[i]);
        gpointer other;

        if (slots[i] == DRBD_AL_EXTENT_NONE) {
            continue;
        }
        if (g_hash_table_lookup_extended(seen, key, NULL, &other)) {
            error_setg(errp, "activity log damaged: extent %" PRIu32
                       " is in both slot %u and slot %" PRIu32, slots[i],
                       GPOINTER_TO_UINT(other), i);
            return -EINVAL;
        }
        g_hash_table_insert(seen, key, GUINT_TO_POINTER(i));
    }

    reset(c, slots);
    return 0;
}

static DrbdAlBeginResult begin(DrbdAlCache *c, uint32_t first, uint32_t last,
                               uint32_t *evicted)
{
    uint32_t cold = 0, idle_hits = 0, pending_hits = 0;
    uint32_t e;

    assert(first <= last && last != DRBD_AL_EXTENT_NONE);
    assert(last - first < drbd_al_cache_max_range(c));

    for (e = first; e <= last; e++) {
        DrbdAlSlot *s = lookup(c, e);

        if (!s) {
            cold++;
        } else if (s->pending) {
            pending_hits++;
        } else if (s->refcnt == 0) {
            idle_hits++;
        }
    }

    /* The idle hits leave the candidates before any victim is chosen */
    if (cold && (nr_queued(c) + cold > DRBD_AL_CACHE_MAX_UPDATES ||
                 c->nr_empty + c->nr_lru - idle_hits < cold)) {
        c->stats.busy++;
        return DRBD_AL_BUSY;
    }

    for (e = first; e <= last; e++) {
        DrbdAlSlot *s = lookup(c, e);

        if (s) {
            ref_get(c, s);
        }
    }
    for (e = first; cold && e <= last; e++) {
        DrbdAlSlot *s = lookup(c, e);

        if (s) {
            continue;
        }
        s = take_victim(c);
        if (evicted) {
            *evicted = s->extent;
        }
        queue_update(c, s, e);
        map_add(c, e, s);
        ref_get(c, s);
    }

    c->stats.misses += cold;
    c->stats.waits += pending_hits;
    c->stats.hits += last - first + 1 - cold - pending_hits;
    if (cold) {
        return DRBD_AL_NEEDS_COMMIT;
    }
    return pending_hits ? DRBD_AL_PENDING : DRBD_AL_HOT;
}

DrbdAlBeginResult drbd_al_cache_begin_range(DrbdAlCache *c, uint32_t first,
                                            uint32_t last)
{
    return begin(c, first, last, NULL);
}

DrbdAlBeginResult drbd_al_cache_begin(DrbdAlCache *c, uint32_t extent,
                                      uint32_t *evicted)
{
    if (evicted) {
        *evicted = DRBD_AL_EXTENT_NONE;
    }
    return begin(c, extent, extent, evicted);
}

void drbd_al_cache_end(DrbdAlCache *c, uint32_t extent)
{
    DrbdAlSlot *s = lookup(c, extent);

    /* Only a committed extent has writes in flight */
    assert(s && !s->pending && s->refcnt > 0);
    if (--s->refcnt == 0) {
        c->nr_in_use--;
        QTAILQ_INSERT_TAIL(&c->lru, s, link);   /* ACTIVE -> IDLE */
        c->nr_lru++;
    }
}

void drbd_al_cache_end_range(DrbdAlCache *c, uint32_t first, uint32_t last)
{
    assert(first <= last && last != DRBD_AL_EXTENT_NONE);
    for (uint32_t e = first; e <= last; e++) {
        drbd_al_cache_end(c, e);
    }
}

unsigned drbd_al_cache_evict_idle(DrbdAlCache *c)
{
    unsigned n = 0;
    DrbdAlSlot *s;

    while (nr_queued(c) < DRBD_AL_CACHE_MAX_UPDATES &&
           (s = QTAILQ_FIRST(&c->lru))) {
        lru_remove(c, s);
        map_remove(c, s->extent);
        c->nr_hot--;
        queue_update(c, s, DRBD_AL_EXTENT_NONE);
        n++;
    }
    return n;
}

unsigned drbd_al_cache_nr_pending(const DrbdAlCache *c)
{
    return nr_queued(c);
}

unsigned drbd_al_cache_prepare(DrbdAlCache *c,
                               DrbdAlCacheUpdate *updates)
{
    assert(!c->in_transaction && c->nr_in_tx == 0);
    assert(c->nr_pending <= DRBD_AL_CACHE_MAX_UPDATES);
    for (unsigned i = 0; i < c->nr_pending; i++) {
        DrbdAlSlot *s = c->pending[i];

        updates[i] = (DrbdAlCacheUpdate) {
            .slot = s->index,
            .old_extent = s->extent,
            .new_extent = s->next,
        };
    }
    c->in_transaction = c->nr_pending > 0;
    c->nr_in_tx = c->nr_pending;
    return c->nr_pending;
}

bool drbd_al_cache_in_transaction(const DrbdAlCache *c)
{
    return c->in_transaction;
}

void drbd_al_cache_commit(DrbdAlCache *c)
{
    assert(c->in_transaction);
    for (unsigned i = 0; i < c->nr_in_tx; i++) {
        DrbdAlSlot *s = c->pending[i];

        s->pending = false;
        s->extent = s->next;
        s->next = DRBD_AL_EXTENT_NONE;
        if (s->extent == DRBD_AL_EXTENT_NONE) {
            assert(s->refcnt == 0);
            empty_push(c, s);                   /* PENDING -> EMPTY */
        } else {
            assert(s->refcnt > 0);
            c->nr_hot++;                        /* PENDING -> ACTIVE */
        }
    }
    c->stats.updates += c->nr_in_tx;
    c->stats.transactions++;
    /* What was queued meanwhile is the next transaction */
    memmove(c->pending, c->pending + c->nr_in_tx,
            nr_queued(c) * sizeof(c->pending[0]));
    c->nr_pending -= c->nr_in_tx;
    c->nr_in_tx = 0;
    c->in_transaction = false;
}

void drbd_al_cache_abort(DrbdAlCache *c)
{
    unsigned i;

    assert(c->in_transaction);

    /*
     * The updates queued for the next transaction go too: one of them may
     * have taken an extent that this transaction evicts.  Two passes: an
     * old extent may be the new extent of another slot, so every new one
     * leaves the map before any old one comes back.
     */
    for (i = 0; i < c->nr_pending; i++) {
        DrbdAlSlot *s = c->pending[i];

        if (s->next != DRBD_AL_EXTENT_NONE) {
            map_remove(c, s->next);
        }
        if (s->refcnt > 0) {
            s->refcnt = 0;
            c->nr_in_use--;
        }
        s->pending = false;
        s->next = DRBD_AL_EXTENT_NONE;
    }
    /* In reverse, so that the candidates regain their order */
    while (i-- > 0) {
        DrbdAlSlot *s = c->pending[i];

        if (s->extent == DRBD_AL_EXTENT_NONE) {
            empty_push(c, s);                   /* PENDING -> EMPTY */
        } else {
            map_add(c, s->extent, s);
            QTAILQ_INSERT_HEAD(&c->lru, s, link);   /* PENDING -> IDLE */
            c->nr_lru++;
            c->nr_hot++;
        }
    }
    c->nr_pending = 0;
    c->nr_in_tx = 0;
    c->in_transaction = false;
}

unsigned drbd_al_cache_next_victims(const DrbdAlCache *c, uint32_t *extents,
                                    unsigned max)
{
    const DrbdAlSlot *s;
    unsigned n = 0;

    QTAILQ_FOREACH(s, &c->lru, link) {
        if (n == max) {
            break;
        }
        extents[n++] = s->extent;
    }
    return n;
}

void drbd_al_cache_slots(const DrbdAlCache *c, uint32_t *slots)
{
    for (uint32_t i = 0; i < c->nr_slots; i++) {
        slots[i] = c->slot[i].extent;
    }
}

bool drbd_al_cache_is_hot(const DrbdAlCache *c, uint32_t extent)
{
    DrbdAlSlot *s = lookup(c, extent);

    return s && !s->pending;
}

bool drbd_al_cache_is_pending(const DrbdAlCache *c, uint32_t extent)
{
    DrbdAlSlot *s = lookup(c, extent);

    return s && s->pending;
}

uint32_t drbd_al_cache_refcount(const DrbdAlCache *c, uint32_t extent)
{
    DrbdAlSlot *s = lookup(c, extent);

    return s ? s->refcnt : 0;
}

uint32_t drbd_al_cache_nr_hot(const DrbdAlCache *c)
{
    return c->nr_hot;
}

uint32_t drbd_al_cache_nr_in_use(const DrbdAlCache *c)
{
    return c->nr_in_use;
}

void drbd_al_cache_stats(const DrbdAlCache *c, DrbdAlCacheStats *stats)
{
    *stats = c->stats;
}

/* The invariants of one slot, by its state */
static char *check_slot(const DrbdAlCache *c, const DrbdAlSlot *s,
                        unsigned *nr_pending)
{
    uint32_t i = s->index;
    bool listed = QTAILQ_IN_USE(s, link);

    if (s->pending) {
        uint32_t n = s->next;
        unsigned k;

        for (k = 0; k < c->nr_pending && c->pending[k] != s; k++) {
            /* find it */
        }
        if (k == c->nr_pending) {
            return g_strdup_printf("slot %u: pending but not queued", i);
        }
        (*nr_pending)++;
        if (listed) {
            return g_strdup_printf("slot %u: pending and a candidate", i);
        }
        if (n == DRBD_AL_EXTENT_NONE ? s->refcnt != 0 : s->refcnt == 0) {
            return g_strdup_printf("slot %u: pending to %" PRIu32
                                   " with refcount %" PRIu32, i, n,
                                   s->refcnt);
        }
        if (n != DRBD_AL_EXTENT_NONE && lookup(c, n) != s) {
            return g_strdup_printf("slot %u: pending extent %" PRIu32
                                   " not mapped to it", i, n);
        }
        if (s->extent != DRBD_AL_EXTENT_NONE &&
            lookup(c, s->extent) == s) {
            return g_strdup_printf("slot %u: evicted extent %" PRIu32
                                   " still mapped to it", i, s->extent);
        }
        return NULL;
    }

    if (s->next != DRBD_AL_EXTENT_NONE) {
        return g_strdup_printf("slot %u: not pending but has a next", i);
    }
    if (s->extent == DRBD_AL_EXTENT_NONE) {
        if (s->refcnt || !listed) {
            return g_strdup_printf("slot %u: empty, refcount %" PRIu32
                                   ", %s", i, s->refcnt,
                                   listed ? "listed" : "not listed");
        }
        return NULL;
    }
    if (lookup(c, s->extent) != s) {
        return g_strdup_printf("slot %u: extent %" PRIu32 " not mapped to "
                               "it", i, s->extent);
    }
    if ((s->refcnt == 0) != listed) {
        return g_strdup_printf("slot %u: refcount %" PRIu32 " but %s", i,
                               s->refcnt, listed ? "listed" : "not listed");
    }
    return NULL;
}

char *drbd_al_cache_check(const DrbdAlCache *c)
{
    g_autoptr(GHashTable) committed = g_hash_table_new(g_direct_hash,
                                                       g_direct_equal);
    uint32_t nr_hot = 0, nr_in_use = 0, nr_mapped = 0, n;
    unsigned nr_pending = 0;
    const DrbdAlSlot *s;

    for (uint32_t i = 0; i < c->nr_slots; i++) {
        char *err;

        s = &c->slot[i];
        if (s->index != i) {
            return g_strdup_printf("slot %u: index %" PRIu32, i, s->index);
        }
        err = check_slot(c, s, &nr_pending);
        if (err) {
            return err;
        }
        if (s->extent != DRBD_AL_EXTENT_NONE) {
            gpointer key = GUINT_TO_POINTER(s->extent);

            if (g_hash_table_contains(committed, key)) {
                return g_strdup_printf("extent %" PRIu32 " committed in two "
                                       "slots", s->extent);
            }
            g_hash_table_add(committed, key);
        }
        nr_hot += !s->pending && s->extent != DRBD_AL_EXTENT_NONE;
        nr_in_use += s->refcnt > 0;
        nr_mapped += s->pending ? s->next != DRBD_AL_EXTENT_NONE
                                : s->extent != DRBD_AL_EXTENT_NONE;
    }
    if (nr_pending != c->nr_pending) {
        return g_strdup_printf("%u pending slots, %u queued", nr_pending,
                               c->nr_pending);
    }
    if (c->in_transaction != (c->nr_in_tx > 0) ||
        c->nr_in_tx > c->nr_pending ||
        c->nr_in_tx > DRBD_AL_CACHE_MAX_UPDATES ||
        nr_queued(c) > DRBD_AL_CACHE_MAX_UPDATES) {
        return g_strdup_printf("transaction %s with %u updates, %u queued",
                               c->in_transaction ? "open" : "closed",
                               c->nr_in_tx, nr_queued(c));
    }
    if (nr_mapped != g_hash_table_size(c->map)) {
        return g_strdup_printf("%" PRIu32 " extents mapped, %u expected",
                               g_hash_table_size(c->map), nr_mapped);
    }
    if (nr_hot != c->nr_hot || nr_in_use != c->nr_in_use) {
        return g_strdup_printf("counted %" PRIu32 " hot, %" PRIu32 " in "
                               "use; recorded %" PRIu32 ", %" PRIu32,
                               nr_hot, nr_in_use, c->nr_hot, c->nr_in_use);
    }

    n = 0;
    QTAILQ_FOREACH(s, &c->empty, link) {
        if (s->pending || s->extent != DRBD_AL_EXTENT_NONE) {
            return g_strdup_printf("slot %" PRIu32 " on the empty list",
                                   s->index);
        }
        n++;
    }
    if (n != c->nr_empty) {
        return g_strdup_printf("%" PRIu32 " on the empty list, recorded "
                               "%" PRIu32, n, c->nr_empty);
    }
    n = 0;
    QTAILQ_FOREACH(s, &c->lru, link) {
        if (s->pending || s->extent == DRBD_AL_EXTENT_NONE || s->refcnt) {
            return g_strdup_printf("slot %" PRIu32 " on the LRU list",
                                   s->index);
        }
        n++;
    }
    if (n != c->nr_lru) {
        return g_strdup_printf("%" PRIu32 " on the LRU list, recorded "
                               "%" PRIu32, n, c->nr_lru);
    }
    return NULL;
}
