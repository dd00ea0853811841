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
#include "qemu/error-report.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "trace.h"

#include "drbd-int.h"

/*
 * Why a node without a disk (detached, or a diskless client) cannot be
 * primary now, if it cannot: it serves its guest through its peer, which
 * must be connected, up to date, and able to serve reads.  Called with
 * s->lock.
 */
static int drbd_diskless_promote_check_locked(BDRVDrbdState *s,
                                              Error **errp)
{
    /* The message names the one peer's states (see drbd_conn()) */
    DrbdConnection *conn = drbd_conn(s);

    if (!drbd_reader_locked(s)) {
        error_setg(errp, "the node has no disk (%s), and no up-to-date peer "
                   "to serve its guest through (connection %s, peer disk "
                   "%s)", s->bs->file ? "detached from it" :
                   "a diskless client", DrbdConnState_str(conn->cstate),
                   DrbdDiskState_str(conn->peer_disk));
        error_append_hint(errp, "A node without a disk is primary only "
                          "while an up-to-date peer is connected.\n");
        return -EAGAIN;
    }
    return 0;
}

/*
 * Whether this node, a sync target, may be primary while its resync
 * runs (DRBD allows it): the blocks it lacks are read from its peer, the
 * sync source, which must be up to date and serve reads.  Not with a
 * checksum-based resync, whose target compares its own blocks.  Called
 * with s->lock.
 */
static bool drbd_sync_target_may_serve_locked(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];

        if (conn->cstate == DRBD_CONN_STATE_SYNC_TARGET &&
            conn->peer && conn->peer->sync_target &&
            conn->csums_alg == DRBD_DIGEST_NONE &&
            drbd_peer_can_read_locked(conn)) {
            return true;
        }
    }
    return false;
}

/*
 * Tell the peer our role and disk state: after a promotion it granted,
 * or when the disk failed.  Not waited for.
 */
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

void drbd_announce_role(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdPeer *peer = drbd_peer_get(s->conns[i]);

        if (peer) {
            aio_co_enter(bdrv_get_aio_context(s->bs),
                         qemu_coroutine_create(drbd_send_state_co, peer));
        }
    }
}

/*
 * Ask the peer of @conn to let this node take @role, with the disk state
 * it has:
 * a STATE_REQ, answered by a STATE_REPLY.  The peer applies what it
 * grants before it answers, so that when this returns, the peer knows.
 * One request at a time; a peer that does not answer within ping-timeout
 * is given up (its answer could no longer be told from the next one's).
 * Returns 1 when granted, 0 when no peer is connected, -EBUSY refused,
 * -ETIMEDOUT without an answer.  A coroutine in the node's AioContext.
 */
static int coroutine_fn drbd_co_state_request(DrbdConnection *conn,
                                              DrbdRole role, Error **errp)
{
    BDRVDrbdState *s = conn->s;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdStatePacket st = { .role = role };
    DrbdPeer *peer;
    int64_t deadline, now;
    bool timed_out = false;
    int reply;

    qemu_co_mutex_lock(&conn->state_req_lock);
    peer = drbd_peer_get(conn);
    if (!peer) {
        qemu_co_mutex_unlock(&conn->state_req_lock);
        return 0;
    }
    qemu_mutex_lock(&s->lock);
    st.disk_state = s->disk;
    if (role == DRBD_ROLE_PRIMARY &&
        peer->version >= DRBD_PROTO_VERSION_GEN_CHECK) {
        /* So that a peer that knows of newer data can say so */
        st.uuid = s->md.sb.uuid_current;
        if (s->detached || !(st.uuid & ~DRBD_UUID_PRIMARY_FLAG)) {
            st.uuid = 0;
        }
    }
    conn->promote_pending = role == DRBD_ROLE_PRIMARY;
    conn->state_reply = -1;
    /* Before it leaves: the answer may come before the send returns */
    peer->state_req_sent = true;
    qemu_mutex_unlock(&s->lock);

    drbd_wire_put_state_req(pkt, &st);
    drbd_send_data_channel(peer, pkt);
    deadline = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
               conn->ping_timeout_ns;
    while (qatomic_read(&conn->state_reply) < 0 &&
           !qatomic_read(&peer->broken)) {
        now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
        if (now >= deadline) {
            timed_out = true;
            break;
        }
        drbd_co_sleep(s, &conn->state_sleep, deadline - now);
    }

    qemu_mutex_lock(&s->lock);
    reply = conn->state_reply;
    conn->promote_pending = false;
    if (reply == DRBD_STATE_REPLY_GRANTED && role == DRBD_ROLE_PRIMARY) {
        /*
         * Granted: until this node is primary (or gives up), the peer's
         * own requests are refused, as a primary's would be
         */
        conn->promote_granted = true;
    }
    qemu_mutex_unlock(&s->lock);
    if (timed_out) {
        drbd_peer_fail(peer, "the peer did not answer a state request "
                       "within ping-timeout");
    }
    drbd_peer_put(peer);
    qemu_co_mutex_unlock(&conn->state_req_lock);

    if (reply == DRBD_STATE_REPLY_GRANTED) {
        return 1;
    }
    if (reply == DRBD_STATE_REPLY_REFUSED) {
        error_setg(errp, "the peer refused: it is primary, or is being "
                   "promoted itself");
        return -EBUSY;
    }
    if (reply == DRBD_STATE_REPLY_BEHIND) {
        error_setg(errp, "peer node %d refused: it knows of a newer data "
                   "generation than this node's, whose writes this node "
                   "lacks", conn->peer_node_id);
        error_append_hint(errp, "Promote a node that has the newest data "
                          "(query-drbd shows each node's current UUID); "
                          "this one resyncs from it.  force=true would "
                          "discard the newer writes.\n");
        return -EBUSY;
    }
    if (reply == DRBD_STATE_REPLY_PRIMARY_PEER) {
        error_setg(errp, "peer node %d refused: another of its peers is "
                   "primary", conn->peer_node_id);
        error_append_hint(errp, "This node lost its connection to a primary "
                          "that is still running: demote that one first.\n");
        return -EBUSY;
    }
    error_setg(errp, "the peer did not answer the state request%s",
               timed_out ? " in time" : ": the connection was lost");
    error_append_hint(errp, "Try again: a disconnected node can be "
                      "promoted on its own.\n");
    return -ETIMEDOUT;
}

