/*
 * DRBD-style replication: what a peer's packet may do, given the state
 *
 * See gate.h.  Every check reads the fields of the DrbdGate that the
 * header names and nothing else, and changes nothing: what an accepted
 * packet does to the state is the caller's business.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "gate.h"

static bool is_ack_cmd(uint16_t cmd)
{
    return cmd == DRBD_CMD_RECV_ACK || cmd == DRBD_CMD_WRITE_ACK ||
           cmd == DRBD_CMD_NEG_ACK;
}

static bool is_resync_write_cmd(uint16_t cmd)
{
    return cmd == DRBD_CMD_RS_DATA || cmd == DRBD_CMD_RS_ZEROES;
}

static bool is_guest_write_cmd(uint16_t cmd)
{
    return cmd == DRBD_CMD_DATA || cmd == DRBD_CMD_ZEROES ||
           cmd == DRBD_CMD_DISCARD;
}

bool drbd_gate_bitmap_range(uint64_t disk_size, uint64_t offset,
                            uint64_t bytes)
{
    return bytes && offset < disk_size && bytes <= disk_size - offset &&
           QEMU_IS_ALIGNED(offset, DRBD_GATE_BM_BLOCK) &&
           (QEMU_IS_ALIGNED(offset + bytes, DRBD_GATE_BM_BLOCK) ||
            offset + bytes == disk_size);
}

int drbd_gate_write_ack(const DrbdGate *g, uint16_t cmd,
                        const DrbdBlockAck *ack, Error **errp)
{
    if (!is_ack_cmd(cmd)) {
        error_setg(errp, "%s packet is not an ack of a write",
                   drbd_cmd_name(cmd));
        return -EINVAL;
    }
    if (ack->id == 0 || ack->id > g->last_req_id) {
        error_setg(errp, "%s for request %" PRIu64 ", which was never sent",
                   drbd_cmd_name(cmd), ack->id);
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_resync_ack(const DrbdGate *g, uint16_t cmd,
                         const DrbdBlockAck *ack, Error **errp)
{
    uint64_t offset = ack->id & ~DRBD_GATE_RESYNC_ID;
    gpointer bytes;

    /*
     * It names a chunk in flight by its id, offset and length; a resync
     * chunk is only ever acked once it is on disk (or failed)
     */
    if (!is_ack_cmd(cmd) || cmd == DRBD_CMD_RECV_ACK ||
        !(ack->id & DRBD_GATE_RESYNC_ID) || ack->offset != offset ||
        !g->resync_chunks ||
        !g_hash_table_lookup_extended(g->resync_chunks, &offset, NULL,
                                      &bytes) ||
        GPOINTER_TO_UINT(bytes) != ack->bytes) {
        error_setg(errp, "%s for a resync block never sent or already "
                   "acked (offset %" PRIu64 ", %" PRIu32 " bytes)",
                   drbd_cmd_name(cmd), ack->offset, ack->bytes);
        return -EINVAL;
    }
    return 0;
}

/*
 * The peer acks the epochs in order, so an ack may name any epoch that
 * waits for one (it covers those before it too), and nothing else
 */
int drbd_gate_barrier_ack(const DrbdGate *g, uint32_t epoch, Error **errp)
{
    if ((int32_t)(epoch - g->epoch_acked_upto) >= 0 &&
        (int32_t)(epoch - g->cur_epoch) < 0) {
        return 0;
    }
    if (g->epoch_acked_upto == g->cur_epoch) {
        error_setg(errp, "BARRIER_ACK for epoch %" PRIu32 ", but no epoch "
                   "waits for an ack", epoch);
    } else {
        error_setg(errp, "BARRIER_ACK for epoch %" PRIu32 ", but the "
                   "epochs waiting for an ack are %" PRIu32 " to %" PRIu32,
                   epoch, g->epoch_acked_upto, g->cur_epoch - 1);
    }
    return -EINVAL;
}

