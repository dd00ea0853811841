/*
 * DRBD-style replication: the order in which a secondary applies writes
 *
 * See order.h.  Writes in flight sit on a list in arrival order, so that
 * the newest number below which every write is done is the head's number
 * minus one; epochs sit on a list oldest first, the open one last.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/queue.h"
#include "qapi/error.h"
#include "order.h"

typedef struct DrbdOrderEpoch DrbdOrderEpoch;

struct DrbdOrderEpoch {
    DrbdBarrier barrier;        /* once closed */
    bool closed;
    uint32_t arrived;           /* writes started in it */
    uint32_t inflight;          /* of those, not done */
    QTAILQ_ENTRY(DrbdOrderEpoch) next;
};

struct DrbdOrderWrite {
    uint64_t seq;
    bool done;
    DrbdOrderEpoch *epoch;
    QTAILQ_ENTRY(DrbdOrderWrite) next;
};

struct DrbdOrder {
    uint64_t arrived;           /* the number of the newest arrived write */
    uint64_t started;           /* ... and of the newest started one */
    unsigned inflight;          /* started, not done */
    unsigned closed;            /* closed epochs on the list */
    unsigned flushes;           /* barriers asking for a flush, not done */
    QTAILQ_HEAD(, DrbdOrderWrite) writes;   /* started, not all done */
    QTAILQ_HEAD(, DrbdOrderEpoch) epochs;   /* oldest first, open last */
};

static DrbdOrderEpoch *open_epoch(DrbdOrder *o)
{
    DrbdOrderEpoch *e = g_new0(DrbdOrderEpoch, 1);

    QTAILQ_INSERT_TAIL(&o->epochs, e, next);
    return e;
}

DrbdOrder *drbd_order_new(void)
{
    DrbdOrder *o = g_new0(DrbdOrder, 1);

    QTAILQ_INIT(&o->writes);
    QTAILQ_INIT(&o->epochs);
    open_epoch(o);
    return o;
}

void drbd_order_free(DrbdOrder *o)
{
    DrbdOrderWrite *w, *wn;
    DrbdOrderEpoch *e, *en;

    if (!o) {
        return;
    }
    QTAILQ_FOREACH_SAFE(w, &o->writes, next, wn) {
        g_free(w);
    }
    QTAILQ_FOREACH_SAFE(e, &o->epochs, next, en) {
        g_free(e);
    }
    g_free(o);
}

/* Every write up to this number is done */
static uint64_t done_upto(const DrbdOrder *o)
{
    DrbdOrderWrite *w = QTAILQ_FIRST(&o->writes);

    return w ? w->seq - 1 : o->started;
}

int drbd_order_arrive(DrbdOrder *o, uint32_t unordered, uint64_t *dep,
                      Error **errp)
{
    if (o->arrived != o->started) {
        error_setg(errp, "a write arrived before the previous one started");
        return -EPROTO;
    }
    if (unordered > o->arrived) {
        error_setg(errp, "write %" PRIu64 " claims %" PRIu32 " unordered "
                   "writes before it, but only %" PRIu64 " arrived",
                   o->arrived + 1, unordered, o->arrived);
        return -EPROTO;
    }
    o->arrived++;
    *dep = o->arrived - 1 - unordered;
    return 0;
}

bool drbd_order_may_start(const DrbdOrder *o, uint64_t dep)
{
    return o->flushes == 0 && done_upto(o) >= dep;
}

DrbdOrderWrite *drbd_order_start(DrbdOrder *o)
{
    DrbdOrderWrite *w = g_new0(DrbdOrderWrite, 1);

    assert(o->arrived == o->started + 1);
    w->seq = ++o->started;
    w->epoch = QTAILQ_LAST(&o->epochs);
    assert(w->epoch && !w->epoch->closed);
    w->epoch->arrived++;
    w->epoch->inflight++;
    QTAILQ_INSERT_TAIL(&o->writes, w, next);
    o->inflight++;
    return w;
}