/*
 * The peer agreed (or none is connected): a new data generation if the
 * writes to come will not reach the peer's disk, and the promotion marked
 * for the superblock, which the caller writes before the node is primary.
 * Called with s->lock.
 */
static bool drbd_promotion_begin_locked(BDRVDrbdState *s, bool force,
                                        bool reconnect)
{
    bool new_generation;
    unsigned mask = DRBD_CONN_BIT(DRBD_CONN_STATE_CONNECTED) |
                    DRBD_CONN_RESYNCING;
    bool all_connected = true;
    unsigned i;

    /*
     * Connected, a peer gets every write (and a running resync the
     * rest): no new generation while every peer is, as with DRBD
     */
    for (i = 0; i < s->nr_conns; i++) {
        all_connected &= !!(DRBD_CONN_BIT(s->conns[i]->cstate) & mask);
        /*
         * A forced promotion, or one after the primary's loss, connects
         * to its peers again: they do not join the new generation, and
         * their loss starts no other
         */
        s->conns[i]->rehandshake = (force || reconnect) &&
                                   s->conns[i]->peer;
    }
    /* The promotion decides about the generation, not a loss before it */
    qatomic_set(&s->gen_due, false);
    if (!drbd_replicates(s)) {
        /*
         * A node without peers (qemu-img, qemu-io) starts its generation
         * at its first write, as DRBD 9 does: an open for writing that
         * writes no data (qemu-img amend, check -r) keeps the UUIDs
         */
        qatomic_set(&s->gen_due, true);
        new_generation = false;
    } else {
        new_generation = drbd_new_generation_locked(s, force ||
                                                    !all_connected,
                                                    !force && !reconnect);
    }
    s->md.sb.uuid_current |= DRBD_UUID_PRIMARY_FLAG;
    /* On disk before the first write as primary can be */
    s->md.primary_pending = true;
    s->hs_gen++;
    return new_generation;
}

/* A promotion is over: the node is primary, or gave up */
static void drbd_promotion_done(BDRVDrbdState *s)
{
    unsigned i;

    qemu_mutex_lock(&s->lock);
    s->md.primary_pending = false;
    for (i = 0; i < s->nr_conns; i++) {
        s->conns[i]->promote_granted = false;
    }
    qemu_mutex_unlock(&s->lock);
}

/*
 * The peers learn that this node is secondary, and this returns once
 * they know (or their connection is given up: a peer never refuses it)
 */
static int coroutine_fn drbd_co_request_secondary(BDRVDrbdState *s,
                                                  Error **errp)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        Error *local_err = NULL;

        if (drbd_co_state_request(s->conns[i], DRBD_ROLE_SECONDARY,
                                  &local_err) < 0) {
            trace_drbd_secondary_unheard(s->bs, error_get_pretty(local_err));
            error_free(local_err);
        }
    }
    return 0;
}

/* The peer granted a promotion that this node gave up */
static int coroutine_fn drbd_co_promotion_undo(BDRVDrbdState *s,
                                               Error **errp)
{
    drbd_promotion_done(s);
    return drbd_co_request_secondary(s, errp);
}

/*
 * Before a connected node becomes primary, its peers must agree, so that
 * two nodes promoted at the same moment never both succeed.  Returns 0
 * when the node may go ahead (granted by every connected peer, or none
 * connected); a refusal undoes what the others granted.  A coroutine in
 * the node's context.
 */
