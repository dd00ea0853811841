/*
 * DRBD-style replication: the channels to the peer
 *
 * A connection has two channels: data (writes, barriers, resync, state)
 * and meta (acks and pings), so that acks never wait behind bulk data.
 * This file moves whole packets over them: a channel is written by
 * whoever holds its send lock, and read by one receiver coroutine through
 * a buffer.  It also keeps the peer's references: the connection manager
 * frees a peer once it is broken (drbd_peer_fail()) and every reference
 * is dropped.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/timer.h"
#include "trace.h"

#include "drbd-int.h"

/* A socket that must finish its handshake before a deadline */
static void drbd_deadline_cb(void *opaque)
{
    DrbdDeadline *d = opaque;

    d->expired = true;
    qio_channel_shutdown(d->ioc, QIO_CHANNEL_SHUTDOWN_BOTH, NULL);
}

void drbd_deadline_arm(DrbdDeadline *d, QIOChannel *ioc, uint64_t ns)
{
    d->ioc = ioc;
    d->expired = false;
    d->timer = aio_timer_new(qemu_get_current_aio_context(),
                             QEMU_CLOCK_REALTIME, SCALE_NS,
                             drbd_deadline_cb, d);
    timer_mod(d->timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + ns);
}

/* The peer made progress: the deadline starts again */
void drbd_deadline_rearm(DrbdDeadline *d, uint64_t ns)
{
    if (d->timer) {
        timer_mod(d->timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + ns);
    }
}

void drbd_deadline_disarm(DrbdDeadline *d)
{
    if (d->timer) {
        timer_free(d->timer);
        d->timer = NULL;
    }
}

void drbd_setup_channel(QIOChannel *ioc, const char *name)
{
    qio_channel_set_name(ioc, name);
    qio_channel_set_blocking(ioc, false, NULL);
    qio_channel_set_follow_coroutine_ctx(ioc, true);
    qio_channel_set_delay(ioc, false);
}

/* Write one encoded packet; the caller holds the channel's send lock */
int coroutine_fn drbd_write_packet(QIOChannel *ioc, GByteArray *pkt,
                                   Error **errp)
{
    return qio_channel_write_all(ioc, (char *)pkt->data,
                                 pkt->len, errp);
}

/*
 * Read one packet: its header into @h and its payload into a buffer the
 * caller frees.  Returns 0 on success, -EPIPE on end of file before a
 * header, and -EINVAL or -EIO with @errp set otherwise.
 */
int coroutine_fn drbd_read_packet(QIOChannel *ioc, DrbdHeader *h,
                                  uint8_t **payload, Error **errp)
{
    uint8_t hbuf[DRBD_WIRE_HEADER_SIZE];
    int ret;

    *payload = NULL;
    ret = qio_channel_read_all_eof(ioc, (char *)hbuf,
                                   sizeof(hbuf), errp);
    if (ret == 0) {
        error_setg(errp, "connection closed by the peer");
        return -EPIPE;
    }
    if (ret < 0) {
        return -EIO;
    }
    if (drbd_wire_get_header(hbuf, h, errp) < 0) {
        return -EINVAL;
    }
    if (h->length) {
        *payload = g_malloc(h->length);
        if (qio_channel_read_all(ioc, (char *)*payload,
                                 h->length, errp) < 0) {
            g_free(*payload);
            *payload = NULL;
            return -EIO;
        }
    }
    trace_drbd_recv_packet(drbd_cmd_name(h->cmd), h->length);
    return 0;
}

/*
 * The receivers read through a buffer, so that the packets that arrived
 * together (a barrier and a write, a write ack and a barrier ack) cost one
 * system call rather than two per packet.  Only the receivers use it: the
 * handshake before them reads exactly what it needs.
 */
