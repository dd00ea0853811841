/*
 * DRBD-style replication: online verify
 *
 * The verify source (the node drbd-verify runs on) walks its range in
 * requests of up to 64 blocks of 4 KiB and keeps a window of them in
 * flight; both nodes read each range, and the blocks whose verify-alg
 * digests differ are marked out of sync in the source's bitmap.
 *
 * The guest writes meanwhile, so the two reads of a range must see the
 * same writes to it.  One node of the pair is the anchor: the primary,
 * or the source when neither is primary.  The anchor reads a range while
 * it holds it in its active requests (no guest write to it in flight,
 * none starting), and sends its digests on the data channel before it
 * lets the next write to it go: that packet sits in the data stream
 * after every write the anchor's read saw and before every write it did
 * not.  The other node reads the range when that packet comes out of the
 * stream, in the order its receiver applies writes (peer->apply_reqs),
 * so it sees exactly the same writes.
 *
 *   anchor is the source   OV_REQUEST carries its digests; the target
 *                          compares in apply order, answers a RESULT
 *   anchor is the target   OV_REQUEST asks; the primary target answers
 *                          with its DIGESTS; the source compares them in
 *                          apply order
 *
 * A node that cannot answer as asked (its role changed, a resync runs)
 * answers SKIPPED, and the verify stops with the reason.
 *
 * The verify is a QEMU job ('drbd-verify', job.c), and its .run the
 * source's walk: the run holds a reference to the peer (the connection's
 * teardown waits for it), works in the node's AioContext, follows the
 * node when it moves, and calls job_pause_point() between two requests:
 * job-pause holds the walk there (the requests in flight are answered),
 * job-cancel stops it as a failure would.  The coroutines that read for
 * one request each are the peer's (drbd_peer_spawn()), and the receivers
 * call in here.  DRBD_VERIFY_FINISHED goes when the job ends, in the main
 * loop, so that a drbd-verify sent after it finds the job's id free.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block-io.h"
#include "qapi/error.h"
#include "qapi/qapi-events-drbd.h"
#include "qemu/error-report.h"
#include "trace.h"

#include "drbd-int.h"
#include "gate.h"

/* Requests the source keeps in flight */
#define DRBD_OV_WINDOW          16
/* Requests a target reads for at once before it reads no more packets */
#define DRBD_OV_SERVE_MAX       (2 * DRBD_OV_WINDOW)
/* Differing ranges the finishing event lists */
#define DRBD_OV_RANGES_MAX      16

/* A request's range fits in a chunk buffer (drbd_chunk_buf_get()) */
QEMU_BUILD_BUG_ON(DRBD_OV_MAX_BYTES > DRBD_RESYNC_CHUNK);

/* The anchor of a request is the primary, or else the source */
static bool drbd_verify_source_anchors(DrbdConnection *conn)
{
    return conn->peer_role != DRBD_ROLE_PRIMARY;
}

/*
 * Wake the coroutine in *@waiter (the verify, waiting for a slot in its
 * window; the data receiver, for a target's slot)
 */
static void drbd_verify_wake(DrbdPeer *peer, Coroutine **waiter)
{
    BDRVDrbdState *s = peer->s;
    Coroutine *co;

    qemu_mutex_lock(&s->lock);
    co = *waiter;
    *waiter = NULL;
    qemu_mutex_unlock(&s->lock);
    if (co) {
        aio_co_wake(co);
    }
}

/*
 * The source learnt the outcome of one request: @mismatch, or that it
 * failed (@error, which the verify then stops with)
 */