static int coroutine_fn drbd_co_request_promotion(BDRVDrbdState *s,
                                                  Error **errp)
{
    bool asked = false, lost;
    unsigned i;
    int ret;

    for (i = 0; i < s->nr_conns; i++) {
        ret = drbd_co_state_request(s->conns[i], DRBD_ROLE_PRIMARY, errp);
        if (ret < 0) {
            if (asked) {
                drbd_co_promotion_undo(s, NULL);
            }
            return ret;
        }
        asked |= ret > 0;
    }
    if (!asked) {
        return 0;
    }
    qemu_mutex_lock(&s->lock);
    /* We granted a peer's own request meanwhile: it won */
    lost = drbd_peer_primary_locked(s);
    qemu_mutex_unlock(&s->lock);
    if (lost) {
        drbd_co_promotion_undo(s, NULL);
        error_setg(errp, "the peer refused: it is primary, or is being "
                   "promoted itself");
        return -EBUSY;
    }
    return 0;
}

/*
 * Sleep @ms at a time until @done(@s, @opaque), called with s->lock,
 * says so, or the realtime clock reaches @deadline (ns); returns what
 * @done said last.  For the waits on a peer's state that no event wakes:
 * a coroutine in the node's context.
 */
static bool coroutine_fn
drbd_co_poll(BDRVDrbdState *s, int64_t deadline, unsigned ms,
             bool (*done)(BDRVDrbdState *s, void *opaque), void *opaque)
{
    bool ok;

    for (;;) {
        qemu_mutex_lock(&s->lock);
        ok = done(s, opaque);
        qemu_mutex_unlock(&s->lock);
        if (ok || qemu_clock_get_ns(QEMU_CLOCK_REALTIME) >= deadline) {
            return ok;
        }
        qemu_co_sleep_ns(QEMU_CLOCK_REALTIME, ms * SCALE_MS);
    }
}

/* The peers that were connected before a reconnect, and their sessions */
typedef struct DrbdReconnect {
    uint64_t gen[DRBD_PEERS_MAX];
    bool was[DRBD_PEERS_MAX];
} DrbdReconnect;

/* Whether each of them is connected again, in a new session */
static bool drbd_peers_back_locked(BDRVDrbdState *s, void *opaque)
{
    DrbdReconnect *r = opaque;
    unsigned mask = DRBD_CONN_BIT(DRBD_CONN_STATE_CONNECTED) |
                    DRBD_CONN_RESYNCING;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];

        if (r->was[i] && (c->seq_gen == r->gen[i] ||
                          !(DRBD_CONN_BIT(c->cstate) & mask))) {
            return false;
        }
    }
    return true;
}

/*
 * Drop the peers for a new handshake, and wait until those that were
 * connected are again (up to twice ping-timeout), so that the node's
 * first writes as primary find its peers, and its quorum, back.  A
 * coroutine in the node's context.
 */
static void coroutine_fn drbd_co_reconnect_peers(BDRVDrbdState *s,
                                                 const char *reason)
{
    int64_t deadline = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                       2 * drbd_ping_timeout_ns(s);
    DrbdReconnect r;
    unsigned i;

    qemu_mutex_lock(&s->lock);
    for (i = 0; i < s->nr_conns; i++) {
        r.was[i] = !!s->conns[i]->peer;
        r.gen[i] = s->conns[i]->seq_gen;
    }
    qemu_mutex_unlock(&s->lock);
    drbd_peers_fail(s, reason);
    qemu_co_sleep_ns(QEMU_CLOCK_REALTIME, 5 * SCALE_MS);
    drbd_co_poll(s, deadline, 5, drbd_peers_back_locked, &r);
}

/*
 * The peer agreed (or none is connected), drbd_promotion_begin_locked()
 * marked the promotion, and @md_ret says whether the superblock with it
 * is on disk: then the role, and the peer told.  A forced promotion's
 * peer is disconnected instead, and so are those of a promotion that
 * follows a primary's loss (@reconnect): a new handshake decides what
 * differs.  A coroutine in the node's context.
 */
static int coroutine_fn drbd_co_become_primary(BDRVDrbdState *s, bool force,
                                               bool reconnect, int md_ret,
                                               const char *reason)
{
    if (md_ret < 0) {
        unsigned i;

        qemu_mutex_lock(&s->lock);
        for (i = 0; i < s->nr_conns; i++) {
            s->conns[i]->rehandshake = false;
        }
        qemu_mutex_unlock(&s->lock);
        drbd_co_promotion_undo(s, NULL);
        return md_ret;
    }

    drbd_set_state(s, NULL, DRBD_ROLE_PRIMARY, -1,
                   force ? DRBD_DISK_STATE_UP_TO_DATE : -1, -1, -1, reason);
    drbd_promotion_done(s);
    /* Primary without a peer that may be promoted: fence it first */
    drbd_fence_peers(s);
    if (force) {
        /*
         * A new generation, and a disk state the peer would refuse to
         * hear raised: let a new handshake decide
         */
        drbd_co_reconnect_peers(s, "forced promotion: connecting again");
    } else if (reconnect) {
        /*
         * The survivors' writes in flight at the loss are marked in
         * their bitmaps: a new handshake with each resyncs them
         */
        drbd_co_reconnect_peers(s, "promoted after the primary's loss: "
                                "connecting again");
    } else {
        drbd_announce_role(s);
    }
    return 0;
}

