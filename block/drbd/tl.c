/*
 * DRBD-style replication: the transfer log
 *
 * Every guest write replicated to the peer stays in the transfer log
 * until the peer is done with it as the protocol says (req.c's
 * transitions): acked, and for protocols A and B until the barrier that
 * closes its epoch is acked.  Writes are sent in epochs; a write that may
 * depend on one already completed opens a new epoch with a barrier.
 * Everything here runs under s->lock, except the sending itself.
 *
 * A request is the transfer log's from drbd_tl_submit_locked() on: it
 * numbers it, files it (in order, and by id for the acks), counts it,
 * and frees it once both the guest (drbd_tl_guest_done_locked()) and
 * the peer are done with it.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "trace.h"

#include "drbd-int.h"
#include "gate.h"

void drbd_tl_init(BDRVDrbdState *s)
{
    QTAILQ_INIT(&s->transfer_log);
    s->tl_by_id = g_hash_table_new(g_int64_hash, g_int64_equal);
}

void drbd_tl_cleanup(BDRVDrbdState *s)
{
    assert(QTAILQ_EMPTY(&s->transfer_log));
    g_clear_pointer(&s->tl_by_id, g_hash_table_destroy);
}

/*
 * The requests of a guest write are freed together, once the last of
 * them is done with: the first holds the write's activity-log extents
 * and the count
 */
static void drbd_req_free_locked(BDRVDrbdState *s, DrbdRequest *req)
{
    DrbdRequest *first = req->first;

    assert(first->live > 0);
    if (--first->live) {
        return;
    }
    if (first->al_held) {
        drbd_al_end_io_locked(s, first->offset, first->bytes);
    }
    g_free(first);
}

void drbd_req_event_locked(BDRVDrbdState *s, DrbdRequest *req,
                           DrbdReqEvent ev)
{
    DrbdConnection *conn = req->conn;
    unsigned actions = drbd_req_mod(&req->state, ev);

    trace_drbd_req_event(s->bs, req->id, drbd_req_event_name(ev),
                         req->state, actions);
    if (actions & DRBD_RA_MARK_OOS) {
        drbd_oos_set_locked(conn, req->offset, req->bytes);
    }
    if (actions & DRBD_RA_COMPLETE) {
        /* Writes after this one may depend on it: they need a new epoch */
        if ((req->state & DRBD_RQ_NET_SENT) &&
            req->epoch == conn->cur_epoch) {
            conn->epoch_needs_barrier = true;
        }
        /* ... and they are ordered after it on the peer's disk */
        if ((req->state & DRBD_RQ_NET_SENT) &&
            req->seq_gen == conn->seq_gen) {
            conn->done_seq = MAX(conn->done_seq, req->seq);
        }
        if (req->waiter) {
            aio_co_wake(req->waiter);
            req->waiter = NULL;
        }
        if (s->md.al) {
            /* A write waiting for an AL slot may close this epoch now */
            qemu_co_queue_restart_all(&s->md.al_queue);
        }
    }
    if (actions & DRBD_RA_DESTROY) {
        if (req->in_tl) {
            QTAILQ_REMOVE(&s->transfer_log, req, tl_next);
            g_hash_table_remove(s->tl_by_id, &req->id);
            req->in_tl = false;
            qatomic_dec(&conn->pe);
            conn->ap_bytes -= req->bytes;
        }
        if (req->guest_gone) {
            drbd_req_free_locked(s, req);
        }
    }
}

/*
 * A guest write enters: one request per peer (the array of
 * s->nr_conns, in the order of s->conns[]), numbered.  The request for
 * each peer whose established connection is in @peers (NULL where none)
 * is sent to it, ordered after the writes the guest has seen complete on
 * that connection and in the log; the others record that their peer
 * misses the write.  Each is returned in its state (req.h, for its
 * connection's protocol and @fua) with DRBD_EV_QUEUE_NET or
 * DRBD_EV_NO_NET and DRBD_EV_SUBMIT_LOCAL fed; the guest's coroutine
 * hands them back with drbd_tl_guest_done_locked().
 */
