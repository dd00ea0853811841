/*
 * DRBD-style replication: the connection manager
 *
 * One connection manager coroutine per node establishes the connection
 * (connecting, or accepting), has the handshake decide, runs the
 * connection, and after a failure tears it down and starts again every
 * connect-interval.  A running connection has three coroutines: one
 * receiver per channel and a pinger; a sync source has a fourth that
 * sends the resync.
 *
 * The connect itself runs in a thread (QEMU's NBD client connection,
 * without NBD negotiation), so that a peer that does not answer blocks
 * no event loop.  Everything else runs in the node's AioContext and
 * follows it when the node moves (drbd_conn_set_context()).  Guest
 * requests may come from any thread; they use only the send locks and
 * the node's lock.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/aio-wait.h"
#include "io/channel-tls.h"
#include "qapi/error.h"
#include "qemu/error-report.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "qemu/yank.h"
#include "trace.h"

#include "drbd-int.h"

/* The listen backlog: connections the kernel holds until we accept */
#define DRBD_LISTEN_BACKLOG     32

/*
 * The pause between connect attempts that found no one listening, for
 * DRBD_RETRY_FAST_WINDOW_NS after the open and after a connection that
 * was up broke, when shorter than connect-interval
 */
#define DRBD_RETRY_FAST_NS          (50 * SCALE_MS)
#define DRBD_RETRY_FAST_WINDOW_NS   (5 * NANOSECONDS_PER_SECOND)

/* The channel in its HELLO exchange, for drbd_conn_stop() to cut short */
static void drbd_set_establishing(DrbdConnection *conn, QIOChannel *ioc)
{
    BDRVDrbdState *s = conn->s;

    qemu_mutex_lock(&s->lock);
    conn->establishing = ioc;
    qemu_mutex_unlock(&s->lock);
}

typedef struct DrbdConnectWait {
    DrbdConnection *conn;
    bool timed_out;
} DrbdConnectWait;

static void drbd_connect_timeout_cb(void *opaque)
{
    DrbdConnectWait *w = opaque;

    w->timed_out = true;
    nbd_co_establish_connection_cancel(w->conn->connector);
}

/*
 * Connect one channel in the connector's thread, then exchange HELLOs on
 * it and secure it (secure.c).  The wait ends after ping-timeout, or
 * early when the node closes or moves; the thread may go on connecting,
 * and the next attempt takes its result.
 */
static QIOChannel *coroutine_fn
drbd_connect_channel(DrbdConnection *conn, bool meta, Error **errp)
{
    ERRP_GUARD();
    DrbdConnectWait w = { .conn = conn };
    DrbdDeadline dl = { 0 };
    DrbdHello hello;
    QEMUTimer *timer;
    QIOChannel *ioc;
    int ret;

    timer = aio_timer_new(qemu_get_current_aio_context(), QEMU_CLOCK_REALTIME,
                          SCALE_NS, drbd_connect_timeout_cb, &w);
    timer_mod(timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
              conn->ping_timeout_ns);
    ioc = nbd_co_establish_connection(conn->connector, NULL, true, errp);
    timer_free(timer);
    if (!ioc) {
        if (w.timed_out) {
            error_free(*errp);
            *errp = NULL;
            error_setg(errp, "connecting to the peer: no answer in %" PRIu64
                       " ms", conn->ping_timeout_ns / SCALE_MS);
        } else {
            error_prepend(errp, "connecting to the peer: ");
        }
        return NULL;
    }
    drbd_setup_channel(ioc, meta ? "drbd-meta" : "drbd-data");
    drbd_set_establishing(conn, ioc);
    drbd_deadline_arm(&dl, ioc, conn->ping_timeout_ns);
    ret = drbd_send_hello(conn, ioc, meta, errp);
    if (ret == 0) {
        /* The peer's HELLO, or why it refuses ours */
        ret = drbd_recv_hello_answer(conn, ioc, &hello, errp);
    }
    if (ret == 0) {
        ret = drbd_check_hello(conn, &hello, errp);
    }
    if (ret == 0) {
        ret = drbd_secure_check_hello(conn, &hello, errp);
    }
    if (ret == 0) {
        /* may replace ioc with TLS over it; the deadline cuts the socket */
        ret = drbd_secure_channel(conn, &ioc, true, errp);
    }
    drbd_deadline_disarm(&dl);
    drbd_set_establishing(conn, NULL);
    if (ret < 0) {
        if (dl.expired) {
            error_free(*errp);
            *errp = NULL;
            error_setg(errp, "the peer did not answer the handshake");
        }
        object_unref(OBJECT(ioc));
        return NULL;
    }
    return ioc;
}

/*
 * A TCP listener hands over a connection only once it carries data (or
 * after about @ping-timeout): the peer's HELLO comes with its connection,
 * so that connections that say nothing never take a candidate's place.
 * Best effort: without TCP_DEFER_ACCEPT, the eviction below still keeps
 * the peer from being locked out by idle ones.
 */
static void drbd_defer_accept(DrbdConnection *conn)
{
#ifdef TCP_DEFER_ACCEPT
    BDRVDrbdState *s = conn->s;
    int secs = MAX(1, conn->ping_timeout_ns / NANOSECONDS_PER_SECOND);

    if (conn->listen_addr->type == SOCKET_ADDRESS_TYPE_INET &&
        setsockopt(conn->listener->fd, IPPROTO_TCP, TCP_DEFER_ACCEPT,
                   &secs, sizeof(secs)) < 0) {
        trace_drbd_defer_accept_failed(s->bs, errno);
    }
#endif
}

/*
 * Accepted connections whose HELLO is awaited at once: idle or slow
 * candidates do not keep the real peer out while they time out.  With
 * all slots taken, a new connection takes the slot of the oldest
 * candidate that has not sent a valid HELLO (or of the oldest one).
 */
#define DRBD_MAX_CANDIDATES     16

/*
 * Accepts in a row before the acceptor lets the rest of its context run
 * (the candidates whose HELLO arrived meanwhile among them)
 */
