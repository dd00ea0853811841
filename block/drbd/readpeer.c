/*
 * DRBD-style replication: guest reads served by the peer
 *
 * A primary whose disk is gone (detached after an error) reads what the
 * guest asks for from its up-to-date peer, and so does a primary whose
 * local read just failed.  The read goes out as a DATA_REQUEST on the
 * data channel, behind every write sent before it, so the peer, which
 * starts the writes of its data channel in order, reads after each of
 * them that overlaps (peer.c); its DATA_REPLY or NEG_DREPLY comes back on
 * the data channel and is matched to the request by its id.
 *
 * The requests waiting for an answer are the peer's reads_pending, under
 * s->lock; the connection's end answers every one of them with EIO
 * (drbd_peer_fail()).  The reading coroutine is the guest's, in the
 * node's context; the reply is copied by the data receiver, in the same
 * context.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "trace.h"

#include "drbd-int.h"

/*
 * Whether the peer connected on @conn can serve our reads: its disk up
 * to date, and it speaks the version that has DATA_REQUEST.  Under
 * s->lock.
 */
bool drbd_peer_can_read_locked(DrbdConnection *conn)
{
    DrbdPeer *peer = conn->peer;

    return peer && !qatomic_read(&peer->broken) &&
           peer->version >= DRBD_PROTO_VERSION_READS &&
           conn->peer_disk == DRBD_DISK_STATE_UP_TO_DATE;
}

/* A connection whose peer can serve our reads, or NULL; under s->lock */
DrbdConnection *drbd_reader_locked(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (drbd_peer_can_read_locked(s->conns[i])) {
            return s->conns[i];
        }
    }
    return NULL;
}

/*
 * Read [@offset, @offset + @bytes) (at most DRBD_WIRE_MAX_DATA, the
 * node's max_transfer) from the peer into @qiov at @qiov_offset.
 * Returns 0, or -EIO if no peer can serve it or the peer could not.
 */
int coroutine_fn drbd_co_read_peer(BDRVDrbdState *s, int64_t offset,
                                   int64_t bytes, QEMUIOVector *qiov,
                                   size_t qiov_offset)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdPeerRead r = {
        .gate = { .offset = offset, .bytes = bytes },
        .qiov = qiov,
        .qiov_offset = qiov_offset,
    };
    DrbdConnection *conn;
    DrbdBlockAck req;
    DrbdPeer *peer;
    int ret;

    assert(bytes > 0 && bytes <= DRBD_WIRE_MAX_DATA);

    qemu_mutex_lock(&s->lock);
    conn = drbd_reader_locked(s);
    if (!conn) {
        qemu_mutex_unlock(&s->lock);
        return -EIO;
    }
    peer = drbd_peer_get_locked(conn);
    r.id = ++peer->read_next_id;
    /* In the table before it goes out: the reply may overtake the send */
    g_hash_table_insert(peer->reads_pending, &r.id, &r);
    qatomic_inc(&conn->pe);
    qemu_mutex_unlock(&s->lock);

    req = (DrbdBlockAck) { .offset = offset, .id = r.id, .bytes = bytes };
    drbd_wire_put_block_ack(pkt, DRBD_CMD_DATA_REQUEST, &req);
    ret = drbd_send_data_channel(peer, pkt);

    qemu_mutex_lock(&s->lock);
    if (ret < 0 && !r.done) {
        /* The connection is breaking: drbd_peer_fail() will not see it */
        g_hash_table_remove(peer->reads_pending, &r.id);
        r.done = true;
        r.ret = -EIO;
    }
    while (!r.done) {
        r.waiter = qemu_coroutine_self();
        qemu_mutex_unlock(&s->lock);
        qemu_coroutine_yield();
        qemu_mutex_lock(&s->lock);
    }
    qatomic_dec(&conn->pe);
    qemu_mutex_unlock(&s->lock);
    drbd_peer_put(peer);
    trace_drbd_read_peer(s->bs, offset, bytes, r.ret);
    return r.ret;
}

/*
 * The peer answered one of our reads: a DATA_REPLY (@p) or a NEG_DREPLY
 * (@neg).  An answer to no request we are waiting for is a protocol
 * error.  Runs in the data receiver.
 */
int coroutine_fn drbd_read_reply(DrbdPeer *peer, uint16_t cmd,
                                 const DrbdDataPacket *p,
                                 const DrbdBlockAck *neg, Error **errp)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    uint64_t id = p ? p->id : neg->id;
    DrbdGate gate;
    DrbdPeerRead *r;
    Coroutine *co;

    qemu_mutex_lock(&s->lock);
    gate = (DrbdGate) { .reads_pending = peer->reads_pending };
    if (drbd_gate_data_reply(&gate, cmd, id, p ? p->offset : neg->offset,
                             p ? p->bytes : neg->bytes, errp) < 0) {
        qemu_mutex_unlock(&s->lock);
        return -EINVAL;
    }
    r = g_hash_table_lookup(peer->reads_pending, &id);
    /* Out of the table, it is ours alone until it is marked done */
    g_hash_table_remove(peer->reads_pending, &id);
    if (p) {
        stat64_add(&conn->nr, p->bytes);
    }
    qemu_mutex_unlock(&s->lock);

    if (p) {
        qemu_iovec_from_buf(r->qiov, r->qiov_offset, p->data, p->bytes);
    }

    qemu_mutex_lock(&s->lock);
    r->ret = p ? 0 : -EIO;
    r->done = true;
    co = r->waiter;
    r->waiter = NULL;
    qemu_mutex_unlock(&s->lock);
    if (co) {
        aio_co_wake(co);
    }
    return 0;
}
