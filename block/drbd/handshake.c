/*
 * DRBD-style replication: the connection handshake
 *
 * On each new connection the two nodes exchange HELLOs on both channels
 * (protocol version, resource, node ids), then sizes, states, generation
 * UUIDs and bitmaps on the data channel, and both decide from the same
 * facts (uuid.c) whether and which way to resync, or that they must not
 * connect (split brain, unrelated data).
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "qapi/qapi-events-drbd.h"
#include "trace.h"

#include "drbd-int.h"

static void drbd_make_hello(DrbdConnection *conn, DrbdHello *h, bool meta)
{
    BDRVDrbdState *s = conn->s;

    *h = (DrbdHello) {
        .version_min = DRBD_PROTO_VERSION_MIN,
        .version_max = DRBD_PROTO_VERSION_MAX,
        .node_id = s->node_id,
        .flags = (meta ? DRBD_HELLO_META_CHANNEL : 0) |
                 drbd_secure_hello_flags(conn),
    };
    pstrcpy(h->resource, sizeof(h->resource), s->resource);
}

/*
 * What in the peer's HELLO does not fit this node's configuration: a
 * REFUSE's reason, or 0
 */
static uint32_t drbd_hello_mismatch(DrbdConnection *conn, const DrbdHello *h)
{
    BDRVDrbdState *s = conn->s;
    uint32_t common_max = MIN(h->version_max, DRBD_PROTO_VERSION_MAX);

    if (common_max < MAX(h->version_min, DRBD_PROTO_VERSION_MIN)) {
        return DRBD_REFUSE_VERSION;
    }
    if (strcmp(h->resource, s->resource) != 0) {
        return DRBD_REFUSE_RESOURCE;
    }
    if (h->node_id == s->node_id) {
        return DRBD_REFUSE_SAME_NODE_ID;
    }
    if (h->node_id != conn->peer_node_id) {
        return DRBD_REFUSE_NODE_ID;
    }
    return 0;
}

/*
 * Both nodes of a connection have node-id @id: the same words on both,
 * the one that found it and the one it refused, so that each logs it
 * once however many times they try again
 */
static void drbd_error_same_node_id(Error **errp, uint32_t id)
{
    error_setg(errp, "this node and its peer both have node-id %" PRIu32
               ": give each node of the resource its own node-id, and "
               "set each node's peer-node-id to the other node's id", id);
}

/*
 * Judge the peer's HELLO against our configuration, changing nothing:
 * the reason to refuse it (DRBD_REFUSE_*) with @errp set, or 0
 */
uint32_t drbd_judge_hello(DrbdConnection *conn, const DrbdHello *h,
                          Error **errp)
{
    BDRVDrbdState *s = conn->s;
    uint32_t reason = drbd_hello_mismatch(conn, h);

    switch (reason) {
    case DRBD_REFUSE_VERSION:
        error_setg(errp, "the peer speaks protocol versions %" PRIu32
                   " to %" PRIu32 ", this node %d to %d: no common version",
                   h->version_min, h->version_max, DRBD_PROTO_VERSION_MIN,
                   DRBD_PROTO_VERSION_MAX);
        break;
    case DRBD_REFUSE_RESOURCE:
        error_setg(errp, "the peer is of resource '%s', this node of '%s': "
                   "give both nodes the same resource name",
                   h->resource, s->resource);
        break;
    case DRBD_REFUSE_SAME_NODE_ID:
        drbd_error_same_node_id(errp, h->node_id);
        break;
    case DRBD_REFUSE_NODE_ID:
        error_setg(errp, "the peer has node-id %" PRIu32 ", peer-node-id "
                   "is %d: set each node's peer-node-id to the other "
                   "node's id", h->node_id, conn->peer_node_id);
        break;
    default:
        break;
    }
    return reason;
}

/* Check the peer's HELLO against our configuration */
int drbd_check_hello(DrbdConnection *conn, const DrbdHello *h, Error **errp)
{
    BDRVDrbdState *s = conn->s;

    switch (drbd_judge_hello(conn, h, errp)) {
    case 0:
        break;
    case DRBD_REFUSE_VERSION:
        return -EPROTO;
    default:
        return -EINVAL;
    }
    /* Both channels of one connection say the same: the peer keeps it */
    qemu_mutex_lock(&s->lock);
    conn->hello_version = MIN(h->version_max, DRBD_PROTO_VERSION_MAX);
    qemu_mutex_unlock(&s->lock);
    return 0;
}

/*
 * Tell the sender of @h, a HELLO refused for @reason, why (version 7;
 * to an older peer nothing, as before).  Best effort: the connection is
 * closed after it either way.
 */
void coroutine_fn drbd_send_refuse(DrbdConnection *conn, QIOChannel *ioc,
                                   const DrbdHello *h, uint32_t reason)
{
    BDRVDrbdState *s = conn->s;
    g_autoptr(GByteArray) pkt = g_byte_array_new();

    if (h->version_max < DRBD_PROTO_VERSION_REFUSE) {
        return;
    }
    trace_drbd_send_refuse(s->bs, reason, h->node_id);
    drbd_wire_put_refuse(pkt, &(DrbdRefuse) {
        .reason = reason, .node_id = s->node_id,
    });
    drbd_write_packet(ioc, pkt, NULL);
}

