/*
 * DRBD-style replicated block device: metadata on disk
 *
 * The superblock, the out-of-sync bitmap and the activity log, read at
 * open, kept up to date while the node runs, and left clean at close.
 * The byte layout is md-format.c's (docs/interop/drbd-metadata.rst); the
 * hot-extent bookkeeping is al-cache.c's.  This file does the I/O and
 * the ordering that makes the metadata crash safe:
 *
 * - a guest write on the primary is issued only once every 4 MiB extent
 *   it touches is in the on-disk activity log (drbd_al_begin_io()), and
 *   its extents stay there until the write is done with both the local
 *   disk and the peer (drbd_al_end_io());
 * - before the transaction that evicts an extent is written, that
 *   extent's part of the bitmap is written (if it changed);
 * - so after a crash, every bit set in memory is either on disk or in an
 *   extent of the activity log, and marking the logged extents out of
 *   sync at the next open loses nothing.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/aio_task.h"
#include "block/block-io.h"
#include "block/block_int.h"
#include "qapi/error.h"
#include "qemu/bitmap.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "qemu/guest-random.h"
#include "qemu/memalign.h"
#include "system/block-backend.h"
#include "trace.h"

#include "drbd-int.h"

/*
 * How many of the next eviction victims an AL transaction that writes
 * bitmap blocks writes the blocks of, ahead of their eviction
 */
#define DRBD_AL_BM_AHEAD    DRBD_AL_CACHE_MAX_UPDATES

/* Bytes of data one 4 KiB block of the on-disk bitmap covers */
#define DRBD_BM_BLOCK_SPAN  ((uint64_t)DRBD_MD_BM_BLOCK_SIZE * 8 * \
                             (1 << DRBD_BM_GRANULARITY))

/*
 * Changes of a peer's out-of-sync bitmap, marking the on-disk blocks of
 * its slot that they touch as changed.  Under s->lock.
 */
static void drbd_bm_dirty_locked(DrbdConnection *conn, uint64_t offset,
                                 uint64_t bytes)
{
    BDRVDrbdState *s = conn->s;
    uint64_t first, last;

    if (!s->md.child || !bytes) {
        return;
    }
    first = offset / DRBD_BM_BLOCK_SPAN;
    last = (offset + bytes - 1) / DRBD_BM_BLOCK_SPAN;
    bitmap_set(s->md.bm_dirty, conn->slot * s->md.bm_blocks + first,
               last - first + 1);
}

/*
 * Only a change dirties the on-disk bitmap: a write to a range already
 * out of sync costs no bitmap write when its extent leaves the log
 */
void drbd_oos_set_locked(DrbdConnection *conn, uint64_t offset,
                         uint64_t bytes)
{
    if (bytes && hbitmap_next_zero(conn->oos, offset, bytes) >= 0) {
        hbitmap_set(conn->oos, offset, bytes);
        drbd_bm_dirty_locked(conn, offset, bytes);
    }
}

void drbd_oos_set_all_locked(BDRVDrbdState *s, uint64_t offset,
                             uint64_t bytes)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        drbd_oos_set_locked(s->conns[i], offset, bytes);
    }
}

void drbd_oos_reset_locked(DrbdConnection *conn, uint64_t offset,
                           uint64_t bytes)
{
    if (bytes && hbitmap_next_dirty(conn->oos, offset, bytes) >= 0) {
        hbitmap_reset(conn->oos, offset, bytes);
        drbd_bm_dirty_locked(conn, offset, bytes);
    }
}

bool drbd_oos_any_locked(BDRVDrbdState *s, uint64_t offset, uint64_t bytes)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (hbitmap_next_dirty(s->conns[i]->oos, offset, bytes) >= 0) {
            return true;
        }
    }
    return false;
}

void drbd_oos_alloc(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (!s->conns[i]->oos) {
            s->conns[i]->oos = hbitmap_alloc(s->size, DRBD_BM_GRANULARITY);
        }
    }
}

void drbd_oos_free(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        g_clear_pointer(&s->conns[i]->oos, hbitmap_free);
    }
}

uint64_t drbd_oos_reset_equal_locked(DrbdConnection *conn, uint64_t offset,
                                     uint32_t bytes, uint64_t differ)
{
    uint64_t equal = 0;
    uint32_t i;

    for (i = 0; i < drbd_ov_blocks(bytes); i++) {
        uint64_t off = offset + (uint64_t)i * DRBD_OV_BLOCK;
        uint64_t len = MIN(DRBD_OV_BLOCK, offset + bytes - off);

        if (!(differ & (1ULL << i))) {
            drbd_oos_reset_locked(conn, off, len);
            equal += len;
        }
    }
    return equal;
}

/*
 * The activity-log extents that a primary peer wrote to here lately, the
 * newest DRBD_RECENT_EXTENTS of them (with more than one peer): when the
 * primary is lost, the writes it had in flight may have reached some of
 * the survivors and not others, somewhere in these.  Under s->lock.
 */
#define DRBD_RECENT_EXTENTS     1024

void drbd_recent_note_locked(BDRVDrbdState *s, uint64_t offset,
                             uint64_t bytes)
{
    uint64_t e, first, last;

    if (!bytes) {
        return;
    }
    if (!s->recent) {
        s->recent = g_hash_table_new(NULL, NULL);
        g_queue_init(&s->recent_order);
    }
    first = offset / DRBD_AL_EXTENT_SIZE;
    last = (offset + bytes - 1) / DRBD_AL_EXTENT_SIZE;
    for (e = first; e <= last; e++) {
        gpointer key = GSIZE_TO_POINTER(e + 1);

        if (!g_hash_table_add(s->recent, key)) {
            continue;
        }
        g_queue_push_tail(&s->recent_order, key);
        if (g_queue_get_length(&s->recent_order) > DRBD_RECENT_EXTENTS) {
            g_hash_table_remove(s->recent,
                                g_queue_pop_head(&s->recent_order));
        }
    }
}

void drbd_recent_mark_locked(BDRVDrbdState *s, DrbdConnection *except)
{
    GList *l;
    unsigned i;

    if (!s->recent) {
        return;
    }
    for (l = s->recent_order.head; l; l = l->next) {
        uint64_t off = (GPOINTER_TO_SIZE(l->data) - 1) * DRBD_AL_EXTENT_SIZE;

        if (off >= s->size) {
            continue;
        }
        for (i = 0; i < s->nr_conns; i++) {
            if (s->conns[i] != except) {
                drbd_oos_set_locked(s->conns[i], off,
                                    MIN(DRBD_AL_EXTENT_SIZE, s->size - off));
            }
        }
    }
}

void drbd_recent_free(BDRVDrbdState *s)
{
    if (s->recent) {
        g_queue_clear(&s->recent_order);
        g_clear_pointer(&s->recent, g_hash_table_destroy);
    }
}

/* A sync target's crash as primary is over: its data is its source's */
static void drbd_crash_over_locked(BDRVDrbdState *s)
{
    s->md.sb.flags &= ~DRBD_MDF_CRASHED_PRIMARY;
}

void drbd_forget_other_peers_locked(DrbdConnection *conn)
{
    BDRVDrbdState *s = conn->s;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];

        if (c != conn) {
            drbd_oos_reset_locked(c, 0, s->size);
            *drbd_md_slot_uuid_ptr(&s->md.sb, c->slot) = 0;
        }
    }
    drbd_crash_over_locked(s);
}

/*
 * A sync target that wrote in a generation of its own during the resync
 * (drbd_uuid_resync_finished_target()) has the source's data now, and
 * its writes since, which its bitmaps for the other peers hold: each of
 * those bitmaps that counted from a generation counts from @gen, the
 * source's, which the target's data descends from now.  Its crash is
 * over as it is for drbd_forget_other_peers_locked().
 */
static void drbd_rebase_other_peers_locked(DrbdConnection *conn,
                                           uint64_t gen)
{
    BDRVDrbdState *s = conn->s;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];
        uint64_t *bitmap = drbd_md_slot_uuid_ptr(&s->md.sb, c->slot);

        if (c != conn && *bitmap) {
            *bitmap = gen;
        }
    }
    drbd_crash_over_locked(s);
}

/*
 * The resync with @peer is complete: both nodes are in the same data
 * generation now.  The source moves its bitmap UUID to the history, and
 * joins the generation its target announced during the resync, if any;
 * the target takes the source's UUIDs as they are after that, and its
 * data is the source's: what it recorded of its other peers (against its
 * data as it was) means nothing any more.  A target that started a
 * generation of its own meanwhile keeps it (see
 * drbd_uuid_resync_finished_target()).
 */
void drbd_resync_finished_uuids(DrbdPeer *peer)
{
    BDRVDrbdState *s = peer->s;
    DrbdUuids u;

    qemu_mutex_lock(&s->lock);
    if (peer->uuids_synced) {
        /* A late resync of writes made during the handshake */
        qemu_mutex_unlock(&s->lock);
        return;
    }
    peer->uuids_synced = true;
    drbd_uuids_get_locked(peer->conn, &u);
    if (drbd_sync_is_source(peer->decision)) {
        drbd_uuid_resync_finished_source_joins(&u, peer->target_gen);
    } else if (drbd_uuid_resync_finished_target(&u, &peer->hs_uuids,
                                                peer->target_gen)) {
        drbd_rebase_other_peers_locked(peer->conn, u.bitmap);
        s->partial_gen = 0;
    } else {
        drbd_forget_other_peers_locked(peer->conn);
        s->gen_unacked_lost = false;
        s->partial_gen = 0;
    }
    drbd_uuids_set_locked(peer->conn, &u);
    qemu_mutex_unlock(&s->lock);
}

