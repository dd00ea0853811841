/*
 * DRBD-style replication: the sync source's side of a resync
 *
 * After a reconnect, the primary sends the peer every block its
 * out-of-sync bitmap marks: first the ranges (OUT_OF_SYNC), so that the
 * peer knows what it lacks, then the data (RS_DATA, or RS_ZEROES for a
 * chunk that reads as zeroes), chunk by chunk at no more than
 * resync-rate, or at the pace of the dynamic controller (c-plan-ahead,
 * pace.h), then RS_DONE.  A bit is cleared only when the
 * peer's WRITE_ACK says the data is on its disk, so a connection lost in
 * the middle leaves the rest marked for the next resync.
 *
 * Guest writes go on meanwhile.  A chunk is read and sent while no guest
 * write overlapping it is in flight, and guest writes wait while a chunk
 * is between read and send, so that the peer, which applies overlapping
 * writes in arrival order, never has old resync data overwrite a newer
 * guest write.
 *
 * With csums-alg, a first pass sends the digests of each chunk's 4 KiB
 * blocks instead (RS_CSUM, read as RS_DATA is, at the same point of the
 * stream of writes); the peer compares them with its own blocks, clears
 * its bits of the equal ones and answers which differ (RS_CSUM_REPLY),
 * and we clear ours of the equal ones.  The second pass, the one above,
 * then sends the data of what is left.
 *
 * With resync-after, no chunk goes out while the other node resyncs.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block-io.h"
#include "qapi/error.h"
#include "qemu/cutils.h"
#include "qemu/timer.h"
#include "trace.h"

#include "drbd-int.h"
#include "gate.h"

/*
 * Chunks in flight, not yet acked (16 MiB of data), and checksums of
 * chunks (csums-alg, as much to compare): what a lost connection makes
 * us send again, and what the peer must hold
 */
#define DRBD_RESYNC_WINDOW      64
#define DRBD_CSUM_WINDOW        64
/* Chunks read (and digested) at once, each holding its own range */
#define DRBD_RESYNC_READERS     4

QEMU_BUILD_BUG_ON(DRBD_RESYNC_CHUNK > DRBD_OV_MAX_BYTES);

/* Tell the peer every range it lacks; returns < 0 if the send failed */
static int coroutine_fn drbd_resync_announce(DrbdPeer *peer)
{
    BDRVDrbdState *s = peer->s;
    int64_t offset = 0;
    int64_t start, count;
    int ret = 0;

    while (ret == 0) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        DrbdBlockAck range;
        bool found;

        qemu_mutex_lock(&s->lock);
        found = hbitmap_next_dirty_area(s->oos, offset, s->size,
                                        DRBD_WIRE_MAX_ZEROES, &start,
                                        &count);
        qemu_mutex_unlock(&s->lock);
        if (!found) {
            break;
        }
        range = (DrbdBlockAck) { .offset = start, .bytes = count };
        drbd_wire_put_block_ack(pkt, DRBD_CMD_OUT_OF_SYNC, &range);
        ret = drbd_send_data_channel(peer, pkt);
        offset = start + count;
    }
    return ret;
}

/*
 * Read one chunk and send it as RS_DATA, or as RS_ZEROES if it reads as
 * zeroes (the target writes zeroes, unmapping where it may)
 */