static int coroutine_fn drbd_rx_fill(DrbdPeer *peer, QIOChannel *ioc,
                                     DrbdRxBuf *rb, size_t need,
                                     Error **errp)
{
    assert(need <= DRBD_RX_BUF_SIZE);
    if (DRBD_RX_BUF_SIZE - rb->pos < need) {
        memmove(rb->data, rb->data + rb->pos, rb->len - rb->pos);
        rb->len -= rb->pos;
        rb->pos = 0;
    }
    while (rb->len - rb->pos < need) {
        ssize_t n = qio_channel_read(ioc, (char *)rb->data + rb->len,
                                     DRBD_RX_BUF_SIZE - rb->len, errp);

        if (n == QIO_CHANNEL_ERR_BLOCK) {
            qio_channel_yield(ioc, G_IO_IN);
            /* Woken by the data, or to follow the node to its new home */
            drbd_co_rehome(peer->s);
            continue;
        }
        if (n < 0) {
            return -EIO;
        }
        if (n == 0) {
            error_setg(errp, "connection closed by the peer");
            return -EPIPE;
        }
        rb->len += n;
    }
    return 0;
}

/* drbd_read_packet() through the receiver's buffer */
int coroutine_fn drbd_rx_packet(DrbdPeer *peer, QIOChannel *ioc,
                                DrbdRxBuf *rb, DrbdHeader *h,
                                uint8_t **payload, Error **errp)
{
    int ret;

    *payload = NULL;
    ret = drbd_rx_fill(peer, ioc, rb, DRBD_WIRE_HEADER_SIZE, errp);
    if (ret < 0) {
        return ret;
    }
    if (drbd_wire_get_header(rb->data + rb->pos, h, errp) < 0) {
        return -EINVAL;
    }
    rb->pos += DRBD_WIRE_HEADER_SIZE;
    if (h->length > DRBD_RX_DIRECT_MIN && h->length > rb->len - rb->pos) {
        /* A large payload: what is buffered, then the rest read directly */
        size_t have = rb->len - rb->pos;

        *payload = drbd_payload_alloc(peer->s, h->length);
        memcpy(*payload, rb->data + rb->pos, have);
        rb->pos = rb->len = 0;
        if (qio_channel_read_all(ioc, (char *)*payload + have,
                                 h->length - have, errp) < 0) {
            drbd_payload_free(peer->s, *payload, h->length);
            *payload = NULL;
            return -EIO;
        }
    } else if (h->length) {
        ret = drbd_rx_fill(peer, ioc, rb, h->length, errp);
        if (ret < 0) {
            return ret;
        }
        *payload = drbd_payload_alloc(peer->s, h->length);
        memcpy(*payload, rb->data + rb->pos, h->length);
        rb->pos += h->length;
    }
    trace_drbd_recv_packet(drbd_cmd_name(h->cmd), h->length);
    return 0;
}

/* Read a packet that must be @cmd */
int coroutine_fn drbd_expect_packet(QIOChannel *ioc, uint16_t cmd,
                                    uint8_t **payload, uint32_t *len,
                                    Error **errp)
{
    DrbdHeader h;
    int ret = drbd_read_packet(ioc, &h, payload, errp);

    if (ret < 0) {
        return ret;
    }
    if (h.cmd != cmd) {
        error_setg(errp, "expected a %s packet, got %s", drbd_cmd_name(cmd),
                   drbd_cmd_name(h.cmd));
        g_free(*payload);
        *payload = NULL;
        return -EINVAL;
    }
    *len = h.length;
    return 0;
}

DrbdPeer *drbd_peer_new(DrbdConnection *conn, QIOChannel *data,
                        QIOChannel *meta)
{
    BDRVDrbdState *s = conn->s;
    DrbdPeer *peer = g_new0(DrbdPeer, 1);

    peer->s = s;
    peer->conn = conn;
    peer->data = data;
    peer->meta = meta;
    peer->role = DRBD_ROLE_UNKNOWN;
    peer->disk = DRBD_DISK_STATE_DUNKNOWN;
    peer->data_rx.data = g_malloc(DRBD_RX_BUF_SIZE);
    peer->meta_rx.data = g_malloc(DRBD_RX_BUF_SIZE);
    qemu_co_mutex_init(&peer->data_send_lock);
    qemu_co_mutex_init(&peer->meta_send_lock);
    QLIST_INIT(&peer->apply_reqs);
    peer->order = drbd_order_new();
    peer->resync_chunks = g_hash_table_new_full(g_int64_hash, g_int64_equal,
                                                g_free, NULL);
    peer->csum_chunks = g_hash_table_new_full(g_int64_hash, g_int64_equal,
                                              g_free, NULL);
    peer->ov_pending = g_hash_table_new_full(g_int64_hash, g_int64_equal,
                                             g_free, g_free);
    /* Keys and values are the readers' own (DrbdPeerRead) */
    peer->reads_pending = g_hash_table_new(g_int64_hash, g_int64_equal);
    qemu_mutex_lock(&s->lock);
    peer->version = conn->hello_version;
    qemu_mutex_unlock(&s->lock);
    return peer;
}

