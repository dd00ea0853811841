/*
 * DRBD-style replication: roles, connection and disk states, and the
 * generation UUIDs
 *
 * Every state change goes through drbd_set_state(), which emits one
 * DRBD_STATE_CHANGE event when something changed.  The UUIDs live in
 * s->md.sb, with or without metadata on disk.
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
#include "qemu/timer.h"
#include "trace.h"

#include "drbd-int.h"

static void drbd_quorum_wake_locked(BDRVDrbdState *s);
static void drbd_fence_update_locked(BDRVDrbdState *s);

/*
 * Change what is not negative among the node's @role and @disk, and the
 * @cstate, @peer_role and @peer_disk of its connection @conn (NULL if
 * those are all negative); emit an event naming @reason when anything
 * changed.
 */
void drbd_set_state(BDRVDrbdState *s, DrbdConnection *conn, int role,
                    int cstate, int disk, int peer_role, int peer_disk,
                    const char *reason)
{
    DrbdRole r, pr;
    DrbdConnState c;
    DrbdDiskState d, pd;
    uint8_t peer_id;
    bool changed = false, quorum_changed, quorum;
    unsigned present;

    assert(conn || (cstate < 0 && peer_role < 0 && peer_disk < 0));
    qemu_mutex_lock(&s->lock);
    if ((role >= 0 && s->role != role) || (disk >= 0 && s->disk != disk)) {
        s->hs_gen++;    /* a running handshake decided on old facts */
    }
    if (disk >= 0 && s->detached && !drbd_disk_detached(disk)) {
        /* A detached node stays diskless until it is opened again */
        disk = DRBD_DISK_STATE_DISKLESS;
    }
#define DRBD_SET(field, value) \
    do { \
        if ((value) >= 0 && (field) != (value)) { \
            (field) = (value); \
            changed = true; \
        } \
    } while (0)
    DRBD_SET(s->role, role);
    DRBD_SET(s->disk, disk);
    if (conn) {
        DRBD_SET(conn->cstate, cstate);
        DRBD_SET(conn->peer_role, peer_role);
        DRBD_SET(conn->peer_disk, peer_disk);
    }
#undef DRBD_SET
    if (conn && conn->cstate >= DRBD_CONN_STATE_CONNECTED) {
        /* Back: nothing to fence, and whatever was fenced is over */
        conn->fence_candidate = false;
        conn->fence_pending = false;
        s->md.sb.flags &= ~DRBD_MDF_PEER_OUTDATED;
    }
    drbd_fence_update_locked(s);
    drbd_quorum_update_locked(s);
    quorum_changed = s->quorum.need && s->quorum.has != s->quorum.reported;
    if (quorum_changed) {
        s->quorum.reported = s->quorum.has;
    }
    quorum = s->quorum.has;
    present = s->quorum.present;
    /* A change of the node's own states names its first peer */
    conn = conn ?: drbd_conn(s);
    r = s->role;
    c = conn->cstate;
    d = s->disk;
    pr = conn->peer_role;
    pd = conn->peer_disk;
    peer_id = conn->peer_node_id;
    if (changed) {
        /* A job that waits for the node's state looks again (job.c) */
        drbd_jobs_wake_locked(s);
    }
    if (changed || quorum_changed) {
        /*
         * Guest requests that wait for quorum look again (the quorum is
         * back, or a demotion fails them)
         */
        drbd_quorum_wake_locked(s);
    }
    qemu_mutex_unlock(&s->lock);

    if (quorum_changed) {
        trace_drbd_quorum(s->bs, quorum, present, s->quorum.need);
        qapi_event_send_drbd_quorum_change(bdrv_get_node_name(s->bs), quorum,
                                           present, s->quorum.need);
    }
    if (!changed) {
        return;
    }
    reason = reason ?: "";
    trace_drbd_state(s->bs, DrbdRole_str(r), DrbdConnState_str(c),
                     DrbdDiskState_str(d), DrbdRole_str(pr),
                     DrbdDiskState_str(pd), reason);
    qapi_event_send_drbd_state_change(bdrv_get_node_name(s->bs), r,
                                      peer_id, pr, c, d, pd, reason);
}

/* A connection of @s to the peer @peer_node_id, not configured yet */
DrbdConnection *drbd_conn_new(BDRVDrbdState *s, uint8_t peer_node_id)
{
    DrbdConnection *conn = g_new0(DrbdConnection, 1);

    conn->s = s;
    conn->peer_node_id = peer_node_id;
    conn->cstate = DRBD_CONN_STATE_STANDALONE;
    conn->peer_role = DRBD_ROLE_UNKNOWN;
    conn->peer_disk = DRBD_DISK_STATE_DUNKNOWN;
    qemu_co_queue_init(&conn->barrier_waiters);
    qemu_co_mutex_init(&conn->state_req_lock);
    ratelimit_init(&conn->resync_limit);
    return conn;
}

/* After the connection manager ended */
void drbd_conn_free(DrbdConnection *conn)
{
    if (!conn) {
        return;
    }
    assert(!conn->peer && !conn->conn_co);
    ratelimit_destroy(&conn->resync_limit);
    qapi_free_SocketAddress(conn->listen_addr);
    qapi_free_SocketAddress(conn->peer_addr);
    g_free(conn->last_error);
    g_clear_pointer(&conn->degraded_timer, timer_free);
    g_free(conn);
}

