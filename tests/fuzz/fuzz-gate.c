/*
 * Fuzz target, stateful: sequences of a peer's packets against the
 * receive-side checks (block/drbd/gate.c) and the order in which a
 * secondary applies writes (block/drbd/order.c)
 *
 * The target models one node of a connection: what it sent (guest write
 * ids, closed epochs, resync chunks, their checksums and verify requests
 * in flight), its role, the peer's as last reported, and the handshake's
 * decision.  The input is, after a configuration, a sequence of steps:
 * either something the node does itself (send a write, close an epoch,
 * send a resync chunk, its checksums or a verify request, finish a write
 * it applies, change roles) or a packet that arrives, decoded as a
 * receiver decodes it and asked of the gate.  Like the receiver, the
 * target stops at the first packet that is malformed or that the gate
 * refuses: the connection would be dropped.
 *
 * Input:
 *
 *   12 bytes   configuration
 *              0: bit 0 primary, bit 1 sync target, bit 2 sync source,
 *                 bits 4-7 verify-alg (a DRBD_DIGEST_*, none if 9 or
 *                 more): the digest size OV packets are decoded with;
 *                 with bit 3, they are csums-alg instead (RS_CSUM's),
 *                 and the node has no verify-alg
 *              1: the handshake's decision (modulo DRBD_SYNC__MAX);
 *                 its value divided by 16, modulo 3, plus 2: the
 *                 protocol version both speak
 *              2: the peer's role, 3: the peer's disk (modulo their
 *                 counts)
 *              4-7: disk size: 512 * (1 + value % 2^21), big-endian
 *              8-11: the first epoch, big-endian
 *   then       steps, each a byte:
 *              0x00-0x0f  the node acts, by the low 4 bits: 0 send a
 *                         guest write, 1 close the epoch, 2 send a resync
 *                         chunk (2 bytes: its first 4 KiB block, 1 byte:
 *                         its length in blocks - 1), 3 finish an applied
 *                         write (1 byte: which), 4 promote or demote,
 *                         5 start or end a resync from this node, 6 send
 *                         a verify request, if the node has a verify-alg
 *                         (2 bytes: its first 4 KiB block, 1 byte: bits
 *                         0-5 its length in blocks - 1, bit 6 with our
 *                         digests), 7 send the checksums of a resync
 *                         chunk (RS_CSUM), if the node has a csums-alg
 *                         and is sync source (2 bytes: its first 4 KiB
 *                         block, 1 byte: bits 0-5 its length in blocks - 1),
 *                         8 send a STATE_REQ, 9-15 nothing
 *              0x10-0xff  a packet arrives: a header and its payload
 *
 * Checked, against the model's own record rather than the gate's
 * arithmetic: an accepted ack names a write or a resync chunk that was
 * sent (and not acked yet, for a chunk), an accepted BARRIER_ACK an
 * epoch that was closed and not acked; an accepted write or resync range
 * lies inside the disk, resync ranges on the bitmap's 4 KiB blocks; a
 * resync is only accepted from the node's sync source (a primary node
 * takes only that); writes are only accepted from a primary; an
 * accepted OV_REQUEST lies on the bitmap inside the disk, an accepted
 * OV_REPLY answers a verify request in flight, by id, offset and length,
 * with a result where the request carried digests, digests where it did
 * not, or a skip; an accepted RS_CSUM carries csums-alg digests of a
 * bitmap range to a sync target that is not primary, and an RS_CSUM_REPLY
 * is accepted exactly when it answers, with a result, checksums in
 * flight (by id, offset and length); an accepted DATA_REQUEST comes from
 * a primary to a node that is not one, for at most 1 MiB inside the disk,
 * and no DATA_REPLY or NEG_DREPLY is accepted (the model sends no read);
 * a STATE or STATE_REQ never raises the peer's disk state (nor brings
 * back a disk it announced diskless or failed), a STATE never changes
 * the peer's role (but a demotion from a peer older than version 4), and
 * a STATE_REPLY answers a STATE_REQ of ours.  The order of applied writes keeps
 * its invariants, and a write that arrives can always start once the
 * writes before it finish (no deadlock).
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/bswap.h"
#include "../../block/drbd/gate.h"
#include "../../block/drbd/order.h"
#include "../../block/drbd/wire.h"
#include "fuzz.h"

#define CONFIG_SIZE     12
#define BM              DRBD_GATE_BM_BLOCK
/* Bounds of what the model keeps, so that an input costs little */
#define MAX_EPOCHS      4096
#define MAX_CHUNKS      64
#define MAX_OVS         16      /* as the verify source keeps in flight */

