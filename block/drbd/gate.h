/*
 * DRBD-style replication: what a peer's packet may do, given the state
 *
 * Pure code: no I/O, no locks, no QEMU globals.  The wire decoders
 * (wire.h) check that a packet is well formed; the gate checks that it
 * makes sense now, from what the receiving node knows: an ack names
 * something that was sent, a resync comes from the node that the
 * handshake made our sync source, a range lines up with the bitmap.  A
 * packet that fails here is a protocol error: the receiver drops the
 * connection with the gate's message.
 *
 * The driver fills a DrbdGate under its lock with what it knows at the
 * moment a packet arrives, and asks; the fuzzer (tests/fuzz/fuzz-gate.c)
 * keeps one as its model of a node and feeds it whole packet sequences.
 * Each function reads only the fields its comment names.
 *
 *   packet                      accepted when
 *   RECV_ACK, WRITE_ACK,        guest write: 0 < id <= last_req_id
 *   NEG_ACK                     resync (id has DRBD_GATE_RESYNC_ID):
 *                               not RECV_ACK, and a chunk in flight
 *                               with that id, offset and length
 *   BARRIER_ACK                 an epoch that was closed, not yet acked
 *   DATA, ZEROES, DISCARD       not primary, the peer is primary
 *   RS_DATA, RS_ZEROES          not primary, sync target, a bitmap range
 *   OUT_OF_SYNC                 a bitmap range; not primary; our sync
 *                               source by the handshake, or an
 *                               up-to-date primary; not sync source
 *   RS_DONE                     sync target
 *   STATE                       the role the peer has (a peer
 *                               older than version 4 may announce a
 *                               demotion), not primary while we are,
 *                               and a disk state no higher than it was
 *   STATE_REQ                   a disk state no higher than it was;
 *                               a UUID only when it asks for primary,
 *                               from version 6
 *   STATE_REPLY                 answers a STATE_REQ we sent; says why
 *                               it refuses only from version 6
 *   RS_CSUM                     as RS_DATA
 *   RS_CSUM_REPLY               answers an RS_CSUM in flight with that
 *                               id, offset and length
 *   OV_REQUEST                  a bitmap range
 *   OV_REPLY                    answers an OV_REQUEST in flight with
 *                               that id, offset and length, in the kind
 *                               the request asked for
 *   RESIZE                      not primary, the peer is primary,
 *                               connected (no resync), a size no smaller
 *                               than the disk's, from version 8
 *   RESIZE_REPLY                answers a RESIZE we sent
 *
 * A "bitmap range" is non-empty, inside the disk, starts on a 4 KiB
 * block of the out-of-sync bitmap and ends on one or at the end of the
 * disk.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef BLOCK_DRBD_GATE_H
#define BLOCK_DRBD_GATE_H

#include "qapi/error.h"
#include "qapi/qapi-types-drbd.h"
#include "uuid.h"
#include "wire.h"

/*
 * The id of a resync chunk: this bit and the chunk's offset.  Guest
 * request ids count from 1 and never reach it.
 */
#define DRBD_GATE_RESYNC_ID     (1ULL << 63)

/* The out-of-sync bitmap's block: resync ranges are aligned to it */
#define DRBD_GATE_BM_BLOCK      4096

/* An OV_REQUEST this node sent, waiting for its OV_REPLY */
typedef struct DrbdGateOv {
    uint64_t offset;
    uint32_t bytes;
    bool digests;               /* it carried our digests */
} DrbdGateOv;

/* A DATA_REQUEST this node sent, waiting for its DATA_REPLY or NEG_DREPLY */
typedef struct DrbdGateRead {
    uint64_t offset;
    uint32_t bytes;
} DrbdGateRead;

typedef struct DrbdGate {
    /* The device */
    uint64_t disk_size;         /* bytes of data */

    /* This node */
    DrbdRole role;
    DrbdConnState cstate;       /* SYNC_SOURCE: we resync the peer */
    bool sync_target;           /* a resync to this node runs */

    /* The peer, as its latest STATE said, and what the handshake decided */
    DrbdRole peer_role;
    DrbdDiskState peer_disk;
    DrbdSyncDecision decision;
    uint32_t peer_version;      /* the protocol version both speak */
    bool state_req_sent;        /* a STATE_REQ of ours awaits its reply */
    bool resize_sent;           /* a RESIZE of ours awaits its reply */

    /* What this node sent: guest writes have ids 1 .. last_req_id */
    uint64_t last_req_id;
    /*
     * Epochs sent: the ones from epoch_acked_upto up to, not including,
     * cur_epoch (in serial arithmetic) are closed and wait for their ack
     */
    uint32_t epoch_acked_upto;
    uint32_t cur_epoch;
    /*
     * Resync chunks sent and not yet acked: from a pointer to the
     * chunk's offset (uint64_t) to its length (GUINT_TO_POINTER), as
     * g_hash_table_new(g_int64_hash, g_int64_equal) keys them
     */
    GHashTable *resync_chunks;
    /*
     * Verify requests sent and not yet answered: from a pointer to the
     * request's id (uint64_t) to its DrbdGateOv
     */
    GHashTable *ov_pending;
    /*
     * Checksums of resync chunks sent and not yet answered, keyed and
     * valued as resync_chunks
     */
    GHashTable *csum_chunks;
    /*
     * Guest reads sent to the peer and not yet answered: from a pointer
     * to the request's id (uint64_t) to its DrbdGateRead
     */
    GHashTable *reads_pending;
} DrbdGate;

/*
 * Whether [@offset, @offset + @bytes) is a bitmap range of a disk of
 * @disk_size bytes (see above)
 */
