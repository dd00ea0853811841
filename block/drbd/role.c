/*
 * DRBD-style replication: promotion, demotion and invalidation
 *
 * The operator's (or management's) commands on a node's role and data,
 * with DRBD's rules: a connected node becomes primary only when its peer
 * agrees, a promotion that the peer will not see starts a new data
 * generation, and each change is on disk before it takes effect.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/aio-wait.h"
#include "block/block_int.h"
#include "qapi/error.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "trace.h"

#include "drbd-int.h"

static void coroutine_fn drbd_send_state_co(void *opaque)
{
    DrbdPeer *peer = opaque;
    BDRVDrbdState *s = peer->s;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdStatePacket st;

    qemu_mutex_lock(&s->lock);
    st.role = s->role;
    st.disk_state = s->disk;
    qemu_mutex_unlock(&s->lock);
    drbd_wire_put_state(pkt, &st);
    drbd_send_data_channel(peer, pkt);
    drbd_peer_put(peer);
}

static void coroutine_fn drbd_send_state_req_co(void *opaque)
{
    DrbdPeer *peer = opaque;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdStatePacket st = {
        .role = DRBD_ROLE_PRIMARY,
        .disk_state = DRBD_DISK_STATE_UP_TO_DATE,
    };

    drbd_wire_put_state_req(pkt, &st);
    drbd_send_data_channel(peer, pkt);
    drbd_peer_put(peer);
}

/*
 * Before a connected node becomes primary, its peer must agree, so that
 * two nodes promoted at the same moment never both succeed.  Returns 0
 * when the node may go ahead (granted, or no peer connected).
 */
int drbd_request_promotion(BDRVDrbdState *s, Error **errp)
{
    DrbdPeer *peer = drbd_peer_get(s);
    QEMUTimer *timer;
    bool timed_out = false;
    int reply;

    if (!peer) {
        return 0;
    }
    qemu_mutex_lock(&s->lock);
    s->conn.promote_pending = true;
    s->conn.promote_reply = -1;
    peer->running++;        /* for the sending coroutine */
    qemu_mutex_unlock(&s->lock);

    aio_co_enter(bdrv_get_aio_context(s->bs),
                 qemu_coroutine_create(drbd_send_state_req_co, peer));

    timer = aio_timer_new(qemu_get_aio_context(), QEMU_CLOCK_REALTIME,
                          SCALE_NS, drbd_timer_set_flag, &timed_out);
    timer_mod(timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
              s->conn.ping_timeout_ns);
    AIO_WAIT_WHILE_UNLOCKED(NULL, qatomic_read(&s->conn.promote_reply) < 0 &&
                            !qatomic_read(&peer->broken) && !timed_out);
    timer_free(timer);

    qemu_mutex_lock(&s->lock);
    reply = s->conn.promote_reply;
    s->conn.promote_pending = false;
    qemu_mutex_unlock(&s->lock);
    drbd_peer_put(peer);

    if (reply == DRBD_STATE_REPLY_GRANTED) {
        return 0;
    }
    if (reply == DRBD_STATE_REPLY_REFUSED) {
        error_setg(errp, "the peer refused: it is primary, or is being "
                   "promoted itself");
        return -EBUSY;
    }
    error_setg(errp, "the peer did not answer the promotion request%s",
               timed_out ? " in time" : ": the connection was lost");
    error_append_hint(errp, "Try again: a disconnected node can be "
                      "promoted on its own.\n");
    return -ETIMEDOUT;
}

/* Tell the peer our role and disk state, after a promotion or demotion */
void drbd_announce_role(BDRVDrbdState *s)
{
    DrbdPeer *peer = drbd_peer_get(s);

    if (peer) {
        aio_co_enter(bdrv_get_aio_context(s->bs),
                     qemu_coroutine_create(drbd_send_state_co, peer));
    }
}

