/*
 * DRBD-style replication: where the node's background work runs
 *
 * The connection's coroutines live in the node's AioContext (s->ctx).
 * When the node moves to another context, the main loop records the new
 * one and wakes every waiting coroutine of the connection (conn.c); each
 * moves itself to s->ctx with drbd_co_rehome() at its next wait.
 *
 * Background I/O (applying the peer's writes, resync reads, metadata
 * written for the connection) is counted in flight on the node, so that
 * a drained section waits for it, and none starts while the node is
 * drained: drbd_co_io_begin() waits until the drained section ends.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block_int-io.h"
#include "qemu/timer.h"

#include "drbd-int.h"

/*
 * Before background I/O on the node's children: count it in flight,
 * waiting first while the node is drained.  Returns -ECANCELED without
 * counting anything if the node is closing (a close runs drained: what
 * was to be written is left to the next resync).
 */
int coroutine_fn drbd_co_io_begin(BDRVDrbdState *s)
{
    for (;;) {
        bdrv_inc_in_flight(s->bs);
        if (!qatomic_read(&s->drained)) {
            return 0;
        }
        /* A drained section began: it must not see this I/O */
        bdrv_dec_in_flight(s->bs);
        qemu_mutex_lock(&s->lock);
        if (qatomic_read(&s->closing)) {
            qemu_mutex_unlock(&s->lock);
            return -ECANCELED;
        }
        if (qatomic_read(&s->drained)) {
            qemu_co_queue_wait(&s->drain_queue, &s->lock);
        }
        qemu_mutex_unlock(&s->lock);
    }
}

void drbd_io_end(BDRVDrbdState *s)
{
    bdrv_dec_in_flight(s->bs);
}

/*
 * Background read of the node's data: counted in flight (as above) and
 * in the lo and dr counters.  Returns -ECANCELED if the node is closing.
 */
int coroutine_fn drbd_co_read_local(BDRVDrbdState *s, int64_t offset,
                                    int64_t bytes, void *buf)
{
    QEMUIOVector qiov;
    int ret;

    if (qatomic_read(&s->detached)) {
        /* No disk to read (detached, or a diskless client) */
        return -EIO;
    }
    ret = drbd_co_io_begin(s);
    if (ret < 0) {
        return ret;
    }
    qatomic_inc(&s->lo);

    /* Bounded by disk-timeout, as the guest's reads are */
    qemu_iovec_init_buf(&qiov, buf, bytes);
    bdrv_graph_co_rdlock();
    ret = drbd_co_disk_read(s, offset, bytes, &qiov, 0, 0);
    bdrv_graph_co_rdunlock();

    qatomic_dec(&s->lo);
    stat64_add(&s->dr, ret == 0 ? bytes : 0);
    drbd_io_end(s);
    if (ret < 0) {
        /* A resync, a verify or a peer's read: on-io-error applies */
        drbd_local_error(s, DRBD_IO_OPERATION_READ, ret);
    }
    return ret;
}

/*
 * Buffers of DRBD_CHUNK_BUF_SIZE bytes for the background reads (resync,
 * checksums, verify) and for the large packets the receivers read (a
 * resync chunk with its fields), kept for the next one: a fresh buffer of
 * that size is a fresh mapping, and filling it costs a page fault per
 * 4 KiB, which in a virtual machine costs about as much as the read
 * itself
 */
#define DRBD_CHUNK_BUFS_KEPT    16

void *drbd_chunk_buf_get(BDRVDrbdState *s)
{
    void *buf = NULL;

    qemu_mutex_lock(&s->lock);
    if (s->chunk_bufs) {
        buf = s->chunk_bufs->data;
        s->chunk_bufs = g_slist_delete_link(s->chunk_bufs, s->chunk_bufs);
        s->chunk_bufs_kept--;
    }
    qemu_mutex_unlock(&s->lock);
    return buf ?: g_malloc(DRBD_CHUNK_BUF_SIZE);
}

void drbd_chunk_buf_put(BDRVDrbdState *s, void *buf)
{
    qemu_mutex_lock(&s->lock);
    if (s->chunk_bufs_kept < DRBD_CHUNK_BUFS_KEPT) {
        s->chunk_bufs = g_slist_prepend(s->chunk_bufs, buf);
        s->chunk_bufs_kept++;
        buf = NULL;
    }
    qemu_mutex_unlock(&s->lock);
    g_free(buf);
}

/*
 * A received payload of @len bytes: large ones in a chunk buffer.  Free
 * it with drbd_payload_free() and the same @len, or with g_free().
 */
static bool drbd_payload_pooled(size_t len)
{
    return len > DRBD_RX_DIRECT_MIN && len <= DRBD_CHUNK_BUF_SIZE;
}