/* The peer's REFUSE @r, as this node's error */
static void drbd_refused_error(DrbdConnection *conn, const DrbdRefuse *r,
                               Error **errp)
{
    BDRVDrbdState *s = conn->s;

    switch (r->reason) {
    case DRBD_REFUSE_SAME_NODE_ID:
        drbd_error_same_node_id(errp, s->node_id);
        break;
    case DRBD_REFUSE_RESOURCE:
        error_setg(errp, "the peer (node %" PRIu32 ") refused the "
                   "connection: it is not of resource '%s': give both "
                   "nodes the same resource name", r->node_id, s->resource);
        break;
    case DRBD_REFUSE_NODE_ID:
        error_setg(errp, "the peer (node %" PRIu32 ") refused the "
                   "connection: its peer-node-id is not this node's "
                   "node-id %d: set each node's peer-node-id to the other "
                   "node's id", r->node_id, s->node_id);
        break;
    default:
        error_setg(errp, "the peer (node %" PRIu32 ") refused the "
                   "connection: it speaks none of this node's protocol "
                   "versions %d to %d: run the same qemu-drbd on both "
                   "nodes", r->node_id, DRBD_PROTO_VERSION_MIN,
                   DRBD_PROTO_VERSION_MAX);
        break;
    }
}

int coroutine_fn drbd_send_hello(DrbdConnection *conn, QIOChannel *ioc,
                                 bool meta, Error **errp)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdHello hello;

    drbd_make_hello(conn, &hello, meta);
    drbd_wire_put_hello(pkt, &hello);
    return drbd_write_packet(ioc, pkt, errp);
}

int coroutine_fn drbd_recv_hello(QIOChannel *ioc, DrbdHello *hello,
                                 Error **errp)
{
    g_autofree uint8_t *payload = NULL;
    uint32_t len;
    int ret;

    ret = drbd_expect_packet(ioc, DRBD_CMD_HELLO, &payload, &len, errp);
    if (ret < 0) {
        return ret;
    }
    return drbd_wire_get_hello(payload, len, hello, errp);
}

/*
 * The answer to our HELLO: the peer's HELLO, or (version 7) a REFUSE
 * that says why it will not have us, which fails with -ECONNREFUSED
 */
int coroutine_fn drbd_recv_hello_answer(DrbdConnection *conn, QIOChannel *ioc,
                                        DrbdHello *hello, Error **errp)
{
    g_autofree uint8_t *payload = NULL;
    DrbdRefuse r;
    DrbdHeader h;
    int ret;

    ret = drbd_read_packet(ioc, &h, &payload, errp);
    if (ret < 0) {
        return ret;
    }
    if (h.cmd == DRBD_CMD_REFUSE) {
        if (drbd_wire_get_refuse(payload, h.length, &r, errp) < 0) {
            return -EINVAL;
        }
        trace_drbd_recv_refuse(conn->s->bs, r.reason, r.node_id);
        drbd_refused_error(conn, &r, errp);
        return -ECONNREFUSED;
    }
    if (h.cmd != DRBD_CMD_HELLO) {
        error_setg(errp, "expected a HELLO packet, got %s",
                   drbd_cmd_name(h.cmd));
        return -EINVAL;
    }
    return drbd_wire_get_hello(payload, h.length, hello, errp);
}

/*
 * The out-of-sync bitmaps cross the data channel in run-length encoded
 * BITMAP packets (rle.h), one bit per 4 KiB, the node with the lower id
 * sending first so that neither waits on a full socket for the other.
 */
static int coroutine_fn drbd_send_bitmap(DrbdPeer *peer, Error **errp)
{
    BDRVDrbdState *s = peer->s;
    uint64_t nbits = DIV_ROUND_UP(s->size, 1 << DRBD_BM_GRANULARITY);
    g_autofree uint8_t *chunk = g_malloc(DRBD_WIRE_MAX_BITMAP);
    HBitmap *hb = hbitmap_alloc(nbits, 0);
    int64_t offset = 0, start, count;
    uint64_t pos = 0;
    size_t len;
    int ret = 0;

    qemu_mutex_lock(&s->lock);
    while (hbitmap_next_dirty_area(peer->conn->oos, offset, s->size,
                                   INT64_MAX, &start, &count)) {
        hbitmap_set(hb, start >> DRBD_BM_GRANULARITY,
                    DIV_ROUND_UP(start + count, 1 << DRBD_BM_GRANULARITY) -
                    (start >> DRBD_BM_GRANULARITY));
        offset = start + count;
    }
    qemu_mutex_unlock(&s->lock);

    while ((len = drbd_rle_encode(hb, nbits, &pos, chunk,
                                  DRBD_WIRE_MAX_BITMAP)) > 0) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();

        drbd_wire_put_bitmap(pkt, chunk, len);
        ret = drbd_write_packet(peer->data, pkt, errp);
        if (ret < 0) {
            break;
        }
    }
    hbitmap_free(hb);
    return ret;
}

/* Receive the peer's bitmap; *@bytes: how much of the device it marks */
static int coroutine_fn drbd_recv_bitmap(DrbdPeer *peer, DrbdDeadline *dl,
                                         HBitmap **out, uint64_t *bytes,
                                         Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    uint64_t nbits = DIV_ROUND_UP(s->size, 1 << DRBD_BM_GRANULARITY);
    HBitmap *hb = hbitmap_alloc(nbits, 0);
    uint64_t pos = 0;

    while (pos < nbits) {
        g_autofree uint8_t *payload = NULL;
        uint32_t len;

        if (drbd_expect_packet(peer->data, DRBD_CMD_BITMAP, &payload, &len,
                               errp) < 0 ||
            drbd_rle_decode(payload, len, pos, hb, nbits, &pos, errp) < 0) {
            hbitmap_free(hb);
            return -EINVAL;
        }
        drbd_deadline_rearm(dl, conn->ping_timeout_ns);
    }
    *bytes = hbitmap_count(hb) << DRBD_BM_GRANULARITY;
    *out = hb;
    return 0;
}