/* Whether @s has peers: a listen or peer address for one at least */
bool drbd_replicates(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (s->conns[i]->listen_addr || s->conns[i]->peer_addr) {
            return true;
        }
    }
    return false;
}

/* Whether a peer of @s is primary; under s->lock */
bool drbd_peer_primary_locked(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (s->conns[i]->peer_role == DRBD_ROLE_PRIMARY) {
            return true;
        }
    }
    return false;
}

uint32_t drbd_promotion_answer_locked(DrbdConnection *conn, uint64_t uuid)
{
    BDRVDrbdState *s = conn->s;
    uint64_t bitmaps[DRBD_MD_MAX_PEERS];
    DrbdUuids u;
    bool older;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];

        if (c == conn) {
            continue;
        }
        if (c->peer_role == DRBD_ROLE_PRIMARY) {
            return DRBD_STATE_REPLY_PRIMARY_PEER;
        }
        if (c->promote_granted) {
            /* Another peer is being promoted with our consent */
            return DRBD_STATE_REPLY_REFUSED;
        }
    }
    if (s->detached) {
        /* No data: what it heard of alone */
        older = drbd_uuid_known_older(NULL, NULL, 0, &s->gen_seen, uuid);
    } else {
        u = (DrbdUuids) {
            .current = s->md.sb.uuid_current,
            .history = { s->md.sb.uuid_history[0],
                         s->md.sb.uuid_history[1] },
        };
        for (i = 0; i < s->md.sb.max_peers; i++) {
            bitmaps[i] = drbd_md_slot_uuid(&s->md.sb, i);
        }
        older = drbd_uuid_known_older(&u, bitmaps, s->md.sb.max_peers,
                                      &s->gen_seen, uuid);
    }
    return older ? DRBD_STATE_REPLY_BEHIND : DRBD_STATE_REPLY_GRANTED;
}

/*
 * Whether a connection of @s is in one of the states of @mask (bits
 * DRBD_CONN_BIT(state)); under s->lock
 */
bool drbd_conn_in_locked(BDRVDrbdState *s, unsigned mask)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (mask & DRBD_CONN_BIT(s->conns[i]->cstate)) {
            return true;
        }
    }
    return false;
}

/* The longest ping-timeout of @s's connections: a wait for all of them */
uint64_t drbd_ping_timeout_ns(BDRVDrbdState *s)
{
    uint64_t ns = 0;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        ns = MAX(ns, s->conns[i]->ping_timeout_ns);
    }
    return ns;
}

bool drbd_disk_detached(DrbdDiskState d)
{
    return d == DRBD_DISK_STATE_DISKLESS || d == DRBD_DISK_STATE_FAILED;
}

/* A failed request's kind, as a log message names it */
static const char *drbd_io_op_name(DrbdIoOperation op)
{
    return op == DRBD_IO_OPERATION_METADATA ? "metadata access" :
           DrbdIoOperation_str(op);
}

/*
 * Stop using the local disk, for good until a disk is attached again:
 * the disk state goes diskless (through failed, if @failed), writes
 * waiting for the activity log go on without it, and disk_error_bh
 * writes a last superblock and tells the peer.  Returns whether this
 * call detached the node (false: it was detached already).  Any thread,
 * without s->lock.
 */
bool drbd_detach(BDRVDrbdState *s, const char *reason, bool failed)
{
    bool first;

    qemu_mutex_lock(&s->lock);
    first = !s->detached;
    qatomic_set(&s->detached, true);
    /* Writes waiting for an activity-log transaction go on without */
    qemu_co_queue_restart_all(&s->md.al_queue);
    qemu_mutex_unlock(&s->lock);
    if (!first) {
        return false;
    }
    if (failed) {
        drbd_set_state(s, NULL, -1, -1, DRBD_DISK_STATE_FAILED, -1, -1,
                       "the local disk failed");
    }
    drbd_set_state(s, NULL, -1, -1, DRBD_DISK_STATE_DISKLESS, -1, -1, reason);
    if (s->disk_error_bh) {
        /* The superblock says so, best effort, and the peer is told */
        qemu_bh_schedule(s->disk_error_bh);
    }
    return true;
}

/*
 * The local disk failed a request of kind @op with @ret: apply the
 * node's on-io-error.  Returns true if the node is detached (now, or
 * before), so that the caller completes the request without the disk,
 * through the peer where it can; false if the error is the caller's to
 * pass on.  Metadata errors detach under every policy (the node could
 * not keep its record of what the peer lacks), and so do flushes of a
 * node that is not primary (the writes it acked are not known to be on
 * its disk).  Any thread, without s->lock.
 */