/*
 * With more than one peer, the survivors of a primary's loss may each
 * hold writes that another lacks (those in flight when it was lost, and
 * all that it wrote after losing one of them).  A survivor that sees a
 * peer may be promoted: its promotion requests carry its current UUID,
 * and every peer it asks refuses if it knows of a newer generation, or
 * still sees a primary (with a majority quorum, the nodes the primary
 * wrote with and those of the promoting node share one, which knows);
 * promoted, it connects to its peers again, so that each handshake
 * resyncs what differs.  With a peer that cannot tell (older than
 * protocol version 6), or none to ask, only the operator can pick the
 * survivor, with force.  Returns 0 when no primary was lost, 1 when the
 * peers are to tell, or fails.  Called with s->lock.
 */
static int drbd_lost_primary_check_locked(BDRVDrbdState *s, Error **errp)
{
    DrbdConnection *lost = NULL;
    unsigned i, asked = 0;
    bool can_ask = true;

    if (s->nr_conns < 2) {
        return 0;
    }
    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];

        if (c->lost_primary) {
            lost = c;
        }
        if (c->peer && !qatomic_read(&c->peer->broken)) {
            can_ask &= c->peer->version >= DRBD_PROTO_VERSION_GEN_CHECK;
            asked++;
        }
    }
    if (!lost) {
        return 0;
    }
    if (can_ask && asked > 0) {
        return 1;
    }
    error_setg(errp, "peer node %d was primary when the connection to it "
               "was lost, and the node has other peers that may hold "
               "writes it lacks: promote the survivor with the newest data "
               "with force=true, or wait for node %d to come back",
               lost->peer_node_id, lost->peer_node_id);
    error_append_hint(errp, "The survivor that stayed connected to it "
                      "longest has the newest data; its peers resync from "
                      "it once it is promoted.  A survivor connected to "
                      "peers of this version is promoted without force "
                      "when they agree.\n");
    return -EBUSY;
}

/*
 * drbd-promote, a QMP command in a coroutine of the main loop: the
 * checks, then as an auto-promotion, in the node's context
 */
int coroutine_fn drbd_co_promote(BDRVDrbdState *s, bool force, Error **errp)
{
    const char *name = drbd_name(s);
    AioContext *old_ctx;
    bool target, new_generation;
    int ret, lost = 0;

    qemu_mutex_lock(&s->lock);
    if (s->role == DRBD_ROLE_PRIMARY) {
        qemu_mutex_unlock(&s->lock);
        return 0;
    }
    if (drbd_peer_primary_locked(s)) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the peer is primary; demote it first", name);
        return -EBUSY;
    }
    if (s->detached && force) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s' has no disk: there is no data of its own to "
                   "force up to date", name);
        return -EINVAL;
    }
    if (s->detached) {
        ret = drbd_diskless_promote_check_locked(s, errp);
        if (ret < 0) {
            qemu_mutex_unlock(&s->lock);
            error_prepend(errp, "'%s': ", name);
            return ret;
        }
    } else if (s->md.failed) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the local disk failed", name);
        return -EIO;
    }
    if (drbd_conn_in_locked(s,
                            DRBD_CONN_BIT(DRBD_CONN_STATE_WF_REPORT_PARAMS))) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the connection handshake is running; try "
                   "again", name);
        return -EAGAIN;
    }
    if (!force && drbd_quorum_check_locked(s, errp) < 0) {
        qemu_mutex_unlock(&s->lock);
        error_prepend(errp, "'%s': ", name);
        error_append_hint(errp, "Promote a node of the partition that has "
                          "quorum, or, sure that the others are gone, "
                          "promote this one with force=true.\n");
        return -EAGAIN;
    }
    if (!force) {
        lost = drbd_lost_primary_check_locked(s, errp);
    }
    if (lost < 0) {
        qemu_mutex_unlock(&s->lock);
        error_prepend(errp, "'%s': ", name);
        return -EBUSY;
    }
    target = s->disk == DRBD_DISK_STATE_INCONSISTENT && !force &&
             drbd_sync_target_may_serve_locked(s);
    if (s->disk != DRBD_DISK_STATE_UP_TO_DATE && !force && !s->detached &&
        !target) {
        DrbdDiskState disk = s->disk;

        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s': the local data is %s, not up-to-date",
                   name, DrbdDiskState_str(disk));
        error_append_hint(errp, "Wait for the resync to finish, or use "
                          "force=true to promote anyway.\n");
        return -EAGAIN;
    }
    qemu_mutex_unlock(&s->lock);

    if (target && !s->whole_blocks) {
        /* Guest writes replace whole bitmap blocks from now on */
        Error *local_err = NULL;

        bdrv_drained_begin(s->bs);
        s->whole_blocks = true;
        bdrv_graph_co_rdlock();
        bdrv_refresh_limits(s->bs, NULL, &local_err);
        bdrv_graph_co_rdunlock();
        bdrv_drained_end(s->bs);
        if (local_err) {
            error_propagate_prepend(errp, local_err, "'%s': ", name);
            return -EINVAL;
        }
    }

    old_ctx = bdrv_co_enter(s->bs);
    ret = drbd_co_request_promotion(s, errp);
    if (ret < 0) {
        error_prepend(errp, "'%s': ", name);
        ret = -EBUSY;
    } else {
        /*
         * Writes that will not reach the peer's disk start a new data
         * generation, so that the next handshake knows who changed what
         */
        qemu_mutex_lock(&s->lock);
        new_generation = drbd_promotion_begin_locked(s, force, lost > 0);
        qemu_mutex_unlock(&s->lock);
        bdrv_graph_co_rdlock();
        ret = drbd_md_sync_in_request(s, false);
        bdrv_graph_co_rdunlock();
        ret = drbd_co_become_primary(s, force, lost > 0, ret,
                                     force ? "promoted (forced)" :
                                     lost > 0 ? "promoted (its primary lost)" :
                                     "promoted");
        if (ret < 0) {
            error_setg_errno(errp, -ret, "'%s': could not write the "
                             "metadata; not promoted", name);
        } else if (new_generation && !force && !lost) {
            /* The peers connected join it (a forced one reconnects) */
            drbd_announce_new_uuid(s);
        }
    }
    bdrv_co_leave(s->bs, old_ctx);
    return ret;
}