void drbd_peer_free(DrbdPeer *peer)
{
    object_unref(OBJECT(peer->data));
    object_unref(OBJECT(peer->meta));
    g_free(peer->data_rx.data);
    drbd_order_free(peer->order);
    g_hash_table_destroy(peer->resync_chunks);
    g_hash_table_destroy(peer->ov_pending);
    g_hash_table_destroy(peer->csum_chunks);
    assert(!g_hash_table_size(peer->reads_pending));
    g_hash_table_destroy(peer->reads_pending);
    g_free(peer->meta_rx.data);
    if (peer->meta_out) {
        g_byte_array_unref(peer->meta_out);
    }
    g_free(peer->broken_reason);
    g_free(peer);
}

/*
 * Start tearing the connection down: the receivers see their channels
 * shut down, the pinger and the resync their sleep end.  Only the first
 * reason is kept.
 */
static void drbd_peer_failv(DrbdPeer *peer, const char *fmt, va_list ap)
    G_GNUC_PRINTF(2, 0);

void drbd_peer_fail(DrbdPeer *peer, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    drbd_peer_failv(peer, fmt, ap);
    va_end(ap);
}

void drbd_peer_fail_err(DrbdPeer *peer, const char *what, Error *err)
{
    drbd_peer_fail(peer, "%s%s%s", what ?: "", what ? ": " : "",
                   error_get_pretty(err));
    error_free(err);
}

static void drbd_peer_failv(DrbdPeer *peer, const char *fmt, va_list ap)
{
    BDRVDrbdState *s = peer->s;
    DrbdConnection *conn = peer->conn;
    g_autoptr(GPtrArray) readers = g_ptr_array_new();
    Coroutine *waiters[3];
    GHashTableIter iter;
    DrbdPeerRead *r;
    int i;

    qemu_mutex_lock(&s->lock);
    if (qatomic_read(&peer->broken)) {
        qemu_mutex_unlock(&s->lock);
        return;
    }
    qatomic_set(&peer->broken, true);
    peer->broken_reason = g_strdup_vprintf(fmt, ap);
    /* A job paused with a reference to the peer lets go of it (job.c) */
    drbd_jobs_wake_locked(s);
    qemu_mutex_unlock(&s->lock);
    trace_drbd_peer_fail(peer->s->bs, peer->broken_reason);

    qio_channel_shutdown(peer->data, QIO_CHANNEL_SHUTDOWN_BOTH,
                         NULL);
    qio_channel_shutdown(peer->meta, QIO_CHANNEL_SHUTDOWN_BOTH,
                         NULL);
    drbd_sleep_wake(s, &peer->ping_sleep, true);
    drbd_sleep_wake(s, &peer->resync_sleep, true);
    drbd_sleep_wake(s, &peer->ahead_sleep, true);
    drbd_sleep_wake(s, &conn->state_sleep, false);
    /* Flushes waiting for a barrier ack see that none will come */
    qemu_mutex_lock(&s->lock);
    qemu_co_enter_all(&conn->barrier_waiters, &s->lock);
    /* ... and a verify, its target or a resync, that no answer will */
    waiters[0] = peer->ov_waiter;
    waiters[1] = peer->ov_serve_waiter;
    waiters[2] = peer->resync_waiter;
    peer->ov_waiter = NULL;
    peer->ov_serve_waiter = NULL;
    peer->resync_waiter = NULL;
    /* ... and guest reads waiting for the peer's data, that it won't come */
    g_hash_table_iter_init(&iter, peer->reads_pending);
    while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&r)) {
        r->done = true;
        r->ret = -EIO;
        if (r->waiter) {
            g_ptr_array_add(readers, r->waiter);
            r->waiter = NULL;
        }
        g_hash_table_iter_remove(&iter);
    }
    qemu_mutex_unlock(&s->lock);
    for (i = 0; i < ARRAY_SIZE(waiters); i++) {
        if (waiters[i]) {
            aio_co_wake(waiters[i]);
        }
    }
    for (i = 0; i < readers->len; i++) {
        aio_co_wake(g_ptr_array_index(readers, i));
    }
}