bool drbd_local_error(BDRVDrbdState *s, DrbdIoOperation op, int ret)
{
    g_autofree char *why = ret == -ETIMEDOUT ?
        g_strdup_printf("no answer within disk-timeout (%" PRIu64 " ms)",
                        s->disk_timeout_ns / SCALE_MS) :
        g_strdup(strerror(-ret));
    bool detach;

    qemu_mutex_lock(&s->lock);
    detach = s->on_io_error != DRBD_ON_IO_ERROR_PASS_ON ||
             op == DRBD_IO_OPERATION_METADATA ||
             (op == DRBD_IO_OPERATION_FLUSH &&
              s->role != DRBD_ROLE_PRIMARY);
    qemu_mutex_unlock(&s->lock);
    trace_drbd_local_error(s->bs, DrbdIoOperation_str(op), ret,
                           DrbdOnIoError_str(s->on_io_error), detach);

    if (!detach) {
        if (!qatomic_xchg(&s->pass_on_reported, true)) {
            error_report("drbd node '%s' (resource %s): a local %s failed: "
                         "%s; the node keeps its disk (on-io-error=pass-on): "
                         "%s; further errors are traced, not logged",
                         drbd_name(s), s->resource, drbd_io_op_name(op),
                         why, op == DRBD_IO_OPERATION_READ ?
                         "the read is retried on the peer" :
                         s->role == DRBD_ROLE_PRIMARY ?
                         "the guest gets the error" :
                         "the primary marks the range out of sync, and this "
                         "node's data is inconsistent");
        }
        return false;
    }
    if (qatomic_read(&s->detached)) {
        return true;
    }
    error_report("drbd node '%s' (resource %s): a local %s failed: %s; "
                 "detaching from the disk (on-io-error=%s): guest I/O is "
                 "served by the peer while an up-to-date one is connected",
                 drbd_name(s), s->resource, drbd_io_op_name(op), why,
                 DrbdOnIoError_str(s->on_io_error));
    error_printf("Replace the disk (drbd-attach), or repair it and open "
                 "the node again: it resyncs from its peer.\n");
    if (drbd_detach(s, "detached after a local disk error", true) &&
        s->on_io_error == DRBD_ON_IO_ERROR_REPORT) {
        qapi_event_send_drbd_io_error(bdrv_get_node_name(s->bs), op, why,
                                      "detach");
    }
    return true;
}

/* @conn's peer and connection; under s->lock */
static DrbdPeerInfo *drbd_peer_info_locked(DrbdConnection *conn)
{
    DrbdPeerInfo *p = g_new0(DrbdPeerInfo, 1);

    p->node_id = conn->peer_node_id;
    p->connection = conn->cstate;
    p->role = conn->peer_role;
    p->disk = conn->peer_disk;
    p->protocol = conn->protocol - 'A';
    p->ns = stat64_get(&conn->ns);
    p->nr = stat64_get(&conn->nr);
    p->pe = qatomic_read(&conn->pe);
    p->ua = qatomic_read(&conn->ua);
    p->out_of_sync = conn->oos ? hbitmap_count(conn->oos) : 0;
    p->fence_pending = conn->fence_pending;
    if (conn->peer) {
        p->has_protocol_version = true;
        p->protocol_version = conn->peer->version;
    }
    p->last_error = g_strdup(conn->last_error);
    return p;
}