typedef struct Chunk {
    uint64_t offset;
    uint32_t bytes;
} Chunk;

typedef struct Ov {
    uint64_t id;
    uint64_t offset;
    uint32_t bytes;
    bool digests;
} Ov;

typedef struct Model {
    DrbdGate g;                 /* what the gate is told */
    uint32_t verify_size;       /* verify-alg's digest size, 0: none */
    uint32_t csums_size;        /* csums-alg's */

    /* The model's own record of what the node sent */
    uint64_t issued;            /* guest writes: ids 1 .. issued */
    GArray *epochs;             /* closed, not acked: uint32_t, oldest first */
    Chunk chunks[MAX_CHUNKS];   /* resync chunks in flight */
    unsigned nchunks;
    Chunk csums[MAX_CHUNKS];    /* resync checksums in flight */
    unsigned ncsums;
    Ov ovs[MAX_OVS];            /* verify requests in flight */
    unsigned novs;
    uint64_t ov_next_id;

    /* The receiving side: the order of applied writes */
    DrbdOrder *order;
    GQueue running;             /* DrbdOrderWrite *, in start order */
} Model;

static void check_order(Model *m)
{
    g_autofree char *broken = drbd_order_check(m->order);

    if (broken) {
        fprintf(stderr, "order: %s\n", broken);
        abort();
    }
}

/* Ack every closed epoch whose writes are done; true if any */
static bool ack_barriers(Model *m)
{
    DrbdBarrier b;
    bool any = false;

    while (drbd_order_next_ack(m->order, &b)) {
        if (b.flags & DRBD_BARRIER_FLUSH) {
            drbd_order_flushed(m->order);
        }
        any = true;
    }
    return any;
}

/* Applied write number @n (of those running) finishes */
static void finish_write(Model *m, unsigned n)
{
    DrbdOrderWrite *w = g_queue_pop_nth(&m->running, n);

    assert(w);
    drbd_order_done(m->order, w);
    ack_barriers(m);
}

/*
 * What a waiting receiver waits for: the oldest running write to finish
 * (or barriers to be acked).  False if nothing can happen any more.
 */
static bool make_progress(Model *m)
{
    if (ack_barriers(m)) {
        return true;
    }
    if (g_queue_is_empty(&m->running)) {
        return false;
    }
    finish_write(m, 0);
    return true;
}

/* Does [@offset, @offset + @bytes) overlap one of the @n chunks @c? */
static bool chunk_overlaps(const Chunk *c, unsigned n, uint64_t offset,
                           uint64_t bytes)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        if (offset < c[i].offset + c[i].bytes &&
            c[i].offset < offset + bytes) {
            return true;
        }
    }
    return false;
}

static void send_resync_chunk(Model *m, FuzzInput *in)
{
    const uint8_t *p = fuzz_take(in, 3);
    uint64_t offset, bytes;

    if (!p || m->nchunks == MAX_CHUNKS) {
        return;
    }
    offset = (uint64_t)lduw_be_p(p) * BM;
    if (offset >= m->g.disk_size) {
        return;
    }
    /* what hbitmap_next_dirty_area() gives: the last may be short */
    bytes = MIN((uint64_t)(p[2] % 64 + 1) * BM, m->g.disk_size - offset);
    if (chunk_overlaps(m->chunks, m->nchunks, offset, bytes)) {
        return;
    }
    m->chunks[m->nchunks++] = (Chunk) { offset, bytes };
    g_hash_table_insert(m->g.resync_chunks,
                        g_memdup2(&offset, sizeof(offset)),
                        GUINT_TO_POINTER(bytes));
}