/* Break the connection to every peer of @s that has one, with @reason */
void drbd_peers_fail(BDRVDrbdState *s, const char *reason)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdPeer *peer = drbd_peer_get(s->conns[i]);

        if (peer) {
            drbd_peer_fail(peer, "%s", reason);
            drbd_peer_put(peer);
        }
    }
}

/*
 * The node moved to another context: wake the peer's coroutines where
 * they wait, so that they follow it (drbd_co_rehome())
 */
void drbd_peer_kick(DrbdPeer *peer)
{
    BDRVDrbdState *s = peer->s;
    Coroutine *waiters[2];
    int i;

    qio_channel_wake_read(peer->data);
    qio_channel_wake_read(peer->meta);
    drbd_sleep_wake(s, &peer->ping_sleep, false);
    drbd_sleep_wake(s, &peer->resync_sleep, false);
    drbd_sleep_wake(s, &peer->ahead_sleep, false);
    /* The resync and a verify waiting for answers: they look again */
    qemu_mutex_lock(&s->lock);
    waiters[0] = peer->resync_waiter;
    waiters[1] = peer->ov_waiter;
    peer->resync_waiter = NULL;
    peer->ov_waiter = NULL;
    qemu_mutex_unlock(&s->lock);
    for (i = 0; i < ARRAY_SIZE(waiters); i++) {
        if (waiters[i]) {
            aio_co_wake(waiters[i]);
        }
    }
}

/*
 * The peer connected on @conn, with a reference that keeps it from being
 * freed until drbd_peer_put(); NULL when there is none.
 */
DrbdPeer *drbd_peer_get_locked(DrbdConnection *conn)
{
    DrbdPeer *peer = conn->peer;

    if (peer && qatomic_read(&peer->broken)) {
        peer = NULL;
    }

    if (peer) {
        peer->running++;
    }
    return peer;
}

DrbdPeer *drbd_peer_get(DrbdConnection *conn)
{
    BDRVDrbdState *s = conn->s;
    DrbdPeer *peer;

    qemu_mutex_lock(&s->lock);
    peer = drbd_peer_get_locked(conn);
    qemu_mutex_unlock(&s->lock);
    return peer;
}

/*
 * Drop a reference; the last one after a break wakes the manager, if it
 * waits (once: a reference taken and dropped again after the break must
 * not wake it a second time)
 */
void drbd_peer_put(DrbdPeer *peer)
{
    BDRVDrbdState *s = peer->s;
    Coroutine *co = NULL;

    qemu_mutex_lock(&s->lock);
    assert(peer->running > 0);
    if (--peer->running == 0 && qatomic_read(&peer->broken)) {
        co = peer->teardown_waiter;
        peer->teardown_waiter = NULL;
    }
    qemu_mutex_unlock(&s->lock);
    if (co) {
        aio_co_wake(co);
    }
}

/*
 * Send a packet on the meta channel, after what drbd_queue_meta() queued
 * (@pkt may be NULL: only that); failures break the connection
 */
int coroutine_fn drbd_send_meta(DrbdPeer *peer, GByteArray *pkt)
{
    BDRVDrbdState *s = peer->s;
    g_autoptr(GByteArray) queued = NULL;
    GByteArray *out;
    Error *err = NULL;
    int ret = 0;

    qemu_co_mutex_lock(&peer->meta_send_lock);
    qemu_mutex_lock(&s->lock);
    queued = peer->meta_out;
    peer->meta_out = NULL;
    qemu_mutex_unlock(&s->lock);
    if (queued && pkt) {
        g_byte_array_append(queued, pkt->data, pkt->len);
    }
    out = queued ? queued : pkt;
    if (out && out->len) {
        ret = qatomic_read(&peer->broken) ? -EPIPE :
              drbd_write_packet(peer->meta, out, &err);
    }
    qemu_co_mutex_unlock(&peer->meta_send_lock);
    if (ret < 0 && err) {
        drbd_peer_fail_err(peer, "meta channel", err);
    }
    return ret;
}