static void drbd_verify_account(DrbdPeer *peer, uint64_t offset,
                                uint32_t bytes, uint64_t mismatch,
                                const char *error)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdVerify *v;

    qemu_mutex_lock(&s->lock);
    v = conn->verify;
    assert(v && v->inflight > 0);
    v->inflight--;
    if (error) {
        if (!v->error) {
            v->error = g_strdup(error);
        }
    } else {
        uint32_t i;

        v->done += bytes;
        job_progress_update(&v->job.common, bytes);
        drbd_pace_marks_note(&v->marks,
                             qemu_clock_get_ns(QEMU_CLOCK_REALTIME), v->done);
        for (i = 0; i < drbd_ov_blocks(bytes); i++) {
            uint64_t off = offset + (uint64_t)i * DRBD_OV_BLOCK;
            uint64_t len = MIN(DRBD_OV_BLOCK, offset + bytes - off);

            if (!(mismatch & (1ULL << i))) {
                continue;
            }
            v->out_of_sync += len;
            hbitmap_set(v->found, off - v->start, len);
            drbd_oos_set_locked(conn, off, len);
        }
    }
    qemu_mutex_unlock(&s->lock);
    if (mismatch) {
        trace_drbd_verify_mismatch(s->bs, offset, bytes, mismatch);
    }
    drbd_verify_wake(peer, &peer->ov_waiter);
}

/*
 * A range compared in the order the receiver applies writes: as a
 * target, answer with the result (@opaque non-NULL); as the source,
 * account for it
 */
static void coroutine_fn drbd_verify_compared(DrbdPeer *peer,
                                              const DrbdOvPacket *p, int ret,
                                              uint64_t mismatch, Error *err,
                                              void *opaque)
{
    BDRVDrbdState *s = peer->s;
    bool reply = opaque;

    if (reply) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        DrbdOvPacket r = {
            .offset = p->offset, .id = p->id, .bytes = p->bytes,
            .flags = ret < 0 ? DRBD_OV_SKIPPED : DRBD_OV_RESULT,
            .mismatch = mismatch,
        };

        if (ret < 0) {
            warn_report("drbd node '%s': verify: %s", drbd_name(s),
                        error_get_pretty(err));
        }
        drbd_wire_put_ov(pkt, DRBD_CMD_OV_REPLY, &r);
        drbd_send_data_channel(peer, pkt);
        qemu_mutex_lock(&s->lock);
        peer->ov_serving--;
        qemu_mutex_unlock(&s->lock);
        drbd_verify_wake(peer, &peer->ov_serve_waiter);
    } else {
        drbd_verify_account(peer, p->offset, p->bytes, mismatch,
                            ret < 0 ? error_get_pretty(err) : NULL);
    }
    error_free(err);
}

static void coroutine_fn drbd_verify_in_order(DrbdPeer *peer,
                                              const DrbdOvPacket *p,
                                              bool reply)
{
    drbd_compare_in_order(peer, peer->conn->verify_alg, p,
                          drbd_verify_compared, reply ? peer : NULL);
}

/*
 * The anchor's read: hold the range against guest writes, read it, and
 * send @out with the digests before the next write to it may go
 */
static int coroutine_fn drbd_verify_anchor(DrbdPeer *peer, uint16_t cmd,
                                           DrbdOvPacket *out, Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    size_t dsize = drbd_digest_size(conn->verify_alg);
    g_autofree uint8_t *digests = g_malloc(DRBD_OV_MAX_BLOCKS * dsize);
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    BlockReq req;
    int ret;

    drbd_co_hold_range(s, &req, out->offset, out->bytes);

    ret = drbd_read_digests(s, conn->verify_alg, out->offset, out->bytes,
                            digests, errp);
    if (ret == 0) {
        out->flags |= DRBD_OV_DIGESTS;
        out->digests = digests;
        out->digest_size = dsize;
    } else if (cmd == DRBD_CMD_OV_REPLY) {
        warn_report("drbd node '%s': verify: %s", drbd_name(s),
                    error_get_pretty(*errp));
        out->flags = DRBD_OV_SKIPPED;
    }
    if (ret == 0 || cmd == DRBD_CMD_OV_REPLY) {
        drbd_wire_put_ov(pkt, cmd, out);
        if (drbd_send_data_channel(peer, pkt) < 0 && ret == 0) {
            error_setg(errp, "the connection was lost");
            ret = -EPIPE;
        }
    }

    drbd_co_release_range(s, &req);
    return ret;
}