/* The peer whose bitmap metadata slot @slot holds, if any */
static DrbdConnection *drbd_slot_conn(BDRVDrbdState *s, unsigned slot)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (s->conns[i]->slot == slot && s->conns[i]->oos) {
            return s->conns[i];
        }
    }
    return NULL;
}

/*
 * The on-disk form of bitmap block @g (slot g / bm_blocks), under
 * s->lock; where @g is, in the metadata
 */
static uint64_t drbd_bm_block_serialize_locked(BDRVDrbdState *s, uint64_t g,
                                               uint8_t *buf)
{
    unsigned slot = g / s->md.bm_blocks;
    uint64_t i = g % s->md.bm_blocks;
    uint64_t start = i * DRBD_BM_BLOCK_SPAN;
    uint64_t count = MIN(DRBD_BM_BLOCK_SPAN, s->size - start);
    DrbdConnection *conn = drbd_slot_conn(s, slot);

    memset(buf, 0, DRBD_MD_BM_BLOCK_SIZE);
    if (conn) {
        hbitmap_serialize_part(conn->oos, buf, start, count);
    }
    return s->md.sb.bm_offset +
           slot * drbd_md_bm_bytes(s->md.sb.data_size) +
           i * DRBD_MD_BM_BLOCK_SIZE;
}

/*
 * The metadata is written from coroutines (the write path) and outside
 * (open, close, role changes): hence the mixed bdrv_pwrite().
 */
static int GRAPH_RDLOCK
drbd_md_write_block(BDRVDrbdState *s, uint64_t offset, const uint8_t *buf,
                    BdrvRequestFlags flags)
{
    int ret = bdrv_pwrite(s->md.child, offset, DRBD_MD_BLOCK_SIZE, buf,
                          flags);

    trace_drbd_md_write(s->bs, offset, ret);
    return ret;
}

/*
 * A failure to write metadata: what the node promised can't be kept.
 * The node detaches (drbd_md_report_failure(), without s->lock): guest
 * I/O goes to the peer, or fails where there is none, promotion is
 * refused, and the disk state says "diskless".  Under s->lock.
 */
static void drbd_md_failed_locked(BDRVDrbdState *s, int ret,
                                  const char *what)
{
    if (!s->md.failed) {
        error_report("drbd node '%s' (resource %s): writing the %s to its "
                     "metadata failed: %s", drbd_name(s), s->resource, what,
                     strerror(-ret));
        s->md.failed = true;
    }
}

static void drbd_md_report_failure(BDRVDrbdState *s)
{
    if (qatomic_read(&s->md.failed)) {
        drbd_local_error(s, DRBD_IO_OPERATION_METADATA, -EIO);
    }
}

static void drbd_md_failed(BDRVDrbdState *s, int ret, const char *what)
{
    qemu_mutex_lock(&s->lock);
    drbd_md_failed_locked(s, ret, what);
    qemu_mutex_unlock(&s->lock);
    drbd_md_report_failure(s);
}

/*
 * Write the changed bitmap blocks among @blocks (all of them if NULL),
 * durably.  Called without s->lock.
 */
static int GRAPH_RDLOCK
drbd_bm_write_blocks(BDRVDrbdState *s, const uint64_t *blocks, unsigned n)
{
    g_autofree uint8_t *buf = qemu_blockalign(s->md.child->bs,
                                              DRBD_MD_BM_BLOCK_SIZE);
    uint64_t nblocks = s->md.sb.max_peers * s->md.bm_blocks;
    uint64_t i, k, offset;
    int ret;

    for (k = 0; k < (blocks ? n : nblocks); k++) {
        i = blocks ? blocks[k] : k;
        qemu_mutex_lock(&s->lock);
        if (!test_bit(i, s->md.bm_dirty)) {
            qemu_mutex_unlock(&s->lock);
            continue;
        }
        offset = drbd_bm_block_serialize_locked(s, i, buf);
        clear_bit(i, s->md.bm_dirty);
        qemu_mutex_unlock(&s->lock);

        ret = drbd_md_write_block(s, offset, buf, 0);
        qemu_mutex_lock(&s->lock);
        if (ret < 0) {
            set_bit(i, s->md.bm_dirty);
            qemu_mutex_unlock(&s->lock);
            return ret;
        }
        stat64_add(&s->bm_writes, 1);
        qemu_mutex_unlock(&s->lock);
    }
    return 0;
}

/*
 * The bitmap blocks of the extents one AL transaction evicts, written in
 * parallel by an AioTaskPool of the transaction writer, in the node's
 * AioContext
 */
#define DRBD_BM_WRITES_PARALLEL \
    (DRBD_AL_CACHE_MAX_UPDATES + DRBD_AL_BM_AHEAD)

typedef struct DrbdBmWriteTask {
    AioTask task;               /* first: the pool frees the task */
    BDRVDrbdState *s;
    uint64_t block;             /* slot * bm_blocks + block, for bm_dirty */
    uint64_t offset;            /* where it is written */
    uint8_t *buf;               /* serialized by the writer, freed here */
} DrbdBmWriteTask;

static int coroutine_fn drbd_bm_write_task_entry(AioTask *task)
{
    DrbdBmWriteTask *t = container_of(task, DrbdBmWriteTask, task);
    BDRVDrbdState *s = t->s;
    int ret;

    bdrv_graph_co_rdlock();
    ret = drbd_md_write_block(s, t->offset, t->buf, 0);
    bdrv_graph_co_rdunlock();
    qemu_mutex_lock(&s->lock);
    if (ret < 0) {
        set_bit(t->block, s->md.bm_dirty);
    } else {
        stat64_add(&s->bm_writes, 1);
    }
    qemu_mutex_unlock(&s->lock);
    qemu_vfree(t->buf);
    return ret;
}

/*
 * Write the changed bitmap blocks among @blocks (duplicates allowed), in
 * parallel; not flushed.  Returns how many were written, or a negative
 * errno.  Called without s->lock.
 */
static int coroutine_fn GRAPH_RDLOCK
drbd_bm_co_write_blocks(BDRVDrbdState *s, const uint64_t *blocks, unsigned n)
{
    AioTaskPool *pool = aio_task_pool_new(DRBD_BM_WRITES_PARALLEL);
    int written = 0, ret;

    for (unsigned k = 0; k < n && aio_task_pool_status(pool) == 0; k++) {
        DrbdBmWriteTask *t;

        qemu_mutex_lock(&s->lock);
        if (!test_bit(blocks[k], s->md.bm_dirty)) {
            qemu_mutex_unlock(&s->lock);
            continue;
        }
        t = g_new(DrbdBmWriteTask, 1);
        *t = (DrbdBmWriteTask) {
            .task.func = drbd_bm_write_task_entry,
            .s = s,
            .block = blocks[k],
            .buf = qemu_blockalign(s->md.child->bs, DRBD_MD_BM_BLOCK_SIZE),
        };
        t->offset = drbd_bm_block_serialize_locked(s, blocks[k], t->buf);
        clear_bit(blocks[k], s->md.bm_dirty);
        qemu_mutex_unlock(&s->lock);

        written++;
        aio_task_pool_start_task(pool, &t->task);
    }
    aio_task_pool_wait_all(pool);
    ret = aio_task_pool_status(pool);
    aio_task_pool_free(pool);
    return ret < 0 ? ret : written;
}

/*
 * Write the superblock as the node is now, durably.  Writers from the
 * main loop and from coroutines may overlap: a writer whose snapshot
 * lands after a newer one writes again, so that the last write to land
 * is the newest state.
 */
static int GRAPH_RDLOCK drbd_md_write_sb(BDRVDrbdState *s)
{
    g_autofree uint8_t *buf = qemu_blockalign(s->md.child->bs,
                                              DRBD_MD_BLOCK_SIZE);
    DrbdSuperblock sb;
    uint64_t seq;
    int ret;

again:
    qemu_mutex_lock(&s->lock);
    seq = ++s->md.seq;
    sb = s->md.sb;
    sb.al_tr_number = s->md.al_tr_number;
    sb.partial_uuid = s->partial_gen;
    sb.flags &= ~(DRBD_MDF_CONSISTENT | DRBD_MDF_WAS_UP_TO_DATE |
                  DRBD_MDF_PRIMARY_IND | DRBD_MDF_PRIMARY_LOST_QUORUM);
    if (s->role == DRBD_ROLE_PRIMARY || s->md.primary_pending) {
        sb.flags |= DRBD_MDF_PRIMARY_IND;
    }
    /*
     * Changes that no one acknowledged yield at a split brain: those of
     * a generation whose primary lost its quorum first, and, should the
     * node crash, those of one it started and wrote none of yet that
     * the guest saw complete (its first write clears it, on disk before
     * it completes: drbd_co_write_common())
     */
    if (s->gen_unacked_lost ||
        ((s->role == DRBD_ROLE_PRIMARY || s->md.primary_pending) &&
         !qatomic_read(&s->gen_acked))) {
        sb.flags |= DRBD_MDF_PRIMARY_LOST_QUORUM;
    }
    if (s->disk == DRBD_DISK_STATE_UP_TO_DATE) {
        sb.flags |= DRBD_MDF_WAS_UP_TO_DATE;
    }
    if (s->disk == DRBD_DISK_STATE_UP_TO_DATE ||
        s->disk == DRBD_DISK_STATE_CONSISTENT ||
        s->disk == DRBD_DISK_STATE_OUTDATED) {
        sb.flags |= DRBD_MDF_CONSISTENT;
    }
    qemu_mutex_unlock(&s->lock);
    drbd_md_sb_encode(&sb, buf);
    ret = drbd_md_write_block(s, s->md.sb_offset, buf, BDRV_REQ_FUA);
    if (ret < 0) {
        return ret;
    }
    qemu_mutex_lock(&s->lock);
    if (s->md.seq_written > seq) {
        /* A newer snapshot landed before this older one */
        qemu_mutex_unlock(&s->lock);
        goto again;
    }
    s->md.seq_written = seq;
    s->md.lost_quorum_written = sb.flags & DRBD_MDF_PRIMARY_LOST_QUORUM;
    qemu_mutex_unlock(&s->lock);
    return 0;
}

