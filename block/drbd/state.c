/*
 * DRBD-style replication: roles, connection and disk states, and the
 * generation UUIDs
 *
 * Every state change goes through drbd_set_state(), which emits one
 * DRBD_STATE_CHANGE event when something changed.  The UUIDs live in
 * s->md, with or without metadata on disk.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block_int.h"
#include "qapi/error.h"
#include "qapi/qapi-events-drbd.h"
#include "qemu/error-report.h"
#include "qemu/guest-random.h"
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
    if (disk >= 0 && s->md_failed) {
        /* A failed disk stays failed until the node is opened again */
        disk = DRBD_DISK_STATE_FAILED;
    }
#define DRBD_SET(field, value) \
    do { \
        if ((value) >= 0 && s->field != (value)) { \
            s->field = (value); \
            changed = true; \
        } \
    } while (0)
    DRBD_SET(role, role);
    DRBD_SET(conn.cstate, cstate);
    DRBD_SET(disk, disk);
    DRBD_SET(conn.peer_role, peer_role);
    DRBD_SET(conn.peer_disk, peer_disk);
#undef DRBD_SET
    r = s->role;
    c = s->conn.cstate;
    d = s->disk;
    pr = s->conn.peer_role;
    pd = s->conn.peer_disk;
    qemu_mutex_unlock(&s->lock);

    if (!changed) {
        return;
    }
    if (s->blocker_bh) {
        /* Whether a migration could hand over may have changed */
        qemu_bh_schedule(s->blocker_bh);
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
    info->auto_promote = s->auto_promote;
    info->peer_role = s->conn.peer_role;
    info->connection = s->conn.cstate;
    info->disk = s->disk;
    info->peer_disk = s->conn.peer_disk;
    info->protocol = s->conn.protocol - 'A';

    c->ns = s->conn.ns;
    c->nr = s->conn.nr;
    c->dw = s->dw;
    c->dr = s->dr;
    c->al = s->al_writes;
    c->bm = s->bm_writes;
    c->lo = s->lo;
    c->pe = s->conn.pe;
    c->ua = s->conn.ua;
    c->ap = s->ap;
    c->ep = s->conn.cur_epoch + 1 - s->conn.barrier_acked_upto;
    c->oos = hbitmap_count(s->oos);
    c->same_csum = s->conn.same_csum;
    info->counters = c;

    if (s->conn.cstate == DRBD_CONN_STATE_SYNC_SOURCE ||
        s->conn.cstate == DRBD_CONN_STATE_SYNC_TARGET) {
        info->resync = g_new0(DrbdResyncInfo, 1);
        info->resync->total = s->conn.resync_total;
        info->resync->done = s->conn.cstate == DRBD_CONN_STATE_SYNC_SOURCE ?
            s->conn.resync_done :
            s->conn.resync_total - MIN(s->conn.resync_total,
                                       hbitmap_count(s->oos));
        info->resync->rate = s->conn.resync_rate;
    }
    if (s->conn.verify) {
        DrbdVerify *v = s->conn.verify;

        info->verify = g_new0(DrbdVerifyInfo, 1);
        info->verify->start = v->start;
        info->verify->length = v->end - v->start;
        info->verify->done = v->done;
        info->verify->out_of_sync = v->out_of_sync;
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

/*
 * The node as messages name it: its node name, or where the user gave
 * none (qemu-io or qemu-img with a file name, -drive without node-name),
 * the name of its image, which the user knows
 */
const char *drbd_name(BDRVDrbdState *s)
{
    const char *name = bdrv_get_node_name(s->bs);

    if (name[0] == '#' && s->bs->file && s->bs->file->bs->filename[0]) {
        return s->bs->file->bs->filename;
    }
    return name;
}

/* The generation UUIDs live in s->md, with or without metadata on disk */
void drbd_uuids_get_locked(BDRVDrbdState *s, DrbdUuids *u)
{
    u->current = s->md.uuid_current;
    u->bitmap = s->md.uuid_bitmap;
    u->history[0] = s->md.uuid_history[0];
    u->history[1] = s->md.uuid_history[1];
}

void drbd_uuids_set_locked(BDRVDrbdState *s, const DrbdUuids *u)
{
    s->hs_gen++;
    s->md.uuid_current = u->current;
    s->md.uuid_bitmap = u->bitmap;
    s->md.uuid_history[0] = u->history[0];
    s->md.uuid_history[1] = u->history[1];
}

/* A UUID as query-drbd, info drbd and qemu-img info show it */
char *drbd_uuid_hex(uint64_t uuid)
{
    return g_strdup_printf("%016" PRIX64, uuid);
}

uint64_t drbd_fresh_uuid(void)
{
    uint64_t v;

    qemu_guest_getrandom_nofail(&v, sizeof(v));
    return v;
}

/*
 * The resync with @peer is complete: both nodes are in the same data
 * generation now.  The source moves its bitmap UUID to the history; the
 * target takes the source's UUIDs as they are after that.
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
    drbd_uuids_get_locked(s, &u);
    if (peer->decision == DRBD_SYNC_SOURCE ||
        peer->decision == DRBD_SYNC_FULL_SOURCE) {
        drbd_uuid_resync_finished_source(&u);
    } else {
        uint64_t flag = u.current & DRBD_UUID_PRIMARY_FLAG;

        u = peer->hs_uuids;
        drbd_uuid_resync_finished_source(&u);
        u.current = (u.current & ~DRBD_UUID_PRIMARY_FLAG) | flag;
    }
    drbd_uuids_set_locked(s, &u);
    qemu_mutex_unlock(&s->lock);
}

/*
 * Keep @reason as the connection's last error and log it with @what in
 * front, once: not again while the same reason repeats at every attempt
 * to connect
 */
void drbd_note_reason(BDRVDrbdState *s, const char *what, const char *reason)
{
    bool repeated;

    trace_drbd_conn_error(s->bs, reason);
    qemu_mutex_lock(&s->lock);
    repeated = !g_strcmp0(s->last_error, reason);
    g_free(s->last_error);
    s->last_error = g_strdup(reason);
    qemu_mutex_unlock(&s->lock);
    if (!repeated) {
        warn_report("drbd node '%s': %s%s", drbd_name(s), what, reason);
    }
}

void drbd_note_error(BDRVDrbdState *s, Error *err)
{
    if (!err) {
        return;
    }
    drbd_note_reason(s, "", error_get_pretty(err));
    error_free(err);
}
