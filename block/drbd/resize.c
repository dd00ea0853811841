/*
 * DRBD-style replicated block device: online growth
 *
 * block_resize on a primary with peers grows the whole resource while it
 * runs, as ``drbdadm resize``: every peer must be connected and in sync
 * (and speak protocol version 8); each grows its disk and metadata first,
 * asked by a RESIZE on the data channel (after every write sent before
 * it, which it lets complete), and answers with a RESIZE_REPLY on the
 * meta channel; then the primary grows.  The new area reads as zeroes on
 * every node (drbd_md_co_resize()) and is in sync.  The caller
 * (block_resize) has drained the primary: no guest write runs meanwhile.
 *
 * A peer that fails to grow leaves the primary as it was; peers that grew
 * and a primary that did not then differ in size, and refuse each other
 * at their next handshake, saying so: grow the smaller ones (offline,
 * qemu-img resize -f drbd).
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block_int.h"
#include "qapi/error.h"
#include "qemu/error-report.h"

#include "drbd-int.h"
#include "gate.h"
#include "trace.h"

/* How long a peer may take to grow (it copies its bitmaps) */
#define DRBD_RESIZE_TIMEOUT_NS  (120 * NANOSECONDS_PER_SECOND)

/*
 * Can every peer grow with this node now?  Each connected, in sync,
 * with a disk (or a diskless client), and of protocol version 8.
 * Called with s->lock.
 */
static bool drbd_resize_peers_ready_locked(BDRVDrbdState *s, Error **errp)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];

        if (!conn->peer || conn->cstate != DRBD_CONN_STATE_CONNECTED) {
            error_setg(errp, "peer node %d is %s: a resource grows online "
                       "with every peer connected and in sync",
                       conn->peer_node_id, DrbdConnState_str(conn->cstate));
            error_append_hint(errp, "Wait for it (or its resync), or stop "
                              "every node and resize each image to the "
                              "same size with 'qemu-img resize -f "
                              "drbd'.\n");
            return false;
        }
        if (conn->peer_disk != DRBD_DISK_STATE_UP_TO_DATE &&
            conn->peer_disk != DRBD_DISK_STATE_DISKLESS) {
            error_setg(errp, "peer node %d's disk is %s: a resource grows "
                       "online with every peer up to date",
                       conn->peer_node_id,
                       DrbdDiskState_str(conn->peer_disk));
            return false;
        }
        if (conn->peer->version < DRBD_PROTO_VERSION_RESIZE) {
            error_setg(errp, "peer node %d speaks protocol version %" PRIu32
                       ", which cannot grow online (version %d can)",
                       conn->peer_node_id, conn->peer->version,
                       DRBD_PROTO_VERSION_RESIZE);
            error_append_hint(errp, "Upgrade it, or stop every node and "
                              "resize each image with 'qemu-img resize -f "
                              "drbd'.\n");
            return false;
        }
        if (conn->peer->resize_sent) {
            error_setg(errp, "a resize of drbd node '%s' runs already",
                       drbd_name(s));
            return false;
        }
    }
    return true;
}

/*
 * Ask @peer to grow to @size bytes and wait for its answer: 0 when it
 * grew, else a negative errno (-ETIMEDOUT, -ECONNRESET without one)
 */
static int coroutine_fn drbd_co_resize_peer(DrbdPeer *peer, uint64_t size)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    int64_t deadline = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                       DRBD_RESIZE_TIMEOUT_NS;
    int64_t now;
    int reply;

    qemu_mutex_lock(&s->lock);
    qatomic_set(&conn->resize_reply, -1);
    /* Before it leaves: the answer may come before the send returns */
    peer->resize_sent = true;
    qemu_mutex_unlock(&s->lock);

    trace_drbd_resize_request(s, conn->peer_node_id, size);
    drbd_wire_put_resize(pkt, size);
    drbd_send_data_channel(peer, pkt);
    while (qatomic_read(&conn->resize_reply) < 0 &&
           !qatomic_read(&peer->broken)) {
        now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
        if (now >= deadline) {
            break;
        }
        drbd_co_sleep(s, &conn->resize_sleep, deadline - now);
    }

    qemu_mutex_lock(&s->lock);
    reply = qatomic_read(&conn->resize_reply);
    peer->resize_sent = false;
    qemu_mutex_unlock(&s->lock);
    if (reply < 0) {
        return qatomic_read(&peer->broken) ? -ECONNRESET : -ETIMEDOUT;
    }
    return -reply;
}