/* A primary target answers a request with its digests */
typedef struct DrbdOvServe {
    DrbdPeer *peer;
    DrbdOvPacket p;
} DrbdOvServe;

static void coroutine_fn drbd_verify_serve_co(void *opaque)
{
    DrbdOvServe *sv = opaque;
    DrbdPeer *peer = sv->peer;
    BDRVDrbdState *s = peer->s;
    DrbdOvPacket r = {
        .offset = sv->p.offset, .id = sv->p.id, .bytes = sv->p.bytes,
    };
    Error *err = NULL;

    drbd_verify_anchor(peer, DRBD_CMD_OV_REPLY, &r, &err);
    error_free(err);
    qemu_mutex_lock(&s->lock);
    peer->ov_serving--;
    qemu_mutex_unlock(&s->lock);
    drbd_verify_wake(peer, &peer->ov_serve_waiter);
    g_free(sv);
    drbd_peer_put(peer);
}

int coroutine_fn drbd_verify_request(DrbdPeer *peer, const DrbdOvPacket *p,
                                     Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdGate gate = { .disk_size = s->size };
    const char *skip = NULL;
    bool primary;

    if (drbd_gate_ov_request(&gate, p, errp) < 0) {
        return -EINVAL;
    }

    /* Not too many at once: a peer must not make us read without end */
    qemu_mutex_lock(&s->lock);
    while (peer->ov_serving >= DRBD_OV_SERVE_MAX &&
           !qatomic_read(&peer->broken)) {
        peer->ov_serve_waiter = qemu_coroutine_self();
        qemu_mutex_unlock(&s->lock);
        qemu_coroutine_yield();
        qemu_mutex_lock(&s->lock);
    }
    primary = s->role == DRBD_ROLE_PRIMARY;
    if (s->detached) {
        skip = "this node has no disk (detached)";
    } else if (conn->cstate != DRBD_CONN_STATE_CONNECTED) {
        skip = "a resync runs";
    } else if ((p->flags & DRBD_OV_DIGESTS) && primary) {
        skip = "this node is primary: it must read first";
    } else if (!(p->flags & DRBD_OV_DIGESTS) && !primary) {
        skip = "this node is not primary: the source must read first";
    }
    if (!skip) {
        peer->ov_serving++;
    }
    qemu_mutex_unlock(&s->lock);
    trace_drbd_verify_request(s->bs, p->offset, p->bytes,
                              !!(p->flags & DRBD_OV_DIGESTS), skip ?: "");

    if (skip) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        DrbdOvPacket r = {
            .offset = p->offset, .id = p->id, .bytes = p->bytes,
            .flags = DRBD_OV_SKIPPED,
        };

        warn_report("drbd node '%s': verify request at %" PRIu64
                    " skipped: %s", drbd_name(s), p->offset, skip);
        drbd_wire_put_ov(pkt, DRBD_CMD_OV_REPLY, &r);
        return drbd_send_data_channel(peer, pkt) < 0 ? -EPIPE : 0;
    }
    if (p->flags & DRBD_OV_DIGESTS) {
        drbd_verify_in_order(peer, p, true);
    } else {
        DrbdOvServe *sv = g_new0(DrbdOvServe, 1);

        sv->peer = peer;
        sv->p = *p;
        drbd_peer_spawn(peer, drbd_verify_serve_co, sv);
    }
    return 0;
}

int coroutine_fn drbd_verify_reply(DrbdPeer *peer, const DrbdOvPacket *p,
                                   Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdGate gate = { .ov_pending = peer->ov_pending };
    int ret;

    qemu_mutex_lock(&s->lock);
    ret = drbd_gate_ov_reply(&gate, p, errp);
    if (ret == 0) {
        g_hash_table_remove(peer->ov_pending, &p->id);
    }
    qemu_mutex_unlock(&s->lock);
    if (ret < 0) {
        return ret;
    }
    trace_drbd_verify_reply(s->bs, p->offset, p->bytes, p->flags);

    if (p->flags & DRBD_OV_SKIPPED) {
        drbd_verify_account(peer, p->offset, p->bytes, 0,
                            "the peer skipped a request (its role or "
                            "connection state changed; see its log)");
    } else if (p->flags & DRBD_OV_RESULT) {
        drbd_verify_account(peer, p->offset, p->bytes, p->mismatch, NULL);
    } else {
        drbd_verify_in_order(peer, p, false);
    }
    return 0;
}