/* Why @s's data, or (@remote) its peers', cannot be invalidated now */
static int drbd_invalidate_check_locked(BDRVDrbdState *s, bool remote,
                                        Error **errp)
{
    const char *name = drbd_name(s);

    if (!remote && s->role == DRBD_ROLE_PRIMARY) {
        error_setg(errp, "'%s' is primary: demote it before discarding its "
                   "data", name);
        return -EBUSY;
    }
    if (remote && s->disk != DRBD_DISK_STATE_UP_TO_DATE) {
        error_setg(errp, "'%s': the local data is %s: it cannot replace "
                   "the peer's", name, DrbdDiskState_str(s->disk));
        return -EAGAIN;
    }
    if (remote && drbd_peer_primary_locked(s)) {
        error_setg(errp, "'%s': the peer is primary: demote it before "
                   "discarding its data", name);
        return -EBUSY;
    }
    if (drbd_conn_in_locked(s, DRBD_CONN_RESYNCING |
                            DRBD_CONN_BIT(DRBD_CONN_STATE_WF_REPORT_PARAMS))) {
        error_setg(errp, "'%s': a resync or a connection handshake is "
                   "running; try again when it is over", name);
        return -EBUSY;
    }
    return 0;
}

/*
 * drbd-invalidate: our data is to be replaced by the peer's, all of it;
 * drbd-invalidate-remote: the peer's by ours.  Both mark the whole disk
 * out of sync, durably, and let the handshake (again, if connected)
 * start the resync: an inconsistent disk is always the sync target, and
 * a new generation makes this node the source.  QMP commands, in a
 * coroutine of the main loop.
 */
int coroutine_fn drbd_co_invalidate(BDRVDrbdState *s, bool remote,
                                    Error **errp)
{
    AioContext *old_ctx;
    const char *name = drbd_name(s);
    DrbdUuids u;
    unsigned i;
    int ret;

    qemu_mutex_lock(&s->lock);
    ret = drbd_invalidate_check_locked(s, remote, errp);
    if (ret < 0) {
        qemu_mutex_unlock(&s->lock);
        return ret;
    }
    drbd_oos_set_all_locked(s, 0, s->size);
    if (remote) {
        drbd_new_generation_locked(s, true, false);
    } else {
        /* Our data names no generation any more: any peer's is newer */
        for (i = 0; i < s->nr_conns; i++) {
            drbd_uuid_init(&u);
            drbd_uuids_set_locked(s->conns[i], &u);
        }
        s->partial_gen = 0;
    }
    qemu_mutex_unlock(&s->lock);

    if (!remote) {
        drbd_set_state(s, NULL, -1, -1, DRBD_DISK_STATE_INCONSISTENT, -1, -1,
                       "invalidated: full resync from the peer");
    }
    /* As a promotion writes it: also on a drained or inactive node */
    old_ctx = bdrv_co_enter(s->bs);
    bdrv_graph_co_rdlock();
    ret = drbd_md_sync_in_request(s, true);
    bdrv_graph_co_rdunlock();
    bdrv_co_leave(s->bs, old_ctx);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "'%s': could not write the metadata",
                         name);
        return ret;
    }

    drbd_peers_fail(s, remote ? "the peer's data was invalidated" :
                    "the local data was invalidated");
    return 0;
}