/* A sync source with a csums-alg sends a chunk's checksums (RS_CSUM) */
static void send_csum(Model *m, FuzzInput *in)
{
    const uint8_t *p = fuzz_take(in, 3);
    uint64_t offset, bytes;

    if (!p || !m->csums_size || m->ncsums == MAX_CHUNKS ||
        m->g.cstate != DRBD_CONN_STATE_SYNC_SOURCE) {
        return;
    }
    offset = (uint64_t)lduw_be_p(p) * BM;
    if (offset >= m->g.disk_size) {
        return;
    }
    bytes = MIN((uint64_t)(p[2] % DRBD_OV_MAX_BLOCKS + 1) * BM,
                m->g.disk_size - offset);
    /* as resync.c: never two checksums of a block at once */
    if (chunk_overlaps(m->csums, m->ncsums, offset, bytes)) {
        return;
    }
    m->csums[m->ncsums++] = (Chunk) { offset, bytes };
    g_hash_table_insert(m->g.csum_chunks, g_memdup2(&offset, sizeof(offset)),
                        GUINT_TO_POINTER(bytes));
}

static void send_verify_request(Model *m, FuzzInput *in)
{
    const uint8_t *p = fuzz_take(in, 3);
    DrbdGateOv *req;
    uint64_t offset;
    uint32_t bytes;
    Ov ov;

    /* without a verify-alg a node runs no verify */
    if (!p || !m->verify_size || m->novs == MAX_OVS) {
        return;
    }
    offset = (uint64_t)lduw_be_p(p) * BM;
    if (offset >= m->g.disk_size) {
        return;
    }
    /* as drbd_verify_co() walks the disk: the last may be short */
    bytes = MIN((uint64_t)(p[2] % DRBD_OV_MAX_BLOCKS + 1) * BM,
                m->g.disk_size - offset);
    ov = (Ov) {
        .id = ++m->ov_next_id, .offset = offset, .bytes = bytes,
        .digests = p[2] & 0x40,
    };
    m->ovs[m->novs++] = ov;
    req = g_new(DrbdGateOv, 1);
    *req = (DrbdGateOv) {
        .offset = offset, .bytes = bytes, .digests = ov.digests,
    };
    g_hash_table_insert(m->g.ov_pending, g_memdup2(&ov.id, sizeof(ov.id)),
                        req);
}

static void act(Model *m, uint8_t op, FuzzInput *in)
{
    switch (op & 15) {
    case 0:
        m->issued++;
        m->g.last_req_id = m->issued;
        break;
    case 1:
        if (m->epochs->len < MAX_EPOCHS) {
            g_array_append_val(m->epochs, m->g.cur_epoch);
            m->g.cur_epoch++;
        }
        break;
    case 2:
        send_resync_chunk(m, in);
        break;
    case 3: {
        uint8_t n = fuzz_u8(in);

        if (!g_queue_is_empty(&m->running)) {
            finish_write(m, n % g_queue_get_length(&m->running));
        }
        break;
    }
    case 4:
        m->g.role = m->g.role == DRBD_ROLE_PRIMARY ? DRBD_ROLE_SECONDARY :
                    DRBD_ROLE_PRIMARY;
        break;
    case 5:
        if (!m->g.sync_target) {
            m->g.cstate = m->g.cstate == DRBD_CONN_STATE_SYNC_SOURCE ?
                          DRBD_CONN_STATE_CONNECTED :
                          DRBD_CONN_STATE_SYNC_SOURCE;
        }
        break;
    case 6:
        send_verify_request(m, in);
        break;
    case 7:
        send_csum(m, in);
        break;
    case 8:
        m->g.state_req_sent = true;
        break;
    default:
        break;
    }
}