#define DRBD_ACCEPT_BURST       4

/*
 * The acceptor and its candidates: one coroutine per accepted connection
 * exchanges HELLOs with it, and hands a channel that passed to the
 * acceptor.  All of them run in the acceptor's AioContext (the acceptor
 * ends them before it follows the node elsewhere), so nothing here needs
 * a lock.
 */
typedef struct DrbdAccept DrbdAccept;

typedef struct DrbdCandidate {
    DrbdAccept *acc;
    QIOChannelSocket *sioc;
    uint64_t seq;               /* the order it was accepted in */
    unsigned slot;
    bool hello_ok;              /* its HELLO passed: likely the peer */
    bool evicted;               /* its slot went to a newer connection */
} DrbdCandidate;

struct DrbdAccept {
    DrbdConnection *conn;
    QIOChannel *data;
    QIOChannel *meta;
    DrbdCandidate *cand[DRBD_MAX_CANDIDATES];   /* HELLO awaited */
    unsigned ncand;             /* slots taken */
    unsigned running;           /* candidate coroutines, evicted included */
    Coroutine *waiter;          /* the acceptor, waiting for them to end */
    uint64_t seq;
};

static void coroutine_fn drbd_candidate_co(void *opaque)
{
    DrbdCandidate *c = opaque;
    DrbdAccept *acc = c->acc;
    DrbdConnection *conn = acc->conn;
    QIOChannel *ioc = QIO_CHANNEL(c->sioc);
    Error *local_err = NULL;
    DrbdDeadline dl = { 0 };
    DrbdHello hello = { 0 };
    bool is_meta, own = false;
    int ret;

    drbd_deadline_arm(&dl, ioc, conn->ping_timeout_ns);
    ret = drbd_recv_hello(ioc, &hello, &local_err);
    if (ret == 0) {
        /*
         * A stranger gets no HELLO; one that speaks version 7, a REFUSE
         * that says why, so that both nodes know what to fix
         */
        ret = drbd_check_hello(conn, &hello, &local_err);
        if (ret < 0) {
            drbd_send_refuse(conn, ioc, &hello,
                             drbd_judge_hello(conn, &hello, NULL));
        }
    }
    c->hello_ok = ret == 0;
    is_meta = hello.flags & DRBD_HELLO_META_CHANNEL;
    if (ret == 0) {
        /*
         * Ours goes out before we judge what theirs asks for, so that
         * where the two differ (TLS, secret) the peer can say so too
         */
        ret = drbd_send_hello(conn, ioc, is_meta, &local_err);
    }
    if (ret == 0) {
        ret = drbd_secure_check_hello(conn, &hello, &local_err);
    }
    if (ret == 0) {
        /*
         * A reference of our own, which the channel takes over if it
         * passes; may replace ioc with TLS over it (the deadline cuts the
         * socket)
         */
        object_ref(OBJECT(ioc));
        own = true;
        ret = drbd_secure_channel(conn, &ioc, false, &local_err);
    }
    drbd_deadline_disarm(&dl);
    if (own && (ret < 0 || c->evicted)) {
        object_unref(OBJECT(ioc));
    }

    if (c->evicted) {
        /* Its slot is another's now; its socket was shut down */
        error_free(local_err);
    } else {
        acc->cand[c->slot] = NULL;
        acc->ncand--;
        if (ret < 0) {
            if (dl.expired) {
                error_free(local_err);
                local_err = NULL;
                error_setg(&local_err, "the peer did not finish the "
                           "handshake in time");
            }
            /* A bad candidate does not stop us listening */
            drbd_conn_note_error(conn, local_err);
        } else if (is_meta) {
            /* A second channel of the same kind replaces the first */
            g_clear_pointer(&acc->meta, object_unref);
            acc->meta = ioc;
        } else {
            g_clear_pointer(&acc->data, object_unref);
            acc->data = ioc;
        }
    }
    object_unref(OBJECT(c->sioc));
    acc->running--;
    g_free(c);
    /* The acceptor looks again, or counts those left */
    if (acc->waiter) {
        Coroutine *co = acc->waiter;

        acc->waiter = NULL;
        aio_co_wake(co);
    } else {
        qio_channel_wake_read(QIO_CHANNEL(conn->listener));
    }
}

/* Cut every candidate short: each ends at its next read */
static void drbd_cut_candidates(DrbdAccept *acc)
{
    for (unsigned i = 0; i < DRBD_MAX_CANDIDATES; i++) {
        if (acc->cand[i]) {
            qio_channel_shutdown(QIO_CHANNEL(acc->cand[i]->sioc),
                                 QIO_CHANNEL_SHUTDOWN_BOTH, NULL);
        }
    }
}

/*
 * All slots are taken: free the one of the oldest candidate that has
 * not passed its HELLO, or else of the oldest, and return it
 */
static unsigned drbd_evict_candidate(DrbdAccept *acc)
{
    DrbdCandidate *victim = NULL;

    for (unsigned i = 0; i < DRBD_MAX_CANDIDATES; i++) {
        DrbdCandidate *c = acc->cand[i];

        if (!victim || (victim->hello_ok && !c->hello_ok) ||
            (victim->hello_ok == c->hello_ok && c->seq < victim->seq)) {
            victim = c;
        }
    }
    trace_drbd_candidate_evicted(acc->conn->s->bs, victim->seq,
                                 victim->hello_ok);
    victim->evicted = true;
    qio_channel_shutdown(QIO_CHANNEL(victim->sioc), QIO_CHANNEL_SHUTDOWN_BOTH,
                         NULL);
    acc->cand[victim->slot] = NULL;
    acc->ncand--;
    return victim->slot;
}

/*
 * End every candidate, and wait for the last: they hold a pointer to
 * @acc.  New connections wait meanwhile (a flood of them must not keep
 * the acceptor from ever seeing the last candidate go).
 */
static void coroutine_fn drbd_end_candidates(DrbdAccept *acc)
{
    drbd_cut_candidates(acc);
    while (acc->running) {
        acc->waiter = qemu_coroutine_self();
        qemu_coroutine_yield();
    }
}