void drbd_fill_info(BDRVDrbdState *s, DrbdInfo *info)
{
    DrbdPeerInfoList **tail = &info->peers;
    unsigned i;

    DrbdConnection *conn = drbd_conn(s);
    DrbdCounters *c = g_new0(DrbdCounters, 1);
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

    qemu_mutex_lock(&s->lock);
    info->node_name = g_strdup(bdrv_get_node_name(s->bs));
    info->resource = g_strdup(s->resource);
    info->node_id = s->node_id;
    info->role = s->role;
    info->auto_promote = s->auto_promote;
    info->peer_role = conn->peer_role;
    info->connection = conn->cstate;
    info->disk = s->disk;
    info->peer_disk = conn->peer_disk;
    info->protocol = conn->protocol - 'A';

    c->ns = stat64_get(&conn->ns);
    c->nr = stat64_get(&conn->nr);
    c->dw = stat64_get(&s->dw);
    c->dr = stat64_get(&s->dr);
    c->al = stat64_get(&s->al_writes);
    c->bm = stat64_get(&s->bm_writes);
    c->lo = qatomic_read(&s->lo);
    c->pe = qatomic_read(&conn->pe);
    c->ua = qatomic_read(&conn->ua);
    c->ap = qatomic_read(&s->ap);
    c->ep = conn->cur_epoch + 1 - conn->barrier_acked_upto;
    c->oos = conn->oos ? hbitmap_count(conn->oos) : 0;
    c->same_csum = conn->same_csum;
    info->counters = c;

    if (conn->cstate == DRBD_CONN_STATE_SYNC_SOURCE ||
        conn->cstate == DRBD_CONN_STATE_SYNC_TARGET) {
        DrbdResyncInfo *r = g_new0(DrbdResyncInfo, 1);
        DrbdPaceSpeed sp;

        r->total = conn->resync_total;
        r->done = drbd_resync_done_locked(conn);
        r->rate = conn->resync_rate;
        drbd_pace_marks_note(&conn->resync_marks, now, r->done);
        sp = drbd_pace_marks_speed(&conn->resync_marks, now, r->done,
                                   r->total);
        r->speed = sp.speed;
        r->average_speed = sp.average;
        r->has_finish = sp.finish >= 0;
        r->finish = MAX(sp.finish, 0);
        r->paused_after = g_strdup(conn->resync_paused_after);
        r->paused = conn->cstate == DRBD_CONN_STATE_SYNC_SOURCE &&
                    conn->resync_job && conn->resync_job->paused;
        info->resync = r;
    }
    if (conn->verify) {
        DrbdVerify *v = conn->verify;
        DrbdVerifyInfo *vi = g_new0(DrbdVerifyInfo, 1);
        DrbdPaceSpeed sp;

        vi->start = v->start;
        vi->length = v->end - v->start;
        vi->done = v->done;
        vi->out_of_sync = v->out_of_sync;
        drbd_pace_marks_note(&v->marks, now, v->done);
        sp = drbd_pace_marks_speed(&v->marks, now, v->done, vi->length);
        vi->speed = sp.speed;
        vi->average_speed = sp.average;
        vi->has_finish = sp.finish >= 0;
        vi->finish = MAX(sp.finish, 0);
        info->verify = vi;
    }
    if (s->last_error) {
        info->last_error = g_strdup(s->last_error);
    }
    info->degraded = drbd_degraded_str_locked(s);
    info->quorum = s->quorum.has;
    info->io_suspended = !QSLIST_EMPTY(&s->quorum.waiters) ||
                         s->fence_suspended;
    info->uuids = g_new0(DrbdUuidInfo, 1);
    info->uuids->current = drbd_uuid_hex(s->md.sb.uuid_current);
    info->uuids->bitmap = drbd_uuid_hex(drbd_md_slot_uuid(&s->md.sb,
                                                          conn->slot));
    QAPI_LIST_PREPEND(info->uuids->history,
                      drbd_uuid_hex(s->md.sb.uuid_history[1]));
    QAPI_LIST_PREPEND(info->uuids->history,
                      drbd_uuid_hex(s->md.sb.uuid_history[0]));
    for (i = 0; i < s->nr_conns; i++) {
        QAPI_LIST_APPEND(tail, drbd_peer_info_locked(s->conns[i]));
    }
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

/*
 * The drbd nodes of this process, for resync-after: any thread, under
 * drbd_nodes_lock, which is taken before any node's lock
 */
static QemuMutex drbd_nodes_lock;
static QLIST_HEAD(, BDRVDrbdState) drbd_nodes =
    QLIST_HEAD_INITIALIZER(drbd_nodes);

static void __attribute__((__constructor__)) drbd_nodes_init(void)
{
    qemu_mutex_init(&drbd_nodes_lock);
}

void drbd_nodes_add(BDRVDrbdState *s)
{
    qemu_mutex_lock(&drbd_nodes_lock);
    QLIST_INSERT_HEAD(&drbd_nodes, s, next);
    qemu_mutex_unlock(&drbd_nodes_lock);
}

void drbd_nodes_remove(BDRVDrbdState *s)
{
    qemu_mutex_lock(&drbd_nodes_lock);
    QLIST_REMOVE(s, next);
    qemu_mutex_unlock(&drbd_nodes_lock);
}

/* Under drbd_nodes_lock: the drbd node named @name, if it is open */
static BDRVDrbdState *drbd_nodes_find(const char *name)
{
    BDRVDrbdState *o;

    QLIST_FOREACH(o, &drbd_nodes, next) {
        if (!strcmp(bdrv_get_node_name(o->bs), name)) {
            return o;
        }
    }
    return NULL;
}

/*
 * At open, before drbd_nodes_add(): whether s's resync-after would make
 * a chain of nodes that loops back to s
 */
bool drbd_resync_after_check(BDRVDrbdState *s, Error **errp)
{
    const char *self = bdrv_get_node_name(s->bs);
    const char *name = s->resync_after;
    unsigned hops = 0;
    bool ok = true;

    qemu_mutex_lock(&drbd_nodes_lock);
    while (name) {
        BDRVDrbdState *o;

        if (!strcmp(name, self) || ++hops > 1000) {
            error_setg(errp, "resync-after '%s' would make node '%s' wait "
                       "for its own resync", s->resync_after, self);
            ok = false;
            break;
        }
        o = drbd_nodes_find(name);
        name = o ? o->resync_after : NULL;
    }
    qemu_mutex_unlock(&drbd_nodes_lock);
    return ok;
}

/*
 * The node name of resync-after while that node resyncs (s must wait),
 * else NULL.  A node that waits for another is a sync source already, so
 * the wait follows chains.
 */
const char *drbd_resync_after_busy(BDRVDrbdState *s)
{
    const char *busy = NULL;
    BDRVDrbdState *o;

    if (!s->resync_after) {
        return NULL;
    }
    qemu_mutex_lock(&drbd_nodes_lock);
    o = drbd_nodes_find(s->resync_after);
    if (o && o != s) {
        unsigned i;

        qemu_mutex_lock(&o->lock);
        for (i = 0; i < o->nr_conns; i++) {
            if (o->conns[i]->cstate == DRBD_CONN_STATE_SYNC_SOURCE ||
                o->conns[i]->cstate == DRBD_CONN_STATE_SYNC_TARGET) {
                busy = s->resync_after;
            }
        }
        qemu_mutex_unlock(&o->lock);
    }
    qemu_mutex_unlock(&drbd_nodes_lock);
    return busy;
}

/* Bytes of the running resync with @conn's peer done, on either side */
uint64_t drbd_resync_done_locked(DrbdConnection *conn)
{
    if (conn->cstate == DRBD_CONN_STATE_SYNC_SOURCE) {
        return conn->resync_done;
    }
    return conn->resync_total - MIN(conn->resync_total,
                                    hbitmap_count(conn->oos));
}

/* A resync starts: its speed counts from now, and nothing holds it yet */
void drbd_resync_marks_start_locked(DrbdConnection *conn)
{
    conn->resync_paused_after = NULL;
    drbd_pace_marks_start(&conn->resync_marks,
                          qemu_clock_get_ns(QEMU_CLOCK_REALTIME), 0);
}

/*
 * The generation UUIDs live in s->md.sb, with or without metadata on
 * disk: the current and history UUIDs are the node's, the bitmap UUID is
 * each peer's (its bitmap slot's).  @conn's view has its bitmap UUID.
 */
void drbd_uuids_get_locked(DrbdConnection *conn, DrbdUuids *u)
{
    DrbdSuperblock *sb = &conn->s->md.sb;

    u->current = sb->uuid_current;
    u->bitmap = drbd_md_slot_uuid(sb, conn->slot);
    u->history[0] = sb->uuid_history[0];
    u->history[1] = sb->uuid_history[1];
}

void drbd_uuids_set_locked(DrbdConnection *conn, const DrbdUuids *u)
{
    BDRVDrbdState *s = conn->s;
    DrbdUuids old;

    drbd_uuids_get_locked(conn, &old);
    if (memcmp(&old, u, sizeof(old))) {
        /*
         * A handshake running with another peer decided on old UUIDs.
         * The same set again (a handshake that found nothing to change)
         * leaves it be: it would fail for nothing, after its peer may
         * have applied its side.
         */
        s->hs_gen++;
    }
    /*
     * A generation the node moves to is the newest it heard of; its own
     * current UUID set again (a bitmap or the history changed) is not:
     * heard of again, it would rank the generations it heard of since
     * (a primary's, in a handshake) as older than its own
     */
    if (!s->detached &&
        (u->current & ~DRBD_UUID_PRIMARY_FLAG) !=
        (s->md.sb.uuid_current & ~DRBD_UUID_PRIMARY_FLAG)) {
        drbd_gen_seen_push(&s->gen_seen, u->current);
    }
    s->md.sb.uuid_current = u->current;
    *drbd_md_slot_uuid_ptr(&s->md.sb, conn->slot) = u->bitmap;
    s->md.sb.uuid_history[0] = u->history[0];
    s->md.sb.uuid_history[1] = u->history[1];
    trace_drbd_uuids_set(s->bs, conn->peer_node_id, u->current, u->bitmap,
                         u->history[0], u->history[1]);
}

/*
 * Whether @c's peer joins a new generation of this node when told: it
 * is connected, in sync, with a disk, and speaks version 5.  Under
 * s->lock.
 */
static bool drbd_uuid_joins_locked(DrbdConnection *c)
{
    return c->cstate == DRBD_CONN_STATE_CONNECTED && c->peer &&
           !qatomic_read(&c->peer->broken) &&
           !drbd_disk_detached(c->peer_disk) &&
           c->peer->version >= DRBD_PROTO_VERSION_NEW_UUID;
}

/*
 * The node's data moves on without some peer (@writes_continue: a
 * primary, or one becoming primary): a new current UUID, and each peer
 * whose bitmap counts from no generation yet counts from the old one,
 * but for those in sync that join the new one (@told: the caller
 * announces it).
 * A peer told of the new one (drbd_announce_new_uuid()) joins it, but
 * may not get the word: its bitmap counts from the old one all the same,
 * which is right either way (a joined peer's next handshake resyncs what
 * its bitmap holds, nothing that it has).
 * (A peer that receives our writes has nothing in its bitmap, and what
 * it lacks later is in it: a bitmap-based resync brings it back, as it
 * does a peer that missed the writes.)  Returns whether it did that.
 */
bool drbd_new_generation_locked(BDRVDrbdState *s, bool writes_continue,
                                bool told)
{
    uint64_t fresh = drbd_fresh_uuid();
    uint64_t old = s->md.sb.uuid_current;
    DrbdUuids u;
    uint64_t bitmap;
    unsigned i;

    if (!writes_continue) {
        return false;
    }
    qatomic_set(&s->gen_acked, false);
    if (!s->quorum.need || qatomic_read(&s->quorum.has)) {
        /*
         * Not without quorum: a write that passed the quorum check just
         * before the quorum went, and waited for the generation before
         * its own (gen_lock), starts one now that a peer went.  No write
         * of it is acknowledged either: the node still yields its
         * changes at the next split brain (primary-lost-quorum).
         */
        s->gen_unacked_lost = false;
    }
    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];

        drbd_uuids_get_locked(c, &u);
        bitmap = u.bitmap;
        u.current = old;
        drbd_uuid_peer_disk_lost(&u, true, fresh);
        if (told && drbd_uuid_joins_locked(c)) {
            /*
             * In sync, it joins the new generation: no bitmap UUID, which
             * would stay behind, stale, while it is (a write it misses
             * from now on is marked in its bitmap all the same)
             */
            u.bitmap = bitmap;
        }
        drbd_uuids_set_locked(c, &u);
    }
    if (s->nr_conns > 1) {
        /*
         * As a peer that joins does: a peer still in the old generation
         * is known to be one behind, whatever its bitmap
         */
        uint64_t current = s->md.sb.uuid_current;

        drbd_uuids_get_locked(s->conns[0], &u);
        u.current = old;
        drbd_uuid_join(&u, current);
        drbd_uuids_set_locked(s->conns[0], &u);
    }
    for (i = 0; i < s->nr_conns; i++) {
        DrbdPeer *peer = s->conns[i]->peer;

        if (peer && !peer->uuids_synced &&
            drbd_sync_is_target(peer->decision)) {
            /* Our writes in it go to our sync source too (meta.c) */
            peer->target_gen = s->md.sb.uuid_current;
            if (told && peer->version >= DRBD_PROTO_VERSION_TARGET_GEN) {
                /*
                 * ... which joins it when told (by the caller, or once
                 * its connection is up: conn.c): a node whose UUIDs lack
                 * it lacks our writes, and is no source for us
                 */
                s->partial_gen = s->md.sb.uuid_current;
            }
        }
    }
    return true;
}