static int coroutine_fn drbd_resync_chunk(DrbdPeer *peer, int64_t offset,
                                          int64_t bytes)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    uint8_t *buf = drbd_chunk_buf_get(s);
    DrbdDataPacket p = {
        .offset = offset,
        .id = DRBD_GATE_RESYNC_ID | (uint64_t)offset,
        .bytes = bytes,
        .data = buf,
    };
    uint8_t digest[DRBD_WIRE_DIGEST_MAX];
    struct iovec iov = { buf, bytes };
    uint16_t cmd = DRBD_CMD_RS_DATA;
    Error *err = NULL;
    BlockReq req;
    int ret;

    drbd_co_hold_range(s, &req, offset, bytes);

    ret = drbd_co_read_local(s, offset, bytes, buf);
    if (ret == -ECANCELED) {
        drbd_co_release_range(s, &req);
        drbd_chunk_buf_put(s, buf);
        return ret;
    }
    if (ret == 0 && buffer_is_zero(buf, bytes)) {
        cmd = DRBD_CMD_RS_ZEROES;
        p.data = NULL;
        p.flags = DRBD_DP_MAY_UNMAP;
    }
    if (ret == 0 && cmd == DRBD_CMD_RS_DATA &&
        drbd_digest_attach(conn->integrity, &p, &iov, 1, digest,
                           &err) < 0) {
        drbd_peer_fail_err(peer, "resync", err);
        ret = -EIO;
    } else if (ret == 0) {
        /*
         * In the table before it goes out: the ack may be processed
         * before the send returns
         */
        qemu_mutex_lock(&s->lock);
        g_hash_table_insert(peer->resync_chunks, g_memdup2(&p.offset,
                                                           sizeof(p.offset)),
                            GUINT_TO_POINTER(p.bytes));
        qatomic_inc(&conn->pe);
        conn->rs_in_flight += p.bytes;
        qemu_mutex_unlock(&s->lock);

        drbd_wire_put_data(pkt, cmd, &p);
        ret = drbd_send_data_channel(peer, pkt);
    } else {
        drbd_peer_fail(peer, "resync: reading %" PRId64 " bytes at %" PRId64
                       " failed: %s", bytes, offset, strerror(-ret));
    }

    if (ret == 0 && cmd == DRBD_CMD_RS_DATA) {
        stat64_add(&conn->ns, bytes);
    }

    drbd_co_release_range(s, &req);
    drbd_chunk_buf_put(s, buf);
    trace_drbd_resync_chunk(s->bs, offset, bytes, ret);
    return ret;
}

/*
 * Read one chunk and send the csums-alg digests of its blocks; the
 * chunk is held against guest writes from the read to the send, as
 * RS_DATA is
 */
static int coroutine_fn drbd_resync_csum_chunk(DrbdPeer *peer,
                                               int64_t offset,
                                               int64_t bytes)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    size_t dsize = drbd_digest_size(conn->csums_alg);
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    uint8_t *buf = drbd_chunk_buf_get(s);
    g_autofree uint8_t *digests = g_malloc(drbd_ov_blocks(bytes) * dsize);
    DrbdOvPacket p = {
        .offset = offset,
        .id = DRBD_GATE_RESYNC_ID | (uint64_t)offset,
        .bytes = bytes,
        .flags = DRBD_OV_DIGESTS,
        .digests = digests,
        .digest_size = dsize,
    };
    Error *err = NULL;
    BlockReq req;
    int ret;

    drbd_co_hold_range(s, &req, offset, bytes);

    ret = drbd_co_read_local(s, offset, bytes, buf);
    if (ret == 0) {
        ret = drbd_block_digests(conn->csums_alg, buf, bytes, digests,
                                 &err);
        if (ret < 0) {
            drbd_peer_fail_err(peer, "resync", err);
        }
    } else if (ret != -ECANCELED) {
        drbd_peer_fail(peer, "resync: reading %" PRId64 " bytes at %"
                       PRId64 " failed: %s", bytes, offset, strerror(-ret));
    }
    if (ret == 0) {
        /* In the table before it goes out: the reply may come first */
        qemu_mutex_lock(&s->lock);
        g_hash_table_insert(peer->csum_chunks,
                            g_memdup2(&p.offset, sizeof(p.offset)),
                            GUINT_TO_POINTER(p.bytes));
        qatomic_inc(&conn->pe);
        conn->rs_in_flight += p.bytes;
        qemu_mutex_unlock(&s->lock);
        drbd_wire_put_ov(pkt, DRBD_CMD_RS_CSUM, &p);
        ret = drbd_send_data_channel(peer, pkt);
    }

    drbd_co_release_range(s, &req);
    drbd_chunk_buf_put(s, buf);
    trace_drbd_resync_csum(s->bs, offset, bytes, ret);
    return ret;
}