/* Between two waits: follow the node to its new context, if it moved */
static void coroutine_fn drbd_accept_follow(DrbdConnection *conn,
                                            DrbdAccept *acc)
{
    BDRVDrbdState *s = conn->s;
    bool moving;

    qemu_mutex_lock(&s->lock);
    moving = s->ctx != qemu_get_current_aio_context();
    qemu_mutex_unlock(&s->lock);
    if (moving) {
        /* The candidates would stay behind: end them first */
        drbd_end_candidates(acc);
    }
    drbd_co_rehome(s);
}

/* Accept connections until we hold a data and a meta channel */
static int coroutine_fn drbd_accept_channels(DrbdConnection *conn,
                                             QIOChannel **data,
                                             QIOChannel **meta,
                                             Error **errp)
{
    BDRVDrbdState *s = conn->s;
    DrbdAccept acc = { .conn = conn };
    unsigned burst = 0;

    while (!qatomic_read(&s->closing) && !(acc.data && acc.meta)) {
        QIOChannelSocket *sioc;
        DrbdCandidate *c;
        unsigned slot;

        if (burst == DRBD_ACCEPT_BURST) {
            /* A flood of connections: let the rest of the context run */
            burst = 0;
            aio_co_schedule(qemu_get_current_aio_context(),
                            qemu_coroutine_self());
            qemu_coroutine_yield();
            drbd_accept_follow(conn, &acc);
            continue;
        }
        sioc = qio_channel_socket_accept(conn->listener, NULL);
        if (!sioc) {
            burst = 0;
            qio_channel_yield(QIO_CHANNEL(conn->listener), G_IO_IN);
            drbd_accept_follow(conn, &acc);
            continue;
        }
        burst++;
        if (acc.ncand == DRBD_MAX_CANDIDATES) {
            slot = drbd_evict_candidate(&acc);
        } else {
            for (slot = 0; acc.cand[slot]; slot++) {
                /* ncand < DRBD_MAX_CANDIDATES: a free slot exists */
            }
        }
        drbd_setup_channel(QIO_CHANNEL(sioc), "drbd-accepted");
        c = g_new0(DrbdCandidate, 1);
        c->acc = &acc;
        c->sioc = sioc;
        c->seq = acc.seq++;
        c->slot = slot;
        acc.cand[slot] = c;
        acc.ncand++;
        acc.running++;
        /*
         * Now, until it waits: a HELLO already here is read before the
         * next connection is accepted, so that a flood of connections
         * cannot push the peer's out before it is looked at
         */
        qemu_coroutine_enter(qemu_coroutine_create(drbd_candidate_co, c));
    }
    drbd_end_candidates(&acc);

    if (qatomic_read(&s->closing) || !acc.data || !acc.meta) {
        g_clear_pointer(&acc.data, object_unref);
        g_clear_pointer(&acc.meta, object_unref);
        error_setg(errp, "closing");
        return -ECANCELED;
    }
    *data = acc.data;
    *meta = acc.meta;
    return 0;
}

/*
 * A connection to a node that connects itself: the peer connects too,
 * so the two configurations do not fit (most often both nodes have the
 * same node-id, and each connects to the other, which does not listen).
 * Read its HELLO, and tell both nodes' operators why.
 */
static void coroutine_fn drbd_refuse_stray(DrbdConnection *conn,
                                           QIOChannelSocket *sioc)
{
    BDRVDrbdState *s = conn->s;
    QIOChannel *ioc = QIO_CHANNEL(sioc);
    Error *err = NULL;
    DrbdDeadline dl = { 0 };
    DrbdHello hello;
    uint32_t reason = 0;

    drbd_setup_channel(ioc, "drbd-stray");
    qemu_mutex_lock(&s->lock);
    conn->stray = ioc;
    qemu_mutex_unlock(&s->lock);
    drbd_deadline_arm(&dl, ioc, conn->ping_timeout_ns);
    if (drbd_recv_hello(ioc, &hello, &err) == 0) {
        reason = drbd_judge_hello(conn, &hello, &err);
        if (!reason) {
            /* Its HELLO fits: it takes this node for the listening one */
            reason = DRBD_REFUSE_NODE_ID;
            error_setg(&err, "the peer (node %" PRIu32 ") connects to this "
                       "node, which connects to it: its peer-node-id is "
                       "not this node's node-id %d: set each node's "
                       "peer-node-id to the other node's id",
                       hello.node_id, s->node_id);
        }
        trace_drbd_stray_refused(s->bs, reason);
        drbd_send_refuse(conn, ioc, &hello, reason);
    }
    drbd_deadline_disarm(&dl);
    qemu_mutex_lock(&s->lock);
    conn->stray = NULL;
    qemu_mutex_unlock(&s->lock);
    if (reason && !qatomic_read(&s->closing)) {
        drbd_conn_note_error(conn, err);
    } else {
        /* Not a drbd peer, or gone: nothing to tell */
        error_free(err);
    }
}

/*
 * A node that connects, and has a listen address too, listens for a
 * peer that connects as well (drbd_refuse_stray()), one at a time
 */
static void coroutine_fn drbd_stray_co(void *opaque)
{
    DrbdConnection *conn = opaque;
    BDRVDrbdState *s = conn->s;

    while (!qatomic_read(&s->closing)) {
        QIOChannelSocket *sioc;

        drbd_co_rehome(s);
        sioc = qio_channel_socket_accept(conn->listener, NULL);
        if (!sioc) {
            qio_channel_yield(QIO_CHANNEL(conn->listener), G_IO_IN);
            continue;
        }
        drbd_refuse_stray(conn, sioc);
        object_unref(OBJECT(sioc));
    }
    qatomic_set(&conn->stray_co, NULL);
    aio_wait_kick();
}

