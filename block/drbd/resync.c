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
 * The resync runs as the .run of its job ('drbd-resync', job.c), which
 * lives from the first resync of the node's data until the peer is in
 * sync again: when the handshake (or a verify) makes this node the sync
 * source, drbd_resync_start() asks the job to run the resync of that
 * connection, making the job in the main loop if there is none.  The run
 * takes the connection (a reference: its teardown waits for the run),
 * sends the data in the node's home, pausing between chunks where
 * job-pause holds it, and lets the connection go at its end.  Between
 * connections, and while the node is the sync target, it waits in the
 * main loop, woken by the state changes; it ends when the peer is
 * connected and in sync, or when the node stands alone.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block-io.h"
#include "qapi/error.h"
#include "qemu/cutils.h"
#include "qemu/main-loop.h"
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
        found = hbitmap_next_dirty_area(peer->conn->oos, offset, s->size,
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
 * Before each chunk: wait while the user pauses the resync's job
 * (job_pause_point()), while the resync-after node resyncs, and, with the
 * controller, while it holds the resync back.  Follows the node.  Returns
 * false if the connection broke meanwhile, or the job was cancelled.
 */
static bool coroutine_fn drbd_resync_pause_point(DrbdJob *dj, DrbdPeer *peer,
                                                 DrbdResyncPacer *pc)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *c = peer->conn;

    while (!qatomic_read(&peer->broken)) {
        const char *after;
        int64_t wait_ns = 0;

        /* Paused, the job waits in the main loop: back home after */
        job_pause_point(&dj->common);
        drbd_co_rehome(s);
        if (job_is_cancelled(&dj->common)) {
            return false;
        }

        after = drbd_resync_after_busy(s);
        qemu_mutex_lock(&s->lock);
        if (after && after != c->resync_paused_after) {
            trace_drbd_resync_after(s->bs, after);
        }
        c->resync_paused_after = after;
        qemu_mutex_unlock(&s->lock);

        if (after) {
            wait_ns = 100 * SCALE_MS;
        } else if (!pc->dynamic || drbd_resync_paced(c, pc, &wait_ns)) {
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
static bool coroutine_fn drbd_resync_csums(DrbdJob *dj, DrbdPeer *peer,
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
        if (!drbd_resync_pause_point(dj, peer, pc) ||
            !drbd_resync_wait(peer, peer->csum_chunks,
                              DRBD_CSUM_WINDOW - 1, UINT_MAX)) {
            return false;
        }
        qemu_mutex_lock(&s->lock);
        found = hbitmap_next_dirty_area(peer->conn->oos, offset, s->size,
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

/*
 * Whether this node, a secondary, resyncs a secondary peer while another
 * peer is primary.  The handshake turns that down (handshake.c), but a
 * node may have decided on it before its handshake with the primary
 * ended: the primary's writes that reach this node then race the resync
 * to the target, which may end with an older block than the primary
 * wrote.  The primary resyncs each of them instead.
 */
static bool drbd_resync_beside_primary(DrbdPeer *peer)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    bool found;

    qemu_mutex_lock(&s->lock);
    found = s->role != DRBD_ROLE_PRIMARY &&
            conn->peer_role != DRBD_ROLE_PRIMARY &&
            drbd_other_primary_locked(conn) >= 0;
    qemu_mutex_unlock(&s->lock);
    return found;
}

/*
 * The resync of @peer's connection, in the job's run: every block marked
 * now goes to the peer, until the connection breaks or the job is
 * cancelled
 */
static void coroutine_fn drbd_resync_run(DrbdJob *dj, DrbdPeer *peer)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) done = g_byte_array_new();
    DrbdResyncPacer pc;
    int64_t offset = 0;

    drbd_co_rehome(s);
    qemu_mutex_lock(&s->lock);
    ratelimit_set_speed(&conn->resync_limit, conn->resync_rate,
                        100 * SCALE_MS);
    drbd_resync_pacer_init(conn, &pc);
    qemu_mutex_unlock(&s->lock);

    if (drbd_resync_announce(peer) < 0) {
        return;
    }
    if (conn->csums_alg != DRBD_DIGEST_NONE &&
        !drbd_resync_csums(dj, peer, &pc)) {
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
        if (!drbd_resync_pause_point(dj, peer, &pc) ||
            !drbd_resync_wait(peer, peer->resync_chunks,
                              DRBD_RESYNC_WINDOW - 1, UINT_MAX)) {
            return;
        }
        if (drbd_resync_beside_primary(peer)) {
            drbd_peer_fail(peer, "a peer of this node is primary now: it "
                           "resyncs the peer, not this node; connecting "
                           "again");
            return;
        }

        /*
         * Bits are cleared by the acks, so look for the next dirty area
         * past what we already sent; one pass covers the bitmap as it was
         * when the resync started.
         */
        qemu_mutex_lock(&s->lock);
        found = hbitmap_next_dirty_area(peer->conn->oos, offset, s->size,
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

/* A resync waits for the job to run it: that of the connection */
static bool drbd_resync_wanted_locked(DrbdConnection *c)
{
    DrbdPeer *peer = c->peer;

    return peer && peer->resync_wanted && !qatomic_read(&peer->broken);
}

/*
 * The job's look at the node, under s->lock, in the main loop: 1 with
 * *@peer (and a reference to it) if it is to run a resync now; 1 without,
 * if it waits; 0 if the peer is in sync: the job is over; or < 0 with
 * @errp if the node stands alone
 */
static int drbd_resync_job_look_locked(DrbdJob *dj, DrbdPeer **peer,
                                       Error **errp)
{
    BDRVDrbdState *s = dj->s;
    DrbdConnection *c = dj->conn;

    if (drbd_resync_wanted_locked(c)) {
        *peer = drbd_peer_get_locked(c);
        (*peer)->resync_wanted = false;
        dj->peer = *peer;
        job_progress_set_remaining(&dj->common, hbitmap_count(c->oos));
    } else if (c->cstate == DRBD_CONN_STATE_CONNECTED &&
               !hbitmap_count(c->oos)) {
        job_progress_set_remaining(&dj->common, 0);
        return 0;
    } else if (c->cstate == DRBD_CONN_STATE_STANDALONE) {
        error_setg(errp, "the node stands alone (%s): the resync goes on "
                   "after drbd-connect", s->last_error ?: "disconnected");
        return -EIO;
    }
    return 1;
}

/* job-cancel: the node disconnects and stands alone until drbd-connect */
static void drbd_resync_cancelled(DrbdConnection *c)
{
    BDRVDrbdState *s = c->s;
    DrbdPeer *peer;

    qemu_mutex_lock(&s->lock);
    c->connect_held = true;
    c->held_reason = "resync cancelled: waiting for drbd-connect";
    peer = drbd_peer_get_locked(c);
    qemu_mutex_unlock(&s->lock);
    if (peer) {
        drbd_peer_fail(peer, "the resync was cancelled (job-cancel)");
        drbd_peer_put(peer);
    }
}

static int coroutine_fn drbd_resync_job_run(Job *job, Error **errp)
{
    DrbdJob *dj = container_of(job, DrbdJob, common);

    for (;;) {
        BDRVDrbdState *s;
        DrbdPeer *peer = NULL;
        int ret;

        /* The job looks, pauses and waits in the main loop (job.c) */
        aio_co_reschedule_self(qemu_get_aio_context());
        job_pause_point(job);
        s = dj->s;
        if (!s) {
            error_setg(errp, "the drbd node was closed");
            return -EIO;
        }
        if (job_is_cancelled(job)) {
            drbd_resync_cancelled(dj->conn);
            return -ECANCELED;
        }

        qemu_mutex_lock(&s->lock);
        ret = drbd_resync_job_look_locked(dj, &peer, errp);
        qemu_mutex_unlock(&s->lock);
        if (ret <= 0) {
            return ret;
        }
        if (!peer) {
            /* Woken by a state change (drbd_jobs_wake_locked()) */
            job_yield(job);
            continue;
        }

        drbd_resync_run(dj, peer);
        qemu_mutex_lock(&s->lock);
        dj->peer = NULL;
        qemu_mutex_unlock(&s->lock);
        /*
         * The node may close once its connection is gone: the next look
         * at it is from the main loop, where its close is seen
         */
        drbd_peer_put(peer);
    }
}

/*
 * The job was cancelled while its run resyncs (main loop): the node
 * disconnects now, as the run would once it looks, so that a resync
 * asleep at its rate, or waiting for acks, stops at once
 */
static void drbd_resync_cancel_bh(void *opaque)
{
    DrbdJob *dj = opaque;
    BDRVDrbdState *s = dj->s;
    bool working = false;

    if (s) {
        qemu_mutex_lock(&s->lock);
        working = dj->peer != NULL;
        qemu_mutex_unlock(&s->lock);
    }
    if (working) {
        drbd_resync_cancelled(dj->conn);
    }
    WITH_JOB_LOCK_GUARD() {
        job_unref_locked(&dj->common);
    }
}

static bool drbd_resync_job_cancel(Job *job, bool force)
{
    /* Once the job is marked cancelled, which follows this call */
    WITH_JOB_LOCK_GUARD() {
        job_ref_locked(job);
    }
    aio_bh_schedule_oneshot(qemu_get_aio_context(), drbd_resync_cancel_bh,
                            container_of(job, DrbdJob, common));
    return true;    /* no soft cancel: the job ends */
}

static void drbd_resync_job_make(DrbdConnection *c);

/*
 * The job is over (main loop): a resync asked for after its run's last
 * look gets a new job, once this one is gone with its id
 */
static void drbd_resync_job_clean(Job *job)
{
    DrbdJob *dj = container_of(job, DrbdJob, common);
    BDRVDrbdState *s = dj->s;
    DrbdConnection *c;
    bool again;

    if (!s) {
        return;
    }
    c = dj->conn;
    qemu_mutex_lock(&s->lock);
    if (c->resync_job == dj) {
        c->resync_job = NULL;
    }
    again = drbd_resync_wanted_locked(c);
    qemu_mutex_unlock(&s->lock);
    if (again) {
        drbd_job_defer(c, drbd_resync_job_make);
    }
}

static const JobDriver drbd_resync_job_driver = {
    .instance_size  = sizeof(DrbdJob),
    .job_type       = JOB_TYPE_DRBD_RESYNC,
    .run            = drbd_resync_job_run,
    .pause          = drbd_job_pause,
    .resume         = drbd_job_resume,
    .cancel         = drbd_resync_job_cancel,
    .clean          = drbd_resync_job_clean,
};

/* Main loop: the job for a resync that waits for one */
static void drbd_resync_job_make(DrbdConnection *c)
{
    BDRVDrbdState *s = c->s;
    DrbdJob *dj;
    bool make;

    qemu_mutex_lock(&s->lock);
    make = !c->resync_job && !qatomic_read(&s->closing) &&
           drbd_resync_wanted_locked(c);
    qemu_mutex_unlock(&s->lock);
    if (!make) {
        return;
    }
    dj = drbd_job_new(c, &drbd_resync_job_driver);
    qemu_mutex_lock(&s->lock);
    c->resync_job = dj;
    qemu_mutex_unlock(&s->lock);
    job_start(&dj->common);
}

void drbd_resync_start(DrbdPeer *peer)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *c = peer->conn;
    uint64_t total;
    bool make;

    qemu_mutex_lock(&s->lock);
    total = hbitmap_count(c->oos);
    c->resync_total = total;
    c->resync_done = 0;
    c->rs_in_flight = 0;
    c->rs_answered = 0;
    drbd_resync_marks_start_locked(c);
    peer->resync_wanted = true;
    /* Its job takes it; or, if it just ended, its clean makes the next */
    make = !c->resync_job;
    drbd_jobs_wake_locked(s);
    qemu_mutex_unlock(&s->lock);
    trace_drbd_resync_start(s->bs, total);
    if (make) {
        drbd_job_defer(c, drbd_resync_job_make);
    }
}

/*
 * How often a node ahead of a peer looks whether to resync it, and how
 * long its guest must have written nothing the peer was not sent: as
 * DRBD's timer, a second, so that the resync, which sends the guest's
 * writes again, follows the burst rather than slowing it down
 */
#define DRBD_AHEAD_POLL_NS      (100 * SCALE_MS)
#define DRBD_AHEAD_QUIET_NS     NANOSECONDS_PER_SECOND

/*
 * While the node is ahead of @peer (on-congestion pull-ahead): once
 * every write it sent is on the peer (the link has drained) and the
 * guest has been quiet, a resync brings the peer the writes it was not
 * sent.  A coroutine of the peer (drbd_peer_spawn()), from the write
 * that went ahead.
 */
void coroutine_fn drbd_resync_ahead_co(void *opaque)
{
    DrbdPeer *peer = opaque;
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    uint64_t oos = 0;
    bool start = false, primary = false;

    for (;;) {
        drbd_co_sleep(s, &peer->ahead_sleep, DRBD_AHEAD_POLL_NS);
        drbd_co_rehome(s);
        qemu_mutex_lock(&s->lock);
        if (!conn->ahead || qatomic_read(&peer->broken)) {
            qemu_mutex_unlock(&s->lock);
            break;
        }
        if (!conn->ap_bytes &&
            qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - conn->ahead_write_ns >=
            DRBD_AHEAD_QUIET_NS) {
            conn->ahead = false;
            oos = hbitmap_count(conn->oos);
            primary = s->role == DRBD_ROLE_PRIMARY;
            start = true;
        }
        qemu_mutex_unlock(&s->lock);
        if (start) {
            break;
        }
    }
    if (start && !primary) {
        /*
         * Demoted meanwhile: a secondary is no sync source of a peer in
         * sync; the handshake of a new connection resyncs it
         */
        drbd_peer_fail(peer, "demoted while ahead of the peer: connecting "
                       "again");
    } else if (start) {
        trace_drbd_ahead_drained(s->bs, conn->peer_node_id, oos);
        drbd_set_state(s, conn, -1, DRBD_CONN_STATE_SYNC_SOURCE, -1, -1,
                       DRBD_DISK_STATE_INCONSISTENT,
                       "the link drained: resync of the writes the peer "
                       "was not sent");
        drbd_resync_start(peer);
    }
    drbd_peer_put(peer);
}

/* Resync bytes in sync now: the job's progress, out of what is left */
static void drbd_resync_progress_locked(DrbdConnection *c, uint64_t bytes)
{
    DrbdJob *dj = c->resync_job;

    if (dj) {
        job_progress_update(&dj->common, bytes);
        job_progress_set_remaining(&dj->common, hbitmap_count(c->oos));
    }
}

/*
 * Both nodes are in sync: the meta receiver must not wait for the
 * metadata write (a drained node holds it back), so it goes on its own
 */
static void coroutine_fn drbd_resync_finished_co(void *opaque)
{
    DrbdPeer *peer = opaque;
    BDRVDrbdState *s = peer->s;

    drbd_resync_finished_uuids(peer);
    drbd_set_state(s, peer->conn, -1, DRBD_CONN_STATE_CONNECTED, -1, -1,
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
        drbd_oos_reset_locked(conn, ack->offset, ack->bytes);
        conn->resync_done += ack->bytes;
        drbd_pace_marks_note(&conn->resync_marks,
                             qemu_clock_get_ns(QEMU_CLOCK_REALTIME),
                             conn->resync_done);
        drbd_resync_progress_locked(conn, ack->bytes);
        finished = hbitmap_count(conn->oos) == 0 &&
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
    equal = drbd_oos_reset_equal_locked(conn, p->offset, p->bytes,
                                        p->mismatch);
    conn->resync_done += equal;
    conn->same_csum += equal;
    drbd_resync_progress_locked(conn, equal);
    finished = hbitmap_count(conn->oos) == 0 &&
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