/*
 * Add the bitmap block of AL extent @extent in every peer's slot to
 * @blocks (holding @n); returns the new count
 */
static unsigned drbd_bm_extent_blocks(BDRVDrbdState *s, uint32_t extent,
                                      uint64_t *blocks, unsigned n)
{
    uint64_t block = (uint64_t)extent * DRBD_AL_EXTENT_SIZE /
                     DRBD_BM_BLOCK_SPAN;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        blocks[n++] = s->conns[i]->slot * s->md.bm_blocks + block;
    }
    return n;
}

/*
 * Write one activity-log transaction with the queued updates.  Entered
 * and left with s->lock held, by the one coroutine that set
 * s->md.al_writing.
 */
static int coroutine_fn GRAPH_RDLOCK
drbd_al_write_transaction_locked(BDRVDrbdState *s)
{
    DrbdAlCacheUpdate upd[DRBD_AL_CACHE_MAX_UPDATES];
    g_autofree uint64_t *bm_blocks = g_new(uint64_t, s->nr_conns *
                                           (DRBD_AL_CACHE_MAX_UPDATES +
                                            DRBD_AL_BM_AHEAD));
    uint32_t victims[DRBD_AL_BM_AHEAD];
    g_autofree uint32_t *slots = g_new(uint32_t, s->md.sb.al_extents);
    g_autofree DrbdAlTransaction *tr = g_new0(DrbdAlTransaction, 1);
    g_autofree uint8_t *buf = NULL;
    const char *what = "activity log";
    unsigned n, i, nbm = 0;
    uint32_t start, size;
    int ret;

    n = drbd_al_cache_prepare(s->md.al, upd);
    if (!n) {
        return 0;
    }
    s->md.al_writing = true;

    /* The context: every slot's content after this transaction */
    drbd_al_cache_slots(s->md.al, slots);
    tr->tr_number = s->md.al_tr_number + 1;
    tr->al_extents = s->md.sb.al_extents;
    tr->n_updates = n;
    for (i = 0; i < n; i++) {
        tr->updates[i].slot = upd[i].slot;
        tr->updates[i].extent = upd[i].new_extent;
        slots[upd[i].slot] = upd[i].new_extent;
        if (upd[i].old_extent != DRBD_AL_EXTENT_NONE) {
            nbm = drbd_bm_extent_blocks(s, upd[i].old_extent, bm_blocks, nbm);
        }
    }
    /*
     * While writing bitmap blocks anyway, write those of the next victims
     * too: when their turn comes, their blocks are likely clean, and that
     * transaction needs neither a bitmap write nor a flush before it
     */
    if (nbm) {
        unsigned nv = drbd_al_cache_next_victims(s->md.al, victims,
                                                 DRBD_AL_BM_AHEAD);

        for (i = 0; i < nv; i++) {
            nbm = drbd_bm_extent_blocks(s, victims[i], bm_blocks, nbm);
        }
    }
    drbd_al_next_context(tr->tr_number, s->md.sb.al_extents, s->md.sb.al_blocks,
                         &start, &size);
    tr->context_start = start;
    tr->context_size = size;
    for (i = 0; i < size; i++) {
        tr->context[i] = slots[(start + i) % s->md.sb.al_extents];
    }
    qemu_mutex_unlock(&s->lock);

    /* The evicted extents' bitmap first, then the transaction */
    ret = drbd_bm_co_write_blocks(s, bm_blocks, nbm);
    if (ret > 0) {
        nbm = ret;
        ret = bdrv_co_flush(s->md.child->bs);
    } else {
        nbm = 0;
    }
    if (ret < 0) {
        what = "bitmap of an evicted extent";
    } else {
        buf = qemu_blockalign(s->md.child->bs, DRBD_MD_BLOCK_SIZE);
        drbd_al_tr_encode(tr, buf);
        ret = drbd_md_write_block(s, s->md.sb.al_offset +
                                  (tr->tr_number % s->md.sb.al_blocks) *
                                  DRBD_MD_BLOCK_SIZE, buf, BDRV_REQ_FUA);
    }
    trace_drbd_al_transaction(s->bs, tr->tr_number, n, nbm, ret);

    qemu_mutex_lock(&s->lock);
    if (ret < 0) {
        drbd_al_cache_abort(s->md.al);
        drbd_md_failed_locked(s, ret, what);
    } else {
        drbd_al_cache_commit(s->md.al);
        s->md.al_tr_number = tr->tr_number;
        stat64_add(&s->al_writes, 1);
    }
    s->md.al_writing = false;
    qemu_co_queue_restart_all(&s->md.al_queue);
    return ret;
}

static void drbd_al_range(int64_t offset, int64_t bytes, uint32_t *first,
                          uint32_t *last)
{
    *first = offset / DRBD_AL_EXTENT_SIZE;
    *last = (offset + bytes - 1) / DRBD_AL_EXTENT_SIZE;
}

static bool drbd_al_all_hot_locked(BDRVDrbdState *s, uint32_t first,
                                   uint32_t last)
{
    uint32_t e;

    for (e = first; e <= last; e++) {
        if (!drbd_al_cache_is_hot(s->md.al, e)) {
            return false;
        }
    }
    return true;
}

/* A barrier to some peer would end an epoch whose writes hold AL slots */
static bool drbd_barrier_would_free_locked(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];

        if (conn->epoch_needs_barrier && conn->peer &&
            !qatomic_read(&conn->peer->broken)) {
            return true;
        }
    }
    return false;
}

/*
 * A guest write to [@offset, @offset + @bytes) is about to be issued:
 * return once its extents are in the on-disk activity log, or fail with
 * -EIO if the metadata can't be written.  The caller owes a
 * drbd_al_end_io() for the same range once the write is done with the
 * local disk and the peer.
 *
 * -EAGAIN: every slot is held by completed writes of the open epoch,
 * which keep their extents until the peer acks its barrier (protocols A
 * and B); the caller closes the epoch and calls again.
 */
int coroutine_fn GRAPH_RDLOCK
drbd_al_begin_io(BDRVDrbdState *s, int64_t offset, int64_t bytes)
{
    DrbdAlBeginResult r;
    uint32_t first, last;
    int ret = 0;

    if (!s->md.al) {
        return 0;
    }
    drbd_al_range(offset, bytes, &first, &last);

    qemu_mutex_lock(&s->lock);
    for (;;) {
        if (s->md.failed || !s->md.writable || s->detached) {
            /* A detached node's caller goes on without its disk */
            qemu_mutex_unlock(&s->lock);
            return -EIO;
        }
        r = drbd_al_cache_begin_range(s->md.al, first, last);
        if (r != DRBD_AL_BUSY) {
            break;
        }
        if (drbd_barrier_would_free_locked(s)) {
            qemu_mutex_unlock(&s->lock);
            return -EAGAIN;
        }
        qemu_co_queue_wait(&s->md.al_queue, &s->lock);
    }

    /* Our extents are hot, or queued: see that a transaction takes them */
    while (r != DRBD_AL_HOT && !drbd_al_all_hot_locked(s, first, last)) {
        if (s->md.failed || s->detached) {
            /* The failed transaction dropped our references */
            ret = -EIO;
            break;
        }
        if (s->md.al_writing) {
            qemu_co_queue_wait(&s->md.al_queue, &s->lock);
        } else {
            drbd_al_write_transaction_locked(s);
        }
    }
    qemu_mutex_unlock(&s->lock);
    if (ret < 0) {
        drbd_md_report_failure(s);
    }
    return ret;
}

/* The write drbd_al_begin_io() let through is done.  Under s->lock. */
void drbd_al_end_io_locked(BDRVDrbdState *s, int64_t offset, int64_t bytes)
{
    uint32_t first, last;

    if (!s->md.al || s->md.failed || s->detached) {
        return;
    }
    drbd_al_range(offset, bytes, &first, &last);
    drbd_al_cache_end_range(s->md.al, first, last);
    qemu_co_queue_restart_all(&s->md.al_queue);
}

