/*
 * DRBD-style replication: the receivers and the pinger
 *
 * One receiver coroutine per channel reads packets and hands each to the
 * layer that owns it: guest-write acks to the transfer log, resync acks
 * to the resync, writes and barriers to the receiving side (peer.c).  The
 * pinger proves the peer alive.  All three run in the node's context and
 * follow it when it moves.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/aio-wait.h"
#include "qapi/error.h"
#include "qemu/timer.h"
#include "trace.h"

#include "drbd-int.h"
#include "gate.h"

/*
 * An ack for one of our requests arrived on the meta channel.  One for a
 * request that is gone is harmless (a BARRIER_ACK may overtake a
 * request's WRITE_ACK); one for a request never issued is a protocol
 * error.
 */
static void coroutine_fn drbd_got_block_ack(DrbdPeer *peer, uint16_t cmd,
                               const DrbdBlockAck *ack)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdRequest *req;
    DrbdGate gate;
    Error *err = NULL;

    if (ack->id & DRBD_GATE_RESYNC_ID) {
        drbd_resync_acked(peer, cmd, ack);
        return;
    }

    qemu_mutex_lock(&s->lock);
    gate = (DrbdGate) { .last_req_id = s->next_req_id };
    if (drbd_gate_write_ack(&gate, cmd, ack, &err) < 0) {
        qemu_mutex_unlock(&s->lock);
        drbd_peer_fail_err(peer, NULL, err);
        return;
    }
    req = drbd_req_find_locked(conn, ack->id);
    if (req) {
        drbd_req_event_locked(s, req, cmd == DRBD_CMD_RECV_ACK ?
                              DRBD_EV_RECV_ACK :
                              cmd == DRBD_CMD_WRITE_ACK ?
                              DRBD_EV_WRITE_ACK : DRBD_EV_NEG_ACK);
    }
    qemu_mutex_unlock(&s->lock);
    if (!req) {
        /* Acks for requests that are gone are harmless: log only */
        trace_drbd_stray_ack(s->bs, drbd_cmd_name(cmd), ack->id);
    }
}