/* How the resync paces itself: by resync-rate, or by the controller */
typedef struct DrbdResyncPacer {
    bool dynamic;               /* c-plan-ahead is set */
    DrbdPace ctl;
    int64_t step_end;           /* when the controller steps next, ns */
    int64_t budget;             /* bytes the step may still send */
} DrbdResyncPacer;

static void drbd_resync_pacer_init(DrbdConnection *conn,
                                   DrbdResyncPacer *pc)
{
    DrbdPaceParams p = conn->pace;

    /* The start: resync-rate, or c-max-rate, or the aim (pace.h) */
    p.start_rate = conn->resync_rate ?: p.max_rate;
    *pc = (DrbdResyncPacer) { .dynamic = p.plan_ahead_ns != 0 };
    drbd_pace_init(&pc->ctl, &p);
}

/*
 * Whether the controller lets the next chunk go now; if not, how many
 * nanoseconds until it may say yes (a new step)
 */
static bool drbd_resync_paced(DrbdConnection *conn, DrbdResyncPacer *pc,
                              int64_t *wait_ns)
{
    BDRVDrbdState *s = conn->s;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    uint64_t pending;
    bool throttle;

    qemu_mutex_lock(&s->lock);
    if (now >= pc->step_end) {
        /* drbd-set-resync-rate caps a running controller */
        pc->ctl.p.max_rate = conn->pace.max_rate;
        /* A chunk that went beyond the last step's share counts here */
        pc->budget = MIN(pc->budget, 0) +
                     drbd_pace_step(&pc->ctl, conn->rs_answered,
                                    conn->rs_in_flight);
        conn->rs_answered = 0;
        pc->step_end = now + DRBD_PACE_STEP_NS;
        trace_drbd_resync_step(s->bs, pc->budget, conn->rs_in_flight);
    }
    pending = conn->rs_answered + conn->rs_in_flight;
    throttle = pc->budget > 0 &&
               drbd_pace_throttle(&pc->ctl, stat64_get(&s->app_bytes),
                                  pending);
    qemu_mutex_unlock(&s->lock);
    if (throttle) {
        /* The guest's I/O goes first for the rest of the step */
        trace_drbd_resync_throttle(s->bs,
                                   drbd_pace_recent_rate(&pc->ctl, pending));
        pc->budget = 0;
    }
    *wait_ns = pc->step_end - now;
    return pc->budget > 0;
}

/*
 * Before each chunk: wait while the user pauses the resync's job, while
 * the resync-after node resyncs, and, with the controller, while it holds
 * the resync back.  Follows the node.  Returns false if the connection
 * broke meanwhile.
 */
static bool coroutine_fn drbd_resync_pause_point(DrbdPeer *peer,
                                                 DrbdResyncPacer *pc)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;

    while (!qatomic_read(&peer->broken)) {
        const char *after = drbd_resync_after_busy(s);
        int64_t wait_ns = 0;

        qemu_mutex_lock(&s->lock);
        if (after && after != conn->resync_paused_after) {
            trace_drbd_resync_after(s->bs, after);
        }
        conn->resync_paused_after = after;
        qemu_mutex_unlock(&s->lock);

        if (drbd_job_paused(s, DRBD_JOB_RESYNC) || after) {
            wait_ns = 100 * SCALE_MS;
        } else if (!pc->dynamic || drbd_resync_paced(conn, pc, &wait_ns)) {
            break;
        }
        drbd_co_sleep(s, &peer->resync_sleep, wait_ns);
        drbd_co_rehome(s);
    }
    return !qatomic_read(&peer->broken);
}

/* A chunk of @bytes went out: resync-rate may hold the next one back */
static void coroutine_fn drbd_resync_sent_chunk(DrbdPeer *peer,
                                                DrbdResyncPacer *pc,
                                                uint64_t bytes)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    uint64_t delay;

    if (pc->dynamic) {
        pc->budget -= bytes;
        return;
    }
    /* No limit (a rate of 0) makes no delay */
    delay = ratelimit_calculate_delay(&conn->resync_limit, bytes);
    if (delay) {
        /*
         * Woken early by a move or a new rate: the rate catches up next
         * time
         */
        drbd_co_sleep(s, &peer->resync_sleep, delay);
    }
}

