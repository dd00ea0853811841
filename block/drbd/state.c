/*
 * DRBD-style replication: roles, connection and disk states
 *
 * Every state change goes through drbd_set_state(), which emits one
 * DRBD_STATE_CHANGE event when something changed; promotion and demotion
 * apply DRBD's rules.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block_int.h"
#include "qapi/error.h"
#include "qapi/qapi-events-drbd.h"
#include "trace.h"

#include "drbd-int.h"

/*
 * Change what is not negative among @role, @cstate, @disk, @peer_role and
 * @peer_disk; emit an event naming @reason when anything changed.
 */
void drbd_set_state(BDRVDrbdState *s, int role, int cstate, int disk,
                    int peer_role, int peer_disk, const char *reason)
{
    DrbdRole r, pr;
    DrbdConnState c;
    DrbdDiskState d, pd;
    bool changed = false;

    qemu_mutex_lock(&s->lock);
    if ((role >= 0 && s->role != role) || (disk >= 0 && s->disk != disk)) {
        s->hs_gen++;    /* a running handshake decided on old facts */
    }
#define DRBD_SET(field, value) \
    do { \
        if ((value) >= 0 && s->field != (value)) { \
            s->field = (value); \
            changed = true; \
        } \
    } while (0)
    DRBD_SET(role, role);
    DRBD_SET(cstate, cstate);
    DRBD_SET(disk, disk);
    DRBD_SET(peer_role, peer_role);
    DRBD_SET(peer_disk, peer_disk);
#undef DRBD_SET
    r = s->role;
    c = s->cstate;
    d = s->disk;
    pr = s->peer_role;
    pd = s->peer_disk;
    qemu_mutex_unlock(&s->lock);

    if (!changed) {
        return;
    }
    reason = reason ?: "";
    trace_drbd_state(s->bs, DrbdRole_str(r), DrbdConnState_str(c),
                     DrbdDiskState_str(d), DrbdRole_str(pr),
                     DrbdDiskState_str(pd), reason);
    qapi_event_send_drbd_state_change(bdrv_get_node_name(s->bs), r, pr, c,
                                      d, pd, reason);
}

void drbd_fill_info(BDRVDrbdState *s, DrbdInfo *info)
{
    DrbdCounters *c = g_new0(DrbdCounters, 1);

    qemu_mutex_lock(&s->lock);
    info->node_name = g_strdup(bdrv_get_node_name(s->bs));
    info->resource = g_strdup(s->resource);
    info->node_id = s->node_id;
    info->role = s->role;
    info->peer_role = s->peer_role;
    info->connection = s->cstate;
    info->disk = s->disk;
    info->peer_disk = s->peer_disk;
    info->protocol = s->protocol - 'A';

    c->ns = s->ns / KiB;
    c->nr = s->nr / KiB;
    c->dw = s->dw / KiB;
    c->dr = s->dr / KiB;
    c->al = s->al_writes;
    c->bm = s->bm_writes;
    c->lo = s->lo;
    c->pe = s->pe;
    c->ua = s->ua;
    c->ap = s->ap;
    c->ep = s->cur_epoch + 1 - s->barrier_acked_upto;
    c->oos = hbitmap_count(s->oos) / KiB;
    info->counters = c;

    if (s->cstate == DRBD_CONN_STATE_SYNC_SOURCE ||
        s->cstate == DRBD_CONN_STATE_SYNC_TARGET) {
        info->resync = g_new0(DrbdResyncInfo, 1);
        info->resync->total = s->resync_total;
        info->resync->done = s->cstate == DRBD_CONN_STATE_SYNC_SOURCE ?
            s->resync_done :
            s->resync_total - MIN(s->resync_total, hbitmap_count(s->oos));
        info->resync->rate = s->resync_rate;
    }
    if (s->last_error) {
        info->last_error = g_strdup(s->last_error);
    }
    info->uuids = g_new0(DrbdUuidInfo, 1);
    info->uuids->current = drbd_uuid_hex(s->md.uuid_current);
    info->uuids->bitmap = drbd_uuid_hex(s->md.uuid_bitmap);
    QAPI_LIST_PREPEND(info->uuids->history,
                      drbd_uuid_hex(s->md.uuid_history[1]));
    QAPI_LIST_PREPEND(info->uuids->history,
                      drbd_uuid_hex(s->md.uuid_history[0]));
    qemu_mutex_unlock(&s->lock);
}

int drbd_promote(BDRVDrbdState *s, bool force, Error **errp)
{
    const char *name = bdrv_get_node_name(s->bs);
    DrbdUuids u;

    qemu_mutex_lock(&s->lock);
    if (s->role == DRBD_ROLE_PRIMARY) {
        qemu_mutex_unlock(&s->lock);
        return 0;
    }
    if (s->peer_role == DRBD_ROLE_PRIMARY) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the peer is primary; demote it first", name);
        return -EBUSY;
    }
    if (s->cstate == DRBD_CONN_STATE_WF_REPORT_PARAMS) {
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
    drbd_uuid_promote(&u, s->cstate >= DRBD_CONN_STATE_CONNECTED, force,
                      drbd_fresh_uuid());
    drbd_uuids_set_locked(s, &u);
    /* On disk before the first write as primary can be */
    s->md_primary_pending = true;
    s->hs_gen++;
    qemu_mutex_unlock(&s->lock);
    drbd_md_sync(s);

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
    if (remote && s->peer_role == DRBD_ROLE_PRIMARY) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the peer is primary: demote it before "
                   "discarding its data", name);
        return -EBUSY;
    }
    if (s->cstate == DRBD_CONN_STATE_SYNC_SOURCE ||
        s->cstate == DRBD_CONN_STATE_SYNC_TARGET ||
        s->cstate == DRBD_CONN_STATE_WF_REPORT_PARAMS) {
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

    /* Guest requests in flight complete first; later ones are refused */
    bdrv_drained_begin(s->bs);
    drbd_set_state(s, DRBD_ROLE_SECONDARY, -1, -1, -1, -1, "demoted");
    bdrv_drained_end(s->bs);
    qemu_mutex_lock(&s->lock);
    drbd_uuids_get_locked(s, &u);
    drbd_uuid_demote(&u);
    drbd_uuids_set_locked(s, &u);
    qemu_mutex_unlock(&s->lock);
    drbd_md_sync(s);
    drbd_announce_role(s);
    return 0;
}