/*
 * Whether @c's peer is told of a new generation of this node: it is
 * connected and speaks version 5.  One in sync with us joins it; a sync
 * target takes it at the resync's end; every peer, a diskless one too,
 * knows from then on that a node without it is behind.  (A peer of
 * version 5 only ever had it in sync, and ignores it otherwise.)  Under
 * s->lock.
 */
bool drbd_uuid_told_locked(DrbdConnection *c)
{
    unsigned mask = DRBD_CONN_BIT(DRBD_CONN_STATE_CONNECTED) |
                    DRBD_CONN_RESYNCING;

    if (c->peer && c->peer->version < DRBD_PROTO_VERSION_GEN_CHECK) {
        return drbd_uuid_joins_locked(c);
    }
    return (DRBD_CONN_BIT(c->cstate) & mask) && c->peer &&
           !qatomic_read(&c->peer->broken);
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

/*
 * The peers missing since the node started, and what that means, or
 * NULL if none is; under s->lock
 */
char *drbd_degraded_str_locked(BDRVDrbdState *s)
{
    g_autoptr(GString) missing = g_string_new(NULL);
    bool several;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];

        if (c->degraded_noted && !c->ever_connected &&
            c->cstate < DRBD_CONN_STATE_CONNECTED) {
            g_string_append_printf(missing, "%s%u", missing->len ? ", " : "",
                                   c->peer_node_id);
        }
    }
    if (!missing->len) {
        return NULL;
    }
    several = strchr(missing->str, ',');
    return g_strdup_printf("running degraded: peer node%s %s not connected "
                           "since the start; writes are tracked in the "
                           "bitmap and resynced to %s when %s back",
                           several ? "s" : "", missing->str,
                           several ? "them" : "it",
                           several ? "they are" : "it is");
}