DrbdRequest *drbd_tl_submit_locked(BDRVDrbdState *s, DrbdPeer *const *peers,
                                   int64_t offset, int64_t bytes, bool fua,
                                   bool al_held)
{
    DrbdRequest *reqs = g_new0(DrbdRequest, s->nr_conns);
    unsigned i;

    reqs[0].live = s->nr_conns;
    reqs[0].al_held = al_held;
    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];
        DrbdRequest *req = &reqs[i];

        req->s = s;
        req->first = reqs;
        req->conn = conn;
        req->offset = offset;
        req->bytes = bytes;
        req->state = drbd_req_initial_state(conn->protocol, fua);
        req->id = ++s->next_req_id;
        if (peers[i]) {
            req->dep = conn->done_seq;
            req->dep_gen = conn->seq_gen;
            drbd_req_event_locked(s, req, DRBD_EV_QUEUE_NET);
            QTAILQ_INSERT_TAIL(&s->transfer_log, req, tl_next);
            g_hash_table_insert(s->tl_by_id, &req->id, req);
            req->in_tl = true;
            qatomic_inc(&conn->pe);
            conn->ap_bytes += bytes;
        } else {
            drbd_req_event_locked(s, req, DRBD_EV_NO_NET);
        }
        drbd_req_event_locked(s, req, DRBD_EV_SUBMIT_LOCAL);
    }
    return reqs;
}

/*
 * The guest's coroutine is done with the requests of its write: the log
 * frees each when it is
 */
void drbd_tl_guest_done_locked(BDRVDrbdState *s, DrbdRequest *reqs)
{
    unsigned i, n = s->nr_conns;

    for (i = 0; i < n; i++) {
        if (reqs[i].in_tl) {
            reqs[i].guest_gone = true;
        } else {
            drbd_req_free_locked(s, &reqs[i]);
        }
    }
}

/* The write an ack from @conn's peer names, if it is in the log for it */
DrbdRequest *drbd_req_find_locked(DrbdConnection *conn, uint64_t id)
{
    DrbdRequest *req = g_hash_table_lookup(conn->s->tl_by_id, &id);

    return req && req->conn == conn ? req : NULL;
}

/*
 * The peer acked the barrier that closed @epoch: the epoch's writes are
 * on its disk.  Only an epoch that was closed and not acked yet can be
 * acked (the peer acks them in order); anything else is a protocol error
 * that changes nothing.
 */
int drbd_tl_barrier_acked_locked(DrbdConnection *conn, uint32_t epoch,
                                 Error **errp)
{
    BDRVDrbdState *s = conn->s;
    DrbdGate gate = {
        .epoch_acked_upto = conn->barrier_acked_upto,
        .cur_epoch = conn->cur_epoch,
    };
    DrbdRequest *req, *next;
    int ret;

    ret = drbd_gate_barrier_ack(&gate, epoch, errp);
    if (ret < 0) {
        return ret;
    }

    QTAILQ_FOREACH_SAFE(req, &s->transfer_log, tl_next, next) {
        if (req->conn == conn && (req->state & DRBD_RQ_NET_SENT) &&
            (int32_t)(req->epoch - epoch) <= 0) {
            drbd_req_event_locked(s, req, DRBD_EV_BARRIER_ACK);
        }
    }
    conn->barrier_acked_upto = epoch + 1;
    qemu_co_queue_restart_all(&conn->barrier_waiters);
    return 0;
}

void drbd_tl_connection_lost_locked(DrbdConnection *conn)
{
    BDRVDrbdState *s = conn->s;
    DrbdRequest *req, *next;

    QTAILQ_FOREACH_SAFE(req, &s->transfer_log, tl_next, next) {
        if (req->conn == conn) {
            drbd_req_event_locked(s, req, DRBD_EV_CONNECTION_LOST);
        }
    }
    /* Requests still in the log wait for their local write */
    conn->ahead = false;
    conn->epoch_size = 0;
    conn->epoch_needs_barrier = false;
    conn->barrier_acked_upto = conn->cur_epoch;
}

/* Close the current epoch with a barrier; the caller holds data_send_lock */
static void drbd_close_epoch_locked(DrbdConnection *conn, GByteArray *pkt,
                                    bool flush)
{
    DrbdBarrier b = {
        .epoch = conn->cur_epoch,
        .set_size = conn->epoch_size,
        .flags = flush ? DRBD_BARRIER_FLUSH : 0,
    };

    drbd_wire_put_barrier(pkt, DRBD_CMD_BARRIER, &b);
    conn->cur_epoch++;
    conn->epoch_size = 0;
    conn->epoch_needs_barrier = false;
}