/* Establish a connection: the two channels and the handshake */
static DrbdPeer *coroutine_fn drbd_establish(DrbdConnection *conn,
                                             bool *reached, Error **errp)
{
    ERRP_GUARD();
    BDRVDrbdState *s = conn->s;
    QIOChannel *data = NULL, *meta = NULL;
    DrbdDeadline dl = { 0 };
    DrbdPeer *peer;
    int ret;

    *reached = false;
    if (conn->connects) {
        data = drbd_connect_channel(conn, false, errp);
        if (!data) {
            return NULL;
        }
        meta = drbd_connect_channel(conn, true, errp);
        if (!meta) {
            object_unref(OBJECT(data));
            return NULL;
        }
    } else if (drbd_accept_channels(conn, &data, &meta, errp) < 0) {
        return NULL;
    }

    *reached = true;
    peer = drbd_peer_new(conn, data, meta);
    drbd_set_state(s, conn, -1, DRBD_CONN_STATE_WF_REPORT_PARAMS, -1, -1, -1,
                   "connected, handshake");
    qemu_mutex_lock(&s->lock);
    conn->handshaking = peer;      /* for drbd_conn_stop() to cut it short */
    qemu_mutex_unlock(&s->lock);
    /* A peer that stops answering does not hold the handshake forever */
    drbd_deadline_arm(&dl, peer->data, conn->ping_timeout_ns);
    ret = qatomic_read(&s->closing) ? -ECANCELED :
          drbd_exchange_params(peer, &dl, errp);
    drbd_deadline_disarm(&dl);
    qemu_mutex_lock(&s->lock);
    conn->handshaking = NULL;
    if (ret < 0) {
        conn->hs_peer_primary = false;
    }
    qemu_mutex_unlock(&s->lock);
    if (ret < 0) {
        if (dl.expired) {
            error_free(*errp);
            *errp = NULL;
            error_setg(errp, "the peer did not go on with the handshake "
                       "within ping-timeout");
        } else if (qatomic_read(&s->closing) && !*errp) {
            error_setg(errp, "closing");
        }
        drbd_peer_free(peer);
        return NULL;
    }
    return peer;
}

/*
 * A primary lost a peer, and the writes that waited for it complete now
 * without it.  Before the guest sees one succeed, @opaque (another peer,
 * connected) shows that it knows the data generation that this starts:
 * else it could grant the promotion of a node that lacks those writes
 * (one that lost the primary too, and whose generation it sees as its
 * own), whose resync would then overwrite them on it.  The generation is
 * started here, where no write started it yet, and announced; then the
 * peer answers a ping (drbd_co_gen_confirm()), or it is lost itself,
 * and the writes then see the quorum as it is (drbd_co_write_common()).
 * Each loss asks each peer once: a later loss, a later ping.  Runs with
 * a reference to the peer, in the node's context.
 */
static void coroutine_fn drbd_loss_confirm_co(void *opaque)
{
    DrbdPeer *peer = opaque;

    bdrv_graph_co_rdlock();
    drbd_co_generation_due(peer->s);
    bdrv_graph_co_rdunlock();
    drbd_co_gen_confirm(peer, "another peer's loss");
    drbd_peer_put(peer);
}