void drbd_order_done(DrbdOrder *o, DrbdOrderWrite *w)
{
    assert(!w->done && w->epoch->inflight > 0 && o->inflight > 0);
    w->done = true;
    w->epoch->inflight--;
    o->inflight--;
    /* Done writes at the head leave; the others wait for their turn */
    while ((w = QTAILQ_FIRST(&o->writes)) && w->done) {
        QTAILQ_REMOVE(&o->writes, w, next);
        g_free(w);
    }
}

int drbd_order_barrier(DrbdOrder *o, const DrbdBarrier *b, Error **errp)
{
    DrbdOrderEpoch *e = QTAILQ_LAST(&o->epochs);

    if (o->arrived != o->started) {
        error_setg(errp, "BARRIER before the previous write started");
        return -EPROTO;
    }
    if (b->set_size != e->arrived) {
        error_setg(errp, "BARRIER for epoch %" PRIu32 " counts %" PRIu32
                   " writes, %" PRIu32 " arrived", b->epoch, b->set_size,
                   e->arrived);
        return -EPROTO;
    }
    e->barrier = *b;
    e->closed = true;
    o->closed++;
    if (b->flags & DRBD_BARRIER_FLUSH) {
        o->flushes++;
    }
    open_epoch(o);
    return 0;
}

bool drbd_order_next_ack(DrbdOrder *o, DrbdBarrier *b)
{
    DrbdOrderEpoch *e = QTAILQ_FIRST(&o->epochs);

    if (!e->closed || e->inflight) {
        return false;
    }
    *b = e->barrier;
    QTAILQ_REMOVE(&o->epochs, e, next);
    o->closed--;
    g_free(e);
    return true;
}

void drbd_order_flushed(DrbdOrder *o)
{
    assert(o->flushes > 0);
    o->flushes--;
}

unsigned drbd_order_inflight(const DrbdOrder *o)
{
    return o->inflight;
}

unsigned drbd_order_closed_epochs(const DrbdOrder *o)
{
    return o->closed;
}

char *drbd_order_check(const DrbdOrder *o)
{
    const DrbdOrderWrite *w;
    const DrbdOrderEpoch *e;
    unsigned inflight = 0, closed = 0, epoch_inflight = 0;
    uint64_t prev = 0;

    if (o->started > o->arrived || o->arrived - o->started > 1) {
        return g_strdup_printf("%" PRIu64 " arrived, %" PRIu64 " started",
                               o->arrived, o->started);
    }
    QTAILQ_FOREACH(w, &o->writes, next) {
        if (w->seq <= prev || w->seq > o->started) {
            return g_strdup_printf("write %" PRIu64 " out of order",
                                   w->seq);
        }
        prev = w->seq;
        inflight += !w->done;
    }
    w = QTAILQ_FIRST(&o->writes);
    if (w && w->done) {
        return g_strdup_printf("done write %" PRIu64 " at the head",
                               w->seq);
    }
    if (inflight != o->inflight) {
        return g_strdup_printf("%u writes in flight, %u recorded", inflight,
                               o->inflight);
    }
    QTAILQ_FOREACH(e, &o->epochs, next) {
        bool last = !QTAILQ_NEXT(e, next);

        if (e->closed == last) {
            return g_strdup(last ? "the newest epoch is closed"
                                 : "an epoch before the newest is open");
        }
        if (e->inflight > e->arrived) {
            return g_strdup_printf("epoch with %" PRIu32 " writes in "
                                   "flight of %" PRIu32, e->inflight,
                                   e->arrived);
        }
        closed += e->closed;
        epoch_inflight += e->inflight;
    }
    if (closed != o->closed || epoch_inflight != o->inflight) {
        return g_strdup_printf("%u closed epochs, %u writes in flight in "
                               "them; recorded %u, %u", closed,
                               epoch_inflight, o->closed, o->inflight);
    }
    return NULL;
}