static int coroutine_fn drbd_exchange_bitmaps(DrbdPeer *peer, DrbdDeadline *dl,
                                              HBitmap **theirs,
                                              uint64_t *bytes, Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;

    if (s->node_id < conn->peer_node_id) {
        return drbd_send_bitmap(peer, errp) < 0 ? -EIO :
               drbd_recv_bitmap(peer, dl, theirs, bytes, errp);
    }
    if (drbd_recv_bitmap(peer, dl, theirs, bytes, errp) < 0) {
        return -EINVAL;
    }
    if (drbd_send_bitmap(peer, errp) < 0) {
        hbitmap_free(*theirs);
        *theirs = NULL;
        return -EIO;
    }
    return 0;
}

static DrbdHandshakeDisk drbd_hs_disk(DrbdDiskState d)
{
    switch (d) {
    case DRBD_DISK_STATE_UP_TO_DATE:
        return DRBD_HS_DISK_UP_TO_DATE;
    case DRBD_DISK_STATE_CONSISTENT:
        return DRBD_HS_DISK_CONSISTENT;
    case DRBD_DISK_STATE_OUTDATED:
        return DRBD_HS_DISK_OUTDATED;
    case DRBD_DISK_STATE_INCONSISTENT:
        return DRBD_HS_DISK_INCONSISTENT;
    default:
        return DRBD_HS_DISK_DISKLESS;
    }
}

static void drbd_uuids_str(GString *out, const char *who, const DrbdUuids *u)
{
    g_string_append_printf(out, " %s %016" PRIX64 ":%016" PRIX64 ":%016"
                           PRIX64 ":%016" PRIX64, who, u->current, u->bitmap,
                           u->history[0], u->history[1]);
}

/*
 * What the handshake decided about a split brain or unrelated data: an
 * event and a log line for the operator, never a silent resolution
 */
static void drbd_report_split_brain(DrbdConnection *conn,
                                    const DrbdHandshakeResult *res,
                                    const DrbdUuids *mine,
                                    const DrbdUuids *theirs)
{
    BDRVDrbdState *s = conn->s;
    g_autoptr(GString) detail = g_string_new(NULL);
    bool resolved = res->resolution == DRBD_SB_BY_POLICY ||
                    res->resolution == DRBD_SB_BY_DISCARD_MY_DATA ||
                    res->resolution == DRBD_SB_BY_NO_CHANGES;
    const char *decision = res->decision == DRBD_SYNC_UNRELATED ?
                           "unrelated data" :
                           resolved ? drbd_sync_decision_str(res->decision) :
                           "split brain";

    g_string_printf(detail, "rule %d", res->rule);
    if (res->resolution == DRBD_SB_BY_POLICY) {
        g_string_append_printf(detail, ", resolved by after-sb policy %s",
                               drbd_after_sb_policy_str(res->policy));
    } else if (res->resolution == DRBD_SB_BY_DISCARD_MY_DATA) {
        g_string_append(detail, ", resolved by discard-my-data");
    } else if (res->resolution == DRBD_SB_BY_NO_CHANGES) {
        g_string_append(detail, ", resolved: the secondary without changes "
                        "since the split takes the other's");
    }
    g_string_append(detail, ";");
    drbd_uuids_str(detail, "self", mine);
    drbd_uuids_str(detail, "peer", theirs);
    if (resolved) {
        warn_report("drbd node '%s' (resource %s): split brain, resolved: "
                    "%s (%s)", drbd_name(s), s->resource,
                    decision, detail->str);
    } else {
        error_report("drbd node '%s' (resource %s): %s: not connecting (%s); "
                     "drbd-connect with discard-my-data on the node whose "
                     "changes are to be dropped", drbd_name(s),
                     s->resource, decision, detail->str);
    }
    qapi_event_send_drbd_split_brain(bdrv_get_node_name(s->bs), resolved,
                                     decision, detail->str);
}

/*
 * Whether a peer with @theirs lacks the writes our inconsistent data
 * holds of its generation (s->partial_gen): it does not descend from it.
 * A resync from it would overwrite them; the writes of that generation
 * that the guest saw complete may be nowhere else.
 */
static bool drbd_partial_gen_lacked(BDRVDrbdState *s,
                                    const DrbdUuids *theirs, Error **errp)
{
    uint64_t gen;

    qemu_mutex_lock(&s->lock);
    gen = s->partial_gen;
    qemu_mutex_unlock(&s->lock);
    if (!gen || drbd_uuid_holds(theirs, gen)) {
        return false;
    }
    error_setg(errp, "this node's data is inconsistent, and holds writes "
               "of data generation %016" PRIX64 " that the peer lacks: it "
               "waits for a sync source that has them", gen);
    error_append_hint(errp, "The node that was its sync source has them; "
                      "if it is gone for good, promote the peer with "
                      "force=true, or drbd-invalidate this node, to give "
                      "them up.\n");
    return true;
}

/* What the sync handshake decided, for drbd_handshake_apply() */
typedef struct DrbdHandshakeOutcome {
    DrbdSyncDecision decision;
    int rule;
    DrbdUuids self_uuids;       /* ours, as the rule repairs them */
    DrbdUuids peer_uuids;       /* the peer's, likewise */
    uint64_t target_gen;        /* DrbdPeer's, as the handshake has it */
    bool hold;                  /* wait for drbd-connect before retrying */
    bool peer_primary;          /* the peer said it is primary */
} DrbdHandshakeOutcome;

/*
 * Whether this node, a secondary with up-to-date data, is connected in
 * sync (no resync) to a primary peer other than @conn's: it is in that
 * primary's generation with every write of it.  Under s->lock.
 */