/* Run an established connection until it breaks */
static void coroutine_fn drbd_peer_run(DrbdConnection *conn, DrbdPeer *peer)
{
    BDRVDrbdState *s = conn->s;
    DrbdPeer *others[DRBD_PEERS_MAX] = { NULL };
    bool announce;
    bool sync_source, sync_target, peer_diskless;
    unsigned i;

    qemu_mutex_lock(&s->lock);
    /*
     * From here on guest writes go to the peer.  What is marked now is
     * what the peer lacks (on a target: what we lack) - the handshake's
     * union plus what a primary wrote while it ran: a source, or a
     * primary, sends it
     */
    sync_target = peer->resync_bits && drbd_sync_is_target(peer->decision);
    peer_diskless = drbd_disk_detached(peer->disk);
    sync_source = !sync_target && hbitmap_count(conn->oos) && !s->detached &&
                  !peer_diskless &&
                  (drbd_sync_is_source(peer->decision) ||
                   s->role == DRBD_ROLE_PRIMARY);
    conn->peer = peer;
    conn->lost_primary = false;
    conn->seq_gen++;
    conn->tx_seq = 0;
    conn->done_seq = 0;
    g_clear_pointer(&s->last_error, g_free);
    g_clear_pointer(&conn->last_error, g_free);
    conn->ever_connected = true;
    if (qatomic_read(&s->closing)) {
        qemu_mutex_unlock(&s->lock);
        drbd_peer_fail(peer, "the node is closing");
        qemu_mutex_lock(&s->lock);
    } else if ((s->role == DRBD_ROLE_PRIMARY) != peer->hs_primary) {
        /*
         * Promoted or demoted after the handshake decided, before the
         * peer was here to be told (drbd_announce_role() found none)
         */
        qemu_mutex_unlock(&s->lock);
        drbd_peer_fail(peer, "the node's role, disk or UUIDs changed at "
                       "the end of the handshake; connecting again");
        qemu_mutex_lock(&s->lock);
    }
    if (sync_target) {
        peer->sync_target = true;
        conn->resync_total = hbitmap_count(conn->oos);
        conn->resync_done = 0;
        drbd_resync_marks_start_locked(conn);
    }
    qemu_mutex_unlock(&s->lock);

    if (peer_diskless) {
        /* It serves as a client, and its disk comes back resynced */
        drbd_tl_peer_disk_gone(peer, peer->role == DRBD_ROLE_PRIMARY);
    }
    drbd_set_state(s, conn, -1,
                   sync_source ? DRBD_CONN_STATE_SYNC_SOURCE :
                   sync_target ? DRBD_CONN_STATE_SYNC_TARGET :
                   DRBD_CONN_STATE_CONNECTED, -1, peer->role,
                   sync_source ? DRBD_DISK_STATE_INCONSISTENT : peer->disk,
                   "connected");
    /* peer_role says it now, and follows the peer's role changes */
    qemu_mutex_lock(&s->lock);
    conn->hs_peer_primary = false;
    qemu_mutex_unlock(&s->lock);

    drbd_peer_spawn(peer, drbd_meta_receiver, peer);
    drbd_peer_spawn(peer, drbd_data_receiver, peer);
    drbd_peer_spawn(peer, drbd_pinger, peer);
    if (sync_source) {
        drbd_resync_start(peer);
    }
    /*
     * A generation started between the handshake and now was announced
     * to the peers connected then: this one is told too
     */
    qemu_mutex_lock(&s->lock);
    announce = s->role == DRBD_ROLE_PRIMARY &&
               ((s->md.sb.uuid_current ^ peer->hs_current) &
                ~DRBD_UUID_PRIMARY_FLAG);
    qemu_mutex_unlock(&s->lock);
    if (announce) {
        drbd_announce_new_uuid(peer->s);
    }

    /* The last reference dropped after the break wakes us */
    qemu_mutex_lock(&s->lock);
    while (peer->running > 0 || !qatomic_read(&peer->broken)) {
        peer->teardown_waiter = qemu_coroutine_self();
        qemu_mutex_unlock(&s->lock);
        qemu_coroutine_yield();
        qemu_mutex_lock(&s->lock);
    }
    conn->peer = NULL;
    conn->hs_peer_primary = false;
    /*
     * The peer no longer counts for the quorum before the writes it held
     * up complete: a write that completes now sees the quorum as it is
     */
    drbd_quorum_update_locked(s);
    /* ... and so do those that waited for it to confirm another's loss */
    drbd_gen_confirmed_locked(peer, UINT_MAX);
    conn->lost_primary = conn->peer_role == DRBD_ROLE_PRIMARY;
    if (conn->lost_primary && s->nr_conns > 1) {
        /* Its last writes may have reached some survivors only */
        drbd_recent_mark_locked(s, conn);
    }
    /* Unacked resync chunks: their bits stay set, resent later */
    qatomic_sub(&conn->pe, g_hash_table_size(peer->resync_chunks));
    drbd_tl_connection_lost_locked(conn);
    /*
     * A primary that writes on without its peer starts a new data
     * generation, at its first write (drbd_co_generation_due()), unless
     * its promotion broke the connection (it started one: the peer's
     * bitmap counts from the generation before it)
     */
    if ((s->role == DRBD_ROLE_PRIMARY || s->md.primary_pending) &&
        !conn->rehandshake) {
        qatomic_set(&s->gen_due, true);
        /* The writes it held up succeed once the others know (below) */
        for (i = 0; i < s->nr_conns && !qatomic_read(&s->closing); i++) {
            others[i] = s->conns[i] == conn ? NULL :
                        drbd_peer_get_locked(s->conns[i]);
            if (others[i]) {
                drbd_gen_confirm_ask_locked(others[i]);
            }
        }
    }
    /* A peer that may be promoted without us is to be fenced (state.c) */
    conn->fence_candidate = !conn->rehandshake &&
                            drbd_disk_may_be_current(conn->peer_disk);
    conn->rehandshake = false;
    qemu_mutex_unlock(&s->lock);
    if (!qatomic_read(&s->closing)) {
        drbd_note_reason(s, "connection to the peer lost: ",
                         peer->broken_reason);
    }
    drbd_set_state(s, conn, -1, DRBD_CONN_STATE_WF_CONNECTION, -1,
                   DRBD_ROLE_UNKNOWN, DRBD_DISK_STATE_DUNKNOWN,
                   peer->broken_reason);
    drbd_fence_peers(s);
    for (i = 0; i < s->nr_conns; i++) {
        if (others[i]) {
            drbd_peer_spawn(others[i], drbd_loss_confirm_co, others[i]);
            drbd_peer_put(others[i]);
        }
    }
    drbd_peer_free(peer);
}

/* A generation due, started in the node's context (@opaque: a peer) */
static void coroutine_fn drbd_generation_due_co(void *opaque)
{
    DrbdPeer *peer = opaque;

    bdrv_graph_co_rdlock();
    drbd_co_generation_due(peer->s);
    bdrv_graph_co_rdunlock();
    drbd_peer_put(peer);
}

void drbd_detached_new_generation(BDRVDrbdState *s)
{
    DrbdPeer *peer = NULL;
    bool due;
    unsigned i;

    qemu_mutex_lock(&s->lock);
    due = s->detached && !qatomic_read(&s->closing) &&
          (s->role == DRBD_ROLE_PRIMARY || s->md.primary_pending);
    if (due) {
        qatomic_set(&s->gen_due, due);
        for (i = 0; i < s->nr_conns && !peer; i++) {
            peer = drbd_peer_get_locked(s->conns[i]);
        }
    }
    qemu_mutex_unlock(&s->lock);
    trace_drbd_detached_new_generation(s->bs, peer != NULL);
    if (peer) {
        /* No peer: the next write starts it, and fails without one */
        drbd_peer_spawn(peer, drbd_generation_due_co, peer);
        drbd_peer_put(peer);
    }
}

void coroutine_fn GRAPH_RDLOCK drbd_co_generation_due(BDRVDrbdState *s)
{
    bool start;

    if (!qatomic_read(&s->gen_due) && !qatomic_read(&s->gen_busy)) {
        return;
    }
    qemu_co_mutex_lock(&s->gen_lock);
    qemu_mutex_lock(&s->lock);
    start = s->gen_due && (s->role == DRBD_ROLE_PRIMARY ||
                           s->md.primary_pending);
    qatomic_set(&s->gen_due, false);
    if (start) {
        drbd_new_generation_locked(s, true, true);
        qatomic_set(&s->gen_busy, true);
    }
    qemu_mutex_unlock(&s->lock);
    if (start) {
        /*
         * On disk before a write of the new generation is (a guest
         * request's: through no drain gate).  A failure is the disk's,
         * which its on-io-error policy answers, as the write's would be.
         */
        drbd_md_sync_in_request(s, false);
        drbd_announce_new_uuid(s);
        qatomic_set(&s->gen_busy, false);
    }
    qemu_co_mutex_unlock(&s->gen_lock);
}

/* Options that a reopen gave, taken or dropped: free them */
void drbd_conn_options_free(DrbdConnection *next)
{
    if (next) {
        drbd_secure_close(next);
        drbd_conn_free(next);
    }
}