/* The most bytes one write may span so that its extents fit one begin */
int64_t drbd_al_max_request(BDRVDrbdState *s)
{
    if (!s->md.al) {
        return 0;
    }
    return (int64_t)(drbd_al_cache_max_range(s->md.al) - 1) *
           DRBD_AL_EXTENT_SIZE;
}

/*
 * Open
 */

static int GRAPH_RDLOCK drbd_md_read(BDRVDrbdState *s, uint64_t offset,
                                     uint64_t bytes, uint8_t *buf,
                                     const char *what, Error **errp)
{
    int ret = bdrv_pread(s->md.child, offset, bytes, buf, 0);

    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the drbd %s of '%s'",
                         what, s->md.child->bs->filename);
    }
    return ret;
}

/*
 * Give each peer its bitmap slot: the one that names it, or else a free
 * one, claimed for it on disk with the next superblock (and the
 * metadata named this node's).  Metadata of one slot (version 1) keeps
 * its slot for the one peer; a node without peers uses slot 0.
 */
static int drbd_md_slot_claim(BDRVDrbdState *s, Error **errp)
{
    DrbdSuperblock *sb = &s->md.sb;
    unsigned i, k;

    if (s->nr_conns > sb->max_peers) {
        error_setg(errp, "the metadata of '%s' has %u bitmap slot%s, for "
                   "%u peer%s, but the node has %u peers: create it with "
                   "max-peers=%u or more", s->md.child->bs->filename,
                   sb->max_peers, sb->max_peers == 1 ? "" : "s",
                   sb->max_peers, sb->max_peers == 1 ? "" : "s",
                   s->nr_conns, s->nr_conns);
        error_append_hint(errp, "qemu-img create -f drbd -o max-peers=N "
                          "makes it; see the docs for an existing image.\n");
        return -EINVAL;
    }
    if (sb->max_peers < 2 || !drbd_replicates(s)) {
        for (i = 0; i < s->nr_conns; i++) {
            s->conns[i]->slot = i;
        }
        return 0;
    }
    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];
        unsigned free_slot = sb->max_peers;

        for (k = 0; k < sb->max_peers; k++) {
            if (sb->slots[k].node_id == conn->peer_node_id) {
                break;
            }
            if (sb->slots[k].node_id == DRBD_MD_SLOT_FREE &&
                free_slot == sb->max_peers) {
                free_slot = k;
            }
        }
        if (k == sb->max_peers) {
            if (free_slot == sb->max_peers) {
                error_setg(errp, "the metadata of '%s' has no bitmap slot "
                           "left for peer node %u: its %u slots are other "
                           "nodes'", s->md.child->bs->filename,
                           conn->peer_node_id, sb->max_peers);
                error_append_hint(errp, "qemu-img info shows whose they "
                                  "are; recreate the metadata with more "
                                  "max-peers for a new node id.\n");
                return -EINVAL;
            }
            k = free_slot;
            sb->slots[k].node_id = conn->peer_node_id;
            sb->node_id = s->node_id;
        }
        conn->slot = k;
    }
    return 0;
}

/*
 * Read and check the metadata of s->md.child, and set up the bitmap and
 * the activity log from it.  Writes nothing: drbd_md_open_commit() does,
 * once the whole open has succeeded.
 */
/* Is there a superblock of internal metadata for an image of @end bytes? */
static bool GRAPH_RDLOCK drbd_md_sb_ends_at(BDRVDrbdState *s, int64_t end,
                                           uint8_t *buf)
{
    DrbdSuperblock sb;

    return end >= DRBD_MD_BLOCK_SIZE && !(end % DRBD_MD_BLOCK_SIZE) &&
           bdrv_pread(s->md.child, end - DRBD_MD_BLOCK_SIZE,
                      DRBD_MD_BLOCK_SIZE, buf, 0) >= 0 &&
           drbd_md_sb_decode(buf, DRBD_MD_BLOCK_SIZE, &sb, NULL) == 0 &&
           sb.placement == DRBD_MD_INTERNAL &&
           drbd_md_layout_check(&sb, end, NULL, NULL) == 0;
}

/*
 * Internal metadata without a superblock at the end of its image: was the
 * image grown behind drbd's back (a raw resize, truncate), or did a resize
 * with -f drbd stop half-way (drbd_md_layout_resize())?  The bytes past
 * the old end were a hole, so the superblock is where some data of the
 * image ends (the last of it, unless the resize wrote some of the new
 * metadata), with a layout for that length.  Return that length, or 0 if
 * there is no such superblock.
 */
static int64_t GRAPH_RDLOCK drbd_md_find_moved(BDRVDrbdState *s, int64_t len)
{
    BlockDriverState *bs = s->md.child->bs;
    g_autofree uint8_t *buf = qemu_blockalign(bs, DRBD_MD_BLOCK_SIZE);
    int64_t ends[8];
    int64_t offset = 0, pnum;
    unsigned n = 0, i;

    /* The ends of the last few runs of data, in a ring */
    while (offset < len) {
        int ret = bdrv_block_status(bs, offset, len - offset, &pnum, NULL,
                                    NULL);

        if (ret < 0 || pnum <= 0) {
            return 0;
        }
        offset += pnum;
        if ((ret & BDRV_BLOCK_DATA) && offset < len) {
            ends[n++ % ARRAY_SIZE(ends)] = offset;
        }
    }
    for (i = 0; i < MIN(n, ARRAY_SIZE(ends)); i++) {
        int64_t end = ends[(n - 1 - i) % ARRAY_SIZE(ends)];

        if (drbd_md_sb_ends_at(s, end, buf)) {
            return end;
        }
    }
    return 0;
}

/*
 * Bytes of the on-disk bitmap read at a time at open: the bitmap of a
 * large disk (32 MiB per TiB) streams into the node's through a buffer of
 * this size, not through a copy of all of it
 */
#define DRBD_BM_READ_CHUNK  (1024 * 1024)

/* Read @conn's bitmap from its slot (@bm_bytes long) into conn->oos */
static int GRAPH_RDLOCK drbd_bm_read_slot(BDRVDrbdState *s,
                                          DrbdConnection *conn,
                                          uint64_t bm_bytes, Error **errp)
{
    HBitmap *hb = conn->oos;
    uint64_t base = s->md.sb.bm_offset + conn->slot * bm_bytes;
    /* Items (bytes of data) per chunk: the bits of DRBD_BM_READ_CHUNK */
    uint64_t span = (uint64_t)DRBD_BM_READ_CHUNK * 8 << DRBD_BM_GRANULARITY;
    g_autofree uint8_t *buf = NULL;
    uint64_t start;
    int ret;

    assert(span % hbitmap_serialization_align(hb) == 0);
    if (!s->size) {
        return 0;
    }
    buf = qemu_try_blockalign(s->md.child->bs, DRBD_BM_READ_CHUNK);
    if (!buf) {
        error_setg(errp, "Could not allocate %d bytes to read the "
                   "out-of-sync bitmap", DRBD_BM_READ_CHUNK);
        return -ENOMEM;
    }
    for (start = 0; start < s->size; start += span) {
        uint64_t count = MIN(span, s->size - start);
        uint64_t bytes = hbitmap_serialization_size(hb, start, count);
        uint64_t off = hbitmap_serialization_size(hb, 0, start);

        assert(bytes <= DRBD_BM_READ_CHUNK && off + bytes <= bm_bytes);
        ret = drbd_md_read(s, base + off, bytes, buf, "bitmap", errp);
        if (ret < 0) {
            return ret;
        }
        /*
         * The node's bitmap starts out zero and its memory untouched: a
         * part that is zero on disk stays so, and costs no resident
         * memory until a bit in it is set
         */
        if (!buffer_is_zero(buf, bytes)) {
            hbitmap_deserialize_part(hb, buf, start, count, false);
        } else if (hbitmap_next_dirty(hb, start, count) >= 0) {
            hbitmap_deserialize_zeroes(hb, start, count, false);
        }
    }
    hbitmap_deserialize_finish(hb);
    return 0;
}