bool drbd_gate_bitmap_range(uint64_t disk_size, uint64_t offset,
                            uint64_t bytes);

/*
 * A RECV_ACK, WRITE_ACK or NEG_ACK (@cmd) for a guest write.
 * Reads last_req_id.
 */
int drbd_gate_write_ack(const DrbdGate *g, uint16_t cmd,
                        const DrbdBlockAck *ack, Error **errp);

/*
 * The same for a resync chunk (the id has DRBD_GATE_RESYNC_ID).  A
 * NEG_ACK passes: it names a chunk, whose write failed.
 * Reads resync_chunks.
 */
int drbd_gate_resync_ack(const DrbdGate *g, uint16_t cmd,
                         const DrbdBlockAck *ack, Error **errp);

/* A BARRIER_ACK for @epoch.  Reads epoch_acked_upto and cur_epoch. */
int drbd_gate_barrier_ack(const DrbdGate *g, uint32_t epoch, Error **errp);

/*
 * A DATA, ZEROES, DISCARD, RS_DATA or RS_ZEROES (@cmd) packet @p.
 * Reads role, peer_role, sync_target and (RS_*) disk_size.
 */
int drbd_gate_write(const DrbdGate *g, uint16_t cmd,
                    const DrbdDataPacket *p, Error **errp);

/*
 * An OUT_OF_SYNC for @range.  Reads disk_size, role, cstate,
 * sync_target, peer_role, peer_disk and decision.  When it passes, this
 * node is (or stays) the sync target.
 */
int drbd_gate_out_of_sync(const DrbdGate *g, const DrbdBlockAck *range,
                          Error **errp);

/* An RS_DONE.  Reads sync_target. */
int drbd_gate_resync_done(const DrbdGate *g, Error **errp);

/*
 * An OV_REQUEST @p: a bitmap range.  Reads disk_size.  (Whether the
 * node can answer it now is not the gate's: it answers SKIPPED.)
 */
int drbd_gate_ov_request(const DrbdGate *g, const DrbdOvPacket *p,
                         Error **errp);

/*
 * An OV_REPLY @p: it answers a request in ov_pending with the same id,
 * offset and length, with a result where the request carried digests,
 * with digests where it did not, or skipped.  Reads ov_pending.
 */
int drbd_gate_ov_reply(const DrbdGate *g, const DrbdOvPacket *p,
                       Error **errp);

/*
 * An RS_CSUM @p, as RS_DATA: from our sync source, on a bitmap range.
 * Reads role, sync_target, peer_role and disk_size.
 */
int drbd_gate_csum(const DrbdGate *g, const DrbdOvPacket *p, Error **errp);

/*
 * An RS_CSUM_REPLY @p: it answers, by id, offset and length, an RS_CSUM
 * in csum_chunks.  Reads csum_chunks.
 */
int drbd_gate_csum_reply(const DrbdGate *g, const DrbdOvPacket *p,
                         Error **errp);

/*
 * A STATE or STATE_REQ (@cmd) packet @st.  Reads peer_disk: a disk state
 * never rises by the peer's word (a detached disk does not come back, an
 * inconsistent one does not become up to date: a resync or a handshake
 * does that).  A STATE also reads role, peer_role and peer_version: it
 * announces the role the peer has, which changes only through a
 * STATE_REQ we granted (from a peer of protocol version 3 or older, a
 * demotion may come as a STATE), and never primary while we are.  A
 * STATE_REQ also reads peer_version: its current UUID comes with a
 * request for the primary role from a peer of version 6 only.
 */
int drbd_gate_state(const DrbdGate *g, uint16_t cmd,
                    const DrbdStatePacket *st, Error **errp);

/*
 * A STATE_REPLY with @result.  Reads state_req_sent (it answers a
 * STATE_REQ of ours) and peer_version: the refusals that say why are
 * version 6's.
 */
int drbd_gate_state_reply(const DrbdGate *g, uint32_t result, Error **errp);

/*
 * A RESIZE to @disk_size bytes (disk_size, role, cstate, peer_role,
 * peer_version)
 */
int drbd_gate_resize(const DrbdGate *g, uint64_t disk_size, Error **errp);

/* A RESIZE_REPLY (resize_sent) */
int drbd_gate_resize_reply(const DrbdGate *g, Error **errp);

/*
 * An AHEAD (role, cstate, sync_target, peer_role, peer_version): only a
 * primary goes ahead, of a secondary in sync
 */
int drbd_gate_ahead(const DrbdGate *g, Error **errp);

/*
 * A NEW_UUID.  Reads role, peer_role and peer_version: only a primary
 * peer starts a data generation for us to join, only a secondary joins
 * it, and only over version 5.  (A sync target of the peer ignores it:
 * the caller's to decide, it takes the peer's UUIDs at the end anyway.)
 */
int drbd_gate_new_uuid(const DrbdGate *g, Error **errp);

/*
 * A DATA_REQUEST for @r (the decoder checked its range).  Reads role and
 * peer_role: only a primary peer reads through us, and never from a
 * primary.  Whether our data can serve it is the caller's to answer
 * (with a NEG_DREPLY), not a protocol error.
 */
int drbd_gate_data_request(const DrbdGate *g, const DrbdBlockAck *r,
                           Error **errp);

/*
 * A DATA_REPLY or NEG_DREPLY (@cmd) for the request @id at @offset of
 * @bytes.  Reads reads_pending: it must answer a request we sent and
 * that is still waiting, with its range.
 */
int drbd_gate_data_reply(const DrbdGate *g, uint16_t cmd, uint64_t id,
                         uint64_t offset, uint32_t bytes, Error **errp);

#endif /* BLOCK_DRBD_GATE_H */