/* One request of the verify source */
typedef struct DrbdOvSend {
    DrbdPeer *peer;
    DrbdOvPacket out;
    bool anchor;                /* this node reads first */
} DrbdOvSend;

/*
 * Put a request in the window (and in the table: the reply may come
 * before its send returns)
 */
static void drbd_verify_reserve(DrbdOvSend *os)
{
    BDRVDrbdState *s = os->peer->s;
    DrbdConnection *conn = os->peer->conn;
    DrbdGateOv *pending = g_new(DrbdGateOv, 1);

    *pending = (DrbdGateOv) {
        .offset = os->out.offset, .bytes = os->out.bytes,
        .digests = os->anchor,
    };
    qemu_mutex_lock(&s->lock);
    os->out.id = ++os->peer->ov_next_id;
    g_hash_table_insert(os->peer->ov_pending,
                        g_memdup2(&os->out.id, sizeof(os->out.id)), pending);
    conn->verify->inflight++;
    qemu_mutex_unlock(&s->lock);
}

/*
 * Send a reserved request, reading first where this node is the anchor.
 * A failure stops the verify: it becomes v->error (unless there is one),
 * and the request leaves the window.
 */
static void coroutine_fn drbd_verify_send(DrbdOvSend *os)
{
    DrbdPeer *peer = os->peer;
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    Error *err = NULL;
    int ret;

    if (os->anchor) {
        ret = drbd_verify_anchor(peer, DRBD_CMD_OV_REQUEST, &os->out, &err);
    } else {
        g_autoptr(GByteArray) pkt = g_byte_array_new();

        drbd_wire_put_ov(pkt, DRBD_CMD_OV_REQUEST, &os->out);
        ret = drbd_send_data_channel(peer, pkt);
        if (ret < 0) {
            error_setg(&err, "the connection was lost");
        }
    }
    if (ret < 0) {
        DrbdVerify *v;

        qemu_mutex_lock(&s->lock);
        v = conn->verify;
        /* A lost connection may have counted it out already */
        if (g_hash_table_remove(peer->ov_pending, &os->out.id)) {
            v->inflight--;
        }
        if (!v->error) {
            v->error = g_strdup(error_get_pretty(err));
        }
        qemu_mutex_unlock(&s->lock);
        error_free(err);
        drbd_verify_wake(peer, &peer->ov_waiter);
    }
}

/* An anchor's request, read side by side with the others of the window */
static void coroutine_fn drbd_verify_send_co(void *opaque)
{
    DrbdOvSend *os = opaque;
    DrbdPeer *peer = os->peer;
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;

    drbd_verify_send(os);
    g_free(os);
    qemu_mutex_lock(&s->lock);
    conn->verify->sending--;
    qemu_mutex_unlock(&s->lock);
    drbd_verify_wake(peer, &peer->ov_waiter);
    drbd_peer_put(peer);
}

/* The first differing ranges, for the event */
static DrbdRangeList *drbd_verify_ranges(DrbdVerify *v)
{
    DrbdRangeList *head = NULL, **tail = &head;
    int64_t start = 0, count;
    int n = 0;

    while (n < DRBD_OV_RANGES_MAX &&
           hbitmap_next_dirty_area(v->found, start, v->end - v->start,
                                   INT64_MAX, &start, &count)) {
        DrbdRange *r = g_new(DrbdRange, 1);

        r->offset = v->start + start;
        r->length = count;
        QAPI_LIST_APPEND(tail, r);
        start += count;
        n++;
    }
    return head;
}