static bool drbd_in_sync_with_primary_locked(DrbdConnection *conn)
{
    BDRVDrbdState *s = conn->s;
    unsigned i;

    if (s->role == DRBD_ROLE_PRIMARY ||
        s->disk != DRBD_DISK_STATE_UP_TO_DATE) {
        return false;
    }
    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];

        if (c != conn && c->peer_role == DRBD_ROLE_PRIMARY &&
            c->cstate == DRBD_CONN_STATE_CONNECTED) {
            return true;
        }
    }
    return false;
}

/*
 * With more than one peer, a node takes one resync at a time, and from
 * the primary where there is one: a second source, or a secondary source
 * beside a primary, would race the primary's writes to the same blocks.
 * Two secondaries that differ in any way (a resync, a split brain) leave
 * it to the primary of either, which settles with each of them first:
 * both ends see the same (each says whether it has a primary peer,
 * DRBD_UUIDS_PRIMARY_PEER), so that neither acts on a decision the other
 * turns down.  What would break this waits: the handshake fails, and the
 * connection is made again after connect-interval.
 */
static int drbd_resync_allowed(DrbdConnection *conn, DrbdSyncDecision d,
                               bool self_primary, bool peer_primary,
                               bool peer_has_primary, Error **errp)
{
    BDRVDrbdState *s = conn->s;
    bool target = drbd_sync_is_target(d);
    int busy = -1, primary;
    unsigned i;

    if (s->nr_conns < 2 || d == DRBD_SYNC_NONE) {
        return 0;
    }
    qemu_mutex_lock(&s->lock);
    primary = drbd_other_primary_locked(conn);
    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];

        if (c != conn && target &&
            (c->cstate == DRBD_CONN_STATE_SYNC_TARGET ||
             (c->peer && c->peer->sync_target))) {
            busy = c->peer_node_id;
        }
    }
    qemu_mutex_unlock(&s->lock);
    if (busy >= 0) {
        error_setg(errp, "the resync from the peer waits for the one from "
                   "node %d to finish", busy);
        return -EAGAIN;
    }
    if (!self_primary && !peer_primary &&
        (primary >= 0 || peer_has_primary)) {
        if (primary >= 0) {
            error_setg(errp, "the peer's data differs from this node's, and "
                       "node %d is primary: the two resync from it first",
                       primary);
        } else {
            error_setg(errp, "the peer's data differs from this node's, and "
                       "the peer has a primary peer: the two resync from it "
                       "first");
        }
        return -EAGAIN;
    }
    return 0;
}

/*
 * The sync handshake's decision: who has the newer data, from the
 * generation UUIDs and disk states (uuid.c).  Changes nothing on the
 * node; reports a split brain to the operator.  Fails, with the reason,
 * when the nodes must not connect.
 */
static int drbd_handshake_decide(DrbdConnection *conn,
                                 const DrbdHandshakeSide *self,
                                 const DrbdStatePacket *st,
                                 const DrbdUuidsPacket *pu,
                                 DrbdHandshakeOutcome *out, Error **errp)
{
    BDRVDrbdState *s = conn->s;
    DrbdHandshakeSide other = {
        .uuids = {
            .current = pu->current, .bitmap = pu->bitmap,
            .history = { pu->history[0], pu->history[1] },
        },
        .disk = drbd_hs_disk(st->disk_state),
        .primary = st->role == DRBD_ROLE_PRIMARY,
        .crashed_primary = pu->flags & DRBD_UUIDS_CRASHED_PRIMARY,
        .changes = pu->changes,
        .discard_my_data = pu->flags & DRBD_UUIDS_DISCARD_MY_DATA,
    };
    DrbdHandshakeConfig their_cfg = {
        .after_sb_0pri = pu->after_sb[0],
        .after_sb_1pri = pu->after_sb[1],
        .after_sb_2pri = pu->after_sb[2],
    };
    DrbdHandshakeConfig cfg = conn->sb_cfg;
    DrbdHandshakeResult res;
    DrbdSyncDecision d;

    *out = (DrbdHandshakeOutcome) { 0 };
    if (drbd_handshake_config_compatible(&conn->sb_cfg, &their_cfg,
                                         errp) < 0) {
        return -EINVAL;
    }

    /* Decide from what we sent: the peer decides from the same */
    cfg.idle_secondary_loses = s->nr_conns == 1;
    d = drbd_sync_handshake(self, &other, s->node_id < conn->peer_node_id,
                            &cfg, &res);
    trace_drbd_sync_handshake(s->bs, drbd_sync_decision_str(d), res.rule,
                              drbd_uuid_cmp_str(res.uuid_cmp),
                              drbd_sb_resolution_str(res.resolution));

    if (s->nr_conns > 1 && !self->primary && !other.primary &&
        (res.rule == 51 || res.rule == 71)) {
        /*
         * One secondary is a generation behind the other, which joined a
         * primary's new one (NEW_UUID, the old current UUID to history[0]
         * as at the end of a resync: rules 51 and 71).  A secondary keeps
         * no bitmap of what another lacks (only a primary records its
         * writes for its peers): what one lacks is not known but for the
         * whole device
         */
        if (d == DRBD_SYNC_SOURCE) {
            d = DRBD_SYNC_FULL_SOURCE;
        } else if (d == DRBD_SYNC_TARGET) {
            d = DRBD_SYNC_FULL_TARGET;
        }
    }
    if (s->nr_conns > 1 && !self->primary && !other.primary &&
        res.rule >= 34 && res.rule <= 37 &&
        self->disk == DRBD_HS_DISK_UP_TO_DATE &&
        other.disk == DRBD_HS_DISK_UP_TO_DATE &&
        (pu->flags & DRBD_UUIDS_PRIMARY_PEER)) {
        bool same;

        qemu_mutex_lock(&s->lock);
        same = drbd_in_sync_with_primary_locked(conn);
        qemu_mutex_unlock(&s->lock);
        if (same) {
            /*
             * Two secondaries in one generation, the one of the primary
             * whose writes this node receives in sync, and the peer has
             * a primary peer too: the same data.  The bitmap UUID on one
             * side is left from a resync between the two that one side
             * took on and the other gave up (its UUIDs changed as it
             * decided: a handshake with the primary ended first), and
             * what either lacks of the primary's writes is in the
             * primary's bitmaps, not in theirs.  Nothing to resync; the
             * bitmap UUID goes to the history, and the bitmap is cleared
             * (drbd_handshake_apply()).
             */
            trace_drbd_sync_handshake_same_primary(s->bs, res.rule);
            d = DRBD_SYNC_NONE;
            res.rule = res.rule == 34 || res.rule == 36 ? 34 : 35;
        }
    }
    if (drbd_resync_allowed(conn, d, self->primary, other.primary,
                            pu->flags & DRBD_UUIDS_PRIMARY_PEER, errp) < 0) {
        /* Not now, whatever was decided: the connection is made again */
        return -EAGAIN;
    }
    if (drbd_sync_is_target(d) && !other.primary &&
        self->disk == DRBD_HS_DISK_INCONSISTENT &&
        drbd_partial_gen_lacked(s, &other.uuids, errp)) {
        return -EAGAIN;
    }
    if (res.resolution != DRBD_SB_NONE || d == DRBD_SYNC_UNRELATED) {
        drbd_report_split_brain(conn, &res, &self->uuids, &other.uuids);
    }
    switch (d) {
    case DRBD_SYNC_SPLIT_BRAIN:
    case DRBD_SYNC_UNRELATED:
        out->hold = true;
        error_setg(errp, "%s with the peer (rule %d): not connecting "
                   "until drbd-connect",
                   d == DRBD_SYNC_UNRELATED ? "unrelated data" :
                   "split brain", res.rule);
        return -EINVAL;
    case DRBD_SYNC_INCONSISTENT_SOURCE:
        error_setg(errp, "the node that would be sync source has "
                   "inconsistent data: neither has good data to send");
        return -EINVAL;
    case DRBD_SYNC_PRIMARY_TARGET:
        error_setg(errp, "a primary with consistent data would become "
                   "sync target: demote it, or discard its data");
        return -EINVAL;
    default:
        break;
    }

    out->decision = d;
    out->rule = res.rule;
    out->peer_primary = other.primary;
    out->self_uuids = self->uuids;
    out->peer_uuids = other.uuids;
    drbd_uuid_repair(res.rule, &out->self_uuids, &out->peer_uuids);
    /* A primary target writes in its current generation from now on */
    if (drbd_sync_is_target(d) && self->primary) {
        out->target_gen = self->uuids.current;
    } else if (drbd_sync_is_source(d) && other.primary) {
        out->target_gen = other.uuids.current;
    }
    return 0;
}