/* Send what drbd_queue_meta() queued, until nothing is left */
static void coroutine_fn drbd_meta_flusher(void *opaque)
{
    DrbdPeer *peer = opaque;
    BDRVDrbdState *s = peer->s;

    for (;;) {
        bool more;

        drbd_send_meta(peer, NULL);
        qemu_mutex_lock(&s->lock);
        more = peer->meta_out != NULL;
        peer->meta_flushing = more;
        qemu_mutex_unlock(&s->lock);
        if (!more) {
            break;
        }
    }
    drbd_peer_put(peer);
}

/*
 * Send @pkt on the meta channel soon, in one send with every packet queued
 * until then: the acks of the writes that complete in one round of the
 * event loop go out together rather than one system call each.  Queued
 * packets keep their order.  The flusher runs in the peer's home context,
 * from a bottom half, with a reference to the peer.
 */
void drbd_queue_meta(DrbdPeer *peer, const GByteArray *pkt)
{
    BDRVDrbdState *s = peer->s;
    Coroutine *co = NULL;
    AioContext *ctx;

    qemu_mutex_lock(&s->lock);
    if (!peer->meta_out) {
        peer->meta_out = g_byte_array_new();
    }
    g_byte_array_append(peer->meta_out, pkt->data, pkt->len);
    if (!peer->meta_flushing && !qatomic_read(&peer->broken)) {
        peer->meta_flushing = true;
        peer->running++;
        co = qemu_coroutine_create(drbd_meta_flusher, peer);
    }
    ctx = s->ctx;
    qemu_mutex_unlock(&s->lock);
    if (co) {
        aio_co_schedule(ctx, co);
    }
}

void drbd_queue_block_ack(DrbdPeer *peer, uint16_t cmd, uint64_t offset,
                          uint64_t id, uint32_t bytes)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdBlockAck ack = { .offset = offset, .id = id, .bytes = bytes };

    drbd_wire_put_block_ack(pkt, cmd, &ack);
    drbd_queue_meta(peer, pkt);
}

/* Send a packet on the data channel, for the resync and the secondary */
int coroutine_fn drbd_send_data_channel(DrbdPeer *peer, GByteArray *pkt)
{
    Error *err = NULL;
    int ret;

    qemu_co_mutex_lock(&peer->data_send_lock);
    ret = qatomic_read(&peer->broken) ? -EPIPE :
          drbd_write_packet(peer->data, pkt, &err);
    qemu_co_mutex_unlock(&peer->data_send_lock);
    if (err) {
        drbd_peer_fail_err(peer, "data channel", err);
    }
    return ret;
}

/*
 * Start a coroutine of the connection in its home context; it holds a
 * reference to the peer and drops it with drbd_peer_put() when it ends.
 */
/*
 * The same in the caller's context, for what a receiver starts that
 * shares the receiver's state (the applies' list of ranges): it runs in
 * the receiver's thread, also while the node moves and the receiver has
 * not followed yet, rather than in the node's new context beside it
 */
void coroutine_fn drbd_peer_spawn_here(DrbdPeer *peer, CoroutineEntry *fn,
                                       void *opaque)
{
    qemu_mutex_lock(&peer->s->lock);
    peer->running++;
    qemu_mutex_unlock(&peer->s->lock);
    aio_co_enter(qemu_get_current_aio_context(),
                 qemu_coroutine_create(fn, opaque));
}

void drbd_peer_spawn(DrbdPeer *peer, CoroutineEntry *fn, void *opaque)
{
    AioContext *ctx;

    qemu_mutex_lock(&peer->s->lock);
    peer->running++;
    ctx = peer->s->ctx;
    qemu_mutex_unlock(&peer->s->lock);
    aio_co_enter(ctx, qemu_coroutine_create(fn, opaque));
}

/*
 * Confirmation of a data generation.  When a primary starts one, the
 * guest writes that complete from then on wait until each peer asked
 * (drbd_gen_confirm_ask_locked()) showed that it knows it: it answered a
 * PING sent after the generation's NEW_UUID (the meta channel keeps
 * their order, and the peer has the generation on disk before it reads
 * on: peer.c), or it is lost.  Else a node that has those writes could
 * be killed before it noted the generation, and a node that lacks them
 * would then look as new as it.  s->gen_confirm counts the answers
 * awaited, peer->confirming the peer's part; both under s->lock.
 */

/* @peer is asked once more; under s->lock */
void drbd_gen_confirm_ask_locked(DrbdPeer *peer)
{
    BDRVDrbdState *s = peer->s;

    peer->confirming++;
    qatomic_set(&s->gen_confirm, s->gen_confirm + 1);
}