/*
 * Send a guest write (DATA, ZEROES or DISCARD) to the peer, opening a new
 * epoch first when the write may depend on one already completed.  Feeds
 * DRBD_EV_SENT or DRBD_EV_SEND_FAILED to the request.
 */
int coroutine_fn drbd_send_write(DrbdPeer *peer, DrbdRequest *req,
                                 uint16_t cmd, QEMUIOVector *qiov,
                                 size_t qiov_offset, uint32_t dp_flags)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdDataPacket p = {
        .offset = req->offset,
        .id = req->id,
        .flags = dp_flags,
        .bytes = req->bytes,
    };
    Error *err = NULL;
    int ret = -EPIPE;

    qemu_co_mutex_lock(&peer->data_send_lock);
    if (!qatomic_read(&peer->broken)) {
        qemu_mutex_lock(&s->lock);
        if (conn->ahead) {
            /*
             * The node went ahead of the peer while this write waited to
             * be sent: it goes after AHEAD no more than the later ones,
             * and is marked out of sync as they are (not a failure of the
             * link)
             */
            drbd_req_event_locked(s, req, DRBD_EV_SEND_FAILED);
            qemu_mutex_unlock(&s->lock);
            qemu_co_mutex_unlock(&peer->data_send_lock);
            return 0;
        }
        if (conn->epoch_needs_barrier ||
            conn->epoch_size >= conn->max_epoch_size) {
            drbd_close_epoch_locked(conn, pkt, false);
        }
        req->epoch = conn->cur_epoch;
        p.epoch = conn->cur_epoch;
        conn->epoch_size++;
        req->seq = ++conn->tx_seq;
        req->seq_gen = conn->seq_gen;
        /*
         * The writes sent since the newest one the guest had seen
         * complete when it issued this one do not go before it on the
         * peer's disk; a write issued on an earlier connection depends on
         * all that were sent before it (conservative, and rare)
         */
        if (req->dep_gen == conn->seq_gen && req->dep < req->seq) {
            p.unordered = MIN(req->seq - 1 - req->dep, UINT32_MAX);
        }
        /*
         * Handed over now, before the bytes go out: the peer's ack may be
         * processed in another thread before this coroutine runs again.
         */
        drbd_req_event_locked(s, req, DRBD_EV_SENT);
        qemu_mutex_unlock(&s->lock);

        if (cmd == DRBD_CMD_DATA) {
            uint8_t digest[DRBD_WIRE_DIGEST_MAX];
            g_autofree struct iovec *iov = NULL;
            int niov;

            niov = qemu_iovec_subvec_niov(qiov, qiov_offset, req->bytes);
            /* The header, then the data: one writev if it can take them */
            iov = g_new(struct iovec, MIN(niov + 1, IOV_MAX));
            if (niov < IOV_MAX) {
                niov = iov_copy(iov + 1, niov, qiov->iov, qiov->niov,
                                qiov_offset, req->bytes);
                ret = drbd_digest_attach(conn->integrity, &p, iov + 1,
                                         niov, digest, &err);
                if (ret == 0) {
                    drbd_wire_put_data_header(pkt, cmd, &p);
                    iov[0].iov_base = pkt->data;
                    iov[0].iov_len = pkt->len;
                    /*
                     * TLS makes a record, and a send, of each piece: let
                     * the header wait for the data, as one segment
                     */
                    if (conn->tls_creds) {
                        qio_channel_set_cork(peer->data, true);
                    }
                    ret = qio_channel_writev_all(peer->data, iov,
                                                 niov + 1, &err);
                    if (conn->tls_creds) {
                        qio_channel_set_cork(peer->data, false);
                    }
                }
            } else {
                /* Too fragmented for one writev: send a linear copy */
                g_autofree uint8_t *buf = g_malloc(req->bytes);

                qemu_iovec_to_buf(qiov, qiov_offset, buf, req->bytes);
                iov[0].iov_base = buf;
                iov[0].iov_len = req->bytes;
                ret = drbd_digest_attach(conn->integrity, &p, iov, 1,
                                         digest, &err);
                if (ret == 0) {
                    drbd_wire_put_data_header(pkt, cmd, &p);
                    g_byte_array_append(pkt, buf, req->bytes);
                    ret = drbd_write_packet(peer->data, pkt, &err);
                }
            }
        } else {
            drbd_wire_put_data(pkt, cmd, &p);
            ret = drbd_write_packet(peer->data, pkt, &err);
        }
    }
    qemu_co_mutex_unlock(&peer->data_send_lock);

    qemu_mutex_lock(&s->lock);
    if (ret < 0) {
        drbd_req_event_locked(s, req, DRBD_EV_SEND_FAILED);
    } else {
        stat64_add(&conn->ns, cmd == DRBD_CMD_DATA ? req->bytes : 0);
    }
    qemu_mutex_unlock(&s->lock);

    if (err) {
        drbd_peer_fail_err(peer, "data channel", err);
    }
    trace_drbd_send_write(s->bs, drbd_cmd_name(cmd), req->id, req->offset,
                          req->bytes, req->epoch, ret);
    return ret;
}