/*
 * A node whose disk is inconsistent (a resync from another peer was cut
 * short) becomes the sync target of any peer with consistent data, by
 * bitmap where the UUIDs allow: the blocks that the other resync still
 * owed are lacking too, and this resync is the one to bring them, or
 * the node would stay inconsistent once it is over (and, with a primary
 * in the resource, wait for good: two secondaries leave their resync to
 * the primary).  Every other bitmap goes into @conn's before it is sent;
 * where one holds what that peer lacks rather than what we lack, the
 * blocks are sent once more for nothing.  Under s->lock.
 */
static void drbd_oos_take_others_locked(DrbdConnection *conn)
{
    BDRVDrbdState *s = conn->s;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *c = s->conns[i];
        int64_t start = 0, count;

        if (c == conn) {
            continue;
        }
        while (hbitmap_next_dirty_area(c->oos, start, s->size, INT64_MAX,
                                       &start, &count)) {
            drbd_oos_set_locked(conn, start, count);
            start += count;
        }
    }
}

/*
 * Apply the handshake's outcome to the node and the peer, in one place:
 * the UUIDs, the bitmap (afterwards the source and the target both hold
 * the union of the two bitmaps), the disk state of a sync target, and
 * the metadata on disk.  @gen is the node's state generation the
 * decision was made from: if the node changed since, nothing is applied.
 */