/*
 * Resync what was found: a primary sends it now; a secondary reconnects,
 * and the handshake gives its marked blocks to the primary, which sends
 * them.  Returns whether a resync was started.
 */
static bool drbd_verify_start_resync(DrbdPeer *peer, uint64_t bytes)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    bool primary, connected;

    qemu_mutex_lock(&s->lock);
    primary = s->role == DRBD_ROLE_PRIMARY;
    connected = !qatomic_read(&peer->broken) &&
                conn->cstate == DRBD_CONN_STATE_CONNECTED;
    qemu_mutex_unlock(&s->lock);
    if (!connected) {
        return false;
    }
    if (primary) {
        drbd_set_state(s, conn, -1, DRBD_CONN_STATE_SYNC_SOURCE, -1, -1,
                       DRBD_DISK_STATE_INCONSISTENT,
                       "verify found out-of-sync blocks");
        drbd_resync_start(peer);
    } else {
        drbd_peer_fail(peer, "verify found %" PRIu64 " bytes out of sync: "
                       "reconnecting, so that the primary resyncs them",
                       bytes);
    }
    return true;
}

static int coroutine_fn drbd_verify_run(Job *job, Error **errp)
{
    DrbdVerify *v = container_of(job, DrbdVerify, job.common);
    DrbdPeer *peer = v->job.peer;
    BDRVDrbdState *s = peer->s;
    DrbdConnection *c = peer->conn;

    while (v->next < v->end) {
        uint32_t bytes = MIN(DRBD_OV_MAX_BYTES, v->end - v->next);
        DrbdOvSend *os;
        bool anchor, cancelled;

        /* Paused by the user, the job waits in the main loop (job.c) */
        job_pause_point(job);
        cancelled = job_is_cancelled(job);
        drbd_co_rehome(s);
        qemu_mutex_lock(&s->lock);
        while (v->inflight >= DRBD_OV_WINDOW && !qatomic_read(&peer->broken) &&
               !v->error) {
            peer->ov_waiter = qemu_coroutine_self();
            qemu_mutex_unlock(&s->lock);
            qemu_coroutine_yield();
            /* Woken by an answer, or by a move (drbd_peer_kick()) */
            drbd_co_rehome(s);
            qemu_mutex_lock(&s->lock);
        }
        if (qatomic_read(&peer->broken) && !v->error) {
            v->error = g_strdup_printf("the connection was lost: %s",
                                       peer->broken_reason);
        } else if (cancelled && !v->error) {
            v->error = g_strdup("the verify was cancelled");
        } else if (!v->error && (s->role != v->role ||
                                 c->peer_role != v->peer_role)) {
            v->error = g_strdup("the roles changed during the verify: run "
                                "it again");
        }
        anchor = drbd_verify_source_anchors(c);
        qemu_mutex_unlock(&s->lock);
        if (v->error) {
            break;
        }

        os = g_new(DrbdOvSend, 1);
        *os = (DrbdOvSend) {
            .peer = peer, .anchor = anchor,
            .out = { .offset = v->next, .bytes = bytes },
        };
        drbd_verify_reserve(os);
        if (anchor) {
            /*
             * Its reads run side by side, each holding its own range
             * against guest writes until its digests are sent
             */
            qemu_mutex_lock(&s->lock);
            v->sending++;
            qemu_mutex_unlock(&s->lock);
            drbd_peer_spawn(peer, drbd_verify_send_co, os);
        } else {
            drbd_verify_send(os);
            g_free(os);
        }
        v->next += bytes;
    }

    /* The answers to what is in flight */
    qemu_mutex_lock(&s->lock);
    while ((v->inflight > 0 || v->sending > 0) &&
           !qatomic_read(&peer->broken)) {
        peer->ov_waiter = qemu_coroutine_self();
        qemu_mutex_unlock(&s->lock);
        qemu_coroutine_yield();
        drbd_co_rehome(s);
        qemu_mutex_lock(&s->lock);
    }
    if (v->inflight > 0) {
        /*
         * The connection broke: no answer comes to what is in the table;
         * the in-order reads of answers that came run on, and count
         * themselves out
         */
        v->inflight -= g_hash_table_size(peer->ov_pending);
        g_hash_table_remove_all(peer->ov_pending);
        if (!v->error) {
            v->error = g_strdup_printf("the connection was lost: %s",
                                       peer->broken_reason);
        }
    }
    while (v->inflight > 0 || v->sending > 0) {
        qemu_mutex_unlock(&s->lock);
        aio_co_schedule(qemu_get_current_aio_context(),
                        qemu_coroutine_self());
        qemu_coroutine_yield();
        qemu_mutex_lock(&s->lock);
    }
    qemu_mutex_unlock(&s->lock);

    if (v->out_of_sync) {
        /* The marks are the bitmap's: on disk like any other */
        drbd_co_md_sync(s, false);
        error_report("drbd node '%s': verify found %" PRIu64 " bytes out "
                     "of sync in [%" PRIu64 ", %" PRIu64 ")", drbd_name(s),
                     v->out_of_sync, v->start, v->end);
        if (v->resync && !v->error) {
            v->resynced = drbd_verify_start_resync(peer, v->out_of_sync);
        }
    }
    trace_drbd_verify_done(s->bs, v->done, v->out_of_sync, v->error ?: "");

    qemu_mutex_lock(&s->lock);
    v->job.peer = NULL;
    qemu_mutex_unlock(&s->lock);
    /* The node may close from here on: see drbd_job_detach() */
    drbd_peer_put(peer);

    if (job_is_cancelled(job)) {
        return -ECANCELED;
    }
    if (v->error) {
        error_setg(errp, "%s", v->error);
        return -EIO;
    }
    return 0;
}