void coroutine_fn drbd_meta_receiver(void *opaque)
{
    DrbdPeer *peer = opaque;
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;

    while (!qatomic_read(&peer->broken)) {
        g_autofree uint8_t *payload = NULL;
        Error *err = NULL;
        DrbdHeader h;
        DrbdBlockAck ack;
        DrbdBarrier b;
        DrbdOvPacket ov;
        DrbdGate gate;
        int ret;

        ret = drbd_rx_packet(peer, peer->meta, &peer->meta_rx, &h, &payload,
                             &err);
        if (ret < 0) {
            drbd_peer_fail_err(peer, "meta channel", err);
            break;
        }
        /* any traffic proves the peer alive */
        qatomic_set(&peer->ping_answered, true);

        switch (h.cmd) {
        case DRBD_CMD_PING: {
            g_autoptr(GByteArray) pkt = g_byte_array_new();

            drbd_wire_put_empty(pkt, DRBD_CMD_PING_ACK);
            drbd_send_meta(peer, pkt);
            break;
        }
        case DRBD_CMD_PING_ACK:
            qatomic_inc(&peer->pings_acked);
            break;
        case DRBD_CMD_RECV_ACK:
        case DRBD_CMD_WRITE_ACK:
        case DRBD_CMD_NEG_ACK:
            ret = drbd_wire_get_block_ack(h.cmd, payload, h.length, s->size,
                                          &ack, &err);
            if (ret == 0) {
                drbd_got_block_ack(peer, h.cmd, &ack);
            }
            break;
        case DRBD_CMD_STATE_REPLY: {
            uint32_t result;

            ret = drbd_wire_get_state_reply(payload, h.length, &result,
                                            &err);
            if (ret == 0) {
                qemu_mutex_lock(&s->lock);
                gate = (DrbdGate) {
                    .state_req_sent = peer->state_req_sent,
                    .peer_version = peer->version,
                };
                ret = drbd_gate_state_reply(&gate, result, &err);
                if (ret == 0) {
                    peer->state_req_sent = false;
                    qatomic_set(&conn->state_reply, result);
                }
                qemu_mutex_unlock(&s->lock);
                drbd_sleep_wake(s, &conn->state_sleep, false);
            }
            break;
        }
        case DRBD_CMD_RESIZE_REPLY: {
            uint32_t result;

            ret = drbd_wire_get_resize_reply(payload, h.length, &result,
                                             &err);
            if (ret == 0) {
                qemu_mutex_lock(&s->lock);
                gate = (DrbdGate) { .resize_sent = peer->resize_sent };
                ret = drbd_gate_resize_reply(&gate, &err);
                if (ret == 0) {
                    peer->resize_sent = false;
                }
                qemu_mutex_unlock(&s->lock);
                if (ret == 0) {
                    drbd_peer_resize_reply(peer, result);
                }
            }
            break;
        }
        case DRBD_CMD_NEW_UUID: {
            uint64_t uuid;

            ret = drbd_wire_get_new_uuid(payload, h.length, &uuid, &err);
            if (ret == 0) {
                ret = drbd_peer_new_uuid(peer, uuid, &err);
            }
            break;
        }
        case DRBD_CMD_RS_CSUM_REPLY:
            ret = drbd_wire_get_ov(h.cmd, payload, h.length, s->size, 0,
                                   &ov, &err);
            if (ret == 0) {
                ret = drbd_resync_csum_reply(peer, &ov, &err);
            }
            break;
        case DRBD_CMD_BARRIER_ACK:
            ret = drbd_wire_get_barrier(h.cmd, payload, h.length, &b, &err);
            if (ret == 0) {
                qemu_mutex_lock(&s->lock);
                ret = drbd_tl_barrier_acked_locked(conn, b.epoch, &err);
                qemu_mutex_unlock(&s->lock);
            }
            break;
        default:
            error_setg(&err, "%s packet on the meta channel",
                       drbd_cmd_name(h.cmd));
            ret = -EINVAL;
        }
        if (ret < 0) {
            drbd_peer_fail_err(peer, "meta channel", err);
            break;
        }
    }
    drbd_peer_put(peer);
}

/*
 * Take the peer's new role and disk state (it was promoted or demoted,
 * or it detached from its disk), which the gate let through
 */
static void coroutine_fn drbd_peer_take_state(DrbdPeer *peer,
                                              const DrbdStatePacket *st)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    bool disk_gone;

    qemu_mutex_lock(&s->lock);
    disk_gone = drbd_disk_detached(st->disk_state) &&
                !drbd_disk_detached(conn->peer_disk);
    qemu_mutex_unlock(&s->lock);
    if (disk_gone) {
        /* Marked before the state says so: no write slips between */
        drbd_tl_peer_disk_gone(peer, st->role == DRBD_ROLE_PRIMARY);
    }
    drbd_set_state(s, conn, -1, disk_gone ? DRBD_CONN_STATE_CONNECTED : -1,
                   -1, st->role, st->disk_state,
                   disk_gone ? "peer detached from its disk" :
                   st->role == DRBD_ROLE_PRIMARY ? "peer promoted" :
                   "peer state changed");
    if (disk_gone) {
        /* Flushes stop waiting for the barrier acks of a disk that is gone */
        qemu_mutex_lock(&s->lock);
        qemu_co_enter_all(&conn->barrier_waiters, &s->lock);
        qemu_mutex_unlock(&s->lock);
    }
}

/* A STATE: the peer's disk changed (or, before version 4, its role) */
static int coroutine_fn drbd_peer_state_changed(DrbdPeer *peer,
                                                const DrbdStatePacket *st,
                                                Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdGate gate;

    qemu_mutex_lock(&s->lock);
    gate = (DrbdGate) {
        .role = s->role,
        .peer_role = conn->peer_role,
        .peer_disk = conn->peer_disk,
        .peer_version = peer->version,
    };
    qemu_mutex_unlock(&s->lock);
    if (drbd_gate_state(&gate, DRBD_CMD_STATE, st, errp) < 0) {
        return -EINVAL;
    }
    drbd_peer_take_state(peer, st);
    return 0;
}