int coroutine_fn GRAPH_RDLOCK
drbd_co_resize_online(BDRVDrbdState *s, uint64_t size, Error **errp)
{
    DrbdPeer *peers[DRBD_PEERS_MAX] = { NULL };
    unsigned i, n;
    int ret = 0;

    if (size < s->size) {
        error_setg(errp, "drbd node '%s' has peers: it only grows online",
                   drbd_name(s));
        error_append_hint(errp, "To shrink it, stop every node and shrink "
                          "each image with 'qemu-img resize -f drbd "
                          "--shrink'.\n");
        return -ENOTSUP;
    }
    qemu_mutex_lock(&s->lock);
    if (s->role != DRBD_ROLE_PRIMARY) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "drbd node '%s' is %s: grow the resource on its "
                   "primary", drbd_name(s), DrbdRole_str(s->role));
        return -EPERM;
    }
    if (!drbd_resize_peers_ready_locked(s, errp)) {
        qemu_mutex_unlock(&s->lock);
        return -EBUSY;
    }
    n = s->nr_conns;
    for (i = 0; i < n; i++) {
        peers[i] = drbd_peer_get_locked(s->conns[i]);
    }
    qemu_mutex_unlock(&s->lock);

    /* The peers first: none of them grows, nothing changes here */
    for (i = 0; i < n && ret == 0; i++) {
        ret = drbd_co_resize_peer(peers[i], size);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "peer node %d of drbd node '%s' "
                             "did not grow to %" PRIu64 " bytes",
                             s->conns[i]->peer_node_id, drbd_name(s), size);
            if (i > 0) {
                error_append_hint(errp, "The peers before it grew: they "
                                  "refuse this node at their next "
                                  "connection until it has their size "
                                  "(qemu-img resize -f drbd, stopped).\n");
            }
        }
    }
    for (i = 0; i < n; i++) {
        drbd_peer_put(peers[i]);
    }
    if (ret < 0) {
        return ret;
    }
    ret = drbd_co_resize_disk(s, size, errp);
    if (ret < 0) {
        error_append_hint(errp, "Its peers grew to %" PRIu64 " bytes: they "
                          "refuse this node at their next connection until "
                          "it has their size.\n", size);
        return ret;
    }
    trace_drbd_resize_done(s, size);
    return 0;
}

/*
 * A RESIZE from our primary (the data receiver): once the writes it sent
 * before are done, grow this node's disk and metadata, and answer.  A
 * failure is the answer's, not the connection's.
 */
int coroutine_fn drbd_peer_resize(DrbdPeer *peer, uint64_t size,
                                  Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    Error *local_err = NULL;
    DrbdGate gate;
    int ret = 0;

    qemu_mutex_lock(&s->lock);
    gate = (DrbdGate) {
        .disk_size = s->size,
        .role = s->role,
        .cstate = conn->cstate,
        .peer_role = conn->peer_role,
        .peer_version = peer->version,
    };
    qemu_mutex_unlock(&s->lock);
    if (drbd_gate_resize(&gate, size, errp) < 0) {
        return -EINVAL;
    }

    drbd_peer_wait_applies(peer);
    if (size != s->size) {
        bdrv_graph_co_rdlock();
        ret = drbd_co_resize_disk(s, size, &local_err);
        if (ret == 0) {
            ret = bdrv_co_refresh_total_sectors(s->bs,
                                                size >> BDRV_SECTOR_BITS);
            if (ret < 0) {
                error_setg_errno(&local_err, -ret, "could not take the new "
                                 "size");
            }
        }
        bdrv_graph_co_rdunlock();
    }
    if (ret < 0) {
        warn_reportf_err(local_err, "drbd node '%s': could not grow to %"
                         PRIu64 " bytes as its primary asked: ",
                         drbd_name(s), size);
    }
    trace_drbd_peer_resize(s, conn->peer_node_id, size, ret);
    drbd_wire_put_resize_reply(pkt, ret < 0 ? MIN(-ret, 4095) : 0);
    if (drbd_send_meta(peer, pkt) < 0) {
        error_setg(errp, "could not answer the RESIZE");
        return -EIO;
    }
    return 0;
}

/* The peer answered our RESIZE (the meta receiver) */
void drbd_peer_resize_reply(DrbdPeer *peer, uint32_t result)
{
    BDRVDrbdState *s = peer->s;

    qatomic_set(&peer->conn->resize_reply, result);
    drbd_sleep_wake(s, &peer->conn->resize_sleep, false);
}