static int coroutine_fn drbd_handshake_apply(DrbdPeer *peer, uint64_t gen,
                                             const DrbdHandshakeOutcome *o,
                                             HBitmap *their_bm, Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    DrbdSyncDecision d = o->decision;
    int64_t start = 0, count;
    unsigned i;

    qemu_mutex_lock(&s->lock);
    if (s->hs_gen != gen) {
        /* Promoted, demoted or invalidated meanwhile: decide again */
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "the node's role, disk or UUIDs changed during the "
                   "handshake; connecting again");
        return -EAGAIN;
    }
    peer->decision = d;
    peer->uuids_synced = d == DRBD_SYNC_NONE;
    /*
     * From now on, a handshake with another peer sees this one as
     * primary: it would otherwise see our UUIDs, the primary's, without
     * the primary, until the connection runs, and two secondaries could
     * then decide on a resync between them that races the primary's
     * writes, or that one of them drops (its UUIDs changed meanwhile)
     * and the other carries out alone
     */
    conn->hs_peer_primary = o->peer_primary;
    peer->target_gen = o->target_gen;
    if (drbd_sync_is_target(d)) {
        s->partial_gen = o->peer_uuids.current;
        if (o->target_gen && peer->version >= DRBD_PROTO_VERSION_TARGET_GEN) {
            /*
             * A primary target: its next write starts a generation that
             * the source joins when told, so that the source's UUIDs show
             * the writes it has of ours (state.c)
             */
            qatomic_set(&s->gen_due, true);
        }
    }
    peer->hs_uuids = o->peer_uuids;
    peer->hs_current = o->self_uuids.current;
    conn->discard_my_data = false;
    /* A crash as primary is over once every peer has had its say */
    conn->crash_pending = false;
    for (i = 0; i < s->nr_conns && !s->conns[i]->crash_pending; i++) {
        /* look on */
    }
    if (i == s->nr_conns) {
        s->md.sb.flags &= ~DRBD_MDF_CRASHED_PRIMARY;
    }
    drbd_uuids_set_locked(conn, &o->self_uuids);
    if (d == DRBD_SYNC_NONE && o->rule != 0 &&
        s->role != DRBD_ROLE_PRIMARY) {
        /* The same generation on both sides: nothing differs */
        drbd_oos_reset_locked(conn, 0, s->size);
    } else if (d == DRBD_SYNC_FULL_SOURCE || d == DRBD_SYNC_FULL_TARGET) {
        drbd_oos_set_locked(conn, 0, s->size);
    } else {
        while (hbitmap_next_dirty_area(their_bm, start, INT64_MAX,
                                       INT64_MAX, &start, &count)) {
            uint64_t off = (uint64_t)start << DRBD_BM_GRANULARITY;

            drbd_oos_set_locked(conn, off,
                                MIN((uint64_t)count << DRBD_BM_GRANULARITY,
                                    s->size - off));
            start += count;
        }
    }
    peer->resync_bits = hbitmap_count(conn->oos) >> DRBD_BM_GRANULARITY;
    qemu_mutex_unlock(&s->lock);

    if (drbd_sync_is_target(d) && peer->resync_bits) {
        /*
         * Our data is not usable until the resync is done, even after a
         * crash: the superblock says so before any resync write
         */
        drbd_set_state(s, NULL, -1, -1, DRBD_DISK_STATE_INCONSISTENT, -1, -1,
                       "resync from the peer needed");
        /* What we lack, on disk with it */
        if (drbd_co_md_sync(s, true) < 0) {
            error_setg(errp, "could not write the metadata before the "
                       "resync");
            return -EIO;
        }
    } else if (d != DRBD_SYNC_NONE && !peer->resync_bits) {
        /*
         * Nothing to send: the resync is over as it starts (a primary's
         * writes from now until the connection is up are sent by a
         * resync that drbd_peer_run() starts for them)
         */
        drbd_resync_finished_uuids(peer);
    }
    if (drbd_co_md_sync(s, false) < 0) {
        error_setg(errp, "could not write the metadata after the handshake");
        return -EIO;
    }
    return 0;
}

/* DECISION's outcome for @d, ours or (mirrored) the one the peer's must be */
static uint32_t drbd_decision_outcome(DrbdSyncDecision d, bool mirrored)
{
    switch (d) {
    case DRBD_SYNC_NONE:
        return DRBD_DECISION_NONE;
    case DRBD_SYNC_SOURCE:
        return mirrored ? DRBD_DECISION_TARGET : DRBD_DECISION_SOURCE;
    case DRBD_SYNC_TARGET:
        return mirrored ? DRBD_DECISION_SOURCE : DRBD_DECISION_TARGET;
    case DRBD_SYNC_FULL_SOURCE:
        return mirrored ? DRBD_DECISION_FULL_TARGET :
                          DRBD_DECISION_FULL_SOURCE;
    case DRBD_SYNC_FULL_TARGET:
        return mirrored ? DRBD_DECISION_FULL_SOURCE :
                          DRBD_DECISION_FULL_TARGET;
    default:
        return DRBD_DECISION_REFUSED;
    }
}

static const char *drbd_decision_outcome_str(uint32_t outcome)
{
    static const char *const names[DRBD_DECISION_MAX + 1] = {
        [DRBD_DECISION_REFUSED] = "refused",
        [DRBD_DECISION_NONE] = "none",
        [DRBD_DECISION_SOURCE] = "source",
        [DRBD_DECISION_TARGET] = "target",
        [DRBD_DECISION_FULL_SOURCE] = "full-source",
        [DRBD_DECISION_FULL_TARGET] = "full-target",
    };

    return outcome <= DRBD_DECISION_MAX ? names[outcome] : "unknown";
}

/*
 * Version 12: tell the peer what this node made of the handshake
 * (@decided: 0, or the error that turns the connection down), and hear
 * what it made of it, before either acts on it.  Each side decides from
 * what both sent, but turns the outcome down for what it alone knows
 * (drbd_resync_allowed(), drbd_partial_gen_lacked(), a change of role
 * since it sent its state): without this, a node could take on the
 * resync that its peer turned down, a target without a source.
 * Returns @decided if it failed, else 0 when the peer's decision is ours
 * from its end, -EAGAIN when it is not.
 */