int GRAPH_RDLOCK drbd_md_open(BDRVDrbdState *s, DrbdMdPlacement placement,
                              int64_t data_len, Error **errp)
{
    g_autofree uint8_t *sb_buf = NULL;
    g_autofree uint8_t *ring = NULL;
    g_autofree uint32_t *slots = NULL;
    Error *local_err = NULL;
    DrbdMdLayout layout;
    uint64_t sb_offset, last_tr = 0, nextents;
    int64_t len;
    bool found = false;
    uint32_t i;
    int ret;

    len = bdrv_getlength(s->md.child->bs);
    if (len < 0) {
        error_setg_errno(errp, -len, "Could not get the size of '%s'",
                         s->md.child->bs->filename);
        return len;
    }
    if (drbd_md_sb_offset(placement, len, &sb_offset, &local_err) < 0) {
        goto not_drbd;
    }
    sb_buf = qemu_blockalign(s->md.child->bs, DRBD_MD_BLOCK_SIZE);
    ret = drbd_md_read(s, sb_offset, DRBD_MD_BLOCK_SIZE, sb_buf,
                       "superblock", errp);
    if (ret < 0) {
        return ret;
    }
    if (drbd_md_sb_decode(sb_buf, DRBD_MD_BLOCK_SIZE, &s->md.sb,
                          &local_err) < 0 ||
        drbd_md_layout_check(&s->md.sb, len, &layout, &local_err) < 0) {
        goto not_drbd;
    }
    if (s->md.sb.placement != placement) {
        error_setg(errp, "the metadata of '%s' is %s, but meta-disk is %s",
                   s->md.child->bs->filename,
                   s->md.sb.placement == DRBD_MD_INTERNAL ? "internal" :
                   "external", DrbdMetaDisk_str(s->meta_disk));
        return -EINVAL;
    }
    if (placement == DRBD_MD_EXTERNAL && data_len < s->md.sb.data_size) {
        error_setg(errp, "'%s' has %" PRId64 " bytes, less than the %"
                   PRIu64 " bytes of data its metadata describes",
                   s->bs->file->bs->filename, data_len, s->md.sb.data_size);
        error_append_hint(errp, "Was it shrunk by a tool other than "
                          "'qemu-img resize -f drbd'?  Grow it back: "
                          "truncate -s %" PRIu64 " '%s' (what was cut off "
                          "is lost: resync it from a peer with "
                          "drbd-invalidate).\n", s->md.sb.data_size,
                          s->bs->file->bs->filename);
        return -EINVAL;
    }
    s->md.sb_offset = sb_offset;
    s->size = s->md.sb.data_size;
    ret = drbd_md_slot_claim(s, errp);
    if (ret < 0) {
        return ret;
    }
    /* Consistent, but not up to date when written: outdated, as DRBD */
    s->disk = (s->md.sb.flags & DRBD_MDF_WAS_UP_TO_DATE) ?
              DRBD_DISK_STATE_UP_TO_DATE :
              (s->md.sb.flags & DRBD_MDF_CONSISTENT) ?
              DRBD_DISK_STATE_OUTDATED : DRBD_DISK_STATE_INCONSISTENT;
    /*
     * Its last generation as primary lost the quorum before a write of
     * it was acknowledged: its changes of it still yield (state.c)
     */
    s->gen_unacked_lost = s->md.sb.flags & DRBD_MDF_PRIMARY_LOST_QUORUM;
    s->md.lost_quorum_written = s->gen_unacked_lost;
    /*
     * A resync target that stopped: the writes its data holds in part
     * still wait for a source that has them (handshake.c)
     */
    s->partial_gen = s->disk == DRBD_DISK_STATE_INCONSISTENT ?
                     s->md.sb.partial_uuid : 0;

    /* The bitmaps, one per peer, from its slot */
    drbd_oos_alloc(s);
    s->md.bm_blocks = DIV_ROUND_UP(s->size, DRBD_BM_BLOCK_SPAN) ?: 1;
    s->md.bm_dirty = bitmap_new(s->md.sb.max_peers * s->md.bm_blocks);
    for (i = 0; i < s->nr_conns; i++) {
        ret = drbd_bm_read_slot(s, s->conns[i], layout.bm_bytes, errp);
        if (ret < 0) {
            return ret;
        }
    }

    /* The activity log */
    ring = qemu_blockalign(s->md.child->bs,
                           (size_t)s->md.sb.al_blocks * DRBD_MD_BLOCK_SIZE);
    ret = drbd_md_read(s, s->md.sb.al_offset,
                       (uint64_t)s->md.sb.al_blocks * DRBD_MD_BLOCK_SIZE, ring,
                       "activity log", errp);
    if (ret < 0) {
        return ret;
    }
    slots = g_new(uint32_t, s->md.sb.al_extents);
    nextents = drbd_md_al_extent_count(s->size);
    if (drbd_al_recover(ring, (size_t)s->md.sb.al_blocks * DRBD_MD_BLOCK_SIZE,
                        s->md.sb.al_extents, s->md.sb.al_blocks, slots,
                        &last_tr, &found, &local_err) < 0) {
        /* What the log covered is unknown: all of it is out of sync */
        warn_reportf_err(local_err, "drbd node '%s': ", drbd_name(s));
        error_printf("The whole device is marked out of sync.\n");
        local_err = NULL;
        for (i = 0; i < s->md.sb.al_extents; i++) {
            slots[i] = DRBD_AL_EXTENT_NONE;
        }
        drbd_oos_set_all_locked(s, 0, s->size);
        found = false;
        s->md.al_damaged = true;
    }
    for (i = 0; i < s->md.sb.al_extents; i++) {
        if (slots[i] != DRBD_AL_EXTENT_NONE && slots[i] >= nextents) {
            error_setg(errp, "the activity log of '%s' holds extent %" PRIu32
                       ", beyond the %" PRIu64 " extents of the device: "
                       "the metadata is damaged", s->md.child->bs->filename,
                       slots[i], nextents);
            return -EINVAL;
        }
    }
    s->md.al_tr_number = found ? last_tr : s->md.sb.al_tr_number;

    if (!(s->md.sb.flags & DRBD_MDF_AL_CLEAN)) {
        /*
         * The node stopped without closing: what the logged extents hold
         * may differ from the peer's, whichever way
         */
        uint32_t n = 0;

        for (i = 0; i < s->md.sb.al_extents; i++) {
            if (slots[i] != DRBD_AL_EXTENT_NONE) {
                uint64_t off = (uint64_t)slots[i] * DRBD_AL_EXTENT_SIZE;

                drbd_oos_set_all_locked(s, off, MIN(DRBD_AL_EXTENT_SIZE,
                                                    s->size - off));
                n++;
            }
        }
        if (s->md.sb.flags & DRBD_MDF_PRIMARY_IND) {
            s->md.sb.flags |= DRBD_MDF_CRASHED_PRIMARY;
        }

        s->md.al_recovered = n;
        trace_drbd_al_recovered(s->bs, n, s->md.al_tr_number);
    }

    for (i = 0; i < s->nr_conns; i++) {
        s->conns[i]->crash_pending =
            s->md.sb.flags & DRBD_MDF_CRASHED_PRIMARY;
    }
    s->md.al = drbd_al_cache_new(s->md.sb.al_extents);
    if (drbd_al_cache_load(s->md.al, slots, errp) < 0) {
        return -EINVAL;
    }
    return 0;

not_drbd:
    if (placement == DRBD_MD_INTERNAL) {
        int64_t was = drbd_md_find_moved(s, len);

        if (was) {
            error_free(local_err);
            error_setg(errp, "'%s' was resized behind drbd's back: its "
                       "drbd metadata ends at byte %" PRId64 ", but the "
                       "image has %" PRId64 " bytes",
                       s->md.child->bs->filename, was, len);
            error_append_hint(errp, "Internal metadata sits at the end of "
                              "the image, and a resize without -f drbd "
                              "leaves it behind.  Truncate the image back "
                              "(truncate -s %" PRId64 " '%s'), then resize "
                              "it with 'qemu-img resize -f drbd'.\n", was,
                              s->md.child->bs->filename);
            return -EINVAL;
        }
    }
    error_propagate_prepend(errp, local_err,
                            "'%s' holds no usable drbd metadata: ",
                            s->md.child->bs->filename);
    error_append_hint(errp, "Create drbd images with 'qemu-img create -f "
                      "drbd', or open the node with meta-disk=none.  Internal "
                      "metadata sits at the end of the image: if the image "
                      "was shrunk without -f drbd, its metadata is gone.\n");
    return -EINVAL;
}

/* Zeroes over @bytes of the metadata from @offset, on disk when it returns */
static int GRAPH_RDLOCK drbd_md_zero(BDRVDrbdState *s, uint64_t offset,
                                     uint64_t bytes)
{
    int ret = bdrv_pwrite_zeroes(s->md.child, offset, bytes, 0);

    return ret < 0 ? ret : bdrv_flush(s->md.child->bs);
}

/*
 * The open succeeded: the metadata says from now on that the node runs
 * (no clean activity log).  Only for a writable node.
 */
int GRAPH_RDLOCK drbd_md_open_commit(BDRVDrbdState *s, Error **errp)
{
    int ret;

    if (s->md.al_damaged) {
        /*
         * Start the ring afresh, so that the damaged block is not read
         * again; the whole device's marks are on disk before that
         */
        ret = drbd_bm_write_blocks(s, NULL, 0);
        if (ret == 0) {
            ret = bdrv_flush(s->md.child->bs);
        }
        if (ret == 0) {
            ret = drbd_md_zero(s, s->md.sb.al_offset,
                               (uint64_t)s->md.sb.al_blocks *
                               DRBD_MD_BLOCK_SIZE);
        }
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not reset the activity log "
                             "of '%s'", s->md.child->bs->filename);
            return ret;
        }
        s->md.al_damaged = false;
    }

    qemu_mutex_lock(&s->lock);
    drbd_gen_seen_push(&s->gen_seen, s->md.sb.uuid_current);
    s->md.sb.flags &= ~DRBD_MDF_AL_CLEAN;
    qemu_mutex_unlock(&s->lock);
    ret = drbd_md_write_sb(s);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the drbd superblock "
                         "of '%s'", s->md.child->bs->filename);
    }
    return ret;
}

/*
 * Whether the metadata is to be written: 0 if so, 1 if there is nothing
 * to write (no metadata, or a read-only node), -EIO if an earlier write
 * failed (nothing written since is trustworthy: the caller must not go
 * on as if it were on disk)
 */
