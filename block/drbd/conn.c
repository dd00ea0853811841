/*
 * DRBD-style replication: the connection to the peer
 *
 * One connection manager coroutine per node establishes the connection
 * (accepting or connecting, then the handshake), runs it, and after a
 * failure tears it down and starts again every connect-interval.  A
 * running connection has three coroutines: one receiver per channel and a
 * pinger; a sync source has a fourth that sends the resync.  Senders are
 * the coroutines that have something to send: they take the channel's
 * send lock and write the whole packet.
 *
 * Everything here runs in the node's AioContext, apart from guest
 * requests, which may come from other threads and only use the send
 * locks and the node's lock.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/aio-wait.h"
#include "qapi/error.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "qapi/qapi-events-drbd.h"
#include "trace.h"

#include "drbd-int.h"


/* A socket that must finish its handshake before a deadline */
typedef struct DrbdDeadline {
    QEMUTimer *timer;
    QIOChannel *ioc;
    bool expired;
} DrbdDeadline;

static void drbd_deadline_cb(void *opaque)
{
    DrbdDeadline *d = opaque;

    d->expired = true;
    qio_channel_shutdown(d->ioc, QIO_CHANNEL_SHUTDOWN_BOTH, NULL);
}

static void drbd_deadline_arm(DrbdDeadline *d, QIOChannelSocket *sioc,
                              uint64_t ns)
{
    d->ioc = QIO_CHANNEL(sioc);
    d->expired = false;
    d->timer = aio_timer_new(qemu_get_current_aio_context(),
                             QEMU_CLOCK_REALTIME, SCALE_NS,
                             drbd_deadline_cb, d);
    timer_mod(d->timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + ns);
}

/* The peer made progress: the deadline starts again */
static void drbd_deadline_rearm(DrbdDeadline *d, uint64_t ns)
{
    if (d->timer) {
        timer_mod(d->timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + ns);
    }
}

static void drbd_deadline_disarm(DrbdDeadline *d)
{
    if (d->timer) {
        timer_free(d->timer);
        d->timer = NULL;
    }
}

static void drbd_setup_channel(QIOChannelSocket *sioc, const char *name)
{
    QIOChannel *ioc = QIO_CHANNEL(sioc);

    qio_channel_set_name(ioc, name);
    qio_channel_set_blocking(ioc, false, NULL);
    qio_channel_set_follow_coroutine_ctx(ioc, true);
    qio_channel_set_delay(ioc, false);
}

/* Write one encoded packet; the caller holds the channel's send lock */
static int coroutine_fn drbd_write_packet(QIOChannelSocket *sioc,
                                          GByteArray *pkt, Error **errp)
{
    return qio_channel_write_all(QIO_CHANNEL(sioc), (char *)pkt->data,
                                 pkt->len, errp);
}

/*
 * Read one packet: its header into @h and its payload into a buffer the
 * caller frees.  Returns 0 on success, -EPIPE on end of file before a
 * header, and -EINVAL or -EIO with @errp set otherwise.
 */