void *drbd_payload_alloc(BDRVDrbdState *s, size_t len)
{
    return drbd_payload_pooled(len) ? drbd_chunk_buf_get(s) : g_malloc(len);
}

void drbd_payload_free(BDRVDrbdState *s, void *buf, size_t len)
{
    if (buf && drbd_payload_pooled(len)) {
        drbd_chunk_buf_put(s, buf);
    } else {
        g_free(buf);
    }
}

void drbd_chunk_bufs_free(BDRVDrbdState *s)
{
    g_slist_free_full(g_steal_pointer(&s->chunk_bufs), g_free);
    s->chunk_bufs_kept = 0;
}

/*
 * Hold [@offset, @offset + @bytes) in the node's active requests: wait
 * until no guest write to it is in flight, and keep new ones waiting
 * until drbd_co_release_range().  What the caller reads meanwhile is what
 * the peer has, or gets, in the stream of writes at that point.
 */
void coroutine_fn drbd_co_hold_range(BDRVDrbdState *s, BlockReq *req,
                                     int64_t offset, int64_t bytes)
{
    qemu_co_mutex_lock(&s->reqs_lock);
    reqlist_wait_all(&s->active_reqs, offset, bytes, &s->reqs_lock);
    reqlist_init_req(&s->active_reqs, req, offset, bytes);
    qemu_co_mutex_unlock(&s->reqs_lock);
}

void coroutine_fn drbd_co_release_range(BDRVDrbdState *s, BlockReq *req)
{
    qemu_co_mutex_lock(&s->reqs_lock);
    reqlist_remove_req(req);
    qemu_co_mutex_unlock(&s->reqs_lock);
}

void drbd_drain_begin_gate(BDRVDrbdState *s)
{
    qatomic_inc(&s->drained);
}

void drbd_drain_end_gate(BDRVDrbdState *s)
{
    if (qatomic_fetch_dec(&s->drained) == 1) {
        /* A waiter of this thread is entered here: without the lock */
        qemu_mutex_lock(&s->lock);
        qemu_co_enter_all(&s->drain_queue, &s->lock);
        qemu_mutex_unlock(&s->lock);
    }
}

/* The node closes: whoever waits at the gate gives up */
void drbd_drain_gate_close(BDRVDrbdState *s)
{
    qemu_mutex_lock(&s->lock);
    qatomic_set(&s->closing, true);
    qemu_co_enter_all(&s->drain_queue, &s->lock);
    qemu_mutex_unlock(&s->lock);
}

/* Move the calling coroutine to the connection's home, if elsewhere */
void coroutine_fn drbd_co_rehome(BDRVDrbdState *s)
{
    AioContext *ctx;

    qemu_mutex_lock(&s->lock);
    ctx = s->ctx;
    qemu_mutex_unlock(&s->lock);
    aio_co_reschedule_self(ctx);
}

static void drbd_sleep_timer_cb(void *opaque)
{
    DrbdSleep *sl = opaque;
    Coroutine *co = qatomic_xchg(&sl->co, NULL);

    if (co) {
        aio_co_wake(co);
    }
}

/*
 * Sleep up to @ns in the calling coroutine's context, or until
 * drbd_sleep_wake().  Returns at once if the sleep was stopped, or if the
 * coroutine is away from home (it must move first).
 */
void coroutine_fn drbd_co_sleep(BDRVDrbdState *s, DrbdSleep *sl, uint64_t ns)
{
    AioContext *here = qemu_get_current_aio_context();
    QEMUTimer *timer;

    qemu_mutex_lock(&s->lock);
    if (sl->stopped || s->ctx != here) {
        qemu_mutex_unlock(&s->lock);
        return;
    }
    assert(!sl->co);
    qatomic_set(&sl->co, qemu_coroutine_self());
    qemu_mutex_unlock(&s->lock);

    timer = aio_timer_new(here, QEMU_CLOCK_REALTIME, SCALE_NS,
                          drbd_sleep_timer_cb, sl);
    timer_mod(timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + ns);
    qemu_coroutine_yield();
    /* Woken by the timer or by drbd_sleep_wake(): either took sl->co */
    timer_free(timer);
}

/* End a sleep early from any thread; with @stop, all later ones too */
void drbd_sleep_wake(BDRVDrbdState *s, DrbdSleep *sl, bool stop)
{
    Coroutine *co;

    qemu_mutex_lock(&s->lock);
    if (stop) {
        sl->stopped = true;
    }
    co = qatomic_xchg(&sl->co, NULL);
    qemu_mutex_unlock(&s->lock);
    if (co) {
        aio_co_wake(co);
    }
}

/* A timer callback for waits with a deadline: sets the bool it is given */
void drbd_timer_set_flag(void *opaque)
{
    bool *flag = opaque;

    qatomic_set(flag, true);
}