int drbd_promote(BDRVDrbdState *s, bool force, Error **errp)
{
    const char *name = bdrv_get_node_name(s->bs);
    DrbdUuids u;
    int ret;

    qemu_mutex_lock(&s->lock);
    if (s->role == DRBD_ROLE_PRIMARY) {
        qemu_mutex_unlock(&s->lock);
        return 0;
    }
    if (s->conn.peer_role == DRBD_ROLE_PRIMARY) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the peer is primary; demote it first", name);
        return -EBUSY;
    }
    if (s->disk == DRBD_DISK_STATE_FAILED || s->md_failed) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the local disk failed (its metadata could "
                   "not be written)", name);
        error_append_hint(errp, "Check the image, then reopen the node.\n");
        return -EIO;
    }
    if (s->conn.cstate == DRBD_CONN_STATE_WF_REPORT_PARAMS) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the connection handshake is running; try "
                   "again", name);
        return -EAGAIN;
    }
    if (s->disk != DRBD_DISK_STATE_UP_TO_DATE && !force) {
        DrbdDiskState disk = s->disk;

        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the local data is %s, not up-to-date",
                   name, DrbdDiskState_str(disk));
        error_append_hint(errp, "Wait for the resync to finish, or use "
                          "force=true to promote anyway.\n");
        return -EAGAIN;
    }
    qemu_mutex_unlock(&s->lock);

    if (drbd_request_promotion(s, errp) < 0) {
        error_prepend(errp, "'%s': ", name);
        return -EBUSY;
    }
    /*
     * Writes that will not reach the peer's disk start a new data
     * generation, so that the next handshake knows who changed what
     */
    qemu_mutex_lock(&s->lock);
    drbd_uuids_get_locked(s, &u);
    /*
     * Connected, the peer gets every write (and a running resync the
     * rest): no new generation, as with DRBD
     */
    drbd_uuid_promote(&u, s->conn.cstate >= DRBD_CONN_STATE_CONNECTED, force,
                      drbd_fresh_uuid());
    drbd_uuids_set_locked(s, &u);
    /* On disk before the first write as primary can be */
    s->md_primary_pending = true;
    s->hs_gen++;
    qemu_mutex_unlock(&s->lock);
    ret = drbd_md_sync(s);
    if (ret < 0) {
        qemu_mutex_lock(&s->lock);
        s->md_primary_pending = false;
        qemu_mutex_unlock(&s->lock);
        error_setg_errno(errp, -ret, "'%s': could not write the metadata; "
                         "not promoted", name);
        return ret;
    }

    drbd_set_state(s, DRBD_ROLE_PRIMARY, -1,
                   force ? DRBD_DISK_STATE_UP_TO_DATE : -1, -1, -1,
                   force ? "promoted (forced)" : "promoted");
    qemu_mutex_lock(&s->lock);
    s->md_primary_pending = false;
    qemu_mutex_unlock(&s->lock);
    drbd_announce_role(s);
    if (force) {
        /* A new generation while connected: let the handshake decide */
        DrbdPeer *peer = drbd_peer_get(s);

        if (peer) {
            drbd_peer_fail(peer, "forced promotion: connecting again");
            drbd_peer_put(peer);
        }
    }
    return 0;
}

/*
 * drbd-invalidate: our data is to be replaced by the peer's, all of it;
 * drbd-invalidate-remote: the peer's by ours.  Both mark the whole disk
 * out of sync, durably, and let the handshake (again, if connected)
 * start the resync: an inconsistent disk is always the sync target, and
 * a new generation makes this node the source.
 */
int drbd_invalidate(BDRVDrbdState *s, bool remote, Error **errp)
{
    const char *name = bdrv_get_node_name(s->bs);
    DrbdPeer *peer;
    DrbdUuids u;
    int ret;

    qemu_mutex_lock(&s->lock);
    if (!remote && s->role == DRBD_ROLE_PRIMARY) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s' is primary: demote it before discarding its "
                   "data", name);
        return -EBUSY;
    }
    if (remote && s->disk != DRBD_DISK_STATE_UP_TO_DATE) {
        DrbdDiskState disk = s->disk;

        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the local data is %s: it cannot replace "
                   "the peer's", name, DrbdDiskState_str(disk));
        return -EAGAIN;
    }
    if (remote && s->conn.peer_role == DRBD_ROLE_PRIMARY) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the peer is primary: demote it before "
                   "discarding its data", name);
        return -EBUSY;
    }
    if (s->conn.cstate == DRBD_CONN_STATE_SYNC_SOURCE ||
        s->conn.cstate == DRBD_CONN_STATE_SYNC_TARGET ||
        s->conn.cstate == DRBD_CONN_STATE_WF_REPORT_PARAMS) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': a resync or a connection handshake is "
                   "running; try again when it is over", name);
        return -EBUSY;
    }
    drbd_oos_set_locked(s, 0, s->size);
    drbd_uuids_get_locked(s, &u);
    if (remote) {
        drbd_uuid_new_current(&u, drbd_fresh_uuid());
    } else {
        /* Our data names no generation any more: any peer's is newer */
        drbd_uuid_init(&u);
    }
    drbd_uuids_set_locked(s, &u);
    qemu_mutex_unlock(&s->lock);

    if (!remote) {
        drbd_set_state(s, -1, -1, DRBD_DISK_STATE_INCONSISTENT, -1, -1,
                       "invalidated: full resync from the peer");
    }
    ret = drbd_md_sync_all(s);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "'%s': could not write the metadata",
                         name);
        return ret;
    }

    peer = drbd_peer_get(s);
    if (peer) {
        drbd_peer_fail(peer, remote ? "the peer's data was invalidated" :
                       "the local data was invalidated");
        drbd_peer_put(peer);
    }
    return 0;
}

int drbd_demote(BDRVDrbdState *s, Error **errp)
{
    DrbdUuids u;
    int ret;

    /* Guest requests in flight complete first; later ones are refused */
    bdrv_drained_begin(s->bs);
    drbd_set_state(s, DRBD_ROLE_SECONDARY, -1, -1, -1, -1, "demoted");
    bdrv_drained_end(s->bs);
    qemu_mutex_lock(&s->lock);
    drbd_uuids_get_locked(s, &u);
    drbd_uuid_demote(&u);
    drbd_uuids_set_locked(s, &u);
    qemu_mutex_unlock(&s->lock);
    ret = drbd_md_sync(s);
    drbd_announce_role(s);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "'%s' is demoted, but its metadata "
                         "could not be written", bdrv_get_node_name(s->bs));
        return ret;
    }
    return 0;
}