/* The model's own reading of a bitmap range */
static bool on_bitmap(const Model *m, uint64_t offset, uint64_t bytes)
{
    uint64_t end = offset + bytes;

    return bytes > 0 && end > offset && end <= m->g.disk_size &&
           offset % BM == 0 && (end % BM == 0 || end == m->g.disk_size);
}

/* May the peer make this node its sync target? (gate.h's table) */
static bool may_resync_us(const Model *m)
{
    const DrbdGate *g = &m->g;

    return g->sync_target ||
           (g->peer_role == DRBD_ROLE_PRIMARY &&
            g->peer_disk == DRBD_DISK_STATE_UP_TO_DATE &&
            g->decision != DRBD_SYNC_SOURCE &&
            g->decision != DRBD_SYNC_FULL_SOURCE);
}

static int got_ack(Model *m, uint16_t cmd, const DrbdBlockAck *ack,
                   Error **errp)
{
    unsigned i;

    if (!(ack->id & DRBD_GATE_RESYNC_ID)) {
        if (drbd_gate_write_ack(&m->g, cmd, ack, errp) < 0) {
            return -EINVAL;
        }
        assert(ack->id >= 1 && ack->id <= m->issued);
        return 0;
    }

    if (drbd_gate_resync_ack(&m->g, cmd, ack, errp) < 0) {
        return -EINVAL;
    }
    assert(cmd == DRBD_CMD_WRITE_ACK || cmd == DRBD_CMD_NEG_ACK);
    for (i = 0; i < m->nchunks; i++) {
        if (m->chunks[i].offset == ack->offset) {
            break;
        }
    }
    assert(i < m->nchunks);
    assert(m->chunks[i].bytes == ack->bytes);
    assert(ack->id == (DRBD_GATE_RESYNC_ID | ack->offset));
    /* acked: no longer in flight */
    m->chunks[i] = m->chunks[--m->nchunks];
    g_hash_table_remove(m->g.resync_chunks, &ack->offset);
    return 0;
}

static int got_barrier_ack(Model *m, uint32_t epoch, Error **errp)
{
    guint i;

    if (drbd_gate_barrier_ack(&m->g, epoch, errp) < 0) {
        return -EINVAL;
    }
    for (i = 0; i < m->epochs->len; i++) {
        if (g_array_index(m->epochs, uint32_t, i) == epoch) {
            break;
        }
    }
    assert(i < m->epochs->len);
    /* it acks the epochs before it too */
    g_array_remove_range(m->epochs, 0, i + 1);
    m->g.epoch_acked_upto = epoch + 1;
    assert(m->epochs->len == m->g.cur_epoch - m->g.epoch_acked_upto);
    assert(!m->epochs->len ||
           g_array_index(m->epochs, uint32_t, 0) == m->g.epoch_acked_upto);
    return 0;
}

static int got_write(Model *m, uint16_t cmd, const DrbdDataPacket *p,
                     Error **errp)
{
    uint64_t dep;

    if (drbd_gate_write(&m->g, cmd, p, errp) < 0) {
        return -EINVAL;
    }
    /* A primary takes resync data only as a sync target */
    assert(m->g.role != DRBD_ROLE_PRIMARY || cmd == DRBD_CMD_RS_DATA);
    assert(p->offset + p->bytes <= m->g.disk_size);
    if (cmd == DRBD_CMD_RS_DATA) {
        assert(m->g.sync_target);
        assert(on_bitmap(m, p->offset, p->bytes));
        return 0;
    }
    assert(m->g.peer_role == DRBD_ROLE_PRIMARY);

    if (drbd_order_arrive(m->order, p->unordered, &dep, errp) < 0) {
        return -EPROTO;
    }
    /* The receiver waits for what the write depends on: it must come */
    while (!drbd_order_may_start(m->order, dep)) {
        if (!make_progress(m)) {
            fprintf(stderr, "a write that depends on write %" PRIu64
                    " can never start\n", dep);
            abort();
        }
    }
    g_queue_push_tail(&m->running, drbd_order_start(m->order));
    return 0;
}