/* A STATE_REQ: the peer asks to become primary, or says it is secondary */
static int coroutine_fn drbd_peer_state_request(DrbdPeer *peer,
                                                const DrbdStatePacket *st,
                                                Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    uint32_t result = DRBD_STATE_REPLY_GRANTED;
    DrbdGate gate;

    /* A role we cannot grant is answered, below, not refused */
    qemu_mutex_lock(&s->lock);
    gate = (DrbdGate) {
        .peer_disk = conn->peer_disk,
        .peer_version = peer->version,
    };
    qemu_mutex_unlock(&s->lock);
    if (drbd_gate_state(&gate, DRBD_CMD_STATE_REQ, st, errp) < 0) {
        return -EINVAL;
    }

    if (st->role == DRBD_ROLE_PRIMARY) {
        qemu_mutex_lock(&s->lock);
        if (s->role == DRBD_ROLE_PRIMARY ||
            conn->promote_granted ||
            (conn->promote_pending && s->node_id < conn->peer_node_id)) {
            /* we are primary, or asking too and the lower id wins */
            result = DRBD_STATE_REPLY_REFUSED;
        } else if (peer->version >= DRBD_PROTO_VERSION_GEN_CHECK) {
            /*
             * Its generation matters where it claims its data up to
             * date; a sync target serves through its source
             */
            result = drbd_promotion_answer_locked(
                conn, st->disk_state == DRBD_DISK_STATE_UP_TO_DATE ?
                      st->uuid : 0);
        }
        qemu_mutex_unlock(&s->lock);
    }
    if (result == DRBD_STATE_REPLY_GRANTED) {
        /*
         * Before the answer: we refuse our own promotion from now on,
         * and the peer knows, once it has the answer, that we know
         */
        drbd_peer_take_state(peer, st);
    }
    trace_drbd_state_request(s->bs, DrbdRole_str(st->role), st->uuid, result);
    drbd_wire_put_state_reply(pkt, result);
    if (drbd_send_meta(peer, pkt) < 0) {
        error_setg(errp, "could not answer a state request");
        return -EPIPE;
    }
    return 0;
}

/*
 * A DATA or RS_DATA packet arrived: does its digest match its data?  A
 * mismatch marks the range out of sync (the data is not written) and
 * fails: the connection drops, and the resync repairs the block.
 */
static int drbd_check_write_integrity(DrbdConnection *conn, uint16_t cmd,
                                      const DrbdDataPacket *p, Error **errp)
{
    BDRVDrbdState *s = conn->s;
    Error *local_err = NULL;
    int ret;

    ret = drbd_check_integrity(conn->integrity, cmd, p, &local_err);
    if (ret == -EBADMSG) {
        qemu_mutex_lock(&s->lock);
        drbd_oos_set_locked(conn, p->offset, p->bytes);
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "%s: not written, marked out of sync",
                   error_get_pretty(local_err));
        error_free(local_err);
    } else if (ret < 0) {
        error_propagate(errp, local_err);
    }
    return ret;
}

/*
 * A receiver whose socket never runs dry (a resync at full speed) would
 * never yield: after this long it lets the rest of its AioContext run (the
 * meta receiver's pings and acks, completions, timers)
 */
#define DRBD_RX_SLICE_NS    (2 * SCALE_MS)