/*
 * The job ends (main loop): the verify is gone from query-drbd, a new
 * one may start, and its event goes.  The job's id is free before the
 * main loop takes the next command.
 */
static void drbd_verify_job_clean(Job *job)
{
    DrbdVerify *v = container_of(job, DrbdVerify, job.common);
    BDRVDrbdState *s = v->job.s;
    DrbdRangeList *ranges;

    if (s) {
        DrbdConnection *c = v->job.conn;

        qemu_mutex_lock(&s->lock);
        assert(c->verify == v);
        c->verify = NULL;
        qemu_mutex_unlock(&s->lock);
    }
    ranges = drbd_verify_ranges(v);
    qapi_event_send_drbd_verify_finished(v->node_name, v->start,
                                         v->end - v->start, v->done,
                                         v->out_of_sync, ranges, v->resynced,
                                         v->error);
    qapi_free_DrbdRangeList(ranges);
}

static void drbd_verify_job_free(Job *job)
{
    DrbdVerify *v = container_of(job, DrbdVerify, job.common);

    hbitmap_free(v->found);
    g_free(v->error);
    g_free(v->node_name);
}

static const JobDriver drbd_verify_job_driver = {
    .instance_size  = sizeof(DrbdVerify),
    .job_type       = JOB_TYPE_DRBD_VERIFY,
    .run            = drbd_verify_run,
    .pause          = drbd_job_pause,
    .resume         = drbd_job_resume,
    .clean          = drbd_verify_job_clean,
    .free           = drbd_verify_job_free,
};

/*
 * The peer a verify runs with: @peer_node_id's, or where that is -1 the
 * first connected one, or else the first
 */
static DrbdConnection *drbd_verify_conn(BDRVDrbdState *s, int peer_node_id,
                                        Error **errp)
{
    DrbdConnection *c = drbd_conn(s);
    unsigned i;

    qemu_mutex_lock(&s->lock);
    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *ci = s->conns[i];

        if (peer_node_id >= 0 ? ci->peer_node_id == peer_node_id :
            ci->cstate == DRBD_CONN_STATE_CONNECTED) {
            c = ci;
            break;
        }
    }
    qemu_mutex_unlock(&s->lock);
    if (peer_node_id >= 0 && i == s->nr_conns) {
        error_setg(errp, "drbd node '%s' has no peer node %d",
                   drbd_name(s), peer_node_id);
        return NULL;
    }
    return c;
}

