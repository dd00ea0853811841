/*
 * DRBD-style replicated block device: the block driver
 *
 * A drbd node sits over a local image (its "file" child).  Guest I/O
 * enters here; the node decides what goes to the local disk and, once
 * replication exists, what goes to the peers.  For now every request is
 * passed through to the local disk unchanged.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block-io.h"
#include "block/block_int.h"
#include "qapi/error.h"
#include "qemu/module.h"
#include "qobject/qdict.h"
#include "trace.h"

static int GRAPH_UNLOCKED
drbd_open(BlockDriverState *bs, QDict *options, int flags, Error **errp)
{
    int ret;

    GLOBAL_STATE_CODE();

    ret = bdrv_open_file_child(NULL, options, "file", bs, errp);
    if (ret < 0) {
        return ret;
    }

    GRAPH_RDLOCK_GUARD_MAINLOOP();

    bs->supported_write_flags = BDRV_REQ_FUA &
        bs->file->bs->supported_write_flags;
    bs->supported_zero_flags = (BDRV_REQ_FUA | BDRV_REQ_MAY_UNMAP |
                                BDRV_REQ_NO_FALLBACK) &
        bs->file->bs->supported_zero_flags;

    trace_drbd_open(bs, bs->file->bs->filename);
    return 0;
}

static void drbd_close(BlockDriverState *bs)
{
    trace_drbd_close(bs);
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_preadv_part(BlockDriverState *bs, int64_t offset, int64_t bytes,
                    QEMUIOVector *qiov, size_t qiov_offset,
                    BdrvRequestFlags flags)
{
    return bdrv_co_preadv_part(bs->file, offset, bytes, qiov, qiov_offset,
                               flags);
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_pwritev_part(BlockDriverState *bs, int64_t offset, int64_t bytes,
                     QEMUIOVector *qiov, size_t qiov_offset,
                     BdrvRequestFlags flags)
{
    return bdrv_co_pwritev_part(bs->file, offset, bytes, qiov, qiov_offset,
                                flags);
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_pwrite_zeroes(BlockDriverState *bs, int64_t offset, int64_t bytes,
                      BdrvRequestFlags flags)
{
    return bdrv_co_pwrite_zeroes(bs->file, offset, bytes, flags);
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_pdiscard(BlockDriverState *bs, int64_t offset, int64_t bytes)
{
    return bdrv_co_pdiscard(bs->file, offset, bytes);
}

/*
 * The driver owns the whole flush (the block layer does not flush our
 * children behind our back), so that replication can later make a flush
 * durable on the peers too.
 */
static int coroutine_fn GRAPH_RDLOCK drbd_co_flush(BlockDriverState *bs)
{
    return bdrv_co_flush(bs->file->bs);
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_block_status(BlockDriverState *bs, bool want_zero, int64_t offset,
                     int64_t bytes, int64_t *pnum, int64_t *map,
                     BlockDriverState **file)
{
    *pnum = bytes;
    *map = offset;
    *file = bs->file->bs;
    return BDRV_BLOCK_RAW | BDRV_BLOCK_OFFSET_VALID;
}

static int64_t coroutine_fn GRAPH_RDLOCK
drbd_co_getlength(BlockDriverState *bs)
{
    return bdrv_co_getlength(bs->file->bs);
}

static BlockDriver bdrv_drbd = {
    .format_name                = "drbd",
    .is_format                  = true,

    .bdrv_open                  = drbd_open,
    .bdrv_close                 = drbd_close,
    .bdrv_child_perm            = bdrv_default_perms,

    .bdrv_co_preadv_part        = drbd_co_preadv_part,
    .bdrv_co_pwritev_part       = drbd_co_pwritev_part,
    .bdrv_co_pwrite_zeroes      = drbd_co_pwrite_zeroes,
    .bdrv_co_pdiscard           = drbd_co_pdiscard,
    .bdrv_co_flush              = drbd_co_flush,
    .bdrv_co_block_status       = drbd_co_block_status,
    .bdrv_co_getlength          = drbd_co_getlength,
};

static void bdrv_drbd_init(void)
{
    bdrv_register(&bdrv_drbd);
}

block_init(bdrv_drbd_init);