static int drbd_md_writable(BDRVDrbdState *s)
{
    if (!s->md.child || !s->md.writable || qatomic_read(&s->detached)) {
        return 1;
    }
    return qatomic_read(&s->md.failed) ? -EIO : 0;
}

/*
 * Write the superblock with what the node is now (role, disk state,
 * UUIDs), if it has writable metadata: after each change of these
 */
static int GRAPH_RDLOCK drbd_md_sync_locked_graph(BDRVDrbdState *s)
{
    int ret = drbd_md_writable(s);

    if (ret) {
        return MIN(ret, 0);
    }
    ret = drbd_md_write_sb(s);
    if (ret < 0) {
        drbd_md_failed(s, ret, "superblock");
    }
    return ret;
}

/* The whole bitmap as it is in memory, then the superblock */
static int GRAPH_RDLOCK drbd_md_sync_all_locked_graph(BDRVDrbdState *s)
{
    int ret = drbd_md_writable(s);

    if (ret) {
        return MIN(ret, 0);
    }
    ret = drbd_bm_write_blocks(s, NULL, 0);
    if (ret == 0) {
        ret = bdrv_flush(s->md.child->bs);
    }
    if (ret < 0) {
        drbd_md_failed(s, ret, "bitmap");
        return ret;
    }
    return drbd_md_sync_locked_graph(s);
}

/*
 * The metadata writers: drbd_md_sync_all() for the main loop outside a
 * coroutine (a disk attached in a drained section), drbd_co_md_sync() for
 * coroutines, which pass the drain gate first (home.c) so that a drained
 * node writes nothing, and drbd_md_sync_in_request() for those that
 * must not wait for a drain.  Only the last may be called from a guest
 * request (it is counted in flight already, and the gate would wait for
 * a drain that waits for it).
 */
int drbd_md_sync_all(BDRVDrbdState *s)
{
    GRAPH_RDLOCK_GUARD_MAINLOOP();
    return drbd_md_sync_all_locked_graph(s);
}

/*
 * The superblock, and with @bitmap the whole bitmap before it, from a
 * coroutine of the connection or a QMP command: through the drain gate
 */
int coroutine_fn drbd_co_md_sync(BDRVDrbdState *s, bool bitmap)
{
    int ret = drbd_co_io_begin(s);

    if (ret == 0) {
        bdrv_graph_co_rdlock();
        ret = bitmap ? drbd_md_sync_all_locked_graph(s) :
                       drbd_md_sync_locked_graph(s);
        bdrv_graph_co_rdunlock();
        drbd_io_end(s);
    }
    return ret;
}

/* The local data on disk, before the metadata says it is up to date */
int coroutine_fn drbd_data_flush_co(BDRVDrbdState *s)
{
    int ret;

    if (qatomic_read(&s->detached)) {
        return -EIO;
    }
    ret = drbd_co_io_begin(s);

    if (ret == 0) {
        bdrv_graph_co_rdlock();
        ret = bdrv_co_flush(s->bs->file->bs);
        bdrv_graph_co_rdunlock();
        drbd_io_end(s);
    }
    return ret;
}

/*
 * The same from a coroutine that holds the graph lock and must not wait
 * for a drained section to end: a guest request's auto-promotion (the
 * drain waits for the request), a promotion or a demotion (a close
 * demotes the node drained)
 */
int coroutine_fn GRAPH_RDLOCK
drbd_md_sync_in_request(BDRVDrbdState *s, bool bitmap)
{
    return bitmap ? drbd_md_sync_all_locked_graph(s) :
                    drbd_md_sync_locked_graph(s);
}

/*
 * The node detached from its disk (drbd_local_error()): one last
 * superblock, which says that the data is not consistent (the disk
 * state is diskless now), so that the disk, opened again, is never taken
 * for up to date, and is the target of a resync.  Best effort: the disk
 * that failed may well fail this too.  Main loop.
 */
void drbd_md_detached(BDRVDrbdState *s)
{
    int ret;

    GRAPH_RDLOCK_GUARD_MAINLOOP();
    if (!s->md.child || !s->md.writable) {
        return;
    }
    ret = drbd_md_write_sb(s);
    if (ret < 0) {
        error_report("drbd node '%s' (resource %s): the superblock could "
                     "not say that the disk is detached: %s; the disk is "
                     "not to be used until it is resynced", drbd_name(s),
                     s->resource, strerror(-ret));
    }
}

/*
 * Clean close: the bitmap on disk, then a superblock that says the
 * activity log need not be replayed.  No guest write is in flight.
 */
int GRAPH_RDLOCK drbd_md_close(BDRVDrbdState *s)
{
    int ret = drbd_md_writable(s);

    if (ret) {
        return MIN(ret, 0);
    }
    ret = drbd_bm_write_blocks(s, NULL, 0);
    if (ret == 0) {
        ret = bdrv_flush(s->md.child->bs);
    }
    if (ret == 0) {
        qemu_mutex_lock(&s->lock);
        s->md.sb.flags |= DRBD_MDF_AL_CLEAN;
        qemu_mutex_unlock(&s->lock);
        ret = drbd_md_write_sb(s);
    }
    if (ret < 0) {
        error_report("drbd node '%s': could not leave its metadata clean: "
                     "%s; the next open resyncs the activity log",
                     drbd_name(s), strerror(-ret));
    }
    return ret;
}

/*
 * qemu-img check: the open has checked the superblock, the layout and
 * the activity log already (and refused what is damaged).  What is left
 * to report is an activity log that an unclean stop left unapplied; with
 * -r, its extents' marks are written to the bitmap on disk.
 */
int coroutine_fn GRAPH_RDLOCK
drbd_md_check(BDRVDrbdState *s, BdrvCheckResult *res, BdrvCheckMode fix)
{
    uint32_t n = s->md.al_recovered;
    int ret;

    if (!s->md.child) {
        return 0;
    }
    res->image_end_offset = s->md.child == s->bs->file ?
                            s->md.sb_offset + DRBD_MD_BLOCK_SIZE : s->size;
    if (!n) {
        return 0;
    }
    if (!(fix & BDRV_FIX_ERRORS) || !s->md.writable) {
        fprintf(stderr, "ERROR the activity log holds %" PRIu32 " extents "
                "(%" PRIu64 " MiB) of an unclean stop that are not marked "
                "out of sync on disk yet\n", n,
                (uint64_t)n * DRBD_AL_EXTENT_SIZE / MiB);
        res->corruptions += n;
        return 0;
    }
    fprintf(stderr, "Repairing the activity log: %" PRIu32 " extents of an "
            "unclean stop marked out of sync\n", n);
    ret = drbd_bm_write_blocks(s, NULL, 0);
    if (ret == 0) {
        ret = bdrv_co_flush(s->md.child->bs);
    }
    if (ret < 0) {
        fprintf(stderr, "ERROR writing the bitmap: %s\n", strerror(-ret));
        res->check_errors++;
        return ret;
    }
    res->corruptions_fixed += n;
    s->md.al_recovered = 0;
    return 0;
}

/*
 * qemu-img amend -o max-peers: more bitmap slots, for a node that is to
 * have more peers.  The node is open alone (no peer, no guest I/O).
 *
 * Crash-safe in this order: everything of the old layout on disk; the
 * new slots zeroed where that touches no old metadata; the new
 * superblock, which with internal metadata lies past the old end of the
 * image (writing it grows the image: until it lands, the old superblock
 * is the image's last block, and the image opens as before); then the
 * old activity log and superblock, now in the new slots, zeroed.  A
 * crash before that last step leaves bytes of them in slots no peer
 * uses yet, which can only make a future resync larger.  The activity
 * log starts empty: the bitmap holds all it recorded.
 *
 * One-slot metadata (version 1) does not record whose its bitmap is:
 * @peer_node_id names that peer and @node_id this node (-1: not given).
 */