static int got_barrier(Model *m, const DrbdBarrier *b, Error **errp)
{
    /* The receiver waits rather than keep too many epochs */
    while (drbd_order_closed_epochs(m->order) >= DRBD_ORDER_MAX_EPOCHS) {
        if (!make_progress(m)) {
            abort();
        }
    }
    if (drbd_order_barrier(m->order, b, errp) < 0) {
        return -EPROTO;
    }
    ack_barriers(m);
    return 0;
}

static int got_out_of_sync(Model *m, const DrbdBlockAck *range,
                           Error **errp)
{
    if (drbd_gate_out_of_sync(&m->g, range, errp) < 0) {
        return -EINVAL;
    }
    assert(m->g.role != DRBD_ROLE_PRIMARY);
    assert(on_bitmap(m, range->offset, range->bytes));
    assert(may_resync_us(m));
    assert(m->g.cstate != DRBD_CONN_STATE_SYNC_SOURCE);
    m->g.sync_target = true;
    m->g.cstate = DRBD_CONN_STATE_SYNC_TARGET;
    return 0;
}

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
        return 0;
    }
}

static int got_state(Model *m, uint16_t cmd, const DrbdStatePacket *st,
                     Error **errp)
{
    bool both_primary = st->role == DRBD_ROLE_PRIMARY &&
                        m->g.role == DRBD_ROLE_PRIMARY;

    if (drbd_gate_state(&m->g, cmd, st, errp) < 0) {
        return -EINVAL;
    }
    /* A current UUID only in a version 6 request for the primary role */
    assert(!st->uuid || (cmd == DRBD_CMD_STATE_REQ &&
                         st->role == DRBD_ROLE_PRIMARY &&
                         m->g.peer_version >= DRBD_PROTO_VERSION_GEN_CHECK));
    /* No disk state rises by the peer's word, detached ones included */
    assert(disk_rank(st->disk_state) <= disk_rank(m->g.peer_disk));
    if (cmd == DRBD_CMD_STATE) {
        assert(!both_primary);
        /* A role changes only by a granted request (demotions: v3 too) */
        assert(st->role == m->g.peer_role ||
               (st->role != DRBD_ROLE_PRIMARY &&
                m->g.peer_version < DRBD_PROTO_VERSION_ROLE_REQ));
    } else if (both_primary) {
        /* a state request this node refuses: nothing changes */
        return 0;
    }
    m->g.peer_role = st->role;
    m->g.peer_disk = st->disk_state;
    return 0;
}

static int got_state_reply(Model *m, uint32_t result, Error **errp)
{
    if (drbd_gate_state_reply(&m->g, result, errp) < 0) {
        return -EINVAL;
    }
    assert(m->g.state_req_sent);
    /* Only a peer of version 6 says why it refuses */
    assert(result <= DRBD_STATE_REPLY_REFUSED ||
           m->g.peer_version >= DRBD_PROTO_VERSION_GEN_CHECK);
    m->g.state_req_sent = false;
    return 0;
}

static int got_ov_request(Model *m, const DrbdOvPacket *p, Error **errp)
{
    if (drbd_gate_ov_request(&m->g, p, errp) < 0) {
        return -EINVAL;
    }
    assert(on_bitmap(m, p->offset, p->bytes));
    assert(p->bytes <= DRBD_OV_MAX_BYTES);
    assert(!(p->flags & ~DRBD_OV_DIGESTS));
    assert(!(p->flags & DRBD_OV_DIGESTS) || m->verify_size);
    return 0;
}