int drbd_verify_start(BDRVDrbdState *s, bool has_start, uint64_t start,
                      bool has_length, uint64_t length, bool resync,
                      int peer_node_id, Error **errp)
{
    DrbdConnection *c;
    DrbdRole role, peer_role;
    DrbdPeer *peer;
    DrbdVerify *v;

    ERRP_GUARD();
    GLOBAL_STATE_CODE();
    c = drbd_verify_conn(s, peer_node_id, errp);
    if (!c) {
        return -EINVAL;
    }
    if (c->verify_alg == DRBD_DIGEST_NONE) {
        error_setg(errp, "drbd node '%s' has no verify-alg: set one, the "
                   "same on both nodes", drbd_name(s));
        return -EINVAL;
    }
    start = has_start ? start : 0;
    if (start > s->size || !QEMU_IS_ALIGNED(start, DRBD_OV_BLOCK)) {
        error_setg(errp, "start %" PRIu64 " must be a multiple of %d and "
                   "within the disk (%" PRIu64 " bytes)", start,
                   DRBD_OV_BLOCK, s->size);
        return -EINVAL;
    }
    length = has_length ? length : s->size - start;
    if (!length || length > s->size - start ||
        (!QEMU_IS_ALIGNED(length, DRBD_OV_BLOCK) &&
         start + length != s->size)) {
        error_setg(errp, "length %" PRIu64 " must be positive, a multiple "
                   "of %d or up to the end of the disk, and within the "
                   "disk (%" PRIu64 " bytes from %" PRIu64 ")", length,
                   DRBD_OV_BLOCK, s->size - start, start);
        return -EINVAL;
    }

    qemu_mutex_lock(&s->lock);
    peer = drbd_peer_get_locked(c);
    role = s->role;
    peer_role = c->peer_role;
    if (!peer || c->cstate != DRBD_CONN_STATE_CONNECTED) {
        error_setg(errp, "drbd node '%s' is %s: verify needs a connected "
                   "peer and no resync running", drbd_name(s),
                   DrbdConnState_str(c->cstate));
    } else if (s->detached || drbd_disk_detached(c->peer_disk)) {
        error_setg(errp, "drbd node '%s': verify compares two disks, and "
                   "%s none", drbd_name(s),
                   s->detached ? "this node has" : "its peer has");
    } else if (c->verify) {
        error_setg(errp, "drbd node '%s' runs a verify already",
                   drbd_name(s));
    } else if (resync && role != DRBD_ROLE_PRIMARY &&
               peer_role != DRBD_ROLE_PRIMARY) {
        error_setg(errp, "drbd node '%s': resync after verify needs a "
                   "primary to resync from; promote one, or verify without "
                   "resync", drbd_name(s));
    }
    qemu_mutex_unlock(&s->lock);
    if (*errp) {
        if (peer) {
            drbd_peer_put(peer);
        }
        return -EINVAL;
    }

    /*
     * The verify is a job.  c->verify is the main loop's to set and clear:
     * none can start meanwhile
     */
    v = container_of(drbd_job_new(c, &drbd_verify_job_driver), DrbdVerify,
                     job);
    v->start = start;
    v->next = start;
    v->end = start + length;
    v->resync = resync;
    v->role = role;
    v->peer_role = peer_role;
    v->found = hbitmap_alloc(length, DRBD_BM_GRANULARITY);
    v->node_name = g_strdup(bdrv_get_node_name(s->bs));
    drbd_pace_marks_start(&v->marks, qemu_clock_get_ns(QEMU_CLOCK_REALTIME),
                          0);
    job_progress_set_remaining(&v->job.common, length);
    qemu_mutex_lock(&s->lock);
    v->job.peer = peer;             /* the run's reference from here on */
    c->verify = v;
    qemu_mutex_unlock(&s->lock);
    trace_drbd_verify_start(s->bs, start, length, resync);
    job_start(&v->job.common);
    return 0;
}