/*
 * The first attempt to connect to @conn's peer since the node started
 * failed: say once that the node runs without it
 */
void drbd_note_degraded(DrbdConnection *conn)
{
    BDRVDrbdState *s = conn->s;
    g_autofree char *msg = NULL;

    qemu_mutex_lock(&s->lock);
    if (!conn->ever_connected && !conn->degraded_noted &&
        conn->cstate < DRBD_CONN_STATE_CONNECTED) {
        conn->degraded_noted = true;
        msg = drbd_degraded_str_locked(s);
    }
    qemu_mutex_unlock(&s->lock);
    if (msg) {
        trace_drbd_degraded(s->bs, conn->peer_node_id);
        warn_report("drbd node '%s' (resource %s): %s", drbd_name(s),
                    s->resource, msg);
    }
}

/* Likewise, and the peer of @conn keeps it as its own last error */
void drbd_conn_note_error(DrbdConnection *conn, Error *err)
{
    BDRVDrbdState *s = conn->s;

    if (!err) {
        return;
    }
    qemu_mutex_lock(&s->lock);
    g_free(conn->last_error);
    conn->last_error = g_strdup(error_get_pretty(err));
    qemu_mutex_unlock(&s->lock);
    drbd_note_error(s, err);
}

/*
 * Wake the guest requests that wait for quorum, each in its context, from
 * a bottom half there (never entered here: this may run in a drain's
 * start, or hold the lock the request takes).  Under s->lock.
 */
static void drbd_quorum_wake_locked(BDRVDrbdState *s)
{
    DrbdQuorumWaiter *w;

    while ((w = QSLIST_FIRST(&s->quorum.waiters))) {
        QSLIST_REMOVE_HEAD(&s->quorum.waiters, next);
        aio_co_schedule(qemu_coroutine_get_aio_context(w->co), w->co);
    }
}