/*
 * Wait until at most @max entries of @inflight (peer->resync_chunks or
 * peer->csum_chunks, or NULL for none) are in flight and at most
 * @max_readers chunks are being read; false if the connection broke or a
 * reader failed
 */
static bool coroutine_fn drbd_resync_wait(DrbdPeer *peer,
                                          GHashTable *inflight, guint max,
                                          unsigned max_readers)
{
    BDRVDrbdState *s = peer->s;

    qemu_mutex_lock(&s->lock);
    while (((inflight && g_hash_table_size(inflight) > max) ||
            peer->resync_readers > max_readers) &&
           !qatomic_read(&peer->broken) && !peer->resync_failed) {
        peer->resync_waiter = qemu_coroutine_self();
        qemu_mutex_unlock(&s->lock);
        qemu_coroutine_yield();
        /* Woken by an answer, or by a move (drbd_peer_kick()) */
        drbd_co_rehome(s);
        qemu_mutex_lock(&s->lock);
    }
    qemu_mutex_unlock(&s->lock);
    return !qatomic_read(&peer->broken) && !peer->resync_failed;
}

/* One chunk that a reader of its own reads and sends */
typedef struct DrbdResyncRead {
    DrbdPeer *peer;
    int64_t offset, bytes;
    bool csum;                  /* its checksums, not its data */
} DrbdResyncRead;

static void coroutine_fn drbd_resync_read_co(void *opaque)
{
    DrbdResyncRead *rr = opaque;
    DrbdPeer *peer = rr->peer;
    BDRVDrbdState *s = peer->s;
    Coroutine *waiter;
    int ret;

    ret = rr->csum ? drbd_resync_csum_chunk(peer, rr->offset, rr->bytes) :
                     drbd_resync_chunk(peer, rr->offset, rr->bytes);
    qemu_mutex_lock(&s->lock);
    peer->resync_readers--;
    peer->resync_failed |= ret < 0;
    waiter = peer->resync_waiter;
    peer->resync_waiter = NULL;
    qemu_mutex_unlock(&s->lock);
    if (waiter) {
        aio_co_wake(waiter);
    }
    g_free(rr);
    drbd_peer_put(peer);
}

/*
 * Read and send a chunk (its data, or its checksums with @csum) in a
 * coroutine of its own, once fewer than DRBD_RESYNC_READERS run; false
 * if the connection broke or a reader failed
 */
static bool coroutine_fn drbd_resync_read(DrbdPeer *peer, int64_t offset,
                                          int64_t bytes, bool csum)
{
    BDRVDrbdState *s = peer->s;
    DrbdResyncRead *rr;

    if (!drbd_resync_wait(peer, NULL, 0, DRBD_RESYNC_READERS - 1)) {
        return false;
    }
    rr = g_new(DrbdResyncRead, 1);
    *rr = (DrbdResyncRead) {
        .peer = peer, .offset = offset, .bytes = bytes, .csum = csum,
    };
    qemu_mutex_lock(&s->lock);
    peer->resync_readers++;
    qemu_mutex_unlock(&s->lock);
    drbd_peer_spawn(peer, drbd_resync_read_co, rr);
    return true;
}

/*
 * The first pass of a resync with csums-alg: the digests of every chunk
 * marked now.  Returns false if the connection broke.
 */
