/*
 * DRBD-style replication: requests to the local disk, bounded by
 * disk-timeout
 *
 * Without disk-timeout, a request to the local disk is a plain call into
 * the block layer.  With it (DRBD's disk-timeout), a request that has not
 * completed after that long counts as failed (-ETIMEDOUT): the caller
 * applies on-io-error, and the request it serves goes on without the
 * disk.  The block layer cannot cancel a request, so the one that hangs
 * goes on in a coroutine of its own, on a copy of the data (the guest's
 * buffer is the guest's again once its request completes): when it ends,
 * at last, nothing waits for it but the node's drain.
 *
 * A DrbdDiskIo is shared by the caller and the request's coroutine, both
 * in the node's context: the last of the two to let go frees it.  The
 * request counts in the node's in_flight until it ends, so that the node
 * is not closed under it.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block-io.h"
#include "block/block_int.h"
#include "qemu/memalign.h"
#include "qemu/timer.h"
#include "trace.h"

#include "drbd-int.h"

typedef struct DrbdDiskIo {
    BDRVDrbdState *s;
    DrbdIoOperation op;
    uint16_t cmd;               /* writes: DATA, ZEROES or DISCARD */
    int64_t offset, bytes;
    BdrvRequestFlags flags;
    void *buf;                  /* DATA and reads: the copy of the data */
    QEMUIOVector qiov;          /* over @buf */
    int ret;
    bool done;                  /* the request completed, with @ret */
    bool timed_out;             /* the caller gave up on it */
    Coroutine *waiter;          /* the caller, while it waits */
    unsigned refs;
} DrbdDiskIo;

/* The request itself: a read, a flush, or a write of kind @cmd */
static int coroutine_fn GRAPH_RDLOCK
drbd_disk_do(BDRVDrbdState *s, DrbdIoOperation op, uint16_t cmd,
             int64_t offset, int64_t bytes, QEMUIOVector *qiov,
             size_t qiov_offset, BdrvRequestFlags flags)
{
    BdrvChild *file = s->bs->file;

    switch (op) {
    case DRBD_IO_OPERATION_READ:
        return bdrv_co_preadv_part(file, offset, bytes, qiov, qiov_offset,
                                   flags);
    case DRBD_IO_OPERATION_FLUSH:
        return bdrv_co_flush(file->bs);
    default:
        break;
    }
    switch (cmd) {
    case DRBD_CMD_DATA:
        return bdrv_co_pwritev_part(file, offset, bytes, qiov, qiov_offset,
                                    flags);
    case DRBD_CMD_ZEROES:
        return bdrv_co_pwrite_zeroes(file, offset, bytes, flags);
    default:
        return bdrv_co_pdiscard(file, offset, bytes);
    }
}

static void drbd_disk_io_unref(DrbdDiskIo *io)
{
    if (--io->refs == 0) {
        qemu_vfree(io->buf);
        g_free(io);
    }
}

static void coroutine_fn drbd_disk_io_co(void *opaque)
{
    DrbdDiskIo *io = opaque;
    BDRVDrbdState *s = io->s;
    Coroutine *waiter;

    bdrv_graph_co_rdlock();
    io->ret = drbd_disk_do(s, io->op, io->cmd, io->offset, io->bytes,
                           &io->qiov, 0, io->flags);
    bdrv_graph_co_rdunlock();

    io->done = true;
    if (io->timed_out) {
        trace_drbd_disk_late(s->bs, DrbdIoOperation_str(io->op), io->offset,
                             io->bytes, io->ret);
    }
    waiter = io->waiter;
    io->waiter = NULL;
    if (waiter) {
        aio_co_wake(waiter);
    }
    drbd_disk_io_unref(io);
    bdrv_dec_in_flight(s->bs);
}

static void drbd_disk_io_timeout(void *opaque)
{
    DrbdDiskIo *io = opaque;
    Coroutine *waiter = io->waiter;

    io->timed_out = true;
    io->waiter = NULL;
    if (waiter) {
        aio_co_wake(waiter);
    }
}

/*
 * @op (@cmd for a write) on the local disk.  Without disk-timeout, the
 * request itself; with it, in a coroutine of its own on a copy of the
 * data, waited for until disk-timeout: its result, or -ETIMEDOUT.
 */
static int coroutine_fn GRAPH_RDLOCK
drbd_disk_request(BDRVDrbdState *s, DrbdIoOperation op, uint16_t cmd,
                  int64_t offset, int64_t bytes, QEMUIOVector *qiov,
                  size_t qiov_offset, BdrvRequestFlags flags)
{
    AioContext *ctx = qemu_get_current_aio_context();
    bool has_data = op == DRBD_IO_OPERATION_READ ||
                    (op == DRBD_IO_OPERATION_WRITE && cmd == DRBD_CMD_DATA);
    QEMUTimer *timer;
    DrbdDiskIo *io;
    int ret;

    if (!s->disk_timeout_ns) {
        return drbd_disk_do(s, op, cmd, offset, bytes, qiov, qiov_offset,
                            flags);
    }

    io = g_new0(DrbdDiskIo, 1);
    *io = (DrbdDiskIo) {
        .s = s, .op = op, .cmd = cmd, .offset = offset, .bytes = bytes,
        .flags = flags, .refs = 2,
    };
    if (has_data) {
        io->buf = qemu_blockalign(s->bs, bytes);
        qemu_iovec_init_buf(&io->qiov, io->buf, bytes);
        if (op == DRBD_IO_OPERATION_WRITE) {
            qemu_iovec_to_buf(qiov, qiov_offset, io->buf, bytes);
        }
    }

    bdrv_inc_in_flight(s->bs);
    timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                          drbd_disk_io_timeout, io);
    timer_mod(timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
              s->disk_timeout_ns);
    qemu_coroutine_enter(qemu_coroutine_create(drbd_disk_io_co, io));
    while (!io->done && !io->timed_out) {
        io->waiter = qemu_coroutine_self();
        qemu_coroutine_yield();
    }
    timer_free(timer);
    if (io->done) {
        ret = io->ret;
        if (ret == 0 && op == DRBD_IO_OPERATION_READ) {
            /* In time: the data is the guest's */
            qemu_iovec_from_buf(qiov, qiov_offset, io->buf, bytes);
        }
    } else {
        io->timed_out = true;
        ret = -ETIMEDOUT;
        trace_drbd_disk_timeout(s->bs, DrbdIoOperation_str(op), offset,
                                bytes);
    }
    drbd_disk_io_unref(io);
    return ret;
}

int coroutine_fn GRAPH_RDLOCK
drbd_co_disk_write(BDRVDrbdState *s, uint16_t cmd, int64_t offset,
                   int64_t bytes, QEMUIOVector *qiov, size_t qiov_offset,
                   BdrvRequestFlags flags)
{
    return drbd_disk_request(s, DRBD_IO_OPERATION_WRITE, cmd, offset, bytes,
                             qiov, qiov_offset, flags);
}

int coroutine_fn GRAPH_RDLOCK
drbd_co_disk_read(BDRVDrbdState *s, int64_t offset, int64_t bytes,
                  QEMUIOVector *qiov, size_t qiov_offset,
                  BdrvRequestFlags flags)
{
    return drbd_disk_request(s, DRBD_IO_OPERATION_READ, 0, offset, bytes,
                             qiov, qiov_offset, flags);
}

int coroutine_fn GRAPH_RDLOCK drbd_co_disk_flush(BDRVDrbdState *s)
{
    return drbd_disk_request(s, DRBD_IO_OPERATION_FLUSH, 0, 0, 0, NULL, 0,
                             0);
}