void coroutine_fn drbd_data_receiver(void *opaque)
{
    DrbdPeer *peer = opaque;
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    int64_t slice_start = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

    while (!qatomic_read(&peer->broken)) {
        uint8_t *payload = NULL;
        Error *err = NULL;
        DrbdHeader h;
        DrbdDataPacket p;
        DrbdBlockAck ack;
        DrbdBarrier b;
        DrbdStatePacket st;
        DrbdOvPacket ov;
        int ret;

        ret = drbd_rx_packet(peer, peer->data, &peer->data_rx, &h, &payload,
                             &err);
        if (ret < 0) {
            drbd_peer_fail_err(peer, "data channel", err);
            break;
        }

        switch (h.cmd) {
        case DRBD_CMD_DATA:
        case DRBD_CMD_ZEROES:
        case DRBD_CMD_DISCARD:
        case DRBD_CMD_RS_DATA:
        case DRBD_CMD_RS_ZEROES:
            ret = drbd_wire_get_data(h.cmd, payload, h.length, s->size, &p,
                                     &err);
            if (ret == 0 && p.data) {
                ret = drbd_check_write_integrity(peer->conn, h.cmd, &p, &err);
            }
            if (ret == 0) {
                /* the payload now belongs to the write */
                ret = drbd_peer_apply(peer, h.cmd, &p, payload, h.length,
                                      &err);
                payload = NULL;
            }
            break;
        case DRBD_CMD_BARRIER:
            ret = drbd_wire_get_barrier(h.cmd, payload, h.length, &b, &err);
            if (ret == 0) {
                ret = drbd_peer_barrier(peer, &b, &err);
            }
            break;
        case DRBD_CMD_OUT_OF_SYNC:
            ret = drbd_wire_get_block_ack(h.cmd, payload, h.length, s->size,
                                          &ack, &err);
            if (ret == 0) {
                ret = drbd_peer_out_of_sync(peer, &ack, &err);
            }
            break;
        case DRBD_CMD_RS_DONE:
            ret = drbd_peer_resync_done(peer, &err);
            break;
        case DRBD_CMD_AHEAD:
            ret = drbd_peer_ahead(peer, &err);
            break;
        case DRBD_CMD_RS_CSUM:
            ret = drbd_wire_get_ov(h.cmd, payload, h.length, s->size,
                                   drbd_digest_size(conn->csums_alg), &ov,
                                   &err);
            if (ret == 0) {
                ret = drbd_peer_csum(peer, &ov, &err);
            }
            break;
        case DRBD_CMD_OV_REQUEST:
        case DRBD_CMD_OV_REPLY:
            ret = drbd_wire_get_ov(h.cmd, payload, h.length, s->size,
                                   drbd_digest_size(conn->verify_alg), &ov,
                                   &err);
            if (ret == 0 && h.cmd == DRBD_CMD_OV_REQUEST) {
                ret = drbd_verify_request(peer, &ov, &err);
            } else if (ret == 0) {
                ret = drbd_verify_reply(peer, &ov, &err);
            }
            break;
        case DRBD_CMD_DATA_REQUEST:
            ret = drbd_wire_get_block_ack(h.cmd, payload, h.length, s->size,
                                          &ack, &err);
            if (ret == 0) {
                ret = drbd_peer_read_request(peer, &ack, &err);
            }
            break;
        case DRBD_CMD_DATA_REPLY:
            ret = drbd_wire_get_data(h.cmd, payload, h.length, s->size, &p,
                                     &err);
            if (ret == 0) {
                ret = drbd_check_integrity(conn->integrity, h.cmd, &p,
                                           &err);
            }
            if (ret == 0) {
                ret = drbd_read_reply(peer, h.cmd, &p, NULL, &err);
            }
            break;
        case DRBD_CMD_NEG_DREPLY:
            ret = drbd_wire_get_block_ack(h.cmd, payload, h.length, s->size,
                                          &ack, &err);
            if (ret == 0) {
                ret = drbd_read_reply(peer, h.cmd, NULL, &ack, &err);
            }
            break;
        case DRBD_CMD_STATE:
            ret = drbd_wire_get_state(payload, h.length, &st, &err);
            if (ret == 0) {
                ret = drbd_peer_state_changed(peer, &st, &err);
            }
            break;
        case DRBD_CMD_STATE_REQ:
            ret = drbd_wire_get_state_req(payload, h.length, &st, &err);
            if (ret == 0) {
                ret = drbd_peer_state_request(peer, &st, &err);
            }
            break;
        case DRBD_CMD_RESIZE: {
            uint64_t size;

            ret = drbd_wire_get_resize(payload, h.length, &size, &err);
            if (ret == 0) {
                ret = drbd_peer_resize(peer, size, &err);
            }
            break;
        }
        default:
            error_setg(&err, "%s packet on the data channel",
                       drbd_cmd_name(h.cmd));
            ret = -EINVAL;
        }
        drbd_payload_free(s, payload, h.length);
        if (ret < 0) {
            drbd_peer_fail_err(peer, "data channel", err);
            break;
        }
        if (qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - slice_start >
            DRBD_RX_SLICE_NS) {
            aio_co_schedule(qemu_get_current_aio_context(),
                            qemu_coroutine_self());
            qemu_coroutine_yield();
            slice_start = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
        }
    }
    drbd_peer_put(peer);
}

