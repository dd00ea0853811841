/*
 * DRBD-style replication: the receiving side
 *
 * A secondary applies what its primary sends, in the order it arrives,
 * as far as order matters: a guest write starts once every write it
 * depends on is done (order.h), a write that overlaps one still running
 * waits for it, and a barrier is acked, in epoch order, once every write
 * of its epoch is done (and the disk flushed when it asks for that).
 * Acks go back on the meta channel as the protocol asks: RECV_ACK on
 * receipt (B), WRITE_ACK once on disk (C, or FUA), NEG_ACK on failure.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block-io.h"
#include "qapi/error.h"
#include "qemu/error-report.h"
#include "qemu/memalign.h"
#include "trace.h"

#include "drbd-int.h"
#include "gate.h"

typedef struct DrbdApply {
    DrbdPeer *peer;
    uint16_t cmd;
    DrbdDataPacket p;
    uint8_t *buf;               /* the received payload, freed at the end */
    size_t buf_len;             /* its length (drbd_payload_free()) */
    BlockReq req;               /* in peer->apply_reqs while running */
    DrbdOrderWrite *ow;         /* guest writes: its place in the order */
} DrbdApply;

/*
 * Wake the receiver waiting for the writes it started: once, however
 * many of them complete before it runs (a coroutine woken twice would be
 * queued twice)
 */
static void drbd_wake_epoch_waiter(DrbdPeer *peer)
{
    Coroutine *co = peer->epoch_waiter;

    if (co) {
        peer->epoch_waiter = NULL;
        aio_co_wake(co);
    }
}

/*
 * Ack every closed epoch whose writes are all done, oldest first:
 * flush the disk first where the barrier asks for it, and add the acks
 * to @acks, for the caller to send with its own.  One coroutine at a
 * time: one that finds another flushing leaves the rest to it, which
 * looks again after its flush.  @counted: the caller's I/O is counted in
 * flight already (a write that completed an epoch).
 */
static void coroutine_fn drbd_ack_barriers(DrbdPeer *peer, GByteArray *acks,
                                           bool counted)
{
    BDRVDrbdState *s = peer->s;
    bool failed = false, popped = false;
    DrbdBarrier ack;

    if (peer->acking) {
        return;
    }
    peer->acking = true;
    while (drbd_order_next_ack(peer->order, &ack)) {
        int ret = 0;

        popped = true;
        if ((ack.flags & DRBD_BARRIER_FLUSH) && !failed &&
            !qatomic_read(&s->detached)) {
            ret = counted ? 0 : drbd_co_io_begin(s);
            if (ret == 0) {
                bdrv_graph_co_rdlock();
                ret = drbd_co_disk_flush(s);
                bdrv_graph_co_rdunlock();
                if (!counted) {
                    drbd_io_end(s);
                }
            }
        }
        if (ack.flags & DRBD_BARRIER_FLUSH) {
            /* The writes after this barrier may start now */
            drbd_order_flushed(peer->order);
            drbd_wake_epoch_waiter(peer);
        }
        trace_drbd_barrier(s->bs, ack.epoch, ack.set_size, ack.flags, ret);
        if (ret < 0 && drbd_local_error(s, DRBD_IO_OPERATION_FLUSH, ret)) {
            /*
             * Detached: the epoch is not known to be on our disk, so it
             * is not acked (a later ack covers it).  The primary learns
             * that our disk is gone, and resyncs all of it when a disk
             * comes back; the barriers after this one are acked without
             * a flush, there being no disk to flush.
             */
            continue;
        }
        if (ret < 0) {
            /* The epoch is not stable: no ack, the primary will resync it */
            drbd_peer_fail(peer, "flushing epoch %" PRIu32 " failed: %s",
                           ack.epoch, strerror(-ret));
            failed = true;
        }
        if (failed) {
            /*
             * Nothing more is acked on this connection, but the epochs
             * still leave the order, so that no write waits for them
             */
            continue;
        }
        ack.flags = 0;
        drbd_wire_put_barrier(acks, DRBD_CMD_BARRIER_ACK, &ack);
    }
    peer->acking = false;
    if (popped) {
        /* A receiver held back by too many closed epochs may go on */
        drbd_wake_epoch_waiter(peer);
    }
}