static bool coroutine_fn drbd_resync_csums(DrbdPeer *peer,
                                           DrbdResyncPacer *pc)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    int64_t offset = 0;

    while (!qatomic_read(&peer->broken)) {
        int64_t start, count;
        bool found;

        drbd_co_rehome(s);
        if (drbd_disk_detached(qatomic_read(&conn->peer_disk))) {
            /* The target detached: its disk comes back resynced in full */
            return false;
        }
        if (!drbd_resync_pause_point(peer, pc) ||
            !drbd_resync_wait(peer, peer->csum_chunks,
                              DRBD_CSUM_WINDOW - 1, UINT_MAX)) {
            return false;
        }
        qemu_mutex_lock(&s->lock);
        found = hbitmap_next_dirty_area(s->oos, offset, s->size,
                                        DRBD_RESYNC_CHUNK, &start, &count);
        qemu_mutex_unlock(&s->lock);
        if (!found) {
            break;
        }
        if (!drbd_resync_read(peer, start, count, true)) {
            return false;
        }
        offset = start + count;
        drbd_resync_sent_chunk(peer, pc, count);
    }
    /*
     * Every checksum sent, and every answer, so that the second pass
     * sends only what differs
     */
    return drbd_resync_wait(peer, NULL, 0, 0) &&
           drbd_resync_wait(peer, peer->csum_chunks, 0, 0);
}

void coroutine_fn drbd_resync_run(DrbdPeer *peer)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) done = g_byte_array_new();
    DrbdResyncPacer pc;
    int64_t offset = 0;

    qemu_mutex_lock(&s->lock);
    conn->resync_total = hbitmap_count(s->oos);
    conn->resync_done = 0;
    conn->rs_in_flight = 0;
    conn->rs_answered = 0;
    drbd_resync_marks_start_locked(conn);
    ratelimit_set_speed(&conn->resync_limit, conn->resync_rate,
                        100 * SCALE_MS);
    drbd_resync_pacer_init(conn, &pc);
    qemu_mutex_unlock(&s->lock);
    trace_drbd_resync_start(s->bs, conn->resync_total);
    drbd_job_resync_started(s);

    if (drbd_resync_announce(peer) < 0) {
        return;
    }
    if (conn->csums_alg != DRBD_DIGEST_NONE &&
        !drbd_resync_csums(peer, &pc)) {
        return;
    }

    while (!qatomic_read(&peer->broken)) {
        int64_t start, count;
        bool found;

        drbd_co_rehome(s);
        if (drbd_disk_detached(qatomic_read(&conn->peer_disk))) {
            /* The target detached: its disk comes back resynced in full */
            return;
        }
        if (!drbd_resync_pause_point(peer, &pc) ||
            !drbd_resync_wait(peer, peer->resync_chunks,
                              DRBD_RESYNC_WINDOW - 1, UINT_MAX)) {
            return;
        }

        /*
         * Bits are cleared by the acks, so look for the next dirty area
         * past what we already sent; one pass covers the bitmap as it was
         * when the resync started.
         */
        qemu_mutex_lock(&s->lock);
        found = hbitmap_next_dirty_area(s->oos, offset, s->size,
                                        DRBD_RESYNC_CHUNK, &start, &count);
        qemu_mutex_unlock(&s->lock);
        if (!found) {
            break;
        }
        if (!drbd_resync_read(peer, start, count, false)) {
            return;
        }
        offset = start + count;
        drbd_resync_sent_chunk(peer, &pc, count);
    }
    /* RS_DONE goes after the last chunk */
    if (!drbd_resync_wait(peer, NULL, 0, 0)) {
        return;
    }

    drbd_wire_put_empty(done, DRBD_CMD_RS_DONE);
    drbd_send_data_channel(peer, done);
    trace_drbd_resync_sent(s->bs);
}

/*
 * Both nodes are in sync: the meta receiver must not wait for the
 * metadata write (a drained node holds it back), so it goes on its own
 */
static void coroutine_fn drbd_resync_finished_co(void *opaque)
{
    DrbdPeer *peer = opaque;
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;

    drbd_resync_finished_uuids(peer);
    drbd_set_state(s, conn, -1, DRBD_CONN_STATE_CONNECTED, -1, -1,
                   DRBD_DISK_STATE_UP_TO_DATE, "resync finished");
    /* A failure marks the disk failed, which says it all */
    drbd_co_md_sync(s, false);
    drbd_peer_put(peer);
}