#define DRBD_SWAP(a, b) \
    do { __typeof__(a) tmp_ = (a); (a) = (b); (b) = tmp_; } while (0)

/*
 * Take the options that a reopen changed (drbd_conn_adjust()), between two
 * connections: no peer runs, and nothing else reads the handshake's and
 * the peer's options
 */
static void drbd_conn_take_options(DrbdConnection *conn)
{
    BDRVDrbdState *s = conn->s;
    DrbdConnection *next;

    qemu_mutex_lock(&s->lock);
    next = conn->next_options;
    conn->next_options = NULL;
    if (next) {
        assert(!conn->peer);
        conn->protocol = next->protocol;
        conn->ping_interval_ns = next->ping_interval_ns;
        conn->ping_timeout_ns = next->ping_timeout_ns;
        conn->max_epoch_size = next->max_epoch_size;
        conn->max_buffers = next->max_buffers;
        conn->sb_cfg = next->sb_cfg;
        conn->integrity = next->integrity;
        conn->verify_alg = next->verify_alg;
        conn->csums_alg = next->csums_alg;
        conn->auth_digest = next->auth_digest;
        /* The secrets change hands: the old ones go with @next */
        DRBD_SWAP(conn->tls_creds, next->tls_creds);
        DRBD_SWAP(conn->tls_authz, next->tls_authz);
        DRBD_SWAP(conn->tls_hostname, next->tls_hostname);
        DRBD_SWAP(conn->auth_key, next->auth_key);
        DRBD_SWAP(conn->auth_key_len, next->auth_key_len);
    }
    qemu_mutex_unlock(&s->lock);
    if (next) {
        trace_drbd_conn_options_taken(s, conn->peer_node_id);
        drbd_conn_options_free(next);
    }
}

/*
 * The pause after a failed connection attempt at @now: connect-interval,
 * but DRBD_RETRY_FAST_NS (if shorter) until @fast_until, the end of a
 * window after the open and after a connection that was up broke.  Only
 * one node of a pair connects: a restarted peer that listens cannot make
 * itself known, and is found this much sooner, while a peer that stays
 * away costs a connect attempt per DRBD_RETRY_FAST_NS for a few seconds.
 * Only the connecting node's pause matters; a listening node's attempt
 * is its wait for the peer.
 */
static int64_t drbd_retry_pause(int64_t interval, int64_t now,
                                int64_t fast_until)
{
    return now < fast_until ? MIN(interval, DRBD_RETRY_FAST_NS) : interval;
}

static void coroutine_fn drbd_conn_co(void *opaque)
{
    DrbdConnection *conn = opaque;
    BDRVDrbdState *s = conn->s;
    bool was_again_now = false;
    /* Until when a failed attempt is tried again after DRBD_RETRY_FAST_NS */
    int64_t fast_until = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                         DRBD_RETRY_FAST_WINDOW_NS;

    while (!qatomic_read(&s->closing)) {
        Error *err = NULL;
        DrbdPeer *peer;
        bool again_now = false, reached;

        drbd_co_rehome(s);
        drbd_conn_take_options(conn);
        if (conn->connect_held) {
            /* After a split brain: stand alone until drbd-connect */
            drbd_set_state(s, conn, -1, DRBD_CONN_STATE_STANDALONE, -1, -1, -1,
                           conn->held_reason);
            while (conn->connect_held && !qatomic_read(&s->closing)) {
                drbd_co_sleep(s, &conn->conn_sleep,
                              10 * NANOSECONDS_PER_SECOND);
                drbd_co_rehome(s);
            }
            continue;
        }
        peer = drbd_establish(conn, &reached, &err);

        if (peer) {
            int64_t up = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

            drbd_peer_run(conn, peer);
            /*
             * As DRBD: a connection that was up is tried again at once
             * (a node invalidated, a verify's resync, a peer restarted);
             * connect-interval is the pause between failed attempts.
             * Not twice in a row for connections that broke at once, or
             * a peer that drops every connection would have us loop.
             */
            again_now = !was_again_now ||
                        qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - up >=
                        conn->connect_interval_ns;
            fast_until = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                         DRBD_RETRY_FAST_WINDOW_NS;
        } else {
            /* A handshake that failed says why, as a lost connection does */
            drbd_set_state(s, conn, -1, DRBD_CONN_STATE_WF_CONNECTION, -1, -1,
                           -1, err ? error_get_pretty(err) : NULL);
            if (!qatomic_read(&s->closing)) {
                drbd_conn_note_error(conn, err);
            } else {
                error_free(err);
            }
        }
        was_again_now = again_now;
        if (!qatomic_read(&s->closing) && conn->connects &&
            !conn->connect_held && !again_now) {
            int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
            /* A peer that was there but refused is not pressed faster */
            int64_t deadline = now + drbd_retry_pause(conn->connect_interval_ns,
                                                      now, reached ? now :
                                                      fast_until);

            /* A move wakes the sleep early: sleep on at the new home */
            while (!qatomic_read(&s->closing) &&
                   (now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME)) <
                   deadline) {
                drbd_co_sleep(s, &conn->conn_sleep, deadline - now);
                drbd_co_rehome(s);
                if (conn->conn_sleep.stopped || !conn->connects ||
                    conn->connect_held) {
                    break;
                }
            }
        }
    }
    qatomic_set(&conn->conn_co, NULL);
    aio_wait_kick();
}

/*
 * Cut the connection, or the one being established, with @reason: its
 * channels are shut down and the manager sees it break.  Any thread.
 */