/*
 * drbd-outdate: the local data is consistent, but may lack a primary's
 * writes from now on; the node is not promoted until a handshake with
 * an up-to-date peer makes it up to date again.  On disk before the
 * command returns, so that management may tell a primary to write on.
 * A QMP command, in a coroutine of the main loop.
 */
int coroutine_fn drbd_co_outdate(BDRVDrbdState *s, Error **errp)
{
    const char *name = drbd_name(s);
    AioContext *old_ctx;
    DrbdDiskState disk;
    bool peer_primary;
    int ret;

    qemu_mutex_lock(&s->lock);
    disk = s->disk;
    peer_primary = drbd_peer_primary_locked(s);
    if (s->role == DRBD_ROLE_PRIMARY || s->md.primary_pending) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s' is primary: demote it before outdating its "
                   "data", name);
        return -EBUSY;
    }
    if (peer_primary) {
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "'%s' is connected to a primary, whose writes keep "
                   "its data up to date: not outdated", name);
        return -EBUSY;
    }
    qemu_mutex_unlock(&s->lock);
    if (disk == DRBD_DISK_STATE_OUTDATED) {
        return 0;
    }
    if (disk != DRBD_DISK_STATE_UP_TO_DATE &&
        disk != DRBD_DISK_STATE_CONSISTENT) {
        error_setg(errp, "'%s': the local data is %s, which no promotion "
                   "takes already: nothing to outdate", name,
                   DrbdDiskState_str(disk));
        return -EINVAL;
    }
    drbd_set_state(s, NULL, -1, -1, DRBD_DISK_STATE_OUTDATED, -1, -1,
                   "outdated (drbd-outdate)");
    old_ctx = bdrv_co_enter(s->bs);
    bdrv_graph_co_rdlock();
    ret = drbd_md_sync_in_request(s, false);
    bdrv_graph_co_rdunlock();
    bdrv_co_leave(s->bs, old_ctx);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "'%s': could not write the metadata; "
                         "the node is outdated until it stops", name);
    }
    return ret;
}

/*
 * Become secondary, as drbd-demote and as a clean close or inactivation
 * do (DRBD's "drbdadm down" demotes first): guest requests in flight
 * complete, a flush has the peer ack every write (protocol A and B
 * included), and the demotion is over once the peer knows it (its
 * STATE_REPLY): a promotion of the peer right after it is not refused on
 * stale state.  A primary that goes down like this leaves
 * its generation as it was: its peer may be promoted, and the two meet
 * again without a split brain.  Main loop only.
 */
static void drbd_demote_timeout_cb(void *opaque)
{
    BDRVDrbdState *s = opaque;

    drbd_peers_fail(s, "the peer did not ack our writes within "
                    "ping-timeout before the demotion");
}

int coroutine_fn drbd_co_demote(BDRVDrbdState *s, Error **errp)
{
    AioContext *old_ctx;
    QEMUTimer *timer;
    int ret;

    qemu_mutex_lock(&s->lock);
    if (s->role != DRBD_ROLE_PRIMARY) {
        qemu_mutex_unlock(&s->lock);
        return 0;
    }
    qemu_mutex_unlock(&s->lock);

    /*
     * A peer that does not ack within ping-timeout (a frozen link) is
     * given up, as the pinger would, but now: a close or a migration
     * does not wait for the next ping
     */
    timer = aio_timer_new(qemu_get_aio_context(), QEMU_CLOCK_REALTIME,
                          SCALE_NS, drbd_demote_timeout_cb, s);
    timer_mod(timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
              drbd_ping_timeout_ns(s));
    /* Guest requests in flight complete first; later ones are refused */
    bdrv_drained_begin(s->bs);
    /* What the peer acked is on its disk: nothing left to lose */
    bdrv_graph_co_rdlock();
    ret = bdrv_co_flush(s->bs);
    bdrv_graph_co_rdunlock();
    if (ret < 0) {
        warn_report("drbd node '%s': the flush before the demotion failed: "
                    "%s", drbd_name(s), strerror(-ret));
    }
    drbd_set_state(s, NULL, DRBD_ROLE_SECONDARY, -1, -1, -1, -1, "demoted");
    bdrv_drained_end(s->bs);
    qemu_mutex_lock(&s->lock);
    s->md.sb.uuid_current &= ~DRBD_UUID_PRIMARY_FLAG;
    s->hs_gen++;
    qemu_mutex_unlock(&s->lock);

    /*
     * Not through the drain gate, as background work goes: a close
     * demotes with the node drained
     */
    old_ctx = bdrv_co_enter(s->bs);
    bdrv_graph_co_rdlock();
    ret = drbd_md_sync_in_request(s, false);
    bdrv_graph_co_rdunlock();
    drbd_co_request_secondary(s, NULL);
    bdrv_co_leave(s->bs, old_ctx);
    timer_free(timer);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "'%s' is demoted, but its metadata "
                         "could not be written", drbd_name(s));
        return ret;
    }
    return 0;
}