/*
 * Close the current epoch with a barrier (with @ahead, only if it holds
 * writes, and then AHEAD after it), as one send under the data channel's
 * lock; *@epoch, if given, is the epoch closed
 */
static int coroutine_fn drbd_send_epoch_end(DrbdPeer *peer, bool flush,
                                            bool ahead, uint32_t *epoch)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    Error *err = NULL;
    int ret = -EPIPE;

    qemu_co_mutex_lock(&peer->data_send_lock);
    if (!qatomic_read(&peer->broken)) {
        qemu_mutex_lock(&s->lock);
        if (epoch) {
            *epoch = conn->cur_epoch;
        }
        if (!ahead || conn->epoch_size) {
            drbd_close_epoch_locked(conn, pkt, flush);
        }
        qemu_mutex_unlock(&s->lock);
        if (ahead) {
            drbd_wire_put_empty(pkt, DRBD_CMD_AHEAD);
        }
        ret = drbd_write_packet(peer->data, pkt, &err);
    }
    qemu_co_mutex_unlock(&peer->data_send_lock);
    if (err) {
        drbd_peer_fail_err(peer, "data channel", err);
    }
    return ret;
}

/*
 * Close the current epoch with a barrier that asks the peer to flush its
 * disk once the epoch's writes are done; *@epoch is the epoch whose
 * BARRIER_ACK says the peer's disk is stable.
 */
int coroutine_fn drbd_send_barrier(DrbdPeer *peer, bool flush,
                                   uint32_t *epoch)
{
    return drbd_send_epoch_end(peer, flush, false, epoch);
}

/*
 * Go ahead of the peer (on-congestion pull-ahead; the caller set
 * conn->ahead): the writes sent so far are closed in an epoch whose
 * barrier's ack says when they are all on the peer, and AHEAD says that
 * no write follows.  The writes from now on, and those still waiting to
 * be sent (drbd_send_write()), are marked out of sync, and resynced once
 * the link has drained (resync.c).
 */
int coroutine_fn drbd_send_ahead(DrbdPeer *peer)
{
    int ret = drbd_send_epoch_end(peer, false, true, NULL);

    trace_drbd_send_ahead(peer->s->bs, peer->conn->peer_node_id, ret);
    return ret;
}

/*
 * The peer's disk is gone (it detached after an error, or connected
 * without one): nothing of what it holds is to be trusted when a disk
 * comes back, so all of it is marked out of sync, and a full resync
 * brings the disk back.  While either node writes, the data moves on
 * without it: a new generation, so that the disk, back, is its target.
 * A primary peer of version 11 starts that generation itself, and its
 * secondaries join it (NEW_UUID): were each to start one of its own,
 * two secondaries would go on in two generations, a split brain at their
 * next handshake.  Runs in a coroutine of the connection.
 */
void coroutine_fn drbd_tl_peer_disk_gone(DrbdPeer *peer, bool peer_primary)
{
    BDRVDrbdState *s = peer->s;
    bool new_generation, announce;

    qemu_mutex_lock(&s->lock);
    if (s->detached) {
        /* Neither disk is here: nothing to record */
        qemu_mutex_unlock(&s->lock);
        return;
    }
    drbd_oos_set_locked(peer->conn, 0, s->size);
    announce = s->role == DRBD_ROLE_PRIMARY;
    new_generation = drbd_new_generation_locked(
        s, s->role == DRBD_ROLE_PRIMARY ||
           (peer_primary && peer->version < DRBD_PROTO_VERSION_DETACH_GEN),
        announce);
    qemu_mutex_unlock(&s->lock);
    trace_drbd_peer_disk_gone(s->bs, new_generation);
    /* A failure detaches us too, which says it all */
    drbd_co_md_sync(s, true);
    if (new_generation && announce) {
        drbd_announce_new_uuid(s);
    }
}