static void drbd_conn_cut(DrbdConnection *conn, const char *reason)
{
    BDRVDrbdState *s = conn->s;
    Object *hs_data = NULL, *hs_meta = NULL, *est = NULL, *stray = NULL;
    DrbdPeer *peer;

    peer = drbd_peer_get(conn);
    if (peer) {
        drbd_peer_fail(peer, "%s", reason);
        drbd_peer_put(peer);
    }
    qemu_mutex_lock(&s->lock);
    if (conn->establishing) {
        est = object_ref(OBJECT(conn->establishing));
    }
    if (conn->stray) {
        stray = object_ref(OBJECT(conn->stray));
    }
    if (conn->handshaking) {
        hs_data = object_ref(OBJECT(conn->handshaking->data));
        hs_meta = object_ref(OBJECT(conn->handshaking->meta));
    }
    qemu_mutex_unlock(&s->lock);
    if (est) {
        qio_channel_shutdown(QIO_CHANNEL(est), QIO_CHANNEL_SHUTDOWN_BOTH,
                             NULL);
        object_unref(est);
    }
    if (stray) {
        qio_channel_shutdown(QIO_CHANNEL(stray), QIO_CHANNEL_SHUTDOWN_BOTH,
                             NULL);
        object_unref(stray);
    }
    if (hs_data) {
        qio_channel_shutdown(QIO_CHANNEL(hs_data), QIO_CHANNEL_SHUTDOWN_BOTH,
                             NULL);
        qio_channel_shutdown(QIO_CHANNEL(hs_meta), QIO_CHANNEL_SHUTDOWN_BOTH,
                             NULL);
        object_unref(hs_data);
        object_unref(hs_meta);
    }
}

/*
 * A reopen changed @conn's options (main loop, the node drained): the
 * resync's apply at once; with @reconnect, the connection breaks and the
 * manager takes the others, which the handshake agrees on, before it
 * connects again (a primary writes on meanwhile, its writes marked out of
 * sync).  @next is a connection that never runs, made by
 * drbd_apply_conn_options() with the new options; this takes it.
 */
void drbd_conn_adjust(DrbdConnection *conn, DrbdConnection *next,
                      bool reconnect)
{
    BDRVDrbdState *s = conn->s;
    DrbdConnection *old;

    if (next->tls_creds) {
        /* As drbd_conn_start_one(): the channels may become TLS anywhere */
        object_class_by_name(TYPE_QIO_CHANNEL_TLS);
    }
    qemu_mutex_lock(&s->lock);
    conn->connect_interval_ns = next->connect_interval_ns;
    conn->pace = next->pace;
    conn->on_congestion = next->on_congestion;
    conn->congestion_fill = next->congestion_fill;
    conn->congestion_extents = next->congestion_extents;
    old = conn->next_options;
    conn->next_options = reconnect ? next : NULL;
    qemu_mutex_unlock(&s->lock);
    drbd_conn_options_free(old);
    if (!reconnect) {
        drbd_conn_options_free(next);
        return;
    }
    trace_drbd_conn_adjust(s, conn->peer_node_id);
    drbd_conn_cut(conn, "its options changed: connecting again");
    /* A manager asleep between two attempts takes them now */
    drbd_sleep_wake(s, &conn->conn_sleep, false);
}

/*
 * drbd-disconnect: break the connection to the peer @peer_node_id (-1:
 * to every peer) and stand alone until drbd-connect
 */
int drbd_disconnect(BDRVDrbdState *s, int peer_node_id, Error **errp)
{
    bool found = false;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];

        if (peer_node_id >= 0 && conn->peer_node_id != peer_node_id) {
            continue;
        }
        found = true;
        qemu_mutex_lock(&s->lock);
        conn->connect_held = true;
        conn->held_reason = "disconnected by drbd-disconnect: waiting for "
                            "drbd-connect";
        qemu_mutex_unlock(&s->lock);
        trace_drbd_disconnect(s, conn->peer_node_id);
        drbd_conn_cut(conn, "disconnected by drbd-disconnect");
        drbd_sleep_wake(s, &conn->conn_sleep, false);
    }
    if (!found) {
        error_setg(errp, "drbd node '%s' has no peer with node-id %d",
                   drbd_name(s), peer_node_id);
        return -ENOENT;
    }
    return 0;
}

/*
 * QMP yank (main thread): cut a hung link at once, as NBD's yank does,
 * rather than wait for ping-timeout.  The node reconnects as after any
 * break.
 */
static void drbd_yank(void *opaque)
{
    BDRVDrbdState *s = opaque;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        drbd_conn_cut(s->conns[i], "the connection was yanked");
    }
}

static void drbd_yank_unregister(BDRVDrbdState *s)
{
    if (s->yank) {
        yank_unregister_function(BLOCKDEV_YANK_INSTANCE(s->bs->node_name),
                                 drbd_yank, s);
        yank_unregister_instance(BLOCKDEV_YANK_INSTANCE(s->bs->node_name));
        s->yank = false;
    }
}

/* Main loop: the peer of @conn has not connected since the start */
static void drbd_degraded_timer_cb(void *opaque)
{
    DrbdConnection *conn = opaque;

    g_clear_pointer(&conn->degraded_timer, timer_free);
    drbd_note_degraded(conn);
}