int GRAPH_RDLOCK drbd_md_grow(BDRVDrbdState *s, uint32_t max_peers,
                              int64_t node_id, int64_t peer_node_id,
                              Error **errp)
{
    const char *name = s->md.child->bs->filename;
    DrbdSuperblock old_sb;
    DrbdMdLayout l;
    uint64_t old_sb_offset, old_end, bm_bytes;
    unsigned long *bm_dirty;
    int64_t len;
    int ret;

    len = bdrv_getlength(s->md.child->bs);
    if (len < 0) {
        error_setg_errno(errp, -len, "Could not get the size of '%s'", name);
        return len;
    }
    if (drbd_md_layout_grow(&s->md.sb, len, max_peers, &l, errp) < 0) {
        return -EINVAL;
    }
    if (s->md.sb.max_peers == 1) {
        if (node_id < 0 || peer_node_id < 0) {
            error_setg(errp, "the metadata of '%s' has one bitmap slot, "
                       "which does not record whose it is: give node-id "
                       "(this node's) and peer-node-id (the node it "
                       "replicated with)", name);
            return -EINVAL;
        }
        if (node_id == peer_node_id) {
            error_setg(errp, "node-id and peer-node-id are both %" PRId64,
                       node_id);
            return -EINVAL;
        }
    } else if (peer_node_id >= 0 ||
               (node_id >= 0 && node_id != s->md.sb.node_id)) {
        error_setg(errp, "the metadata of '%s' is node %" PRIu32 "'s, and "
                   "its slots name their peers: give max-peers alone",
                   name, s->md.sb.node_id);
        return -EINVAL;
    }

    /* The bitmap and superblock of the old layout, on disk */
    ret = drbd_md_sync_all_locked_graph(s);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the metadata of '%s'",
                         name);
        return ret;
    }

    bm_bytes = l.bm_bytes;
    old_end = s->md.sb.bm_offset + s->md.sb.max_peers * bm_bytes;
    if (l.placement == DRBD_MD_EXTERNAL) {
        /* The new slots are past everything of the old metadata */
        ret = drbd_md_zero(s, old_end,
                           (max_peers - s->md.sb.max_peers) * bm_bytes);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not write the new bitmap "
                             "slots of '%s'", name);
            return ret;
        }
    }

    qemu_mutex_lock(&s->lock);
    old_sb = s->md.sb;
    old_sb_offset = s->md.sb_offset;
    drbd_md_sb_relayout(&s->md.sb, &l);
    if (old_sb.max_peers == 1) {
        s->md.sb.node_id = node_id;
        s->md.sb.slots[0].node_id = peer_node_id;
    }
    s->md.sb_offset = l.sb_offset;
    bm_dirty = bitmap_new(max_peers * s->md.bm_blocks);
    bitmap_copy(bm_dirty, s->md.bm_dirty, old_sb.max_peers * s->md.bm_blocks);
    g_free(s->md.bm_dirty);
    s->md.bm_dirty = bm_dirty;
    if (l.placement == DRBD_MD_INTERNAL) {
        /* The ring moves: it starts empty, and so does what it caches */
        drbd_al_cache_free(s->md.al);
        s->md.al = drbd_al_cache_new(s->md.sb.al_extents);
    }
    qemu_mutex_unlock(&s->lock);

    ret = drbd_md_write_sb(s);
    if (ret < 0) {
        qemu_mutex_lock(&s->lock);
        s->md.sb = old_sb;
        s->md.sb_offset = old_sb_offset;
        qemu_mutex_unlock(&s->lock);
        error_setg_errno(errp, -ret, "Could not write the new superblock "
                         "of '%s'", name);
        error_append_hint(errp, "Its metadata is as it was, with %" PRIu32
                          " slot%s, unless the image grew: then 'qemu-img "
                          "info -f drbd' fails on it, and 'qemu-img resize "
                          "-f raw' back to %" PRIu64 " bytes restores "
                          "it.\n", old_sb.max_peers,
                          old_sb.max_peers == 1 ? "" : "s",
                          old_sb_offset + DRBD_MD_BLOCK_SIZE);
        return ret;
    }

    if (l.placement == DRBD_MD_INTERNAL) {
        /* The old activity log and superblock, in the new slots now */
        ret = drbd_md_zero(s, old_end, l.sb_offset - old_end);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not clear the new bitmap "
                             "slots of '%s'", name);
            return ret;
        }
    }
    trace_drbd_md_grow(s->bs, old_sb.max_peers, max_peers, l.image_size);
    return 0;
}

/*
 * Copy bitmap slot @slot from the layout @from to the layout @to (both of
 * the metadata's child): the bits of the data both have, none beyond
 */
static int coroutine_fn GRAPH_RDLOCK
drbd_bm_co_move_slot(BDRVDrbdState *s, const DrbdMdLayout *from,
                     const DrbdMdLayout *to, unsigned slot, uint8_t *buf)
{
    uint64_t keep = MIN(from->bm_bytes, to->bm_bytes);
    int ret;

    ret = bdrv_co_pread(s->md.child, from->bm_offset + slot * from->bm_bytes,
                        keep, buf, 0);
    if (ret < 0) {
        return ret;
    }
    memset(buf + keep, 0, to->bm_bytes - keep);
    return bdrv_co_pwrite(s->md.child, to->bm_offset + slot * to->bm_bytes,
                          to->bm_bytes, buf, 0);
}

/*
 * Resize the node's data to @size bytes, with its metadata (qemu-img
 * resize -f drbd, block_resize of a node without peers; the node is
 * drained).  The old superblock stays valid until the new one is on disk
 * (drbd_md_layout_resize()): an image grown and cut before that is the
 * old one again.  The new data reads as zeroes (from a hole, or zeroed
 * where the old metadata was, after the new superblock; a crash in between
 * leaves the old metadata's bytes there) and is in sync.  The activity
 * log starts empty: nothing is in flight.
 */
int coroutine_fn GRAPH_RDLOCK
drbd_md_co_resize(BDRVDrbdState *s, uint64_t size, Error **errp)
{
    const char *name = s->md.child->bs->filename;
    g_autofree uint8_t *buf = NULL;
    DrbdSuperblock old_sb;
    DrbdMdLayout old, l;
    uint64_t old_sb_offset, old_size = s->size;
    int64_t len;
    unsigned i;
    int ret;

    len = bdrv_co_getlength(s->md.child->bs);
    if (len < 0) {
        error_setg_errno(errp, -len, "Could not get the size of '%s'", name);
        return len;
    }
    if (drbd_md_layout_check(&s->md.sb, len, &old, errp) < 0 ||
        drbd_md_layout_resize(&s->md.sb, len, size, &l, errp) < 0) {
        return -EINVAL;
    }
    /* Everything of the old layout on disk, to copy from */
    ret = drbd_md_sync_all_locked_graph(s);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the metadata of '%s'",
                         name);
        return ret;
    }
    if (l.placement == DRBD_MD_EXTERNAL && size > old_size) {
        ret = bdrv_co_truncate(s->bs->file, size, false, PREALLOC_MODE_OFF, 0,
                               errp);
        if (ret < 0) {
            return ret;
        }
    }
    if (l.image_size > len) {
        ret = bdrv_co_truncate(s->md.child, l.image_size, false,
                               PREALLOC_MODE_OFF, 0, errp);
        if (ret < 0) {
            return ret;
        }
    }
    buf = qemu_try_blockalign(s->md.child->bs, MAX(l.bm_bytes,
                                                   old.bm_bytes));
    if (!buf) {
        error_setg(errp, "Could not allocate %" PRIu64 " bytes for the "
                   "bitmap", MAX(l.bm_bytes, old.bm_bytes));
        return -ENOMEM;
    }
    for (i = 0; i < l.max_peers; i++) {
        ret = drbd_bm_co_move_slot(s, &old, &l, i, buf);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not write the new bitmap of "
                             "'%s'", name);
            goto undo;
        }
    }
    ret = drbd_md_zero(s, l.al_offset, (uint64_t)l.al_blocks *
                       DRBD_MD_BLOCK_SIZE);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the new activity log "
                         "of '%s'", name);
        goto undo;
    }

    qemu_mutex_lock(&s->lock);
    old_sb = s->md.sb;
    old_sb_offset = s->md.sb_offset;
    s->md.sb.data_size = size;
    s->md.sb.bm_offset = l.bm_offset;
    s->md.sb.al_offset = l.al_offset;
    s->md.sb_offset = l.sb_offset;
    qemu_mutex_unlock(&s->lock);
    ret = drbd_md_write_sb(s);
    if (ret < 0) {
        qemu_mutex_lock(&s->lock);
        s->md.sb = old_sb;
        s->md.sb_offset = old_sb_offset;
        qemu_mutex_unlock(&s->lock);
        error_setg_errno(errp, -ret, "Could not write the new superblock "
                         "of '%s'", name);
        goto undo;
    }

    /* The new layout is the image's: the node follows */
    qemu_mutex_lock(&s->lock);
    s->size = size;
    for (i = 0; i < s->nr_conns; i++) {
        hbitmap_truncate(s->conns[i]->oos, size);
    }
    s->md.bm_blocks = DIV_ROUND_UP(size, DRBD_BM_BLOCK_SPAN) ?: 1;
    g_free(s->md.bm_dirty);
    s->md.bm_dirty = bitmap_new(l.max_peers * s->md.bm_blocks);
    drbd_al_cache_free(s->md.al);
    s->md.al = drbd_al_cache_new(s->md.sb.al_extents);
    qemu_mutex_unlock(&s->lock);

    if (l.placement == DRBD_MD_INTERNAL && size > old_size) {
        /* The old metadata, in the new data now */
        ret = drbd_md_zero(s, old_size, MIN((uint64_t)len, size) - old_size);
    } else if (l.placement == DRBD_MD_INTERNAL) {
        ret = bdrv_co_truncate(s->md.child, l.image_size, true,
                               PREALLOC_MODE_OFF, 0, errp);
        if (ret < 0) {
            return ret;
        }
    } else if (size < old_size) {
        ret = bdrv_co_truncate(s->bs->file, size, false, PREALLOC_MODE_OFF,
                               0, errp);
        if (ret < 0) {
            return ret;
        }
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not zero the old metadata of "
                         "'%s', which is in the new data now", name);
        return ret;
    }
    trace_drbd_md_resize(s->bs, old_size, size, l.image_size);
    return 0;

undo:
    /* The old metadata is the image's: cut what the resize added */
    if (l.image_size > len &&
        bdrv_co_truncate(s->md.child, len, true, PREALLOC_MODE_OFF, 0,
                         NULL) < 0) {
        error_append_hint(errp, "The image keeps its old metadata and data, "
                          "but it grew: 'qemu-img info -f drbd' says how to "
                          "cut it back.\n");
    }
    return ret;
}