/*
 * Quorum
 *
 * A node sees itself and each peer it is connected to (the connection
 * established: the handshake is over), whatever the peer's disk, so that
 * a diskless peer is a tie-breaker.  It has quorum while it sees
 * quorum.need nodes, quorum.min_uptodate of them with up-to-date data.
 */
/* A promotion dropped its peers to connect again; under s->lock */
static bool drbd_reconnecting_locked(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (s->conns[i]->rehandshake) {
            return true;
        }
    }
    return false;
}

void drbd_quorum_update_locked(BDRVDrbdState *s)
{
    unsigned present = 1, uptodate, i;
    bool quorum;

    if (!s->quorum.need) {
        qatomic_set(&s->quorum.has, true);
        return;
    }
    uptodate = s->disk == DRBD_DISK_STATE_UP_TO_DATE;
    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];

        if (c->peer && c->cstate >= DRBD_CONN_STATE_CONNECTED) {
            present++;
            uptodate += c->peer_disk == DRBD_DISK_STATE_UP_TO_DATE;
        }
    }
    quorum = present >= s->quorum.need && uptodate >= s->quorum.min_uptodate;
    s->quorum.present = present;
    if (s->quorum.has && !quorum && !drbd_reconnecting_locked(s) &&
        (s->role == DRBD_ROLE_PRIMARY || s->md.primary_pending) &&
        !qatomic_read(&s->gen_acked)) {
        /*
         * No write of this generation was acknowledged, and none will be
         * without quorum: the majority, promoting another node, owes
         * these changes nothing.  (Not so for the reconnects that follow
         * a promotion: the node drops its peers itself, for a moment.)
         */
        s->gen_unacked_lost = true;
    }
    qatomic_set(&s->quorum.has, quorum);
}

/* Why the node may not be promoted for want of quorum; under s->lock */
int drbd_quorum_check_locked(BDRVDrbdState *s, Error **errp)
{
    drbd_quorum_update_locked(s);
    if (s->quorum.has) {
        return 0;
    }
    if (s->quorum.present >= s->quorum.need) {
        error_setg(errp, "no quorum: too few of the %u nodes it sees have "
                   "up-to-date data (quorum-minimum-redundancy %u)",
                   s->quorum.present, s->quorum.min_uptodate);
    } else {
        error_setg(errp, "no quorum: the node sees %u of the resource's %u "
                   "nodes, and quorum needs %u", s->quorum.present,
                   s->nr_conns + 1, s->quorum.need);
    }
    return -EAGAIN;
}

/*
 * A primary's guest request (@write: a write, or the completion of one):
 * 0 while the node has quorum (at once where quorum is off), or else -EIO
 * (on-no-quorum io-error), or a wait until the quorum is back
 * (suspend-io), which drbd-resume-io, a demotion and a drain of the node
 * (which must end: a close, a move, a snapshot) end with -EIO.  A write
 * also waits while a peer is to be fenced (resource-and-stonith), until
 * drbd-resume-io lets it go on (a demotion or a drain fails it).  The
 * first failure of a streak is logged.  (A flush is not held: it makes
 * durable what was written, and no write completed without quorum.)
 */
int coroutine_fn drbd_co_quorum_wait(BDRVDrbdState *s, bool write)
{
    const char *what = write ? "write" : "read";
    /* Writes wait for a peer to be fenced; reads of the newest data not */
    bool fenced = write;
    unsigned present;
    uint64_t gen;
    bool fencing = false;
    int ret = 0;

    if ((!s->quorum.need || qatomic_read(&s->quorum.has)) &&
        !(fenced && qatomic_read(&s->fence_suspended))) {
        return 0;
    }
    qemu_mutex_lock(&s->lock);
    gen = s->quorum.resume_gen;
    while (!s->quorum.has || (fenced && s->fence_suspended)) {
        DrbdQuorumWaiter w = { .co = qemu_coroutine_self() };

        fencing = s->quorum.has;
        if ((!s->quorum.has &&
             (s->quorum.on_no_quorum == DRBD_ON_NO_QUORUM_IO_ERROR ||
              s->quorum.resume_gen != gen)) ||
            s->role != DRBD_ROLE_PRIMARY || qatomic_read(&s->drained)) {
            ret = -EIO;
            break;
        }
        trace_drbd_quorum_suspended(s->bs, what);
        QSLIST_INSERT_HEAD(&s->quorum.waiters, &w, next);
        qemu_mutex_unlock(&s->lock);
        qemu_coroutine_yield();
        qemu_mutex_lock(&s->lock);
    }
    present = s->quorum.present;
    qemu_mutex_unlock(&s->lock);
    if (ret == 0) {
        qatomic_set(&s->quorum.refusal_reported, false);
    } else if (fencing) {
        error_report("drbd node '%s' (resource %s): guest %s failed while "
                     "it waited for a peer to be fenced: the node is "
                     "secondary now, or drained", drbd_name(s), s->resource,
                     what);
    } else if (!qatomic_xchg(&s->quorum.refusal_reported, true)) {
        error_report("drbd node '%s' (resource %s) has no quorum (it sees "
                     "%u of %u nodes, %u needed): guest %s failed",
                     drbd_name(s), s->resource, present, s->nr_conns + 1,
                     s->quorum.need, what);
    }
    return ret;
}