/* Start @conn's listener or connector, and its manager */
static int drbd_conn_start_one(DrbdConnection *conn, Error **errp)
{
    BDRVDrbdState *s = conn->s;

    assert(!conn->conn_co && !conn->stray_co);
    if (conn->listen_addr) {
        Error *local_err = NULL;

        conn->listener = qio_channel_socket_new();
        qio_channel_set_name(QIO_CHANNEL(conn->listener), "drbd-listener");
        if (qio_channel_socket_listen_sync(conn->listener,
                                           conn->listen_addr,
                                           DRBD_LISTEN_BACKLOG,
                                           &local_err) < 0) {
            g_clear_pointer(&conn->listener, object_unref);
            if (!conn->connects) {
                error_propagate(errp, local_err);
                return -EIO;
            }
            /* It listens only to explain a peer that connects too */
            trace_drbd_stray_listen_failed(s->bs,
                                           error_get_pretty(local_err));
            error_free(local_err);
        } else {
            drbd_setup_channel(QIO_CHANNEL(conn->listener),
                               "drbd-listener");
            drbd_defer_accept(conn);
        }
    }
    if (conn->connects) {
        /*
         * The connector's thread creates the channels.  QOM initializes a
         * class on its first object, and not thread-safely: initialize
         * the socket channel's class here, in the main thread, or the
         * thread's first connect races with the main thread's first
         * socket (a QMP chardev at start-up) and corrupts the class.
         */
        object_class_by_name(TYPE_QIO_CHANNEL_SOCKET);
        conn->connector = nbd_client_connection_new(conn->peer_addr,
                                                    false, NULL, NULL,
                                                    NULL, NULL);
    }

    if (conn->tls_creds) {
        /* As above: the channels may become TLS in an iothread */
        object_class_by_name(TYPE_QIO_CHANNEL_TLS);
    }

    qemu_mutex_lock(&s->lock);
    conn->conn_sleep.stopped = false;
    qemu_mutex_unlock(&s->lock);
    drbd_set_state(s, conn, -1, DRBD_CONN_STATE_WF_CONNECTION, -1, -1, -1,
                   NULL);
    conn->conn_co = qemu_coroutine_create(drbd_conn_co, conn);
    aio_co_enter(s->ctx, conn->conn_co);
    if (!conn->ever_connected && !conn->degraded_noted) {
        /*
         * A peer that is there connects within a connect-interval (and
         * its handshake within ping-timeout): if it has not by then,
         * say once that the node runs without it
         */
        conn->degraded_timer = timer_new_ns(QEMU_CLOCK_REALTIME,
                                            drbd_degraded_timer_cb, conn);
        timer_mod(conn->degraded_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                  conn->connect_interval_ns + conn->ping_timeout_ns);
    }
    if (conn->connects && conn->listener) {
        conn->stray_co = qemu_coroutine_create(drbd_stray_co, conn);
        aio_co_enter(s->ctx, conn->stray_co);
    }
    return 0;
}

/*
 * Start listening or connecting, to every peer.  Called when a writable
 * node opens, or when an inactive one is activated (not before: the
 * connection applies the peer's writes, and an inactive node must not
 * write).
 */
int drbd_conn_start(BDRVDrbdState *s, Error **errp)
{
    unsigned i;

    if (!s->yank) {
        if (!yank_register_instance(BLOCKDEV_YANK_INSTANCE(s->bs->node_name),
                                    errp)) {
            return -EEXIST;
        }
        yank_register_function(BLOCKDEV_YANK_INSTANCE(s->bs->node_name),
                               drbd_yank, s);
        s->yank = true;
    }
    qemu_mutex_lock(&s->lock);
    qatomic_set(&s->closing, false);
    s->ctx = bdrv_get_aio_context(s->bs);
    qemu_mutex_unlock(&s->lock);
    for (i = 0; i < s->nr_conns; i++) {
        if (drbd_conn_start_one(s->conns[i], errp) < 0) {
            drbd_conn_stop(s);
            return -EIO;
        }
    }
    return 0;
}

/*
 * drbd-connect: leave the standalone state a split brain left, trying to
 * connect again; with @discard_my_data, this node's changes are the ones
 * to lose if the handshake finds a split brain again
 */
void drbd_connect_again(BDRVDrbdState *s, bool discard_my_data)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];

        qemu_mutex_lock(&s->lock);
        conn->discard_my_data = discard_my_data;
        conn->connect_held = false;
        qemu_mutex_unlock(&s->lock);
        drbd_sleep_wake(s, &conn->conn_sleep, false);
    }
}

/*
 * Wake every waiting coroutine of the connection: the node closes, or
 * moved to s->ctx and they must follow
 */
static void drbd_conn_kick(DrbdConnection *conn)
{
    BDRVDrbdState *s = conn->s;
    DrbdPeer *peer;

    qemu_mutex_lock(&s->lock);
    peer = conn->peer;
    if (peer) {
        peer->running++;
    }
    qemu_mutex_unlock(&s->lock);
    if (peer) {
        drbd_peer_kick(peer);
        drbd_peer_put(peer);
    }
    if (conn->listener) {
        qio_channel_wake_read(QIO_CHANNEL(conn->listener));
    }
    if (conn->connector) {
        nbd_co_establish_connection_cancel(conn->connector);
    }
    drbd_sleep_wake(s, &conn->conn_sleep, false);
}

/*
 * The node moved to @ctx (main loop, the node drained): the connections
 * follow it.  Their coroutines move themselves when woken.
 */
void drbd_conn_set_context(BDRVDrbdState *s, AioContext *ctx)
{
    unsigned i;

    trace_drbd_conn_move(s->bs, ctx);
    qemu_mutex_lock(&s->lock);
    s->ctx = ctx;
    qemu_mutex_unlock(&s->lock);
    for (i = 0; i < s->nr_conns; i++) {
        if (s->conns[i]->conn_co || s->conns[i]->stray_co) {
            drbd_conn_kick(s->conns[i]);
        }
    }
}

/* Whether a connection manager of @s runs */
bool drbd_conn_running(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (qatomic_read(&s->conns[i]->conn_co) ||
            qatomic_read(&s->conns[i]->stray_co)) {
            return true;
        }
    }
    return false;
}

/*
 * Stop the connection managers and wait until they and their peers are
 * gone
 */
void drbd_conn_stop(BDRVDrbdState *s)
{
    unsigned i;

    if (drbd_conn_running(s)) {
        drbd_drain_gate_close(s);
        for (i = 0; i < s->nr_conns; i++) {
            DrbdConnection *conn = s->conns[i];

            if (conn->conn_co || conn->stray_co) {
                drbd_sleep_wake(s, &conn->conn_sleep, true);
                drbd_conn_cut(conn, "the node is closing");
                drbd_conn_kick(conn);
            }
        }
        AIO_WAIT_WHILE_UNLOCKED(NULL, drbd_conn_running(s));
    }
    for (i = 0; i < s->nr_conns; i++) {
        g_clear_pointer(&s->conns[i]->degraded_timer, timer_free);
        g_clear_pointer(&s->conns[i]->listener, object_unref);
        g_clear_pointer(&s->conns[i]->connector,
                        nbd_client_connection_release);
    }
    drbd_yank_unregister(s);
}