/* drbd_co_demote() from the main loop, outside a coroutine */
typedef struct DrbdDemote {
    BDRVDrbdState *s;
    Error **errp;
    int ret;
    bool done;
} DrbdDemote;

static void coroutine_fn drbd_demote_entry(void *opaque)
{
    DrbdDemote *d = opaque;

    d->ret = drbd_co_demote(d->s, d->errp);
    qatomic_set(&d->done, true);
    aio_wait_kick();
}

int drbd_demote(BDRVDrbdState *s, Error **errp)
{
    DrbdDemote d = { .s = s, .errp = errp };

    assert(qemu_in_main_thread() && !qemu_in_coroutine());
    aio_co_enter(qemu_get_aio_context(),
                 qemu_coroutine_create(drbd_demote_entry, &d));
    AIO_WAIT_WHILE_UNLOCKED(NULL, !qatomic_read(&d.done));
    return d.ret;
}

/*
 * Why this node cannot become primary by itself now, if it cannot: the
 * checks of an auto-promotion that need no peer.  Returns 1 where the
 * node lost its primary and its peers are to tell (see
 * drbd_lost_primary_check_locked()).  Called with s->lock.
 */
static int drbd_auto_promote_check_locked(BDRVDrbdState *s, Error **errp)
{
    int lost, ret;

    if (drbd_quorum_check_locked(s, errp) < 0) {
        return -EAGAIN;
    }
    lost = drbd_lost_primary_check_locked(s, errp);
    if (lost < 0) {
        return -EBUSY;
    }
    if (s->detached) {
        ret = drbd_diskless_promote_check_locked(s, errp);
        return ret < 0 ? ret : lost;
    }
    if (s->md.failed) {
        error_setg(errp, "the local disk failed");
        return -EIO;
    }
    if (s->disk != DRBD_DISK_STATE_UP_TO_DATE) {
        error_setg(errp, "the local data is %s, not up-to-date",
                   DrbdDiskState_str(s->disk));
        error_append_hint(errp, "Wait for the resync to finish, or promote "
                          "it with drbd-promote force=true.\n");
        return -EAGAIN;
    }
    return lost;
}

/*
 * Whether a user may take write permission on an auto-promoting node:
 * refused up front where the promotion is certain to fail.  Whether the
 * peer agrees is only known when it is asked, at the first request.
 */
int drbd_auto_promote_check(BDRVDrbdState *s, Error **errp)
{
    int ret = 0;

    qemu_mutex_lock(&s->lock);
    if (s->auto_promote && s->role != DRBD_ROLE_PRIMARY) {
        ret = drbd_auto_promote_check_locked(s, errp);
    }
    qemu_mutex_unlock(&s->lock);
    if (ret < 0) {
        error_prepend(errp, "drbd node '%s' (resource %s) cannot become "
                      "primary for writing (role auto): ",
                      drbd_name(s), s->resource);
    }
    return MIN(ret, 0);
}

/*
 * role=auto: become primary for a guest request (or the coroutine that
 * set_perm starts), as drbd-promote would, but from a coroutine in the
 * node's context.  One runs at a time; the others find the node primary
 * or fail as it did.
 */
int coroutine_fn GRAPH_RDLOCK drbd_co_auto_promote(BDRVDrbdState *s,
                                                   Error **errp)
{
    int64_t deadline = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                       drbd_ping_timeout_ns(s);
    bool new_generation, lost;
    int ret;

    qemu_co_mutex_lock(&s->auto_lock);
    qemu_mutex_lock(&s->lock);
    /* A handshake decides the disk states: wait for it, a little */
    while (s->role != DRBD_ROLE_PRIMARY &&
           drbd_conn_in_locked(s,
                DRBD_CONN_BIT(DRBD_CONN_STATE_WF_REPORT_PARAMS)) &&
           qemu_clock_get_ns(QEMU_CLOCK_REALTIME) < deadline) {
        qemu_mutex_unlock(&s->lock);
        qemu_co_sleep_ns(QEMU_CLOCK_REALTIME, 10 * SCALE_MS);
        qemu_mutex_lock(&s->lock);
    }
    if (s->role == DRBD_ROLE_PRIMARY) {
        qemu_mutex_unlock(&s->lock);
        qemu_co_mutex_unlock(&s->auto_lock);
        return 0;
    }
    ret = drbd_auto_promote_check_locked(s, errp);
    lost = ret == 1;
    if (ret >= 0 &&
        drbd_conn_in_locked(s,
                            DRBD_CONN_BIT(DRBD_CONN_STATE_WF_REPORT_PARAMS))) {
        error_setg(errp, "the connection handshake is still running");
        ret = -EAGAIN;
    }
    qemu_mutex_unlock(&s->lock);
    if (ret >= 0) {
        ret = drbd_co_request_promotion(s, errp);
    }
    if (ret < 0) {
        qemu_co_mutex_unlock(&s->auto_lock);
        return ret;
    }

    qemu_mutex_lock(&s->lock);
    new_generation = drbd_promotion_begin_locked(s, false, lost);
    qemu_mutex_unlock(&s->lock);
    ret = drbd_co_become_primary(s, false, lost,
                                 drbd_md_sync_in_request(s, false),
                                 "promoted (auto-promote)");
    if (ret < 0) {
        error_setg_errno(errp, -ret, "could not write the metadata");
    } else if (new_generation && !lost) {
        drbd_announce_new_uuid(s);
    }
    qemu_co_mutex_unlock(&s->auto_lock);
    return ret;
}