/* Resync writes: no epoch, no order, always acked, clear our bits */
static bool drbd_is_resync_write(uint16_t cmd)
{
    return cmd == DRBD_CMD_RS_DATA || cmd == DRBD_CMD_RS_ZEROES;
}

/* The received bytes a write holds in memory until it is done */
static uint32_t drbd_apply_buf_bytes(uint16_t cmd, const DrbdDataPacket *p)
{
    return cmd == DRBD_CMD_DATA || cmd == DRBD_CMD_RS_DATA ? p->bytes : 0;
}

static bool drbd_apply_wants_write_ack(DrbdPeer *peer, uint16_t cmd,
                                       uint32_t flags)
{
    return drbd_is_resync_write(cmd) || peer->conn->protocol == 'C' ||
           (flags & DRBD_DP_FUA);
}

/*
 * Resync data on a sync target that was promoted (s->whole_blocks): its
 * guest writes replace whole blocks and clear their bits (drbd.c), and
 * what the resync brings for those is as old as, or older than, what the
 * guest wrote since.  Only the blocks still lacking are written, with
 * guest writes to the range held off meanwhile; their bits are cleared
 * here.
 */
static int coroutine_fn GRAPH_RDLOCK
drbd_apply_resync_lacking(BDRVDrbdState *s, DrbdApply *a,
                          BdrvRequestFlags flags)
{
    int64_t end = a->p.offset + a->p.bytes;
    int64_t start = a->p.offset, count;
    BlockReq req;
    int ret = 0;

    qemu_co_mutex_lock(&s->reqs_lock);
    reqlist_wait_all(&s->active_reqs, a->p.offset, a->p.bytes,
                     &s->reqs_lock);
    reqlist_init_req(&s->active_reqs, &req, a->p.offset, a->p.bytes);
    qemu_co_mutex_unlock(&s->reqs_lock);

    while (start < end) {
        QEMUIOVector qiov;
        bool found;

        qemu_mutex_lock(&s->lock);
        found = hbitmap_next_dirty_area(a->peer->conn->oos, start, end,
                                        INT64_MAX, &start, &count);
        qemu_mutex_unlock(&s->lock);
        if (!found) {
            break;
        }
        if (a->cmd == DRBD_CMD_RS_DATA) {
            qemu_iovec_init_buf(&qiov, a->p.data + (start - a->p.offset),
                                count);
            ret = drbd_co_disk_write(s, DRBD_CMD_DATA, start, count, &qiov,
                                     0, flags);
        } else {
            ret = drbd_co_disk_write(s, DRBD_CMD_ZEROES, start, count, NULL,
                                     0, flags);
        }
        if (ret < 0) {
            break;
        }
        qemu_mutex_lock(&s->lock);
        drbd_oos_reset_locked(a->peer->conn, start, count);
        qemu_mutex_unlock(&s->lock);
        start += count;
    }

    qemu_co_mutex_lock(&s->reqs_lock);
    reqlist_remove_req(&req);
    qemu_co_mutex_unlock(&s->reqs_lock);
    return ret;
}