static int coroutine_fn drbd_read_packet(QIOChannelSocket *sioc,
                                         DrbdHeader *h, uint8_t **payload,
                                         Error **errp)
{
    uint8_t hbuf[DRBD_WIRE_HEADER_SIZE];
    int ret;

    *payload = NULL;
    ret = qio_channel_read_all_eof(QIO_CHANNEL(sioc), (char *)hbuf,
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
        if (qio_channel_read_all(QIO_CHANNEL(sioc), (char *)*payload,
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
static int coroutine_fn drbd_rx_fill(QIOChannelSocket *sioc, DrbdRxBuf *rb,
                                     size_t need, Error **errp)
{
    QIOChannel *ioc = QIO_CHANNEL(sioc);

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
static int coroutine_fn drbd_rx_packet(QIOChannelSocket *sioc, DrbdRxBuf *rb,
                                       DrbdHeader *h, uint8_t **payload,
                                       Error **errp)
{
    int ret;

    *payload = NULL;
    ret = drbd_rx_fill(sioc, rb, DRBD_WIRE_HEADER_SIZE, errp);
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

        *payload = g_malloc(h->length);
        memcpy(*payload, rb->data + rb->pos, have);
        rb->pos = rb->len = 0;
        if (qio_channel_read_all(QIO_CHANNEL(sioc), (char *)*payload + have,
                                 h->length - have, errp) < 0) {
            g_free(*payload);
            *payload = NULL;
            return -EIO;
        }
    } else if (h->length) {
        ret = drbd_rx_fill(sioc, rb, h->length, errp);
        if (ret < 0) {
            return ret;
        }
        *payload = g_memdup2(rb->data + rb->pos, h->length);
        rb->pos += h->length;
    }
    trace_drbd_recv_packet(drbd_cmd_name(h->cmd), h->length);
    return 0;
}

/* Read a packet that must be @cmd */
static int coroutine_fn drbd_expect_packet(QIOChannelSocket *sioc,
                                           uint16_t cmd, uint8_t **payload,
                                           uint32_t *len, Error **errp)
{
    DrbdHeader h;
    int ret = drbd_read_packet(sioc, &h, payload, errp);

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

static void drbd_make_hello(BDRVDrbdState *s, DrbdHello *h, bool meta)
{
    *h = (DrbdHello) {
        .version_min = DRBD_PROTO_VERSION_MIN,
        .version_max = DRBD_PROTO_VERSION_MAX,
        .node_id = s->node_id,
        .flags = meta ? DRBD_HELLO_META_CHANNEL : 0,
    };
    pstrcpy(h->resource, sizeof(h->resource), s->resource);
}

/* Check the peer's HELLO against our configuration */
static int drbd_check_hello(BDRVDrbdState *s, const DrbdHello *h,
                            Error **errp)
{
    uint32_t common_max = MIN(h->version_max, DRBD_PROTO_VERSION_MAX);

    if (common_max < MAX(h->version_min, DRBD_PROTO_VERSION_MIN)) {
        error_setg(errp, "the peer speaks protocol versions %" PRIu32
                   " to %" PRIu32 ", this node %d to %d: no common version",
                   h->version_min, h->version_max, DRBD_PROTO_VERSION_MIN,
                   DRBD_PROTO_VERSION_MAX);
        return -EPROTO;
    }
    if (strcmp(h->resource, s->resource) != 0) {
        error_setg(errp, "the peer is of resource '%s', this node of '%s'",
                   h->resource, s->resource);
        return -EINVAL;
    }
    if (h->node_id != s->peer_node_id) {
        error_setg(errp, "the peer has node-id %" PRIu32 ", peer-node-id "
                   "is %d", h->node_id, s->peer_node_id);
        return -EINVAL;
    }
    return 0;
}

static int coroutine_fn drbd_send_hello(BDRVDrbdState *s,
                                        QIOChannelSocket *sioc, bool meta,
                                        Error **errp)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdHello hello;

    drbd_make_hello(s, &hello, meta);
    drbd_wire_put_hello(pkt, &hello);
    return drbd_write_packet(sioc, pkt, errp);
}

static int coroutine_fn drbd_recv_hello(QIOChannelSocket *sioc,
                                        DrbdHello *hello, Error **errp)
{
    g_autofree uint8_t *payload = NULL;
    uint32_t len;
    int ret;

    ret = drbd_expect_packet(sioc, DRBD_CMD_HELLO, &payload, &len, errp);
    if (ret < 0) {
        return ret;
    }
    return drbd_wire_get_hello(payload, len, hello, errp);
}

/* Connect one channel and exchange HELLOs on it */
static QIOChannelSocket *coroutine_fn
drbd_connect_channel(BDRVDrbdState *s, bool meta, Error **errp)
{
    g_autoptr(QIOChannelSocket) sioc = qio_channel_socket_new();
    DrbdDeadline dl = { 0 };
    DrbdHello hello;
    int ret;

    /*
     * The connect itself blocks; on loopback and on a LAN a refused or
     * completed connection is immediate.
     */
    if (qio_channel_socket_connect_sync(sioc, s->peer_addr, errp) < 0) {
        return NULL;
    }
    drbd_setup_channel(sioc, meta ? "drbd-meta" : "drbd-data");
    s->establishing = sioc;
    drbd_deadline_arm(&dl, sioc, s->ping_timeout_ns);
    ret = drbd_send_hello(s, sioc, meta, errp);
    if (ret == 0) {
        ret = drbd_recv_hello(sioc, &hello, errp);
    }
    if (ret == 0) {
        ret = drbd_check_hello(s, &hello, errp);
    }
    drbd_deadline_disarm(&dl);
    s->establishing = NULL;
    if (ret < 0) {
        if (dl.expired) {
            error_free(*errp);
            *errp = NULL;
            error_setg(errp, "the peer did not answer the handshake");
        }
        return NULL;
    }
    return g_steal_pointer(&sioc);
}

/* Accept connections until we hold a data and a meta channel */
static int coroutine_fn drbd_accept_channels(BDRVDrbdState *s,
                                             QIOChannelSocket **data,
                                             QIOChannelSocket **meta,
                                             Error **errp)
{
    *data = NULL;
    *meta = NULL;

    while (!*data || !*meta) {
        g_autoptr(QIOChannelSocket) sioc = NULL;
        Error *local_err = NULL;
        DrbdDeadline dl = { 0 };
        DrbdHello hello = { 0 };
        bool is_meta;
        int ret;

        if (s->closing) {
            goto fail;
        }
        sioc = qio_channel_socket_accept(s->listener, NULL);
        if (!sioc) {
            qio_channel_yield(QIO_CHANNEL(s->listener), G_IO_IN);
            continue;
        }
        drbd_setup_channel(sioc, "drbd-accepted");
        s->establishing = sioc;
        drbd_deadline_arm(&dl, sioc, s->ping_timeout_ns);
        ret = drbd_recv_hello(sioc, &hello, &local_err);
        if (ret == 0) {
            ret = drbd_check_hello(s, &hello, &local_err);
        }
        is_meta = hello.flags & DRBD_HELLO_META_CHANNEL;
        if (ret == 0) {
            ret = drbd_send_hello(s, sioc, is_meta, &local_err);
        }
        drbd_deadline_disarm(&dl);
        s->establishing = NULL;
        if (ret < 0) {
            if (dl.expired) {
                error_free(local_err);
                local_err = NULL;
                error_setg(&local_err, "the peer did not finish the "
                           "handshake in time");
            }
            /* A bad candidate does not stop us listening */
            drbd_note_error(s, local_err);
            continue;
        }
        /* A second channel of the same kind replaces the first */
        if (is_meta) {
            g_clear_pointer(meta, object_unref);
            *meta = g_steal_pointer(&sioc);
        } else {
            g_clear_pointer(data, object_unref);
            *data = g_steal_pointer(&sioc);
        }
    }
    return 0;

fail:
    g_clear_pointer(data, object_unref);
    g_clear_pointer(meta, object_unref);
    error_setg(errp, "closing");
    return -ECANCELED;
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
    while (hbitmap_next_dirty_area(s->oos, offset, s->size, INT64_MAX,
                                   &start, &count)) {
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
        drbd_deadline_rearm(dl, s->ping_timeout_ns);
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

    if (s->node_id < s->peer_node_id) {
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
static void drbd_report_split_brain(BDRVDrbdState *s,
                                    const DrbdHandshakeResult *res,
                                    const DrbdUuids *mine,
                                    const DrbdUuids *theirs)
{
    g_autoptr(GString) detail = g_string_new(NULL);
    bool resolved = res->resolution == DRBD_SB_BY_POLICY ||
                    res->resolution == DRBD_SB_BY_DISCARD_MY_DATA;
    const char *decision = res->decision == DRBD_SYNC_UNRELATED ?
                           "unrelated data" :
                           resolved ? drbd_sync_decision_str(res->decision) :
                           "split brain";

    g_string_printf(detail, "rule %d", res->rule);
    if (resolved) {
        g_string_append_printf(detail, ", resolved %s%s",
                               res->resolution == DRBD_SB_BY_POLICY ?
                               "by after-sb policy " : "by discard-my-data",
                               res->resolution == DRBD_SB_BY_POLICY ?
                               drbd_after_sb_policy_str(res->policy) : "");
    }
    g_string_append(detail, ";");
    drbd_uuids_str(detail, "self", mine);
    drbd_uuids_str(detail, "peer", theirs);
    if (resolved) {
        warn_report("drbd node '%s' (resource %s): split brain, resolved: "
                    "%s (%s)", bdrv_get_node_name(s->bs), s->resource,
                    decision, detail->str);
    } else {
        error_report("drbd node '%s' (resource %s): %s: not connecting (%s); "
                     "drbd-connect with discard-my-data on the node whose "
                     "changes are to be dropped", bdrv_get_node_name(s->bs),
                     s->resource, decision, detail->str);
    }
    qapi_event_send_drbd_split_brain(bdrv_get_node_name(s->bs), resolved,
                                     decision, detail->str);
}

/*
 * The sync handshake: who has the newer data, from the generation UUIDs
 * and disk states (uuid.c), and what is out of sync, from both bitmaps.
 * Sets peer->decision; the source and the target both hold the union of
 * the two bitmaps afterwards.
 */
static int coroutine_fn drbd_sync_handshake_co(DrbdPeer *peer,
                                               DrbdHandshakeSide self,
                                               uint64_t gen,
                                               const DrbdStatePacket *st,
                                               const DrbdUuidsPacket *pu,
                                               HBitmap *their_bm,
                                               Error **errp)
{
    BDRVDrbdState *s = peer->s;
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
    DrbdHandshakeResult res;
    DrbdSyncDecision d;
    int64_t start = 0, count;

    if (drbd_handshake_config_compatible(&s->sb_cfg, &their_cfg, errp) < 0) {
        return -EINVAL;
    }

    /* Decide from what we sent: the peer decides from the same */
    d = drbd_sync_handshake(&self, &other, s->node_id < s->peer_node_id,
                            &s->sb_cfg, &res);
    trace_drbd_sync_handshake(s->bs, drbd_sync_decision_str(d), res.rule,
                              drbd_uuid_cmp_str(res.uuid_cmp),
                              drbd_sb_resolution_str(res.resolution));

    if (res.resolution != DRBD_SB_NONE || d == DRBD_SYNC_UNRELATED) {
        drbd_report_split_brain(s, &res, &self.uuids, &other.uuids);
    }
    switch (d) {
    case DRBD_SYNC_SPLIT_BRAIN:
    case DRBD_SYNC_UNRELATED:
        qemu_mutex_lock(&s->lock);
        s->connect_held = true;
        qemu_mutex_unlock(&s->lock);
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

    peer->decision = d;
    peer->uuids_synced = d == DRBD_SYNC_NONE;
    peer->hs_uuids = other.uuids;
    drbd_uuid_repair(res.rule, &self.uuids, &peer->hs_uuids);

    qemu_mutex_lock(&s->lock);
    if (s->hs_gen != gen) {
        /* Promoted, demoted or invalidated meanwhile: decide again */
        qemu_mutex_unlock(&s->lock);
        error_setg(errp, "the node's role, disk or UUIDs changed during the "
                   "handshake; connecting again");
        return -EAGAIN;
    }
    s->discard_my_data = false;
    s->md.flags &= ~DRBD_MDF_CRASHED_PRIMARY;
    drbd_uuids_set_locked(s, &self.uuids);
    if (d == DRBD_SYNC_NONE && res.rule != 0 &&
        s->role != DRBD_ROLE_PRIMARY) {
        /* The same generation on both sides: nothing differs */
        drbd_oos_reset_locked(s, 0, s->size);
    } else if (d == DRBD_SYNC_FULL_SOURCE || d == DRBD_SYNC_FULL_TARGET) {
        drbd_oos_set_locked(s, 0, s->size);
    } else {
        while (hbitmap_next_dirty_area(their_bm, start, INT64_MAX,
                                       INT64_MAX, &start, &count)) {
            uint64_t off = (uint64_t)start << DRBD_BM_GRANULARITY;

            drbd_oos_set_locked(s, off,
                                MIN((uint64_t)count << DRBD_BM_GRANULARITY,
                                    s->size - off));
            start += count;
        }
    }
    peer->resync_bits = hbitmap_count(s->oos) >> DRBD_BM_GRANULARITY;
    qemu_mutex_unlock(&s->lock);

    if ((d == DRBD_SYNC_TARGET || d == DRBD_SYNC_FULL_TARGET) &&
        peer->resync_bits) {
        /*
         * Our data is not usable until the resync is done, even after a
         * crash: the superblock says so before any resync write
         */
        drbd_set_state(s, -1, -1, DRBD_DISK_STATE_INCONSISTENT, -1, -1,
                       "resync from the peer needed");
        /* What we lack, on disk with it */
        drbd_md_sync_all_co(s);
    } else if (d != DRBD_SYNC_NONE && !peer->resync_bits) {
        /*
         * Nothing to send: the resync is over as it starts (a primary's
         * writes from now until the connection is up are sent by a
         * resync that drbd_peer_run() starts for them)
         */
        drbd_resync_finished_uuids(peer);
    }
    drbd_md_sync_co(s);
    return 0;
}

/*
 * Exchange sizes, states, generation UUIDs and bitmaps on the data
 * channel, and decide what happens between the two nodes
 */
static int coroutine_fn drbd_exchange_params(DrbdPeer *peer,
                                             DrbdDeadline *dl, Error **errp)
{
    BDRVDrbdState *s = peer->s;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    g_autofree uint8_t *payload = NULL;
    g_autofree uint8_t *payload2 = NULL;
    g_autofree uint8_t *payload3 = NULL;
    DrbdSizes mine = {
        .disk_size = s->size,
        .max_epoch_size = s->max_epoch_size,
        .protocol = s->protocol,
    };
    DrbdUuidsPacket uuids, their_uuids;
    DrbdHandshakeSide self;
    uint64_t gen;
    DrbdSizes theirs;
    DrbdStatePacket st;
    HBitmap *their_bm = NULL;
    uint64_t their_bytes = 0;
    uint32_t len;
    int ret;

    qemu_mutex_lock(&s->lock);
    st.role = s->role;
    st.disk_state = s->disk;
    /* What we send is what we decide from */
    self = (DrbdHandshakeSide) {
        .disk = drbd_hs_disk(s->disk),
        .primary = s->role == DRBD_ROLE_PRIMARY,
        .crashed_primary = s->md.flags & DRBD_MDF_CRASHED_PRIMARY,
        .changes = hbitmap_count(s->oos) >> DRBD_BM_GRANULARITY,
        .discard_my_data = s->discard_my_data,
    };
    drbd_uuids_get_locked(s, &self.uuids);
    gen = s->hs_gen;
    qemu_mutex_unlock(&s->lock);

    uuids = (DrbdUuidsPacket) {
        .current = self.uuids.current,
        .bitmap = self.uuids.bitmap,
        .history = { self.uuids.history[0], self.uuids.history[1] },
        .changes = self.changes,
        .flags = (self.crashed_primary ? DRBD_UUIDS_CRASHED_PRIMARY : 0) |
                 (self.discard_my_data ? DRBD_UUIDS_DISCARD_MY_DATA : 0),
        .after_sb = { s->sb_cfg.after_sb_0pri, s->sb_cfg.after_sb_1pri,
                      s->sb_cfg.after_sb_2pri },
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
        return -EINVAL;
    }
    if (theirs.protocol != s->protocol) {
        error_setg(errp, "the peer uses protocol %c, this node %c",
                   theirs.protocol, s->protocol);
        return -EINVAL;
    }
    if (st.role == DRBD_ROLE_PRIMARY && s->role == DRBD_ROLE_PRIMARY) {
        error_setg(errp, "both nodes are primary: refusing to connect "
                   "(demote one of them)");
        return -EINVAL;
    }
    ret = drbd_expect_packet(peer->data, DRBD_CMD_UUIDS, &payload3, &len,
                             errp);
    if (ret < 0 || drbd_wire_get_uuids(payload3, len, &their_uuids,
                                       errp) < 0) {
        return -EINVAL;
    }

    ret = drbd_exchange_bitmaps(peer, dl, &their_bm, &their_bytes, errp);
    if (ret < 0) {
        return ret;
    }
    ret = drbd_sync_handshake_co(peer, self, gen, &st, &their_uuids,
                                 their_bm, errp);
    hbitmap_free(their_bm);
    if (ret < 0) {
        return ret;
    }

    peer->role = st.role;
    peer->disk = st.disk_state;
    return 0;
}

static DrbdPeer *drbd_peer_new(BDRVDrbdState *s, QIOChannelSocket *data,
                               QIOChannelSocket *meta)
{
    DrbdPeer *peer = g_new0(DrbdPeer, 1);

    peer->s = s;
    peer->data = data;
    peer->meta = meta;
    peer->role = DRBD_ROLE_UNKNOWN;
    peer->disk = DRBD_DISK_STATE_DUNKNOWN;
    peer->data_rx.data = g_malloc(DRBD_RX_BUF_SIZE);
    peer->meta_rx.data = g_malloc(DRBD_RX_BUF_SIZE);
    qemu_co_mutex_init(&peer->data_send_lock);
    qemu_co_mutex_init(&peer->meta_send_lock);
    QLIST_INIT(&peer->apply_reqs);
    return peer;
}

static void drbd_peer_free(DrbdPeer *peer)
{
    object_unref(OBJECT(peer->data));
    object_unref(OBJECT(peer->meta));
    g_free(peer->data_rx.data);
    g_free(peer->meta_rx.data);
    g_free(peer->broken_reason);
    g_free(peer);
}

/* Establish a connection: the two channels and the handshake */
static DrbdPeer *coroutine_fn drbd_establish(BDRVDrbdState *s, Error **errp)
{
    ERRP_GUARD();
    QIOChannelSocket *data = NULL, *meta = NULL;
    DrbdDeadline dl = { 0 };
    DrbdPeer *peer;
    int ret;

    if (s->connects) {
        data = drbd_connect_channel(s, false, errp);
        if (!data) {
            return NULL;
        }
        meta = drbd_connect_channel(s, true, errp);
        if (!meta) {
            object_unref(OBJECT(data));
            return NULL;
        }
    } else if (drbd_accept_channels(s, &data, &meta, errp) < 0) {
        return NULL;
    }

    peer = drbd_peer_new(s, data, meta);
    drbd_set_state(s, -1, DRBD_CONN_STATE_WF_REPORT_PARAMS, -1, -1, -1,
                   "connected, handshake");
    qemu_mutex_lock(&s->lock);
    s->handshaking = peer;      /* for drbd_conn_stop() to cut it short */
    qemu_mutex_unlock(&s->lock);
    /* A peer that stops answering does not hold the handshake forever */
    drbd_deadline_arm(&dl, peer->data, s->ping_timeout_ns);
    ret = qatomic_read(&s->closing) ? -ECANCELED :
          drbd_exchange_params(peer, &dl, errp);
    drbd_deadline_disarm(&dl);
    qemu_mutex_lock(&s->lock);
    s->handshaking = NULL;
    qemu_mutex_unlock(&s->lock);
    if (ret < 0) {
        if (dl.expired) {
            error_free(*errp);
            *errp = NULL;
            error_setg(errp, "the peer did not go on with the handshake "
                       "within ping-timeout");
        } else if (s->closing && !*errp) {
            error_setg(errp, "closing");
        }
        drbd_peer_free(peer);
        return NULL;
    }
    return peer;
}

void drbd_note_error(BDRVDrbdState *s, Error *err)
{
    if (!err) {
        return;
    }
    trace_drbd_conn_error(s->bs, error_get_pretty(err));
    qemu_mutex_lock(&s->lock);
    g_free(s->last_error);
    s->last_error = g_strdup(error_get_pretty(err));
    qemu_mutex_unlock(&s->lock);
    error_free(err);
}

/*
 * Start tearing the connection down: the receivers see their channels
 * shut down, the pinger and the resync their sleep end.  Only the first
 * reason is kept.
 */
void drbd_peer_fail(DrbdPeer *peer, const char *fmt, ...)
{
    BDRVDrbdState *s = peer->s;
    va_list ap;

    qemu_mutex_lock(&s->lock);
    if (peer->broken) {
        qemu_mutex_unlock(&s->lock);
        return;
    }
    peer->broken = true;
    va_start(ap, fmt);
    peer->broken_reason = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    qemu_mutex_unlock(&s->lock);
    trace_drbd_peer_fail(peer->s->bs, peer->broken_reason);

    qio_channel_shutdown(QIO_CHANNEL(peer->data), QIO_CHANNEL_SHUTDOWN_BOTH,
                         NULL);
    qio_channel_shutdown(QIO_CHANNEL(peer->meta), QIO_CHANNEL_SHUTDOWN_BOTH,
                         NULL);
    qemu_co_sleep_wake(&peer->ping_sleep);
    qemu_co_sleep_wake(&peer->resync_sleep);
    qemu_co_enter_all(&s->drain_queue, NULL);
    qemu_co_enter_all(&s->barrier_waiters, NULL);
}

/*
 * The connected peer, with a reference that keeps it from being freed
 * until drbd_peer_put(); NULL when there is none.
 */
DrbdPeer *drbd_peer_get_locked(BDRVDrbdState *s)
{
    DrbdPeer *peer = s->peer && !s->peer->broken ? s->peer : NULL;

    if (peer) {
        peer->running++;
    }
    return peer;
}

DrbdPeer *drbd_peer_get(BDRVDrbdState *s)
{
    DrbdPeer *peer;

    qemu_mutex_lock(&s->lock);
    peer = drbd_peer_get_locked(s);
    qemu_mutex_unlock(&s->lock);
    return peer;
}

/* Drop a reference; the last one after a break wakes the manager */
void drbd_peer_put(DrbdPeer *peer)
{
    BDRVDrbdState *s = peer->s;
    bool wake;

    qemu_mutex_lock(&s->lock);
    assert(peer->running > 0);
    wake = --peer->running == 0 && peer->broken;
    qemu_mutex_unlock(&s->lock);
    if (wake) {
        aio_co_wake(s->conn_co);
    }
}

/* Send a packet on the meta channel; failures break the connection */
int coroutine_fn drbd_send_meta(DrbdPeer *peer, GByteArray *pkt)
{
    Error *err = NULL;
    int ret;

    qemu_co_mutex_lock(&peer->meta_send_lock);
    ret = peer->broken ? -EPIPE : drbd_write_packet(peer->meta, pkt, &err);
    qemu_co_mutex_unlock(&peer->meta_send_lock);
    if (ret < 0 && err) {
        drbd_peer_fail(peer, "meta channel: %s", error_get_pretty(err));
        error_free(err);
    }
    return ret;
}

void coroutine_fn drbd_send_block_ack(DrbdPeer *peer, uint16_t cmd,
                                      uint64_t offset, uint64_t id,
                                      uint32_t bytes)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdBlockAck ack = { .offset = offset, .id = id, .bytes = bytes };

    drbd_wire_put_block_ack(pkt, cmd, &ack);
    drbd_send_meta(peer, pkt);
}

/* Close the current epoch with a barrier; the caller holds data_send_lock */
static void drbd_close_epoch_locked(BDRVDrbdState *s, GByteArray *pkt,
                                    bool flush)
{
    DrbdBarrier b = {
        .epoch = s->cur_epoch,
        .set_size = s->epoch_size,
        .flags = flush ? DRBD_BARRIER_FLUSH : 0,
    };

    drbd_wire_put_barrier(pkt, DRBD_CMD_BARRIER, &b);
    s->cur_epoch++;
    s->epoch_size = 0;
    s->epoch_needs_barrier = false;
}

/*
 * Send a guest write (DATA, ZEROES or DISCARD) to the peer, opening a new
 * epoch first when the write may depend on one already completed.  Feeds
 * DRBD_EV_SENT or DRBD_EV_SEND_FAILED to the request.
 */
int coroutine_fn drbd_send_write(DrbdPeer *peer, DrbdRequest *req,
                                 uint16_t cmd, QEMUIOVector *qiov,
                                 size_t qiov_offset, uint32_t dp_flags)
{
    BDRVDrbdState *s = peer->s;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdDataPacket p = {
        .offset = req->offset,
        .id = req->id,
        .flags = dp_flags,
        .bytes = req->bytes,
    };
    Error *err = NULL;
    int ret = -EPIPE;

    qemu_co_mutex_lock(&peer->data_send_lock);
    if (!peer->broken) {
        qemu_mutex_lock(&s->lock);
        if (s->epoch_needs_barrier || s->epoch_size >= s->max_epoch_size) {
            drbd_close_epoch_locked(s, pkt, false);
        }
        req->epoch = s->cur_epoch;
        p.epoch = s->cur_epoch;
        s->epoch_size++;
        /*
         * Handed over now, before the bytes go out: the peer's ack may be
         * processed in another thread before this coroutine runs again.
         */
        drbd_req_event_locked(s, req, DRBD_EV_SENT);
        qemu_mutex_unlock(&s->lock);

        if (cmd == DRBD_CMD_DATA) {
            struct iovec iov[IOV_MAX];
            int niov;

            drbd_wire_put_data_header(pkt, cmd, &p);
            iov[0].iov_base = pkt->data;
            iov[0].iov_len = pkt->len;
            niov = qemu_iovec_subvec_niov(qiov, qiov_offset, req->bytes);
            if (niov < IOV_MAX) {
                niov = iov_copy(iov + 1, IOV_MAX - 1, qiov->iov, qiov->niov,
                                qiov_offset, req->bytes);
                ret = qio_channel_writev_all(QIO_CHANNEL(peer->data), iov,
                                             niov + 1, &err);
            } else {
                /* Too fragmented for one writev: send a linear copy */
                g_autofree uint8_t *buf = g_malloc(req->bytes);

                qemu_iovec_to_buf(qiov, qiov_offset, buf, req->bytes);
                g_byte_array_append(pkt, buf, req->bytes);
                ret = drbd_write_packet(peer->data, pkt, &err);
            }
        } else {
            drbd_wire_put_data(pkt, cmd, &p);
            ret = drbd_write_packet(peer->data, pkt, &err);
        }
    }
    qemu_co_mutex_unlock(&peer->data_send_lock);

    qemu_mutex_lock(&s->lock);
    if (ret < 0) {
        drbd_req_event_locked(s, req, DRBD_EV_SEND_FAILED);
    } else {
        s->ns += cmd == DRBD_CMD_DATA ? req->bytes : 0;
    }
    qemu_mutex_unlock(&s->lock);

    if (err) {
        drbd_peer_fail(peer, "data channel: %s", error_get_pretty(err));
        error_free(err);
    }
    trace_drbd_send_write(s->bs, drbd_cmd_name(cmd), req->id, req->offset,
                          req->bytes, req->epoch, ret);
    return ret;
}

/*
 * Close the current epoch with a barrier that asks the peer to flush its
 * disk once the epoch's writes are done; *@epoch is the epoch whose
 * BARRIER_ACK says the peer's disk is stable.
 */
int coroutine_fn drbd_send_barrier(DrbdPeer *peer, bool flush,
                                   uint32_t *epoch)
{
    BDRVDrbdState *s = peer->s;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    Error *err = NULL;
    int ret = -EPIPE;

    qemu_co_mutex_lock(&peer->data_send_lock);
    if (!peer->broken) {
        qemu_mutex_lock(&s->lock);
        *epoch = s->cur_epoch;
        drbd_close_epoch_locked(s, pkt, flush);
        qemu_mutex_unlock(&s->lock);
        ret = drbd_write_packet(peer->data, pkt, &err);
    }
    qemu_co_mutex_unlock(&peer->data_send_lock);
    if (err) {
        drbd_peer_fail(peer, "data channel: %s", error_get_pretty(err));
        error_free(err);
    }
    return ret;
}

/* Send a packet on the data channel, for the resync and the secondary */
int coroutine_fn drbd_send_data_channel(DrbdPeer *peer, GByteArray *pkt)
{
    Error *err = NULL;
    int ret;

    qemu_co_mutex_lock(&peer->data_send_lock);
    ret = peer->broken ? -EPIPE : drbd_write_packet(peer->data, pkt, &err);
    qemu_co_mutex_unlock(&peer->data_send_lock);
    if (err) {
        drbd_peer_fail(peer, "data channel: %s", error_get_pretty(err));
        error_free(err);
    }
    return ret;
}

/* An ack for one of our requests arrived on the meta channel */
static void coroutine_fn drbd_got_block_ack(DrbdPeer *peer, uint16_t cmd,
                               const DrbdBlockAck *ack)
{
    BDRVDrbdState *s = peer->s;
    DrbdRequest *req;

    if (ack->id & DRBD_RESYNC_ID_FLAG) {
        drbd_resync_acked(peer, cmd, ack);
        return;
    }

    qemu_mutex_lock(&s->lock);
    req = drbd_req_find_locked(s, ack->id);
    if (req) {
        drbd_req_event_locked(s, req, cmd == DRBD_CMD_RECV_ACK ?
                              DRBD_EV_RECV_ACK :
                              cmd == DRBD_CMD_WRITE_ACK ?
                              DRBD_EV_WRITE_ACK : DRBD_EV_NEG_ACK);
    }
    qemu_mutex_unlock(&s->lock);
    if (!req) {
        /* Acks for requests that are gone are harmless: log only */
        trace_drbd_stray_ack(s->bs, drbd_cmd_name(cmd), ack->id);
    }
}

static void coroutine_fn drbd_meta_receiver(void *opaque)
{
    DrbdPeer *peer = opaque;
    BDRVDrbdState *s = peer->s;

    while (!peer->broken) {
        g_autofree uint8_t *payload = NULL;
        Error *err = NULL;
        DrbdHeader h;
        DrbdBlockAck ack;
        DrbdBarrier b;
        int ret;

        ret = drbd_rx_packet(peer->meta, &peer->meta_rx, &h, &payload,
                             &err);
        if (ret < 0) {
            drbd_peer_fail(peer, "meta channel: %s", error_get_pretty(err));
            error_free(err);
            break;
        }
        peer->ping_answered = true;   /* any traffic proves the peer alive */

        switch (h.cmd) {
        case DRBD_CMD_PING: {
            g_autoptr(GByteArray) pkt = g_byte_array_new();

            drbd_wire_put_empty(pkt, DRBD_CMD_PING_ACK);
            drbd_send_meta(peer, pkt);
            break;
        }
        case DRBD_CMD_PING_ACK:
            break;
        case DRBD_CMD_RECV_ACK:
        case DRBD_CMD_WRITE_ACK:
        case DRBD_CMD_NEG_ACK:
            ret = drbd_wire_get_block_ack(h.cmd, payload, h.length, s->size,
                                          &ack, &err);
            if (ret == 0) {
                drbd_got_block_ack(peer, h.cmd, &ack);
            }
            break;
        case DRBD_CMD_STATE_REPLY: {
            uint32_t result;

            ret = drbd_wire_get_state_reply(payload, h.length, &result,
                                            &err);
            if (ret == 0) {
                qemu_mutex_lock(&s->lock);
                if (s->promote_pending) {
                    qatomic_set(&s->promote_reply, result);
                }
                qemu_mutex_unlock(&s->lock);
                aio_wait_kick();
            }
            break;
        }
        case DRBD_CMD_BARRIER_ACK:
            ret = drbd_wire_get_barrier(h.cmd, payload, h.length, &b, &err);
            if (ret == 0) {
                qemu_mutex_lock(&s->lock);
                drbd_tl_barrier_acked_locked(s, b.epoch);
                qemu_mutex_unlock(&s->lock);
            }
            break;
        default:
            error_setg(&err, "%s packet on the meta channel",
                       drbd_cmd_name(h.cmd));
            ret = -EINVAL;
        }
        if (ret < 0) {
            drbd_peer_fail(peer, "meta channel: %s", error_get_pretty(err));
            error_free(err);
            break;
        }
    }
    drbd_peer_put(peer);
}

/* The peer's role or disk changed (it was promoted or demoted) */
static int drbd_peer_state_changed(DrbdPeer *peer, const DrbdStatePacket *st,
                                   Error **errp)
{
    BDRVDrbdState *s = peer->s;
    bool both_primary;

    qemu_mutex_lock(&s->lock);
    both_primary = st->role == DRBD_ROLE_PRIMARY &&
                   s->role == DRBD_ROLE_PRIMARY;
    qemu_mutex_unlock(&s->lock);
    if (both_primary) {
        error_setg(errp, "the peer became primary while this node is "
                   "primary");
        return -EINVAL;
    }
    drbd_set_state(s, -1, -1, -1, st->role, st->disk_state,
                   st->role == DRBD_ROLE_PRIMARY ? "peer promoted" :
                   "peer state changed");
    return 0;
}

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

/* The peer asks to become primary (or to take another state) */
static int coroutine_fn drbd_peer_state_request(DrbdPeer *peer,
                                                const DrbdStatePacket *st)
{
    BDRVDrbdState *s = peer->s;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    uint32_t result = DRBD_STATE_REPLY_GRANTED;

    if (st->role == DRBD_ROLE_PRIMARY) {
        qemu_mutex_lock(&s->lock);
        if (s->role == DRBD_ROLE_PRIMARY ||
            (s->promote_pending && s->node_id < s->peer_node_id)) {
            /* we are primary, or asking too and the lower id wins */
            result = DRBD_STATE_REPLY_REFUSED;
        }
        qemu_mutex_unlock(&s->lock);
    }
    if (result == DRBD_STATE_REPLY_GRANTED) {
        /* before the answer, so that we refuse our own promotion now */
        drbd_set_state(s, -1, -1, -1, st->role, st->disk_state,
                       st->role == DRBD_ROLE_PRIMARY ?
                       "peer promoted" : "peer state changed");
    }
    trace_drbd_state_request(s->bs, DrbdRole_str(st->role), result);
    drbd_wire_put_state_reply(pkt, result);
    return drbd_send_meta(peer, pkt) < 0 ? -EPIPE : 0;
}

static void coroutine_fn drbd_send_state_req_co(void *opaque)
{
    DrbdPeer *peer = opaque;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdStatePacket st = {
        .role = DRBD_ROLE_PRIMARY,
        .disk_state = DRBD_DISK_STATE_UP_TO_DATE,
    };

    drbd_wire_put_state_req(pkt, &st);
    drbd_send_data_channel(peer, pkt);
    drbd_peer_put(peer);
}

/* A timer callback for waits with a deadline: sets the bool it is given */
void drbd_timer_set_flag(void *opaque)
{
    bool *flag = opaque;

    *flag = true;
}

/*
 * Before a connected node becomes primary, its peer must agree, so that
 * two nodes promoted at the same moment never both succeed.  Returns 0
 * when the node may go ahead (granted, or no peer connected).
 */
int drbd_request_promotion(BDRVDrbdState *s, Error **errp)
{
    DrbdPeer *peer = drbd_peer_get(s);
    QEMUTimer *timer;
    bool timed_out = false;
    int reply;

    if (!peer) {
        return 0;
    }
    qemu_mutex_lock(&s->lock);
    s->promote_pending = true;
    s->promote_reply = -1;
    peer->running++;        /* for the sending coroutine */
    qemu_mutex_unlock(&s->lock);

    aio_co_enter(bdrv_get_aio_context(s->bs),
                 qemu_coroutine_create(drbd_send_state_req_co, peer));

    timer = aio_timer_new(qemu_get_aio_context(), QEMU_CLOCK_REALTIME,
                          SCALE_NS, drbd_timer_set_flag, &timed_out);
    timer_mod(timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
              s->ping_timeout_ns);
    AIO_WAIT_WHILE_UNLOCKED(NULL, qatomic_read(&s->promote_reply) < 0 &&
                            !qatomic_read(&peer->broken) && !timed_out);
    timer_free(timer);

    qemu_mutex_lock(&s->lock);
    reply = s->promote_reply;
    s->promote_pending = false;
    qemu_mutex_unlock(&s->lock);
    drbd_peer_put(peer);

    if (reply == DRBD_STATE_REPLY_GRANTED) {
        return 0;
    }
    if (reply == DRBD_STATE_REPLY_REFUSED) {
        error_setg(errp, "the peer refused: it is primary, or is being "
                   "promoted itself");
        return -EBUSY;
    }
    error_setg(errp, "the peer did not answer the promotion request%s",
               timed_out ? " in time" : ": the connection was lost");
    error_append_hint(errp, "Try again: a disconnected node can be "
                      "promoted on its own.\n");
    return -ETIMEDOUT;
}

/* Tell the peer our role and disk state, after a promotion or demotion */
void drbd_announce_role(BDRVDrbdState *s)
{
    DrbdPeer *peer = drbd_peer_get(s);

    if (peer) {
        aio_co_enter(bdrv_get_aio_context(s->bs),
                     qemu_coroutine_create(drbd_send_state_co, peer));
    }
}

static void coroutine_fn drbd_data_receiver(void *opaque)
{
    DrbdPeer *peer = opaque;
    BDRVDrbdState *s = peer->s;

    while (!peer->broken) {
        uint8_t *payload = NULL;
        Error *err = NULL;
        DrbdHeader h;
        DrbdDataPacket p;
        DrbdBlockAck ack;
        DrbdBarrier b;
        DrbdStatePacket st;
        int ret;

        ret = drbd_rx_packet(peer->data, &peer->data_rx, &h, &payload,
                             &err);
        if (ret < 0) {
            drbd_peer_fail(peer, "data channel: %s", error_get_pretty(err));
            error_free(err);
            break;
        }

        switch (h.cmd) {
        case DRBD_CMD_DATA:
        case DRBD_CMD_ZEROES:
        case DRBD_CMD_DISCARD:
        case DRBD_CMD_RS_DATA:
            ret = drbd_wire_get_data(h.cmd, payload, h.length, s->size, &p,
                                     &err);
            if (ret == 0) {
                /* the payload now belongs to the write */
                ret = drbd_peer_apply(peer, h.cmd, &p, payload, &err);
                payload = NULL;
            }
            break;
        case DRBD_CMD_BARRIER:
            ret = drbd_wire_get_barrier(h.cmd, payload, h.length, &b, &err);
            if (ret == 0) {
                ret = drbd_peer_barrier(peer, &b, &err);
            }
            break;
        case DRBD_CMD_OUT_OF_SYNC:
            ret = drbd_wire_get_block_ack(h.cmd, payload, h.length, s->size,
                                          &ack, &err);
            if (ret == 0) {
                ret = drbd_peer_out_of_sync(peer, &ack, &err);
            }
            break;
        case DRBD_CMD_RS_DONE:
            ret = drbd_peer_resync_done(peer, &err);
            break;
        case DRBD_CMD_STATE:
            ret = drbd_wire_get_state(payload, h.length, &st, &err);
            if (ret == 0) {
                ret = drbd_peer_state_changed(peer, &st, &err);
            }
            break;
        case DRBD_CMD_STATE_REQ:
            ret = drbd_wire_get_state(payload, h.length, &st, &err);
            if (ret == 0 && drbd_peer_state_request(peer, &st) < 0) {
                error_setg(&err, "could not answer a state request");
                ret = -EPIPE;
            }
            break;
        default:
            error_setg(&err, "%s packet on the data channel",
                       drbd_cmd_name(h.cmd));
            ret = -EINVAL;
        }
        g_free(payload);
        if (ret < 0) {
            drbd_peer_fail(peer, "data channel: %s", error_get_pretty(err));
            error_free(err);
            break;
        }
    }
    drbd_peer_put(peer);
}

/* Ping the peer every ping-interval; no answer in ping-timeout kills it */
static void coroutine_fn drbd_pinger(void *opaque)
{
    DrbdPeer *peer = opaque;
    BDRVDrbdState *s = peer->s;

    while (!peer->broken) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();

        qemu_co_sleep_ns_wakeable(&peer->ping_sleep, QEMU_CLOCK_REALTIME,
                                  s->ping_interval_ns);
        if (peer->broken) {
            break;
        }
        peer->ping_answered = false;
        drbd_wire_put_empty(pkt, DRBD_CMD_PING);
        if (drbd_send_meta(peer, pkt) < 0) {
            break;
        }
        qemu_co_sleep_ns_wakeable(&peer->ping_sleep, QEMU_CLOCK_REALTIME,
                                  s->ping_timeout_ns);
        if (!peer->broken && !peer->ping_answered) {
            drbd_peer_fail(peer, "the peer did not answer a ping in %" PRIu64
                           " ms", s->ping_timeout_ns / SCALE_MS);
        }
    }
    drbd_peer_put(peer);
}

/*
 * Start a coroutine of the connection; it holds a reference to the peer
 * and drops it with drbd_peer_put() when it ends.  It runs in the
 * connection's AioContext (the caller's), not necessarily the node's: the
 * receiving side's bookkeeping then stays in one thread, and block I/O
 * may be issued from any.
 */
void drbd_peer_spawn(DrbdPeer *peer, CoroutineEntry *fn, void *opaque)
{
    qemu_mutex_lock(&peer->s->lock);
    peer->running++;
    qemu_mutex_unlock(&peer->s->lock);
    aio_co_enter(qemu_get_current_aio_context(),
                 qemu_coroutine_create(fn, opaque));
}

static void coroutine_fn drbd_resync_co(void *opaque)
{
    DrbdPeer *peer = opaque;

    drbd_resync_run(peer);
    drbd_peer_put(peer);
}

/* Run an established connection until it breaks */
static void coroutine_fn drbd_peer_run(BDRVDrbdState *s, DrbdPeer *peer)
{
    bool new_generation;
    DrbdUuids u;
    bool sync_source, sync_target;

    qemu_mutex_lock(&s->lock);
    /*
     * From here on guest writes go to the peer.  What is marked now is
     * what the peer lacks (on a target: what we lack) - the handshake's
     * union plus what a primary wrote while it ran: a source, or a
     * primary, sends it
     */
    sync_target = peer->resync_bits &&
                  (peer->decision == DRBD_SYNC_TARGET ||
                   peer->decision == DRBD_SYNC_FULL_TARGET);
    sync_source = !sync_target && hbitmap_count(s->oos) &&
                  (peer->decision == DRBD_SYNC_SOURCE ||
                   peer->decision == DRBD_SYNC_FULL_SOURCE ||
                   s->role == DRBD_ROLE_PRIMARY);
    s->peer = peer;
    g_clear_pointer(&s->last_error, g_free);
    if (s->closing) {
        qemu_mutex_unlock(&s->lock);
        drbd_peer_fail(peer, "the node is closing");
        qemu_mutex_lock(&s->lock);
    }
    if (sync_target) {
        peer->sync_target = true;
        s->resync_total = hbitmap_count(s->oos);
        s->resync_done = 0;
    }
    qemu_mutex_unlock(&s->lock);

    drbd_set_state(s, -1, sync_source ? DRBD_CONN_STATE_SYNC_SOURCE :
                   sync_target ? DRBD_CONN_STATE_SYNC_TARGET :
                   DRBD_CONN_STATE_CONNECTED, -1, peer->role,
                   sync_source ? DRBD_DISK_STATE_INCONSISTENT : peer->disk,
                   "connected");

    drbd_peer_spawn(peer, drbd_meta_receiver, peer);
    drbd_peer_spawn(peer, drbd_data_receiver, peer);
    drbd_peer_spawn(peer, drbd_pinger, peer);
    if (sync_source) {
        drbd_peer_spawn(peer, drbd_resync_co, peer);
    }

    /* The last reference dropped after the break wakes us */
    qemu_mutex_lock(&s->lock);
    while (peer->running > 0 || !peer->broken) {
        qemu_mutex_unlock(&s->lock);
        qemu_coroutine_yield();
        qemu_mutex_lock(&s->lock);
    }
    s->peer = NULL;
    s->pe -= peer->resync_unacked;  /* their bits stay set: resent later */
    drbd_tl_connection_lost_locked(s);
    g_free(s->last_error);
    s->last_error = g_strdup(peer->broken_reason);
    /* A primary writes on without its peer: a new data generation */
    drbd_uuids_get_locked(s, &u);
    new_generation = drbd_uuid_peer_disk_lost(&u,
                                              s->role == DRBD_ROLE_PRIMARY ||
                                              s->md_primary_pending,
                                              drbd_fresh_uuid());
    drbd_uuids_set_locked(s, &u);
    qemu_mutex_unlock(&s->lock);
    if (new_generation) {
        drbd_md_sync_co(s);
    }
    drbd_set_state(s, -1, DRBD_CONN_STATE_WF_CONNECTION, -1,
                   DRBD_ROLE_UNKNOWN, DRBD_DISK_STATE_DUNKNOWN,
                   peer->broken_reason);
    drbd_peer_free(peer);
}

static void coroutine_fn drbd_conn_co(void *opaque)
{
    BDRVDrbdState *s = opaque;

    while (!s->closing) {
        Error *err = NULL;
        DrbdPeer *peer;

        if (s->connect_held) {
            /* After a split brain: stand alone until drbd-connect */
            drbd_set_state(s, -1, DRBD_CONN_STATE_STANDALONE, -1, -1, -1,
                           "split brain: waiting for drbd-connect");
            while (s->connect_held && !s->closing) {
                qemu_co_sleep_ns_wakeable(&s->conn_sleep,
                                          QEMU_CLOCK_REALTIME,
                                          10 * NANOSECONDS_PER_SECOND);
            }
            continue;
        }
        peer = drbd_establish(s, &err);

        if (peer) {
            drbd_peer_run(s, peer);
        } else {
            if (!s->closing) {
                drbd_note_error(s, err);
            } else {
                error_free(err);
            }
            drbd_set_state(s, -1, DRBD_CONN_STATE_WF_CONNECTION, -1, -1, -1,
                           NULL);
        }
        if (!s->closing && s->connects && !s->connect_held) {
            qemu_co_sleep_ns_wakeable(&s->conn_sleep, QEMU_CLOCK_REALTIME,
                                      s->connect_interval_ns);
        }
    }
    s->conn_co = NULL;
    aio_wait_kick();
}

int drbd_conn_start(BDRVDrbdState *s, Error **errp)
{
    if (s->listen_addr && (!s->peer_addr || !s->connects)) {
        s->listener = qio_channel_socket_new();
        qio_channel_set_name(QIO_CHANNEL(s->listener), "drbd-listener");
        if (qio_channel_socket_listen_sync(s->listener, s->listen_addr, 1,
                                           errp) < 0) {
            g_clear_pointer(&s->listener, object_unref);
            return -EIO;
        }
        drbd_setup_channel(s->listener, "drbd-listener");
    }

    s->closing = false;
    drbd_set_state(s, -1, DRBD_CONN_STATE_WF_CONNECTION, -1, -1, -1, NULL);
    s->conn_co = qemu_coroutine_create(drbd_conn_co, s);
    aio_co_enter(bdrv_get_aio_context(s->bs), s->conn_co);
    return 0;
}

/*
 * drbd-connect: leave the standalone state a split brain left, trying to
 * connect again; with @discard_my_data, this node's changes are the ones
 * to lose if the handshake finds a split brain again
 */
void drbd_connect_again(BDRVDrbdState *s, bool discard_my_data)
{
    qemu_mutex_lock(&s->lock);
    s->discard_my_data = discard_my_data;
    s->connect_held = false;
    qemu_mutex_unlock(&s->lock);
    qemu_co_sleep_wake(&s->conn_sleep);
}

/* Stop the connection manager and wait until it and its peer are gone */
void drbd_conn_stop(BDRVDrbdState *s)
{
    Object *hs_data = NULL, *hs_meta = NULL;

    if (!s->conn_co) {
        return;
    }
    s->closing = true;
    if (s->peer) {
        drbd_peer_fail(s->peer, "the node is closing");
    }
    if (s->establishing) {
        qio_channel_shutdown(QIO_CHANNEL(s->establishing),
                             QIO_CHANNEL_SHUTDOWN_BOTH, NULL);
    }
    qemu_mutex_lock(&s->lock);
    if (s->handshaking) {
        hs_data = object_ref(OBJECT(s->handshaking->data));
        hs_meta = object_ref(OBJECT(s->handshaking->meta));
    }
    qemu_mutex_unlock(&s->lock);
    if (hs_data) {
        qio_channel_shutdown(QIO_CHANNEL(hs_data), QIO_CHANNEL_SHUTDOWN_BOTH,
                             NULL);
        qio_channel_shutdown(QIO_CHANNEL(hs_meta), QIO_CHANNEL_SHUTDOWN_BOTH,
                             NULL);
        object_unref(hs_data);
        object_unref(hs_meta);
    }
    if (s->listener) {
        qio_channel_wake_read(QIO_CHANNEL(s->listener));
    }
    qemu_co_sleep_wake(&s->conn_sleep);
    qemu_co_enter_all(&s->drain_queue, NULL);

    AIO_WAIT_WHILE_UNLOCKED(NULL, s->conn_co != NULL);
    g_clear_pointer(&s->listener, object_unref);
}