static int coroutine_fn drbd_handshake_agree(DrbdPeer *peer, uint64_t gen,
                                             int decided,
                                             const DrbdHandshakeOutcome *o,
                                             Error **errp)
{
    BDRVDrbdState *s = peer->s;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    g_autofree uint8_t *payload = NULL;
    DrbdDecision ours, theirs;
    uint32_t expected;
    uint32_t len;

    if (decided == 0) {
        qemu_mutex_lock(&s->lock);
        if (s->hs_gen != gen) {
            /* Promoted, demoted or invalidated since we sent our state */
            decided = -EAGAIN;
            error_setg(errp, "the node's role, disk or UUIDs changed during "
                       "the handshake; connecting again");
        }
        qemu_mutex_unlock(&s->lock);
    }
    ours = (DrbdDecision) {
        .outcome = decided < 0 ? DRBD_DECISION_REFUSED :
                   drbd_decision_outcome(o->decision, false),
        .rule = decided < 0 ? 0 : MIN(MAX(o->rule, 0),
                                      DRBD_DECISION_RULE_MAX),
    };
    drbd_wire_put_decision(pkt, &ours);
    if (decided < 0) {
        /* Our reason stands; the peer learns only that we refused */
        drbd_write_packet(peer->data, pkt, NULL);
        return decided;
    }
    if (drbd_write_packet(peer->data, pkt, errp) < 0 ||
        drbd_expect_packet(peer->data, DRBD_CMD_DECISION, &payload, &len,
                           errp) < 0 ||
        drbd_wire_get_decision(payload, len, &theirs, errp) < 0) {
        return -EINVAL;
    }
    expected = drbd_decision_outcome(o->decision, true);
    trace_drbd_sync_handshake_agree(s->bs,
                                    drbd_decision_outcome_str(ours.outcome),
                                    drbd_decision_outcome_str(theirs.outcome),
                                    theirs.rule);
    if (theirs.outcome == DRBD_DECISION_REFUSED) {
        error_setg(errp, "the peer turned down the outcome of the handshake "
                   "(%s here, by rule %d): its log says why; connecting "
                   "again", drbd_sync_decision_str(o->decision), o->rule);
        return -EAGAIN;
    }
    if (theirs.outcome != expected) {
        error_setg(errp, "the peer decided '%s' (rule %" PRIu32 "), where "
                   "this node decided '%s' (rule %d): connecting again",
                   drbd_decision_outcome_str(theirs.outcome), theirs.rule,
                   drbd_sync_decision_str(o->decision), o->rule);
        return -EAGAIN;
    }
    return 0;
}

/*
 * Exchange sizes, states, generation UUIDs and bitmaps on the data
 * channel, and decide what happens between the two nodes
 */