static void coroutine_fn drbd_apply_co(void *opaque)
{
    DrbdApply *a = opaque;
    DrbdPeer *peer = a->peer;
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) acks = g_byte_array_new();
    QEMUIOVector qiov;
    BdrvRequestFlags flags = 0;
    bool lacking = false;
    int ret;

    if (a->p.flags & DRBD_DP_FUA) {
        flags |= BDRV_REQ_FUA;
    }
    if (qatomic_read(&s->detached)) {
        /* No disk: the primary marks what we NEG_ACK out of sync */
        ret = -EIO;
        goto done;
    }
    qatomic_inc(&s->lo);

    bdrv_graph_co_rdlock();
    lacking = drbd_is_resync_write(a->cmd) && s->whole_blocks;
    switch (lacking ? 0 : a->cmd) {
    case 0:
        if (a->p.flags & DRBD_DP_MAY_UNMAP) {
            flags |= BDRV_REQ_MAY_UNMAP;
        }
        ret = drbd_apply_resync_lacking(s, a, flags);
        break;
    case DRBD_CMD_DATA:
    case DRBD_CMD_RS_DATA:
        qemu_iovec_init_buf(&qiov, a->p.data, a->p.bytes);
        ret = drbd_co_disk_write(s, DRBD_CMD_DATA, a->p.offset, a->p.bytes,
                                 &qiov, 0, flags);
        break;
    case DRBD_CMD_ZEROES:
    case DRBD_CMD_RS_ZEROES:
        if (a->p.flags & DRBD_DP_MAY_UNMAP) {
            flags |= BDRV_REQ_MAY_UNMAP;
        }
        ret = drbd_co_disk_write(s, DRBD_CMD_ZEROES, a->p.offset,
                                 a->p.bytes, NULL, 0, flags);
        break;
    case DRBD_CMD_DISCARD:
        ret = drbd_co_disk_write(s, DRBD_CMD_DISCARD, a->p.offset,
                                 a->p.bytes, NULL, 0, 0);
        break;
    default:
        g_assert_not_reached();
    }
    if (ret < 0 && !drbd_local_error(s, DRBD_IO_OPERATION_WRITE, ret)) {
        /*
         * pass-on: the primary marks the range out of sync (NEG_ACK); our
         * data lacks a write it has, so it is not to be promoted, and
         * the next handshake makes us the sync target
         */
        drbd_set_state(s, NULL, -1, -1, DRBD_DISK_STATE_INCONSISTENT, -1, -1,
                       "a local write failed (on-io-error=pass-on)");
        drbd_md_sync_in_request(s, false);
        /* The peer is told, and the superblock written again */
        qemu_bh_schedule(s->disk_error_bh);
    }
    bdrv_graph_co_rdunlock();

    qemu_mutex_lock(&s->lock);
    qatomic_dec(&s->lo);
    if (a->cmd == DRBD_CMD_DATA || a->cmd == DRBD_CMD_RS_DATA) {
        stat64_add(&s->dw, ret == 0 ? a->p.bytes : 0);
    }
    if (drbd_is_resync_write(a->cmd) && ret == 0 && !lacking) {
        drbd_oos_reset_locked(peer->conn, a->p.offset, a->p.bytes);
    }
    qemu_mutex_unlock(&s->lock);

done:
    trace_drbd_apply(s->bs, drbd_cmd_name(a->cmd), a->p.offset, a->p.bytes,
                     a->p.epoch, ret);
    reqlist_remove_req(&a->req);
    peer->apply_bytes -= drbd_apply_buf_bytes(a->cmd, &a->p);
    if (!drbd_is_resync_write(a->cmd)) {
        drbd_order_done(peer->order, a->ow);
    } else {
        peer->resync_inflight--;
    }
    /* The receiver may wait for its order, for memory or for the resync */
    drbd_wake_epoch_waiter(peer);
    if (!drbd_is_resync_write(a->cmd)) {
        drbd_ack_barriers(peer, acks, true);
    }

    /*
     * One send for the write's ack and the barrier's: their order does
     * not matter to the primary
     */
    if (ret < 0 || drbd_apply_wants_write_ack(peer, a->cmd, a->p.flags)) {
        DrbdBlockAck ack = {
            .offset = a->p.offset, .id = a->p.id, .bytes = a->p.bytes,
        };

        drbd_wire_put_block_ack(acks, ret < 0 ? DRBD_CMD_NEG_ACK :
                                DRBD_CMD_WRITE_ACK, &ack);
    }
    if (acks->len) {
        drbd_queue_meta(peer, acks);
    }

    qatomic_dec(&conn->ua);

    drbd_payload_free(s, a->buf, a->buf_len);
    g_free(a);
    drbd_io_end(s);
    drbd_peer_put(peer);
}