/* The peer acked a resync chunk: it is on its disk */
void coroutine_fn drbd_resync_acked(DrbdPeer *peer, uint16_t cmd,
                                    const DrbdBlockAck *ack)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    uint64_t offset = ack->id & ~DRBD_GATE_RESYNC_ID;
    DrbdGate gate = { .resync_chunks = peer->resync_chunks };
    bool finished = false;
    Coroutine *waiter;
    Error *err = NULL;

    qemu_mutex_lock(&s->lock);
    if (drbd_gate_resync_ack(&gate, cmd, ack, &err) < 0) {
        qemu_mutex_unlock(&s->lock);
        drbd_peer_fail_err(peer, NULL, err);
        return;
    }
    g_hash_table_remove(peer->resync_chunks, &offset);
    qatomic_dec(&conn->pe);
    conn->rs_in_flight -= MIN(conn->rs_in_flight, ack->bytes);
    conn->rs_answered += ack->bytes;
    waiter = peer->resync_waiter;
    peer->resync_waiter = NULL;
    if (cmd == DRBD_CMD_WRITE_ACK) {
        drbd_oos_reset_locked(s, ack->offset, ack->bytes);
        conn->resync_done += ack->bytes;
        drbd_pace_marks_note(&conn->resync_marks,
                             qemu_clock_get_ns(QEMU_CLOCK_REALTIME),
                             conn->resync_done);
        finished = hbitmap_count(s->oos) == 0 &&
                   conn->cstate == DRBD_CONN_STATE_SYNC_SOURCE;
    }
    qemu_mutex_unlock(&s->lock);

    if (waiter) {
        aio_co_wake(waiter);
    }
    if (cmd != DRBD_CMD_WRITE_ACK) {
        drbd_peer_fail(peer, "the peer failed to write resync data at %"
                       PRIu64, ack->offset);
    } else if (finished) {
        drbd_peer_spawn(peer, drbd_resync_finished_co, peer);
    }
}

/*
 * The peer compared a chunk's checksums: the blocks it found equal are
 * in sync on both sides now; what differs stays marked for the data pass
 */
int coroutine_fn drbd_resync_csum_reply(DrbdPeer *peer,
                                        const DrbdOvPacket *p,
                                        Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdGate gate = { .csum_chunks = peer->csum_chunks };
    bool finished = false;
    Coroutine *waiter;
    uint64_t equal;

    qemu_mutex_lock(&s->lock);
    if (drbd_gate_csum_reply(&gate, p, errp) < 0) {
        qemu_mutex_unlock(&s->lock);
        return -EINVAL;
    }
    g_hash_table_remove(peer->csum_chunks, &p->offset);
    qatomic_dec(&conn->pe);
    conn->rs_in_flight -= MIN(conn->rs_in_flight, p->bytes);
    conn->rs_answered += p->bytes;
    equal = drbd_oos_reset_equal_locked(s, p->offset, p->bytes,
                                        p->mismatch);
    conn->resync_done += equal;
    conn->same_csum += equal;
    finished = hbitmap_count(s->oos) == 0 &&
               conn->cstate == DRBD_CONN_STATE_SYNC_SOURCE;
    waiter = peer->resync_waiter;
    peer->resync_waiter = NULL;
    qemu_mutex_unlock(&s->lock);

    if (waiter) {
        aio_co_wake(waiter);
    }
    if (finished) {
        drbd_peer_spawn(peer, drbd_resync_finished_co, peer);
    }
    return 0;
}

/* The resync rate with every peer */
void drbd_resync_set_rate(BDRVDrbdState *s, uint64_t rate)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];
        DrbdPeer *peer;

        qemu_mutex_lock(&s->lock);
        conn->resync_rate = rate;
        if (conn->pace.plan_ahead_ns) {
            conn->pace.max_rate = rate;
        }
        peer = drbd_peer_get_locked(conn);
        qemu_mutex_unlock(&s->lock);
        ratelimit_set_speed(&conn->resync_limit, rate, 100 * SCALE_MS);
        if (peer) {
            /* A resync asleep at the old rate goes on at the new one */
            drbd_sleep_wake(s, &peer->resync_sleep, false);
            drbd_peer_put(peer);
        }
    }
}