/* Sleep until @deadline (QEMU_CLOCK_REALTIME ns), following the node */
static void coroutine_fn drbd_ping_wait(DrbdPeer *peer, int64_t deadline,
                                        bool for_answer)
{
    BDRVDrbdState *s = peer->s;
    int64_t now;

    while (!qatomic_read(&peer->broken) &&
           !(for_answer && qatomic_read(&peer->ping_answered)) &&
           !(!for_answer && qatomic_read(&peer->ping_now)) &&
           (now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME)) < deadline) {
        drbd_co_sleep(s, &peer->ping_sleep, deadline - now);
        drbd_co_rehome(s);
    }
}

/*
 * The peer owes us something: acks of guest writes or of resync chunks,
 * answers to checksums or verify requests, or (on a sync target) the
 * rest of the resync
 */
static bool drbd_peer_owes_acks(DrbdPeer *peer)
{
    BDRVDrbdState *s = peer->s;
    bool owed;

    qemu_mutex_lock(&s->lock);
    owed = !QTAILQ_EMPTY(&s->transfer_log) ||
           g_hash_table_size(peer->resync_chunks) ||
           g_hash_table_size(peer->csum_chunks) ||
           g_hash_table_size(peer->ov_pending) ||
           peer->sync_target;
    qemu_mutex_unlock(&s->lock);
    return owed;
}

/*
 * Ping the peer every ping-interval; no answer in ping-timeout kills it.
 * While the peer owes acks (or a resync or verify runs), it is pinged
 * every ping-timeout: a peer that stopped answering (a frozen link: no
 * FIN, no RST) holds the writes and flushes waiting for it, and stalls
 * the resync, at most about twice ping-timeout, not a whole
 * ping-interval.
 */
void coroutine_fn drbd_pinger(void *opaque)
{
    DrbdPeer *peer = opaque;
    DrbdConnection *conn = peer->conn;

    while (!qatomic_read(&peer->broken)) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        int64_t next = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                       conn->ping_interval_ns;

        for (;;) {
            int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

            drbd_ping_wait(peer, MIN(next, now + conn->ping_timeout_ns),
                           false);
            if (qatomic_read(&peer->broken) ||
                qatomic_read(&peer->ping_now) ||
                qemu_clock_get_ns(QEMU_CLOCK_REALTIME) >= next ||
                drbd_peer_owes_acks(peer)) {
                break;
            }
        }
        if (qatomic_read(&peer->broken)) {
            break;
        }
        qatomic_set(&peer->ping_now, false);
        qatomic_set(&peer->ping_answered, false);
        drbd_wire_put_empty(pkt, DRBD_CMD_PING);
        qatomic_inc(&peer->pings_sent);
        if (drbd_send_meta(peer, pkt) < 0) {
            break;
        }
        drbd_ping_wait(peer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                       conn->ping_timeout_ns, true);
        if (!qatomic_read(&peer->broken) &&
            !qatomic_read(&peer->ping_answered)) {
            drbd_peer_fail(peer, "the peer did not answer a ping in %" PRIu64
                           " ms", conn->ping_timeout_ns / SCALE_MS);
        }
    }
    drbd_peer_put(peer);
}

/*
 * Ping the peer now, not at the next ping-interval: a drained section
 * (a close, a migration, a graph change) waits for the requests that wait
 * for the peer, and a peer that stopped answering is then given up after
 * ping-timeout.  Any thread.
 */
void drbd_ping_now(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdPeer *peer = drbd_peer_get(s->conns[i]);

        if (peer) {
            qatomic_set(&peer->ping_now, true);
            drbd_sleep_wake(s, &peer->ping_sleep, false);
            drbd_peer_put(peer);
        }
    }
}