/*
 * What the receiving side knows, for the gate's checks of the peer's
 * writes and resync packets (the acks' fields stay empty: the sending
 * side checks those)
 */
static void drbd_peer_gate_locked(DrbdPeer *peer, DrbdGate *gate)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;

    *gate = (DrbdGate) {
        .disk_size = s->size,
        .role = s->role,
        .cstate = conn->cstate,
        .sync_target = peer->sync_target,
        .peer_role = conn->peer_role,
        .peer_disk = conn->peer_disk,
        .decision = peer->decision,
        .peer_version = peer->version,
    };
}

/* Wait until every write received so far is done (before a RESIZE) */
void coroutine_fn drbd_peer_wait_applies(DrbdPeer *peer)
{
    reqlist_wait_all(&peer->apply_reqs, 0, INT64_MAX, NULL);
}

/* Wait until the writes counted by *@count are done */
static void coroutine_fn drbd_wait_applies(DrbdPeer *peer,
                                           unsigned *count)
{
    while (*count > 0) {
        peer->epoch_waiter = qemu_coroutine_self();
        qemu_coroutine_yield();
        peer->epoch_waiter = NULL;
    }
}

/*
 * Start applying a received write.  Takes ownership of @buf.  Only a
 * secondary applies writes; a primary that receives one is talking to a
 * peer that thinks it is primary too.
 */
int coroutine_fn drbd_peer_apply(DrbdPeer *peer, uint16_t cmd,
                                 const DrbdDataPacket *p, uint8_t *buf,
                                 size_t buf_len, Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdApply *a;
    DrbdGate gate;
    uint64_t dep = 0;
    int ret;

    qemu_mutex_lock(&s->lock);
    drbd_peer_gate_locked(peer, &gate);
    if (!drbd_is_resync_write(cmd) && s->nr_conns > 1) {
        /* Noted as it arrives (one refused is harmless: noted in vain) */
        drbd_recent_note_locked(s, p->offset, p->bytes);
    }
    qemu_mutex_unlock(&s->lock);
    ret = drbd_gate_write(&gate, cmd, p, errp);
    if (ret < 0) {
        drbd_payload_free(s, buf, buf_len);
        return ret;
    }
    if (drbd_is_resync_write(cmd) && !peer->resync_persisted) {
        /*
         * The source announced every range before its first chunk: what
         * we lack, and that our disk is inconsistent, go to disk before
         * the first chunk does (a chunk is acked before it is flushed)
         */
        if (drbd_co_md_sync(s, true) < 0) {
            drbd_payload_free(s, buf, buf_len);
            error_setg(errp, "could not write the metadata before the "
                       "first resync block");
            return -EIO;
        }
        peer->resync_persisted = true;
    }

    if (!drbd_is_resync_write(cmd) &&
        drbd_order_arrive(peer->order, p->unordered, &dep, errp) < 0) {
        drbd_payload_free(s, buf, buf_len);
        return -EPROTO;
    }

    qatomic_inc(&conn->ua);
    if (cmd == DRBD_CMD_DATA || cmd == DRBD_CMD_RS_DATA) {
        stat64_add(&conn->nr, p->bytes);
    }

    if (conn->protocol == 'B' && !drbd_is_resync_write(cmd)) {
        /* protocol B: the primary may complete once we hold the data */
        drbd_queue_block_ack(peer, DRBD_CMD_RECV_ACK, p->offset, p->id,
                             p->bytes);
    }

    /*
     * Start no guest write before the writes it depends on are done, and
     * keep the arrival order of overlapping writes
     */
    if (!drbd_is_resync_write(cmd)) {
        while (!drbd_order_may_start(peer->order, dep)) {
            peer->epoch_waiter = qemu_coroutine_self();
            qemu_coroutine_yield();
            peer->epoch_waiter = NULL;
        }
    }
    /*
     * Hold no more than max-buffers of received data: until writes free
     * some, the receiver reads nothing more and TCP holds the peer back
     * (one write is always let through, whatever its size)
     */
    while (peer->apply_bytes &&
           peer->apply_bytes + drbd_apply_buf_bytes(cmd, p) >
           (uint64_t)conn->max_buffers * 4 * KiB) {
        peer->epoch_waiter = qemu_coroutine_self();
        qemu_coroutine_yield();
        peer->epoch_waiter = NULL;
    }
    reqlist_wait_all(&peer->apply_reqs, p->offset, p->bytes, NULL);
    /* Counted in flight until drbd_apply_co() ends; not while drained */
    if (drbd_co_io_begin(s) < 0) {
        drbd_payload_free(s, buf, buf_len);
        qatomic_dec(&conn->ua);
        error_setg(errp, "the node is closing");
        return -ECANCELED;
    }

    peer->apply_bytes += drbd_apply_buf_bytes(cmd, p);
    a = g_new0(DrbdApply, 1);
    a->peer = peer;
    a->cmd = cmd;
    a->p = *p;
    a->buf = buf;
    a->buf_len = buf_len;
    reqlist_init_req(&peer->apply_reqs, &a->req, p->offset, p->bytes);
    if (drbd_is_resync_write(cmd)) {
        peer->resync_inflight++;
    } else {
        a->ow = drbd_order_start(peer->order);
    }
    /*
     * Start the write now rather than when the receiver next waits for
     * the network: with packets queued up, that may be many writes later.
     */
    qemu_mutex_lock(&s->lock);
    peer->running++;
    qemu_mutex_unlock(&s->lock);
    qemu_coroutine_enter(qemu_coroutine_create(drbd_apply_co, a));
    return 0;
}