int coroutine_fn drbd_exchange_params(DrbdPeer *peer, DrbdDeadline *dl,
                                      Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    g_autofree uint8_t *payload = NULL;
    g_autofree uint8_t *payload2 = NULL;
    g_autofree uint8_t *payload3 = NULL;
    DrbdSizes mine = {
        .disk_size = s->size,
        .max_epoch_size = conn->max_epoch_size,
        .protocol = conn->protocol,
        .integrity = conn->integrity,
        .verify = conn->verify_alg,
        .csums = conn->csums_alg,
    };
    DrbdUuidsPacket uuids, their_uuids;
    DrbdHandshakeOutcome outcome;
    DrbdHandshakeSide self;
    uint64_t gen;
    DrbdSizes theirs;
    DrbdStatePacket st;
    HBitmap *their_bm = NULL;
    uint64_t their_bytes = 0;
    bool primary_peer;
    uint32_t len;
    int ret;

    qemu_mutex_lock(&s->lock);
    st.role = s->role;
    st.disk_state = s->disk;
    /* What we send is what we decide from */
    self = (DrbdHandshakeSide) {
        .disk = drbd_hs_disk(s->disk),
        .primary = s->role == DRBD_ROLE_PRIMARY,
        .crashed_primary = (s->md.sb.flags & DRBD_MDF_CRASHED_PRIMARY) &&
                           conn->crash_pending,
        .changes = hbitmap_count(conn->oos) >> DRBD_BM_GRANULARITY,
        /* Changes that no one acknowledged yield (drbd-int.h) */
        .discard_my_data = conn->discard_my_data || s->gen_unacked_lost,
    };
    drbd_uuids_get_locked(conn, &self.uuids);
    primary_peer = drbd_other_primary_locked(conn) >= 0;
    gen = s->hs_gen;
    peer->hs_primary = self.primary;
    qemu_mutex_unlock(&s->lock);

    uuids = (DrbdUuidsPacket) {
        .current = self.uuids.current,
        .bitmap = self.uuids.bitmap,
        .history = { self.uuids.history[0], self.uuids.history[1] },
        .changes = self.changes,
        .flags = (self.crashed_primary ? DRBD_UUIDS_CRASHED_PRIMARY : 0) |
                 (self.discard_my_data ? DRBD_UUIDS_DISCARD_MY_DATA : 0) |
                 (primary_peer && peer->version >= DRBD_PROTO_VERSION_NEW_UUID ?
                  DRBD_UUIDS_PRIMARY_PEER : 0),
        .after_sb = { conn->sb_cfg.after_sb_0pri,
                      conn->sb_cfg.after_sb_1pri,
                      conn->sb_cfg.after_sb_2pri },
    };

    drbd_wire_put_sizes(pkt, &mine);
    drbd_wire_put_state(pkt, &st);
    drbd_wire_put_uuids(pkt, &uuids);
    ret = drbd_write_packet(peer->data, pkt, errp);
    if (ret < 0) {
        return ret;
    }

    ret = drbd_expect_packet(peer->data, DRBD_CMD_SIZES, &payload, &len,
                             errp);
    if (ret < 0 && conn->tls_creds && conn->connects) {
        /*
         * With TLS 1.3 our handshake ends before the listening peer
         * judges our certificate: if it refuses it, this read is where
         * we learn, and it cannot tell us why
         */
        error_prepend(errp, "the peer closed the connection after the TLS "
                      "handshake (if its log says so, it refused our "
                      "certificate, e.g. by its tls-authz): ");
    }
    if (ret < 0 || drbd_wire_get_sizes(payload, len, &theirs, errp) < 0) {
        return -EINVAL;
    }
    ret = drbd_expect_packet(peer->data, DRBD_CMD_STATE, &payload2, &len,
                             errp);
    if (ret < 0 || drbd_wire_get_state(payload2, len, &st, errp) < 0) {
        return -EINVAL;
    }

    if (theirs.disk_size != s->size) {
        error_setg(errp, "the peer's disk has %" PRIu64 " bytes, this "
                   "node's %" PRIu64 ": the sizes must be equal",
                   theirs.disk_size, s->size);
        error_append_hint(errp, "Stop the node whose image is smaller and "
                          "resize it with 'qemu-img resize -f drbd' to the "
                          "other's size.\n");
        return -EINVAL;
    }
    if (theirs.protocol != conn->protocol) {
        error_setg(errp, "the peer uses protocol %c, this node %c",
                   theirs.protocol, conn->protocol);
        return -EINVAL;
    }
    if (theirs.integrity != conn->integrity) {
        error_setg(errp, "the peer's data-integrity-alg is %s, this node's "
                   "%s", drbd_digest_name(theirs.integrity),
                   drbd_digest_name(conn->integrity));
        return -EINVAL;
    }
    if (theirs.verify != conn->verify_alg) {
        error_setg(errp, "the peer's verify-alg is %s, this node's %s",
                   drbd_digest_name(theirs.verify),
                   drbd_digest_name(conn->verify_alg));
        return -EINVAL;
    }
    if (theirs.csums != conn->csums_alg) {
        error_setg(errp, "the peer's csums-alg is %s, this node's %s",
                   drbd_digest_name(theirs.csums),
                   drbd_digest_name(conn->csums_alg));
        return -EINVAL;
    }
    if (st.role == DRBD_ROLE_PRIMARY && s->role == DRBD_ROLE_PRIMARY) {
        error_setg(errp, "both nodes are primary: refusing to connect: "
                   "demote the one whose writes since they parted are to "
                   "be given up (if it wrote nothing, it then takes the "
                   "other's data; else drbd-connect with discard-my-data "
                   "on it)");
        return -EINVAL;
    }
    ret = drbd_expect_packet(peer->data, DRBD_CMD_UUIDS, &payload3, &len,
                             errp);
    if (ret < 0 || drbd_wire_get_uuids(payload3, len, &their_uuids,
                                       errp) < 0) {
        return -EINVAL;
    }

    qemu_mutex_lock(&s->lock);
    if (s->disk == DRBD_DISK_STATE_INCONSISTENT) {
        drbd_oos_take_others_locked(conn);
    }
    qemu_mutex_unlock(&s->lock);
    ret = drbd_exchange_bitmaps(peer, dl, &their_bm, &their_bytes, errp);
    if (ret < 0) {
        return ret;
    }
    ret = drbd_handshake_decide(conn, &self, &st, &their_uuids, &outcome,
                                errp);
    if (outcome.hold) {
        qemu_mutex_lock(&s->lock);
        conn->connect_held = true;
        conn->held_reason = "split brain: waiting for drbd-connect";
        qemu_mutex_unlock(&s->lock);
    }
    if (peer->version >= DRBD_PROTO_VERSION_DECISION) {
        ret = drbd_handshake_agree(peer, gen, ret, &outcome, errp);
    }
    if (ret == 0) {
        ret = drbd_handshake_apply(peer, gen, &outcome, their_bm, errp);
    }
    hbitmap_free(their_bm);
    if (ret < 0) {
        return ret;
    }

    peer->role = st.role;
    peer->disk = st.disk_state;
    qemu_mutex_lock(&s->lock);
    if (s->detached && conn->missed_acked &&
        peer->disk == DRBD_DISK_STATE_UP_TO_DATE) {
        /*
         * Writes that the guest saw succeed went to our other peers
         * without this one, and we have no disk to send them from: in
         * another generation than ours, it lacks them, and we neither
         * read from it nor count it as a copy.  (Its promotion is
         * refused by the peers that know our generation; the next
         * primary with a disk resyncs it.)  In ours, it got them from
         * another peer.
         */
        if (!((their_uuids.current ^ s->md.sb.uuid_current) &
              ~DRBD_UUID_PRIMARY_FLAG)) {
            conn->missed_acked = false;
        } else {
            peer->disk = DRBD_DISK_STATE_OUTDATED;
        }
        trace_drbd_sync_handshake_missed_acked(s->bs, conn->missed_acked);
    }
    qemu_mutex_unlock(&s->lock);
    if (outcome.decision == DRBD_SYNC_NONE &&
        st.disk_state == DRBD_DISK_STATE_UP_TO_DATE &&
        qatomic_read(&s->disk) == DRBD_DISK_STATE_OUTDATED) {
        /* Outdated (drbd-outdate), and the same data as an up-to-date peer */
        drbd_set_state(s, NULL, -1, -1, DRBD_DISK_STATE_UP_TO_DATE, -1, -1,
                       "in sync with an up-to-date peer");
        if (drbd_co_md_sync(s, false) < 0) {
            error_setg(errp, "could not write the metadata after the "
                       "handshake");
            return -EIO;
        }
    }
    if (st.role == DRBD_ROLE_PRIMARY) {
        /* A diskless node learns the data's generation from its primary */
        qemu_mutex_lock(&s->lock);
        drbd_gen_seen_push(&s->gen_seen, their_uuids.current);
        if (outcome.decision == DRBD_SYNC_NONE &&
            s->role != DRBD_ROLE_PRIMARY && !s->detached &&
            !drbd_conn_in_locked(s, DRBD_CONN_RESYNCING)) {
            /*
             * Back with a primary in its generation: what it marked for
             * us while we were apart comes from it, and what we marked
             * for our other peers when we lost it (its writes in flight
             * then) it resyncs to them too
             */
            drbd_forget_other_peers_locked(conn);
        }
        qemu_mutex_unlock(&s->lock);
    }
    return 0;
}