static bool drbd_no_peer_primary_locked(BDRVDrbdState *s, void *opaque)
{
    return !drbd_peer_primary_locked(s);
}

/*
 * role=auto, for a guest request: drbd_co_auto_promote(), and while the
 * peer is primary, wait up to ping-timeout for it to demote, then ask
 * again (DRBD 9's auto-promote-timeout).  That is the hand-over of a
 * live migration between two hosts' storage daemons: the destination's
 * guest runs, and writes, as soon as the migration completes; the
 * source's daemon demotes its node once the source VM is gone (a
 * libvirt hook inactivates it).  set_perm's promotion does not wait: a
 * writer may well hold a node whose peer is primary for long.
 */
int coroutine_fn GRAPH_RDLOCK drbd_co_auto_promote_wait(BDRVDrbdState *s,
                                                        Error **errp)
{
    int64_t start = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    int64_t deadline = start + drbd_ping_timeout_ns(s);
    Error *local_err = NULL;
    bool waited = false, primary;
    int ret;

    for (;;) {
        ret = drbd_co_auto_promote(s, &local_err);
        qemu_mutex_lock(&s->lock);
        primary = drbd_peer_primary_locked(s);
        qemu_mutex_unlock(&s->lock);
        if (ret == 0 || !primary ||
            qemu_clock_get_ns(QEMU_CLOCK_REALTIME) >= deadline) {
            break;
        }
        error_free(local_err);
        local_err = NULL;
        if (!waited) {
            waited = true;
            trace_drbd_auto_promote_wait(s->bs,
                                         (deadline - start) / SCALE_MS);
        }
        /* The peer tells its demotion (a state packet): look again */
        drbd_co_poll(s, deadline, 10, drbd_no_peer_primary_locked, NULL);
    }
    if (waited) {
        trace_drbd_auto_promote_waited(s->bs, ret,
            (qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - start) / SCALE_MS);
    }
    error_propagate(errp, local_err);
    return ret;
}

/* set_perm's promotion: at once, not at the first request */
static void coroutine_fn drbd_auto_promote_entry(void *opaque)
{
    BDRVDrbdState *s = opaque;
    Error *local_err = NULL;

    bdrv_graph_co_rdlock();
    if (qatomic_read(&s->write_perm) &&
        drbd_co_auto_promote(s, &local_err) < 0) {
        /* The first request tries again, and fails with the reason */
        drbd_note_reason(s, "auto-promote: ", error_get_pretty(local_err));
        error_free(local_err);
    }
    bdrv_graph_co_rdunlock();
    bdrv_dec_in_flight(s->bs);
}

/* The last writer let go: demote, in the main loop, if none came back */
static void drbd_auto_demote_bh(void *opaque);

void drbd_auto_init(BDRVDrbdState *s)
{
    qemu_co_mutex_init(&s->auto_lock);
    s->auto_demote_bh = aio_bh_new(qemu_get_aio_context(),
                                   drbd_auto_demote_bh, s);
}

/*
 * The last writer let go: demote, in the main loop, if none came back.
 * The demotion polls: the node is held meanwhile, or a close in there
 * would free it under us (a close that started already demotes itself).
 */
static void drbd_auto_demote_bh(void *opaque)
{
    BDRVDrbdState *s = opaque;
    BlockDriverState *bs = s->bs;
    Error *local_err = NULL;

    if (qatomic_read(&s->write_perm) || !bs->refcnt) {
        return;
    }
    bdrv_ref(bs);
    if (drbd_demote(s, &local_err) < 0) {
        warn_reportf_err(local_err, "drbd node '%s': auto-demote: ",
                         drbd_name(s));
    }
    bdrv_unref(bs);
}

/*
 * The node's users took or gave up write permission (set_perm, main
 * loop): with role=auto, promote or demote accordingly
 */
void drbd_auto_perm_changed(BDRVDrbdState *s, bool write_perm)
{
    if (write_perm == s->write_perm) {
        return;
    }
    qatomic_set(&s->write_perm, write_perm);
    if (!s->auto_promote || (s->bs->open_flags & BDRV_O_INACTIVE)) {
        return;
    }
    if (write_perm) {
        /* Counted in flight: a drain or close waits for it */
        bdrv_inc_in_flight(s->bs);
        /* Later: not within the permission update that brought it */
        aio_co_schedule(bdrv_get_aio_context(s->bs),
                        qemu_coroutine_create(drbd_auto_promote_entry, s));
    } else {
        qemu_bh_schedule(s->auto_demote_bh);
    }
}