/*
 * A barrier closes an epoch.  Its writes may still be running: the
 * receiver goes on reading, and the last of them to complete acks it
 * (after the acks of every earlier epoch).
 */
int coroutine_fn drbd_peer_barrier(DrbdPeer *peer, const DrbdBarrier *b,
                                   Error **errp)
{
    g_autoptr(GByteArray) acks = g_byte_array_new();

    /* A primary far ahead of our disk waits, rather than our memory grow */
    while (drbd_order_closed_epochs(peer->order) >= DRBD_ORDER_MAX_EPOCHS) {
        peer->epoch_waiter = qemu_coroutine_self();
        qemu_coroutine_yield();
        peer->epoch_waiter = NULL;
    }
    if (drbd_order_barrier(peer->order, b, errp) < 0) {
        return -EPROTO;
    }
    drbd_ack_barriers(peer, acks, false);
    if (acks->len) {
        drbd_queue_meta(peer, acks);
    }
    return 0;
}

/* The sync source announces a range we lack */
int coroutine_fn drbd_peer_out_of_sync(DrbdPeer *peer,
                                       const DrbdBlockAck *range,
                                       Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdGate gate;
    int ret;

    qemu_mutex_lock(&s->lock);
    drbd_peer_gate_locked(peer, &gate);
    ret = drbd_gate_out_of_sync(&gate, range, errp);
    if (ret < 0) {
        qemu_mutex_unlock(&s->lock);
        return ret;
    }
    if (!peer->sync_target) {
        peer->sync_target = true;
        conn->resync_total = 0;
        conn->resync_done = 0;
        drbd_resync_marks_start_locked(conn);
    }
    drbd_oos_set_locked(peer->conn, range->offset, range->bytes);
    conn->resync_total = hbitmap_count(peer->conn->oos);
    qemu_mutex_unlock(&s->lock);

    drbd_set_state(s, conn, -1, DRBD_CONN_STATE_SYNC_TARGET,
                   DRBD_DISK_STATE_INCONSISTENT, -1, -1, "resync started");
    return 0;
}

/* RS_CSUM reads at once: a source keeps no more in flight */
#define DRBD_CSUM_READS_MAX     128