int drbd_gate_write(const DrbdGate *g, uint16_t cmd,
                    const DrbdDataPacket *p, Error **errp)
{
    if (!is_guest_write_cmd(cmd) && !is_resync_write_cmd(cmd)) {
        error_setg(errp, "%s packet is not a write", drbd_cmd_name(cmd));
        return -EINVAL;
    }
    /*
     * A primary that receives a write talks to a peer that is one too;
     * resync data is for a sync target, which may be primary
     */
    if (g->role == DRBD_ROLE_PRIMARY &&
        !(is_resync_write_cmd(cmd) && g->sync_target)) {
        error_setg(errp, "received a %s packet while primary",
                   drbd_cmd_name(cmd));
        return -EINVAL;
    }
    /* Guest writes come from a primary; resync data from our sync source */
    if (is_resync_write_cmd(cmd) ? !g->sync_target :
        g->peer_role != DRBD_ROLE_PRIMARY) {
        error_setg(errp, "received a %s packet from a %s peer that is not "
                   "our sync source", drbd_cmd_name(cmd),
                   DrbdRole_str(g->peer_role));
        return -EINVAL;
    }
    if (is_resync_write_cmd(cmd) &&
        !drbd_gate_bitmap_range(g->disk_size, p->offset, p->bytes)) {
        error_setg(errp, "resync data at %" PRIu64 " (%" PRIu32 " bytes) "
                   "is not aligned to the bitmap's 4 KiB blocks",
                   p->offset, p->bytes);
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_out_of_sync(const DrbdGate *g, const DrbdBlockAck *range,
                          Error **errp)
{
    if (!drbd_gate_bitmap_range(g->disk_size, range->offset, range->bytes)) {
        error_setg(errp, "OUT_OF_SYNC at %" PRIu64 " (%" PRIu32 " bytes) is "
                   "not aligned to the bitmap's 4 KiB blocks", range->offset,
                   range->bytes);
        return -EINVAL;
    }
    /*
     * A primary is a sync target only where the handshake made it one:
     * promoted while inconsistent, it reads what it lacks from the peer
     */
    if (g->role == DRBD_ROLE_PRIMARY &&
        g->decision != DRBD_SYNC_TARGET &&
        g->decision != DRBD_SYNC_FULL_TARGET) {
        error_setg(errp, "the peer wants to resync a primary, which the "
                   "handshake did not make its sync target (it decided %s)",
                   drbd_sync_decision_str(g->decision));
        return -EINVAL;
    }
    /*
     * The handshake made us its sync target, or the peer is an up-to-date
     * primary (which resyncs what it marked while connected); nobody else
     * may overwrite our data
     */
    if (!g->sync_target &&
        (g->decision == DRBD_SYNC_SOURCE ||
         g->decision == DRBD_SYNC_FULL_SOURCE ||
         g->peer_role != DRBD_ROLE_PRIMARY ||
         g->peer_disk != DRBD_DISK_STATE_UP_TO_DATE)) {
        error_setg(errp, "OUT_OF_SYNC from a %s peer whose disk is %s, which "
                   "the handshake did not make our sync source (it decided "
                   "%s)", DrbdRole_str(g->peer_role),
                   DrbdDiskState_str(g->peer_disk),
                   drbd_sync_decision_str(g->decision));
        return -EINVAL;
    }
    if (g->cstate == DRBD_CONN_STATE_SYNC_SOURCE) {
        error_setg(errp, "split brain: both nodes hold changes the other "
                   "lacks");
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_resync_done(const DrbdGate *g, Error **errp)
{
    if (!g->sync_target) {
        error_setg(errp, "RS_DONE, but no resync to this node runs");
        return -EINVAL;
    }
    return 0;
}

/*
 * How much a disk state says of the data: a peer's never rises by its
 * own word (a resync, which both nodes follow, or a handshake raises it)
 */
static int disk_rank(DrbdDiskState d)
{
    switch (d) {
    case DRBD_DISK_STATE_INCONSISTENT:
        return 1;
    case DRBD_DISK_STATE_OUTDATED:
        return 2;
    case DRBD_DISK_STATE_CONSISTENT:
        return 3;
    case DRBD_DISK_STATE_UP_TO_DATE:
        return 4;
    default:
        /* diskless, attaching, failed, unknown: no data to speak of */
        return 0;
    }
}

int drbd_gate_state(const DrbdGate *g, uint16_t cmd,
                    const DrbdStatePacket *st, Error **errp)
{
    const char *name = drbd_cmd_name(cmd);

    assert(cmd == DRBD_CMD_STATE || cmd == DRBD_CMD_STATE_REQ);
    if (disk_rank(st->disk_state) > disk_rank(g->peer_disk)) {
        error_setg(errp, "%s: the peer's disk is %s, but it announces %s: a "
                   "disk state rises only through a resync or a new "
                   "handshake", name, DrbdDiskState_str(g->peer_disk),
                   DrbdDiskState_str(st->disk_state));
        return -EINVAL;
    }
    if (cmd == DRBD_CMD_STATE_REQ) {
        if (st->uuid && (g->peer_version < DRBD_PROTO_VERSION_GEN_CHECK ||
                         st->role != DRBD_ROLE_PRIMARY)) {
            error_setg(errp, "STATE_REQ: a current UUID in a request for "
                       "the %s role, from a peer of protocol version %"
                       PRIu32, DrbdRole_str(st->role), g->peer_version);
            return -EINVAL;
        }
        /* It asks: what we grant is the answer, not a protocol error */
        return 0;
    }
    if (st->role == DRBD_ROLE_PRIMARY && g->role == DRBD_ROLE_PRIMARY) {
        error_setg(errp, "the peer became primary while this node is "
                   "primary");
        return -EINVAL;
    }
    if (st->role != g->peer_role &&
        (st->role == DRBD_ROLE_PRIMARY ||
         g->peer_version >= DRBD_PROTO_VERSION_ROLE_REQ)) {
        error_setg(errp, "STATE: the peer is %s, and announces %s without "
                   "asking: a role changes only through a STATE_REQ that "
                   "this node granted", DrbdRole_str(g->peer_role),
                   DrbdRole_str(st->role));
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_new_uuid(const DrbdGate *g, Error **errp)
{
    if (g->peer_version < DRBD_PROTO_VERSION_NEW_UUID) {
        error_setg(errp, "NEW_UUID from a peer of protocol version %" PRIu32,
                   g->peer_version);
        return -EINVAL;
    }
    if (g->peer_role != DRBD_ROLE_PRIMARY) {
        error_setg(errp, "NEW_UUID, but the peer is %s: only a primary "
                   "starts a data generation", DrbdRole_str(g->peer_role));
        return -EINVAL;
    }
    if (g->role == DRBD_ROLE_PRIMARY) {
        error_setg(errp, "NEW_UUID while this node is primary");
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_state_reply(const DrbdGate *g, uint32_t result, Error **errp)
{
    if (!g->state_req_sent) {
        error_setg(errp, "STATE_REPLY, but no STATE_REQ waits for an "
                   "answer");
        return -EINVAL;
    }
    if (result > DRBD_STATE_REPLY_REFUSED &&
        g->peer_version < DRBD_PROTO_VERSION_GEN_CHECK) {
        error_setg(errp, "STATE_REPLY: result %" PRIu32 " from a peer of "
                   "protocol version %" PRIu32, result, g->peer_version);
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_ahead(const DrbdGate *g, Error **errp)
{
    if (g->peer_version < DRBD_PROTO_VERSION_AHEAD) {
        error_setg(errp, "AHEAD from a peer of protocol version %" PRIu32,
                   g->peer_version);
        return -EINVAL;
    }
    if (g->role == DRBD_ROLE_PRIMARY || g->peer_role != DRBD_ROLE_PRIMARY) {
        error_setg(errp, "AHEAD from a %s peer while this node is %s: only "
                   "a primary goes ahead of its secondaries",
                   DrbdRole_str(g->peer_role), DrbdRole_str(g->role));
        return -EINVAL;
    }
    if (g->cstate != DRBD_CONN_STATE_CONNECTED || g->sync_target) {
        error_setg(errp, "AHEAD while the connection is %s: a primary goes "
                   "ahead only of a peer in sync",
                   DrbdConnState_str(g->cstate));
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_resize(const DrbdGate *g, uint64_t disk_size, Error **errp)
{
    if (g->peer_version < DRBD_PROTO_VERSION_RESIZE) {
        error_setg(errp, "RESIZE from a peer of protocol version %" PRIu32,
                   g->peer_version);
        return -EINVAL;
    }
    if (g->role == DRBD_ROLE_PRIMARY || g->peer_role != DRBD_ROLE_PRIMARY) {
        error_setg(errp, "RESIZE from a %s peer while this node is %s: "
                   "only a primary grows its secondaries",
                   DrbdRole_str(g->peer_role), DrbdRole_str(g->role));
        return -EINVAL;
    }
    if (g->cstate != DRBD_CONN_STATE_CONNECTED) {
        error_setg(errp, "RESIZE while the connection is %s: a resource "
                   "grows only in sync", DrbdConnState_str(g->cstate));
        return -EINVAL;
    }
    if (disk_size < g->disk_size) {
        error_setg(errp, "RESIZE to %" PRIu64 " bytes, less than the %"
                   PRIu64 " of the disk: a disk only grows online",
                   disk_size, g->disk_size);
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_resize_reply(const DrbdGate *g, Error **errp)
{
    if (!g->resize_sent) {
        error_setg(errp, "RESIZE_REPLY, but no RESIZE waits for an answer");
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_data_request(const DrbdGate *g, const DrbdBlockAck *r,
                           Error **errp)
{
    if (g->role == DRBD_ROLE_PRIMARY) {
        error_setg(errp, "DATA_REQUEST at %" PRIu64 " from a %s peer while "
                   "this node is primary", r->offset,
                   DrbdRole_str(g->peer_role));
        return -EINVAL;
    }
    if (g->peer_role != DRBD_ROLE_PRIMARY) {
        error_setg(errp, "DATA_REQUEST at %" PRIu64 " from a %s peer: only "
                   "a primary reads", r->offset,
                   DrbdRole_str(g->peer_role));
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_data_reply(const DrbdGate *g, uint16_t cmd, uint64_t id,
                         uint64_t offset, uint32_t bytes, Error **errp)
{
    const DrbdGateRead *r = g->reads_pending ?
                            g_hash_table_lookup(g->reads_pending, &id) :
                            NULL;

    if (!r || r->offset != offset || r->bytes != bytes) {
        error_setg(errp, "%s for a read never requested or already "
                   "answered (offset %" PRIu64 ", %" PRIu32 " bytes)",
                   drbd_cmd_name(cmd), offset, bytes);
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_ov_request(const DrbdGate *g, const DrbdOvPacket *p,
                         Error **errp)
{
    if (!drbd_gate_bitmap_range(g->disk_size, p->offset, p->bytes)) {
        error_setg(errp, "OV_REQUEST at %" PRIu64 " (%" PRIu32 " bytes) is "
                   "not aligned to the bitmap's 4 KiB blocks", p->offset,
                   p->bytes);
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_ov_reply(const DrbdGate *g, const DrbdOvPacket *p,
                       Error **errp)
{
    const DrbdGateOv *req = g->ov_pending ?
                            g_hash_table_lookup(g->ov_pending, &p->id) :
                            NULL;

    if (!req || req->offset != p->offset || req->bytes != p->bytes) {
        error_setg(errp, "OV_REPLY for a verify request never sent or "
                   "already answered (offset %" PRIu64 ", %" PRIu32
                   " bytes)", p->offset, p->bytes);
        return -EINVAL;
    }
    if (!(p->flags & DRBD_OV_SKIPPED) &&
        !!(p->flags & DRBD_OV_DIGESTS) == req->digests) {
        error_setg(errp, "OV_REPLY at %" PRIu64 " carries %s, but the "
                   "request %s", p->offset,
                   req->digests ? "digests" : "a result",
                   req->digests ? "carried ours" : "asked for digests");
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_csum(const DrbdGate *g, const DrbdOvPacket *p, Error **errp)
{
    if (g->role == DRBD_ROLE_PRIMARY) {
        error_setg(errp, "received an RS_CSUM packet while primary");
        return -EINVAL;
    }
    if (!g->sync_target) {
        error_setg(errp, "received an RS_CSUM packet from a %s peer that is "
                   "not our sync source", DrbdRole_str(g->peer_role));
        return -EINVAL;
    }
    if (!drbd_gate_bitmap_range(g->disk_size, p->offset, p->bytes)) {
        error_setg(errp, "RS_CSUM at %" PRIu64 " (%" PRIu32 " bytes) is not "
                   "aligned to the bitmap's 4 KiB blocks", p->offset,
                   p->bytes);
        return -EINVAL;
    }
    return 0;
}

int drbd_gate_csum_reply(const DrbdGate *g, const DrbdOvPacket *p,
                         Error **errp)
{
    uint64_t offset = p->id & ~DRBD_GATE_RESYNC_ID;
    gpointer bytes;

    if (!(p->id & DRBD_GATE_RESYNC_ID) || p->offset != offset ||
        !g->csum_chunks ||
        !g_hash_table_lookup_extended(g->csum_chunks, &offset, NULL,
                                      &bytes) ||
        GPOINTER_TO_UINT(bytes) != p->bytes) {
        error_setg(errp, "RS_CSUM_REPLY for a resync checksum never sent or "
                   "already answered (offset %" PRIu64 ", %" PRIu32
                   " bytes)", p->offset, p->bytes);
        return -EINVAL;
    }
    return 0;
}