/*
 * Resize this node's data to @size bytes: its disk and metadata
 * (drbd_md_co_resize()), the disk alone (meta-disk none), or nothing but
 * the size (a diskless client, whose data is its peers').  Nothing is in
 * flight on the node.
 */
int coroutine_fn GRAPH_RDLOCK
drbd_co_resize_disk(BDRVDrbdState *s, uint64_t size, Error **errp)
{
    unsigned i;
    int ret;

    if (qatomic_read(&s->detached)) {
        error_setg(errp, "drbd node '%s' is detached from its disk: attach "
                   "it (drbd-attach) before it grows", drbd_name(s));
        return -EIO;
    }
    if (s->md.child) {
        if (!s->md.writable || s->md.failed) {
            error_setg(errp, "drbd node '%s' cannot write its metadata",
                       drbd_name(s));
            return -EACCES;
        }
        return drbd_md_co_resize(s, size, errp);
    }
    if (s->bs->file) {
        ret = bdrv_co_truncate(s->bs->file, size, false, PREALLOC_MODE_OFF,
                               0, errp);
        if (ret < 0) {
            return ret;
        }
    }
    qemu_mutex_lock(&s->lock);
    s->size = size;
    for (i = 0; i < s->nr_conns; i++) {
        hbitmap_truncate(s->conns[i]->oos, size);
    }
    qemu_mutex_unlock(&s->lock);
    return 0;
}

void drbd_md_free(BDRVDrbdState *s)
{
    g_clear_pointer(&s->md.al, drbd_al_cache_free);
    g_clear_pointer(&s->md.bm_dirty, g_free);
}

/*
 * Whether the first @bytes of @blk read as zeroes, as a fresh file's:
 * holes are, and allocated ranges (a fresh file's first block is) are
 * read, up to a few MiB in all
 */
#define DRBD_ZERO_CHECK_READ_MAX    (16 * MiB)
#define DRBD_ZERO_CHECK_CHUNK       (1 * MiB)

static bool coroutine_fn GRAPH_UNLOCKED
drbd_data_is_zero(BlockBackend *blk, int64_t bytes)
{
    BlockDriverState *bs = blk_bs(blk);
    g_autofree uint8_t *buf = NULL;
    int64_t offset = 0, pnum, budget = DRBD_ZERO_CHECK_READ_MAX;

    while (offset < bytes) {
        int ret;

        bdrv_graph_co_rdlock();
        ret = bdrv_co_block_status_above(bs, NULL, offset, bytes - offset,
                                         &pnum, NULL, NULL);
        bdrv_graph_co_rdunlock();
        if (ret < 0 || pnum <= 0) {
            return false;
        }
        if (!(ret & BDRV_BLOCK_ZERO)) {
            int64_t end = offset + pnum;

            if (pnum > budget) {
                return false;
            }
            budget -= pnum;
            buf = buf ?: blk_blockalign(blk, DRBD_ZERO_CHECK_CHUNK);
            while (offset < end) {
                int64_t n = MIN(end - offset, DRBD_ZERO_CHECK_CHUNK);

                if (blk_co_pread(blk, offset, n, buf, 0) < 0 ||
                    !buffer_is_zero(buf, n)) {
                    return false;
                }
                offset += n;
            }
            continue;
        }
        offset += pnum;
    }
    return true;
}

/*
 * Create: fresh metadata over @file (and @meta, for external metadata)
 */
int coroutine_fn GRAPH_UNLOCKED
drbd_md_create(BlockBackend *file, BlockBackend *meta, uint64_t data_size,
               uint32_t al_extents, uint32_t max_peers, bool data_raw,
               Error **errp)
{
    BlockBackend *md_blk = meta ?: file;
    g_autofree uint8_t *buf = NULL;
    DrbdSuperblock sb;
    DrbdMdLayout layout;
    uint64_t uuid;
    int ret;

    if (meta) {
        ret = drbd_md_layout_external(data_size, al_extents, max_peers,
                                      &layout, errp);
    } else {
        ret = drbd_md_layout_internal(data_size, al_extents, max_peers,
                                      &layout, errp);
    }
    if (ret < 0) {
        return ret;
    }

    if (meta) {
        ret = blk_co_truncate(file, data_size, false, PREALLOC_MODE_OFF, 0,
                              errp);
        if (ret < 0) {
            return ret;
        }
    }
    ret = blk_co_truncate(md_blk, layout.image_size, false,
                          PREALLOC_MODE_OFF, 0, errp);
    if (ret < 0) {
        return ret;
    }

    /* Empty bitmaps and activity log, then the superblock */
    ret = blk_co_pwrite_zeroes(md_blk, layout.bm_offset,
                               max_peers * layout.bm_bytes, 0);
    if (ret == 0) {
        ret = blk_co_pwrite_zeroes(md_blk, layout.al_offset,
                                   (int64_t)layout.al_blocks *
                                   DRBD_MD_BLOCK_SIZE, 0);
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the drbd metadata");
        return ret;
    }

    qemu_guest_getrandom_nofail(&uuid, sizeof(uuid));
    drbd_md_sb_init(&sb, &layout, 0, uuid);
    if (data_raw) {
        /*
         * Data to make replicated: a generation of its own, up to date,
         * whose first peer created afresh is its full sync target
         * (uuid.c, rule 111), as DRBD's "new-current-uuid --clear-bitmap"
         * of a disk with its data
         */
        sb.flags |= DRBD_MDF_CONSISTENT | DRBD_MDF_WAS_UP_TO_DATE;
        do {
            qemu_guest_getrandom_nofail(&sb.uuid_current,
                                        sizeof(sb.uuid_current));
            sb.uuid_current &= ~DRBD_UUID_PRIMARY_FLAG;
        } while (sb.uuid_current == DRBD_UUID_ZEROED ||
                 sb.uuid_current <= DRBD_UUID_JUST_CREATED);
    } else if (drbd_data_is_zero(file, data_size)) {
        /*
         * All zeroes, as a fresh peer's: the two are in sync from the
         * start, without a full resync
         */
        sb.flags |= DRBD_MDF_CONSISTENT | DRBD_MDF_WAS_UP_TO_DATE;
        sb.uuid_current = DRBD_UUID_ZEROED;
    }
    /*
     * Else "just created" and inconsistent, as DRBD's fresh metadata:
     * the node opened as primary first is the source of a full resync
     */
    buf = qemu_blockalign(blk_bs(md_blk), DRBD_MD_BLOCK_SIZE);
    drbd_md_sb_encode(&sb, buf);
    ret = blk_co_pwrite(md_blk, layout.sb_offset, DRBD_MD_BLOCK_SIZE, buf,
                        BDRV_REQ_FUA);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the drbd superblock");
        return ret;
    }
    return 0;
}

/* What qemu-img info shows */
ImageInfoSpecificDrbd *drbd_md_info(BDRVDrbdState *s)
{
    ImageInfoSpecificDrbd *info = g_new0(ImageInfoSpecificDrbd, 1);
    g_auto(GStrv) flags = NULL;
    g_autofree char *flags_str = NULL;
    DrbdMdSlotInfoList **slots;
    strList **tail;
    int i;

    qemu_mutex_lock(&s->lock);
    info->placement = s->meta_disk;
    info->data_size = s->md.sb.data_size;
    flags_str = drbd_md_flags_str(s->md.sb.flags);
    flags = g_strsplit(flags_str, ",", -1);
    tail = &info->flags;
    for (i = 0; flags[i]; i++) {
        if (flags[i][0]) {
            QAPI_LIST_APPEND(tail, g_strdup(flags[i]));
        }
    }
    info->device_uuid = drbd_uuid_hex(s->md.sb.device_uuid);
    info->current_uuid = drbd_uuid_hex(s->md.sb.uuid_current);
    info->bitmap_uuid = drbd_uuid_hex(s->md.sb.uuid_bitmap);
    tail = &info->history_uuids;
    for (i = 0; i < ARRAY_SIZE(s->md.sb.uuid_history); i++) {
        QAPI_LIST_APPEND(tail, drbd_uuid_hex(s->md.sb.uuid_history[i]));
    }
    /* The first peer's (see drbd_conn()) */
    info->out_of_sync = hbitmap_count(drbd_conn(s)->oos);
    info->al_extents = s->md.sb.al_extents;
    info->al_active = s->md.al ? drbd_al_cache_nr_hot(s->md.al) : 0;
    info->max_peers = s->md.sb.max_peers;
    slots = &info->slots;
    for (i = 0; i < s->md.sb.max_peers; i++) {
        DrbdMdSlotInfo *slot = g_new0(DrbdMdSlotInfo, 1);

        slot->has_peer_node_id = s->md.sb.slots[i].node_id !=
                                 DRBD_MD_SLOT_FREE;
        slot->peer_node_id = slot->has_peer_node_id ?
                             s->md.sb.slots[i].node_id : 0;
        slot->bitmap_uuid = drbd_uuid_hex(drbd_md_slot_uuid(&s->md.sb, i));
        QAPI_LIST_APPEND(slots, slot);
    }
    if (s->partial_gen) {
        info->partial_uuid = drbd_uuid_hex(s->partial_gen);
    }
    qemu_mutex_unlock(&s->lock);
    return info;
}