/*
 * A chunk compared with the sync source's checksums: the equal blocks
 * are in sync, the others (all of them if ours could not be read) are
 * to be sent as data
 */
static void coroutine_fn drbd_csum_compared(DrbdPeer *peer,
                                            const DrbdOvPacket *p, int ret,
                                            uint64_t mismatch, Error *err,
                                            void *opaque)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdOvPacket r = {
        .offset = p->offset, .id = p->id, .bytes = p->bytes,
        .flags = DRBD_OV_RESULT, .mismatch = mismatch,
    };

    if (ret < 0) {
        warn_report_err(err);
        r.mismatch = p->bytes == DRBD_OV_MAX_BYTES ? UINT64_MAX :
                     (1ULL << drbd_ov_blocks(p->bytes)) - 1;
    }
    qemu_mutex_lock(&s->lock);
    conn->same_csum += drbd_oos_reset_equal_locked(conn, p->offset,
                                                   p->bytes, r.mismatch);
    qemu_mutex_unlock(&s->lock);
    trace_drbd_peer_csum(s->bs, p->offset, p->bytes, r.mismatch);

    peer->resync_inflight--;
    peer->csum_reading--;
    drbd_wake_epoch_waiter(peer);

    drbd_wire_put_ov(pkt, DRBD_CMD_RS_CSUM_REPLY, &r);
    drbd_queue_meta(peer, pkt);
}

/*
 * The sync source sends the checksums of a chunk: compare them with our
 * blocks once the writes received before are done, as RS_DATA would be
 * written then
 */
int coroutine_fn drbd_peer_csum(DrbdPeer *peer, const DrbdOvPacket *p,
                                Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdGate gate;

    qemu_mutex_lock(&s->lock);
    drbd_peer_gate_locked(peer, &gate);
    qemu_mutex_unlock(&s->lock);
    if (drbd_gate_csum(&gate, p, errp) < 0) {
        return -EINVAL;
    }
    if (!peer->resync_persisted) {
        /* As before the first RS_DATA: what we lack is on disk first */
        if (drbd_co_md_sync(s, true) < 0) {
            error_setg(errp, "could not write the metadata before the "
                       "first resync checksum");
            return -EIO;
        }
        peer->resync_persisted = true;
    }
    while (peer->csum_reading >= DRBD_CSUM_READS_MAX) {
        peer->epoch_waiter = qemu_coroutine_self();
        qemu_coroutine_yield();
        peer->epoch_waiter = NULL;
    }
    peer->resync_inflight++;
    peer->csum_reading++;
    drbd_compare_in_order(peer, conn->csums_alg, p, drbd_csum_compared,
                          NULL);
    return 0;
}

/*
 * The primary went ahead of us (on-congestion pull-ahead): it sends no
 * write after this packet, and marks them out of sync for the resync
 * that follows once the link has drained.  Our data is outdated until
 * then, on disk too: a node that lacks writes the guest saw complete is
 * not promoted without force.
 */
int coroutine_fn drbd_peer_ahead(DrbdPeer *peer, Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdGate gate;

    qemu_mutex_lock(&s->lock);
    drbd_peer_gate_locked(peer, &gate);
    qemu_mutex_unlock(&s->lock);
    if (drbd_gate_ahead(&gate, errp) < 0) {
        return -EINVAL;
    }
    drbd_set_state(s, peer->conn, -1, DRBD_CONN_STATE_BEHIND,
                   DRBD_DISK_STATE_OUTDATED, -1, -1,
                   "the primary went ahead: the link is congested");
    /* A failure marks the disk failed, which says it all */
    drbd_co_md_sync(s, false);
    return 0;
}