static int got_ov_reply(Model *m, const DrbdOvPacket *p, Error **errp)
{
    unsigned i;

    if (drbd_gate_ov_reply(&m->g, p, errp) < 0) {
        return -EINVAL;
    }
    for (i = 0; i < m->novs; i++) {
        if (m->ovs[i].id == p->id) {
            break;
        }
    }
    assert(i < m->novs);
    assert(m->ovs[i].offset == p->offset && m->ovs[i].bytes == p->bytes);
    assert(p->flags == DRBD_OV_SKIPPED ||
           p->flags == (m->ovs[i].digests ? DRBD_OV_RESULT :
                                            DRBD_OV_DIGESTS));
    /* answered: no longer in flight */
    m->ovs[i] = m->ovs[--m->novs];
    g_hash_table_remove(m->g.ov_pending, &p->id);
    return 0;
}

static int got_csum(Model *m, const DrbdOvPacket *p, Error **errp)
{
    if (drbd_gate_csum(&m->g, p, errp) < 0) {
        return -EINVAL;
    }
    assert(m->g.role != DRBD_ROLE_PRIMARY && m->g.sync_target);
    assert(on_bitmap(m, p->offset, p->bytes));
    assert(p->bytes <= DRBD_OV_MAX_BYTES);
    assert(p->flags == DRBD_OV_DIGESTS && p->digests);
    assert(m->csums_size && p->digest_size == m->csums_size);
    return 0;
}

/* Accepted exactly when it answers checksums in flight: both ways */
static int got_csum_reply(Model *m, const DrbdOvPacket *p, Error **errp)
{
    uint32_t blocks = drbd_ov_blocks(p->bytes);
    unsigned i;
    int ret;

    for (i = 0; i < m->ncsums; i++) {
        if (m->csums[i].offset == p->offset) {
            break;
        }
    }
    ret = drbd_gate_csum_reply(&m->g, p, errp);
    assert((ret == 0) == (i < m->ncsums && m->csums[i].bytes == p->bytes &&
                          p->id == (DRBD_GATE_RESYNC_ID | p->offset)));
    if (ret < 0) {
        return -EINVAL;
    }
    assert(p->flags == DRBD_OV_RESULT && !p->digests);
    assert(blocks == 64 || !(p->mismatch >> blocks));
    /* answered: no longer in flight */
    m->csums[i] = m->csums[--m->ncsums];
    g_hash_table_remove(m->g.csum_chunks, &p->offset);
    return 0;
}

/*
 * Decode and take the packet @cmd with payload @buf (@len bytes); < 0
 * with @errp set where the receiver would drop the connection
 */