/*
 * Fencing
 *
 * A primary must not write while a peer it cannot reach may be promoted
 * by someone else with data that lacks those writes.  Such a peer (a
 * fence candidate: lost while its data was up to date or consistent, or
 * not seen since the open; not one that this node dropped itself to
 * connect again) is to be fenced by management, which the node asks
 * with DRBD_FENCE_PEER when it is primary, or becomes it, without the
 * peer, and which answers with drbd-resume-io once the peer is outdated
 * or powered off.  Metadata that says its peers are outdated
 * (DRBD_MDF_PEER_OUTDATED, until one is back) asks nothing at the open.
 */

/* Whether a peer last seen with disk state @d may be promoted */
bool drbd_disk_may_be_current(DrbdDiskState d)
{
    return d == DRBD_DISK_STATE_UP_TO_DATE ||
           d == DRBD_DISK_STATE_CONSISTENT ||
           d == DRBD_DISK_STATE_DUNKNOWN;
}

/* Writes wait while a peer is to be fenced (resource-and-stonith) */
static void drbd_fence_update_locked(BDRVDrbdState *s)
{
    bool primary = s->role == DRBD_ROLE_PRIMARY || s->md.primary_pending;
    bool pending = false;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (!primary) {
            /* A secondary writes nothing: ask again if it is promoted */
            s->conns[i]->fence_pending = false;
        }
        pending |= s->conns[i]->fence_pending;
    }
    qatomic_set(&s->fence_suspended,
                pending && s->fencing == DRBD_FENCING_RESOURCE_AND_STONITH);
}

/*
 * The node is primary, became it, or lost a peer: ask management to
 * fence each candidate not asked for yet.  Any thread, without s->lock.
 */
void drbd_fence_peers(BDRVDrbdState *s)
{
    uint8_t ids[DRBD_PEERS_MAX];
    unsigned n = 0, i;
    bool suspended;

    if (s->fencing == DRBD_FENCING_DONT_CARE) {
        return;
    }
    qemu_mutex_lock(&s->lock);
    if (s->role == DRBD_ROLE_PRIMARY || s->md.primary_pending) {
        for (i = 0; i < s->nr_conns; i++) {
            DrbdConnection *c = s->conns[i];

            if (c->fence_candidate && !c->fence_pending &&
                c->cstate < DRBD_CONN_STATE_CONNECTED) {
                c->fence_pending = true;
                ids[n++] = c->peer_node_id;
            }
        }
    }
    drbd_fence_update_locked(s);
    suspended = s->fence_suspended;
    qemu_mutex_unlock(&s->lock);

    for (i = 0; i < n; i++) {
        trace_drbd_fence_peer(s->bs, ids[i], suspended);
        warn_report("drbd node '%s' (resource %s) is primary without peer "
                    "node %u, whose data may be up to date: fence it "
                    "(drbd-outdate on it, or power it off), then answer "
                    "with drbd-resume-io%s", drbd_name(s), s->resource,
                    ids[i], suspended ? "; guest writes wait until then" :
                    "");
        qapi_event_send_drbd_fence_peer(bdrv_get_node_name(s->bs), ids[i],
                                        s->fencing, suspended);
    }
}

/*
 * drbd-resume-io: management fenced the peers it was asked to.  The
 * metadata says so (written by the caller), and writes held go on.
 * Returns whether the metadata changed.
 */
bool drbd_fence_answer(BDRVDrbdState *s)
{
    bool answered = false;
    unsigned i;

    qemu_mutex_lock(&s->lock);
    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];

        if (c->fence_pending) {
            c->fence_pending = false;
            c->fence_candidate = false;
            answered = true;
        }
    }
    if (answered) {
        s->md.sb.flags |= DRBD_MDF_PEER_OUTDATED;
    }
    drbd_fence_update_locked(s);
    drbd_quorum_wake_locked(s);
    qemu_mutex_unlock(&s->lock);
    return answered;
}

/*
 * drbd-resume-io, and a drain's start: the guest requests waiting for
 * quorum fail now.  Any thread.
 */
void drbd_resume_io(BDRVDrbdState *s)
{
    qemu_mutex_lock(&s->lock);
    s->quorum.resume_gen++;
    drbd_quorum_wake_locked(s);
    qemu_mutex_unlock(&s->lock);
}

/*
 * A peer of @conn's node, other than @conn's, that is primary (or whose
 * handshake says so): its node id, or -1.  Under s->lock.
 */
int drbd_other_primary_locked(DrbdConnection *conn)
{
    BDRVDrbdState *s = conn->s;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (s->conns[i] != conn &&
            (s->conns[i]->peer_role == DRBD_ROLE_PRIMARY ||
             s->conns[i]->hs_peer_primary)) {
            return s->conns[i]->peer_node_id;
        }
    }
    return -1;
}