/* The sync source has sent everything: once it is on disk, we are done */
int coroutine_fn drbd_peer_resync_done(DrbdPeer *peer, Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdGate gate;
    uint64_t left;
    int ret;

    qemu_mutex_lock(&s->lock);
    drbd_peer_gate_locked(peer, &gate);
    qemu_mutex_unlock(&s->lock);
    ret = drbd_gate_resync_done(&gate, errp);
    if (ret < 0) {
        return ret;
    }
    drbd_wait_applies(peer, &peer->resync_inflight);

    qemu_mutex_lock(&s->lock);
    left = hbitmap_count(peer->conn->oos);
    peer->sync_target = false;
    qemu_mutex_unlock(&s->lock);

    if (left) {
        error_setg(errp, "resync ended with %" PRIu64 " bytes still out "
                   "of sync", left);
        return -EPROTO;
    }
    /* What the resync wrote is on disk before we say we are up to date */
    if (drbd_data_flush_co(s) < 0) {
        error_setg(errp, "flushing the resynchronized data failed");
        return -EIO;
    }
    drbd_resync_finished_uuids(peer);
    drbd_set_state(s, conn, -1, DRBD_CONN_STATE_CONNECTED,
                   DRBD_DISK_STATE_UP_TO_DATE, -1, DRBD_DISK_STATE_UP_TO_DATE,
                   "resync finished");
    if (drbd_co_md_sync(s, false) < 0) {
        error_setg(errp, "could not write the metadata after the resync");
        return -EIO;
    }
    return 0;
}

/*
 * Guest reads of a primary that reads through us (readpeer.c): one
 * coroutine per DATA_REQUEST, in the node's context
 */
typedef struct DrbdServeRead {
    DrbdPeer *peer;
    DrbdBlockAck r;
} DrbdServeRead;

/* Whether our data can answer a read: attached and up to date */
static bool drbd_can_serve_reads_locked(BDRVDrbdState *s)
{
    return !s->detached && s->disk == DRBD_DISK_STATE_UP_TO_DATE;
}

static int coroutine_fn drbd_send_neg_dreply(DrbdPeer *peer,
                                             const DrbdBlockAck *r)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();

    drbd_wire_put_block_ack(pkt, DRBD_CMD_NEG_DREPLY, r);
    return drbd_send_data_channel(peer, pkt);
}

static void coroutine_fn drbd_serve_read_co(void *opaque)
{
    DrbdServeRead *sr = opaque;
    DrbdPeer *peer = sr->peer;
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    uint8_t digest[DRBD_WIRE_DIGEST_MAX];
    uint8_t *buf = qemu_blockalign(s->bs, sr->r.bytes);
    struct iovec iov = { buf, sr->r.bytes };
    DrbdDataPacket p = {
        .offset = sr->r.offset,
        .id = sr->r.id,
        .bytes = sr->r.bytes,
        .data = buf,
    };
    Error *err = NULL;
    int ret;

    /* After the writes that arrived before the request, if they overlap */
    reqlist_wait_all(&peer->apply_reqs, sr->r.offset, sr->r.bytes, NULL);
    ret = drbd_co_read_local(s, sr->r.offset, sr->r.bytes, buf);
    if (ret == 0 && drbd_digest_attach(conn->integrity, &p, &iov, 1,
                                       digest, &err) < 0) {
        drbd_peer_fail_err(peer, "answering a read", err);
        ret = -EIO;
    } else if (ret == 0) {
        drbd_wire_put_data(pkt, DRBD_CMD_DATA_REPLY, &p);
        ret = drbd_send_data_channel(peer, pkt);
        stat64_add(&conn->ns, ret == 0 ? sr->r.bytes : 0);
    } else {
        drbd_send_neg_dreply(peer, &sr->r);
    }
    trace_drbd_serve_read(s->bs, sr->r.offset, sr->r.bytes, ret);

    qemu_vfree(buf);
    qemu_mutex_lock(&s->lock);
    peer->reads_serving--;
    qatomic_dec(&conn->ua);
    qemu_mutex_unlock(&s->lock);
    g_free(sr);
    drbd_peer_put(peer);
}

/*
 * The primary asks for blocks it cannot read itself.  Answered with the
 * data, or with a NEG_DREPLY where our data cannot serve (not up to
 * date, detached, or the read failed); only a request a primary peer may
 * send is a protocol error.
 */