static int receive(Model *m, uint16_t cmd, const uint8_t *buf, uint32_t len,
                   Error **errp)
{
    switch (cmd) {
    case DRBD_CMD_RECV_ACK:
    case DRBD_CMD_WRITE_ACK:
    case DRBD_CMD_NEG_ACK:
    case DRBD_CMD_OUT_OF_SYNC: {
        DrbdBlockAck a;

        if (drbd_wire_get_block_ack(cmd, buf, len, m->g.disk_size, &a,
                                    errp) < 0) {
            return -EINVAL;
        }
        return cmd == DRBD_CMD_OUT_OF_SYNC ? got_out_of_sync(m, &a, errp) :
               got_ack(m, cmd, &a, errp);
    }
    case DRBD_CMD_BARRIER:
    case DRBD_CMD_BARRIER_ACK: {
        DrbdBarrier b;

        if (drbd_wire_get_barrier(cmd, buf, len, &b, errp) < 0) {
            return -EINVAL;
        }
        return cmd == DRBD_CMD_BARRIER ? got_barrier(m, &b, errp) :
               got_barrier_ack(m, b.epoch, errp);
    }
    case DRBD_CMD_DATA:
    case DRBD_CMD_ZEROES:
    case DRBD_CMD_DISCARD:
    case DRBD_CMD_RS_DATA: {
        DrbdDataPacket p;

        if (drbd_wire_get_data(cmd, buf, len, m->g.disk_size, &p,
                               errp) < 0) {
            return -EINVAL;
        }
        return got_write(m, cmd, &p, errp);
    }
    case DRBD_CMD_RS_DONE:
        if (drbd_gate_resync_done(&m->g, errp) < 0) {
            return -EINVAL;
        }
        assert(m->g.sync_target);
        m->g.sync_target = false;
        m->g.cstate = DRBD_CONN_STATE_CONNECTED;
        return 0;
    case DRBD_CMD_STATE:
    case DRBD_CMD_STATE_REQ: {
        DrbdStatePacket st;

        if ((cmd == DRBD_CMD_STATE ?
             drbd_wire_get_state(buf, len, &st, errp) :
             drbd_wire_get_state_req(buf, len, &st, errp)) < 0) {
            return -EINVAL;
        }
        return got_state(m, cmd, &st, errp);
    }
    case DRBD_CMD_OV_REQUEST:
    case DRBD_CMD_OV_REPLY: {
        DrbdOvPacket p;

        if (drbd_wire_get_ov(cmd, buf, len, m->g.disk_size, m->verify_size,
                             &p, errp) < 0) {
            return -EINVAL;
        }
        return cmd == DRBD_CMD_OV_REQUEST ? got_ov_request(m, &p, errp) :
               got_ov_reply(m, &p, errp);
    }
    case DRBD_CMD_RS_CSUM:
    case DRBD_CMD_RS_CSUM_REPLY: {
        DrbdOvPacket p;

        if (drbd_wire_get_ov(cmd, buf, len, m->g.disk_size, m->csums_size,
                             &p, errp) < 0) {
            return -EINVAL;
        }
        return cmd == DRBD_CMD_RS_CSUM ? got_csum(m, &p, errp) :
               got_csum_reply(m, &p, errp);
    }
    case DRBD_CMD_DATA_REQUEST:
    case DRBD_CMD_NEG_DREPLY: {
        DrbdBlockAck a;

        if (drbd_wire_get_block_ack(cmd, buf, len, m->g.disk_size, &a,
                                    errp) < 0) {
            return -EINVAL;
        }
        if (cmd == DRBD_CMD_NEG_DREPLY) {
            /* The model sends no reads: nothing may be answered */
            if (drbd_gate_data_reply(&m->g, cmd, a.id, a.offset, a.bytes,
                                     errp) < 0) {
                return -EINVAL;
            }
            g_assert_not_reached();
        }
        if (drbd_gate_data_request(&m->g, &a, errp) < 0) {
            return -EINVAL;
        }
        /* Only from a primary, to a node that is not, inside the disk */
        assert(m->g.peer_role == DRBD_ROLE_PRIMARY &&
               m->g.role != DRBD_ROLE_PRIMARY);
        assert(a.bytes <= DRBD_WIRE_MAX_DATA &&
               a.offset + a.bytes <= m->g.disk_size);
        return 0;
    }
    case DRBD_CMD_DATA_REPLY: {
        DrbdDataPacket p;

        if (drbd_wire_get_data(cmd, buf, len, m->g.disk_size, &p,
                               errp) < 0) {
            return -EINVAL;
        }
        if (drbd_gate_data_reply(&m->g, cmd, p.id, p.offset, p.bytes,
                                 errp) < 0) {
            return -EINVAL;
        }
        g_assert_not_reached();
    }
    case DRBD_CMD_STATE_REPLY: {
        uint32_t result;

        if (drbd_wire_get_state_reply(buf, len, &result, errp) < 0) {
            return -EINVAL;
        }
        return got_state_reply(m, result, errp);
    }
    case DRBD_CMD_NEW_UUID: {
        uint64_t uuid;

        if (drbd_wire_get_new_uuid(buf, len, &uuid, errp) < 0 ||
            drbd_gate_new_uuid(&m->g, errp) < 0) {
            return -EINVAL;
        }
        /* Only a primary's, to a node that is not, over version 5 */
        assert(m->g.peer_role == DRBD_ROLE_PRIMARY &&
               m->g.role != DRBD_ROLE_PRIMARY &&
               m->g.peer_version >= DRBD_PROTO_VERSION_NEW_UUID);
        return 0;
    }
    case DRBD_CMD_PING:
    case DRBD_CMD_PING_ACK:
        return 0;
    default:
        /* the handshake's packets, once connected */
        error_setg(errp, "%s packet on an established connection",
                   drbd_cmd_name(cmd));
        return -EINVAL;
    }
}