/*
 * @peer answered @n of the times it was asked (all of them: its loss
 * ends its part); under s->lock
 */
void drbd_gen_confirmed_locked(DrbdPeer *peer, unsigned n)
{
    BDRVDrbdState *s = peer->s;

    n = MIN(n, peer->confirming);
    peer->confirming -= n;
    qatomic_set(&s->gen_confirm, s->gen_confirm - n);
    if (n && !s->gen_confirm) {
        qemu_co_queue_restart_all(&s->gen_confirm_queue);
    }
}

void coroutine_fn drbd_co_gen_confirm(DrbdPeer *peer, const char *why)
{
    BDRVDrbdState *s = peer->s;
    int64_t deadline = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                       3 * peer->conn->ping_timeout_ns;
    uint64_t ping;

    /* A ping counted before it is sent: this one goes after NEW_UUID */
    ping = qatomic_read(&peer->pings_sent) + 1;
    qatomic_set(&peer->ping_now, true);
    drbd_sleep_wake(s, &peer->ping_sleep, false);
    while (!qatomic_read(&peer->broken) &&
           qatomic_read(&peer->pings_acked) < ping) {
        if (qemu_clock_get_ns(QEMU_CLOCK_REALTIME) >= deadline) {
            /* The pinger should have dropped it: unconfirmed, it goes */
            drbd_peer_fail(peer, "the peer did not answer a ping after %s",
                           why);
            break;
        }
        qemu_co_sleep_ns(QEMU_CLOCK_REALTIME, SCALE_MS);
        drbd_co_rehome(s);
    }
    /*
     * A peer lost instead lets the writes go at its teardown, once the
     * quorum no longer counts it (drbd_peer_run())
     */
    qemu_mutex_lock(&s->lock);
    if (!qatomic_read(&peer->broken)) {
        drbd_gen_confirmed_locked(peer, 1);
    }
    qemu_mutex_unlock(&s->lock);
}

/* drbd_co_gen_confirm() of a new generation; holds a reference */
static void coroutine_fn drbd_gen_confirm_co(void *opaque)
{
    DrbdPeer *peer = opaque;

    drbd_co_gen_confirm(peer, "a new data generation");
    drbd_peer_put(peer);
}

/*
 * A guest write done: wait for the confirmations asked for.  Without the
 * lock when none is, as nearly always: a loss asks in the locked section
 * that completes the writes it held up, before their coroutines are
 * woken, and a new generation before a write of it is sent.
 */
void coroutine_fn drbd_co_gen_confirm_wait(BDRVDrbdState *s)
{
    if (!qatomic_read(&s->gen_confirm)) {
        return;
    }
    qemu_mutex_lock(&s->lock);
    while (s->gen_confirm) {
        qemu_co_queue_wait(&s->gen_confirm_queue, &s->lock);
    }
    qemu_mutex_unlock(&s->lock);
}

/*
 * The node started a data generation as primary: each peer that receives
 * its writes in sync (connected, no resync; a resync's target takes our
 * UUIDs at its end) and speaks version 5 joins it (NEW_UUID), so that
 * a node that missed the writes is told from one that did not.  Each
 * peer told is asked to confirm it (above) before a guest write that
 * completes from now on succeeds.
 */
void drbd_announce_new_uuid(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];
        g_autoptr(GByteArray) pkt = NULL;
        DrbdPeer *peer = NULL;
        uint64_t uuid = 0;
        bool confirm = false;

        qemu_mutex_lock(&s->lock);
        if (drbd_uuid_told_locked(conn)) {
            peer = drbd_peer_get_locked(conn);
            uuid = s->md.sb.uuid_current;
            confirm = peer && !qatomic_read(&s->closing);
            if (confirm) {
                drbd_gen_confirm_ask_locked(peer);
            }
        }
        qemu_mutex_unlock(&s->lock);
        if (peer) {
            pkt = g_byte_array_new();
            drbd_wire_put_new_uuid(pkt, uuid);
            drbd_queue_meta(peer, pkt);
            if (confirm) {
                drbd_peer_spawn(peer, drbd_gen_confirm_co, peer);
            }
            drbd_peer_put(peer);
        }
    }
}