int coroutine_fn drbd_peer_read_request(DrbdPeer *peer,
                                        const DrbdBlockAck *r,
                                        Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdServeRead *sr;
    DrbdGate gate;
    bool serve;

    qemu_mutex_lock(&s->lock);
    drbd_peer_gate_locked(peer, &gate);
    if (drbd_gate_data_request(&gate, r, errp) < 0) {
        qemu_mutex_unlock(&s->lock);
        return -EINVAL;
    }
    serve = drbd_can_serve_reads_locked(s);
    if (serve) {
        peer->reads_serving++;
        qatomic_inc(&conn->ua);
    }
    qemu_mutex_unlock(&s->lock);

    if (!serve) {
        trace_drbd_serve_read(s->bs, r->offset, r->bytes, -EIO);
        if (drbd_send_neg_dreply(peer, r) < 0) {
            error_setg(errp, "could not answer a read request");
            return -EPIPE;
        }
        return 0;
    }
    sr = g_new0(DrbdServeRead, 1);
    sr->peer = peer;
    sr->r = *r;
    drbd_peer_spawn_here(peer, drbd_serve_read_co, sr);
    return 0;
}

/*
 * A NEW_UUID: the primary peer started a data generation (it lost
 * another peer, or was promoted without all of them), and this node,
 * which receives its writes, is in it too.  A sync target of the peer
 * takes the peer's UUIDs at the end of the resync instead; a sync
 * source of a primary target joins it now from version 10, and at the
 * resync's end before.  Runs in the meta receiver, which it holds up
 * while the metadata goes to disk.
 */
int coroutine_fn drbd_peer_new_uuid(DrbdPeer *peer, uint64_t uuid,
                                    Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdGate gate;
    DrbdUuids u;
    bool joined = false, partial = false;

    qemu_mutex_lock(&s->lock);
    gate = (DrbdGate) {
        .role = s->role,
        .peer_role = conn->peer_role,
        .peer_version = peer->version,
    };
    if (drbd_gate_new_uuid(&gate, errp) < 0) {
        qemu_mutex_unlock(&s->lock);
        return -EINVAL;
    }
    drbd_gen_seen_push(&s->gen_seen, uuid);
    if (!peer->sync_target && conn->cstate == DRBD_CONN_STATE_CONNECTED &&
        !s->detached) {
        drbd_uuids_get_locked(conn, &u);
        drbd_uuid_join(&u, uuid);
        drbd_uuids_set_locked(conn, &u);
        joined = true;
    } else if (peer->sync_target && !peer->uuids_synced) {
        /* The resync's end takes the source's generation: this one */
        drbd_uuid_join(&peer->hs_uuids, uuid);
        s->partial_gen = uuid;
        partial = true;
    } else if (!peer->uuids_synced && drbd_sync_is_source(peer->decision)) {
        /*
         * Our sync target, primary, writes in a generation of its own,
         * and we receive its writes: from version 10 we join it now (our
         * data, with its writes, is that generation's), before, at the
         * resync's end
         */
        peer->target_gen = uuid;
        if (peer->version >= DRBD_PROTO_VERSION_TARGET_GEN) {
            drbd_uuids_get_locked(conn, &u);
            joined = drbd_uuid_target_gen_new(&u, uuid);
        }
        if (joined) {
            drbd_uuid_join(&u, peer->target_gen);
            drbd_uuids_set_locked(conn, &u);
        }
    }
    qemu_mutex_unlock(&s->lock);
    trace_drbd_new_uuid(s->bs, uuid, joined);
    if (joined || partial) {
        /*
         * On disk before the meta channel reads on: a PING that the
         * primary sent after NEW_UUID is answered once the generation
         * survives a crash of this node, and the primary counts on that
         * (drbd_co_gen_confirm()).  A failure detaches the node, which
         * says it all.
         */
        drbd_co_md_sync(s, false);
    }
    return 0;
}