static void model_init(Model *m, const uint8_t *c)
{
    uint32_t disk_sectors = (uint32_t)ldl_be_p(c + 4) % (1 << 21) + 1;
    uint32_t epoch = ldl_be_p(c + 8);

    *m = (Model) {
        .g = {
            .disk_size = (uint64_t)disk_sectors * 512,
            .role = c[0] & 1 ? DRBD_ROLE_PRIMARY : DRBD_ROLE_SECONDARY,
            .cstate = DRBD_CONN_STATE_CONNECTED,
            .sync_target = c[0] & 2,
            .decision = c[1] % DRBD_SYNC__MAX,
            .peer_version = (c[1] >> 4) % (DRBD_PROTO_VERSION_MAX -
                                           DRBD_PROTO_VERSION_MIN + 1) +
                            DRBD_PROTO_VERSION_MIN,
            .peer_role = c[2] % DRBD_ROLE__MAX,
            .peer_disk = c[3] % DRBD_DISK_STATE__MAX,
            .epoch_acked_upto = epoch,
            .cur_epoch = epoch,
            .resync_chunks = g_hash_table_new_full(g_int64_hash,
                                                   g_int64_equal, g_free,
                                                   NULL),
            .ov_pending = g_hash_table_new_full(g_int64_hash, g_int64_equal,
                                                g_free, g_free),
            .csum_chunks = g_hash_table_new_full(g_int64_hash,
                                                 g_int64_equal, g_free,
                                                 NULL),
        },
        .verify_size = c[0] & 8 ? 0 : fuzz_digest_size(c[0] >> 4),
        .csums_size = c[0] & 8 ? fuzz_digest_size(c[0] >> 4) : 0,
        .epochs = g_array_new(false, false, sizeof(uint32_t)),
        .order = drbd_order_new(),
    };
    if (m->g.sync_target) {
        m->g.cstate = DRBD_CONN_STATE_SYNC_TARGET;
    } else if (c[0] & 4) {
        m->g.cstate = DRBD_CONN_STATE_SYNC_SOURCE;
    }
    g_queue_init(&m->running);
}

static void model_free(Model *m)
{
    /* the writes still running are freed with the order */
    g_queue_clear(&m->running);
    drbd_order_free(m->order);
    g_array_free(m->epochs, true);
    g_hash_table_destroy(m->g.resync_chunks);
    g_hash_table_destroy(m->g.ov_pending);
    g_hash_table_destroy(m->g.csum_chunks);
}

DRBD_FUZZ_TARGET(gate)
{
    FuzzInput in = { data, size };
    const uint8_t *config = fuzz_take(&in, CONFIG_SIZE);
    Model m;

    if (!config) {
        return 0;
    }
    model_init(&m, config);

    while (in.len) {
        uint8_t op = fuzz_u8(&in);
        const uint8_t *hdr;
        g_autofree uint8_t *payload = NULL;
        Error *err = NULL;
        DrbdHeader h;
        int ret;

        if (op < 0x10) {
            act(&m, op, &in);
            check_order(&m);
            continue;
        }
        hdr = fuzz_take(&in, DRBD_WIRE_HEADER_SIZE);
        if (!hdr) {
            break;
        }
        if (drbd_wire_get_header(hdr, &h, &err) < 0) {
            fuzz_refused(err);
            error_free(err);
            break;
        }
        if (!fuzz_take_copy(&in, h.length, &payload)) {
            break;
        }
        ret = receive(&m, h.cmd, payload, h.length, &err);
        check_order(&m);
        if (ret < 0) {
            /* dropped, and the message says why */
            assert(err && *error_get_pretty(err));
            fuzz_refused(err);
            error_free(err);
            break;
        }
        assert(!err);
    }

    model_free(&m);
    return 0;
}
