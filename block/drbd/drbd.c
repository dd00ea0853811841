/*
 * DRBD-style replicated block device: the block driver
 *
 * A drbd node sits over a local image (its "file" child).  On a primary,
 * guest reads go to the local image (or, without a good one, to the peer:
 * readpeer.c) and guest writes go both to the local image and to the peer
 * (the transfer log, tl.c), completing as the protocol says (req.c);
 * while no peer is connected, what the peer misses is recorded in the
 * out-of-sync bitmap (state.c, meta.c) for the next resync (resync.c).
 * A secondary refuses guest I/O and applies what its primary sends
 * (peer.c).  The floors of the files are listed in drbd-int.h.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block-io.h"
#include "block/block_int.h"
#include "block/qdict.h"
#include "qapi/error.h"
#include "qapi/clone-visitor.h"
#include "qapi/qapi-visit-drbd.h"
#include "qapi/qobject-input-visitor.h"
#include "qapi/qobject-output-visitor.h"
#include "qobject/qobject.h"
#include "qemu/cutils.h"
#include "qemu/error-report.h"
#include "qemu/module.h"
#include "qemu/option.h"
#include "qemu/timer.h"
#include "qobject/qdict.h"
#include "qobject/qstring.h"
#include "qapi/qapi-visit-block-core.h"
#include "system/block-backend.h"
#include "trace.h"

#include "drbd-int.h"

#define DRBD_DEFAULT_CONNECT_INTERVAL_MS    1000
#define DRBD_DEFAULT_PING_INTERVAL_MS       10000
#define DRBD_DEFAULT_PING_TIMEOUT_MS        5000
#define DRBD_DEFAULT_MAX_EPOCH_SIZE         2048
#define DRBD_DEFAULT_MAX_BUFFERS            2048
#define DRBD_MAX_DISK_TIMEOUT_MS            600000
#define DRBD_MIN_MAX_BUFFERS                32
#define DRBD_MAX_MAX_BUFFERS                131072
#define DRBD_DEFAULT_C_DELAY_TARGET_MS      1000
#define DRBD_DEFAULT_C_MIN_RATE             256000

/* The options of BlockdevOptionsDrbd, as they appear flattened */
static const char *const drbd_option_names[] = {
    "resource", "node-id", "peer-node-id", "role", "protocol",
    "connect-interval", "ping-interval", "ping-timeout", "max-epoch-size",
    "max-buffers", "resync-rate", "resync-after", "c-plan-ahead",
    "c-fill-target", "c-delay-target", "c-max-rate", "c-min-rate",
    "wfc-timeout", "meta-disk", "after-sb-0pri", "after-sb-1pri",
    "after-sb-2pri", "secret", "cram-hmac-alg", "tls-creds", "tls-authz",
    "tls-hostname", "data-integrity-alg", "csums-alg", "verify-alg",
    "on-io-error", "disk-timeout", "size", "read-balancing", "quorum",
    "quorum-minimum-redundancy", "on-no-quorum", "fencing", "on-congestion",
    "congestion-fill", "congestion-extents",
};
static const char *const drbd_option_prefixes[] = {
    "listen.", "peer.", "peers.",
};

/* Move our options out of @options into a dict of their own */
static QDict *drbd_take_options(QDict *options)
{
    QDict *mine = qdict_new();
    const QDictEntry *e, *next;

    for (e = qdict_first(options); e; e = next) {
        const char *key = qdict_entry_key(e);
        bool ours = false;
        int i;

        next = qdict_next(options, e);
        for (i = 0; i < ARRAY_SIZE(drbd_option_names) && !ours; i++) {
            ours = !strcmp(key, drbd_option_names[i]);
        }
        for (i = 0; i < ARRAY_SIZE(drbd_option_prefixes) && !ours; i++) {
            ours = strstart(key, drbd_option_prefixes[i], NULL);
        }
        if (ours) {
            qdict_put_obj(mine, key, qobject_ref(qdict_entry_value(e)));
            qdict_del(options, key);
        }
    }
    return mine;
}

/*
 * DRBD's configuration and documentation spell the protocols A, B and C;
 * QAPI's enum values are lowercase.  Accept the uppercase letter where
 * the options come as strings (-drive, --image-opts); QMP and -blockdev
 * have had them checked against the enum before the driver sees them.
 */
static void drbd_protocol_lowercase(QDict *options)
{
    const char *protocol = qdict_get_try_str(options, "protocol");

    if (protocol && protocol[0] >= 'A' && protocol[0] <= 'C' &&
        !protocol[1]) {
        char lower[] = { g_ascii_tolower(protocol[0]), '\0' };

        qdict_put_str(options, "protocol", lower);
    }
}

static BlockdevOptionsDrbd *drbd_parse_options(QDict *options, Error **errp)
{
    g_autoptr(QDict) mine = drbd_take_options(options);
    BlockdevOptionsDrbd *opts = NULL;
    Visitor *v;

    drbd_protocol_lowercase(mine);
    v = qobject_input_visitor_new_flat_confused(mine, errp);
    if (!v) {
        return NULL;
    }
    visit_type_BlockdevOptionsDrbd(v, NULL, &opts, errp);
    visit_free(v);
    return opts;
}

/* after-sb-@which_pri: DRBD's values, each valid for some options only */
static int drbd_apply_after_sb(int which_pri, bool has, DrbdAfterSb value,
                               DrbdAfterSbPolicy *policy, Error **errp)
{
    if (!has) {
        *policy = DRBD_ASB_DISCONNECT;
        return 0;
    }
    return drbd_after_sb_policy_parse(which_pri, DrbdAfterSb_str(value),
                                      policy, errp);
}

static bool drbd_addr_type_ok(const SocketAddress *addr)
{
    return addr->type == SOCKET_ADDRESS_TYPE_INET ||
           addr->type == SOCKET_ADDRESS_TYPE_UNIX;
}

/*
 * The options of the connection to one peer: its node id and address,
 * protocol, timeouts, buffers, resync pacing, after-sb policies and
 * security (DRBD's "net" section, and the resync's part of "disk")
 */
static int drbd_apply_conn_options(DrbdConnection *conn,
                                   BlockdevOptionsDrbd *o,
                                   const DrbdPeerOptions *po, Error **errp)
{
    BDRVDrbdState *s = conn->s;
    SocketAddress *listen = po ? po->listen : o->listen;
    SocketAddress *peer = po ? po->address : o->peer;

    if (s->node_id > 31 || conn->peer_node_id > 31) {
        error_setg(errp, po ? "node-id and the node-id of each of peers "
                   "must be 0 to 31" :
                   "node-id and peer-node-id must be 0 to 31");
        return -EINVAL;
    }
    if (s->node_id == conn->peer_node_id) {
        error_setg(errp, po ? "node-id %d is the node's own and a peer's" :
                   "node-id and peer-node-id are both %d", s->node_id);
        error_append_hint(errp, "Give each node of the resource its own "
                          "id.\n");
        return -EINVAL;
    }
    conn->protocol = 'A' + (po && po->has_protocol ? po->protocol :
                            o->has_protocol ? o->protocol : DRBD_PROTOCOL_C);
    /*
     * A connection is made again and again, from an address: a file
     * descriptor would be used once and then closed (and the number
     * reused by something else)
     */
    if ((listen && !drbd_addr_type_ok(listen)) ||
        (peer && !drbd_addr_type_ok(peer))) {
        error_setg(errp, po ? "the address and listen of peer node %d must "
                   "be inet or unix addresses" :
                   "listen and peer must be inet or unix addresses",
                   conn->peer_node_id);
        error_append_hint(errp, "A drbd node reconnects after every break, "
                          "so it cannot use a file descriptor or vsock.\n");
        return -EINVAL;
    }
    if (po && !listen && !peer) {
        error_setg(errp, "peer node %d has neither address nor listen",
                   conn->peer_node_id);
        error_append_hint(errp, "Give the peer's address to connect to, "
                          "this node's address to accept it on (listen), "
                          "or both.\n");
        return -EINVAL;
    }
    conn->listen_addr = QAPI_CLONE(SocketAddress, listen);
    conn->peer_addr = QAPI_CLONE(SocketAddress, peer);
    conn->connects = conn->peer_addr &&
                     (!conn->listen_addr || s->node_id < conn->peer_node_id);

    conn->connect_interval_ns = (uint64_t)(o->has_connect_interval ?
        o->connect_interval : DRBD_DEFAULT_CONNECT_INTERVAL_MS) * SCALE_MS;
    conn->ping_interval_ns = (uint64_t)(o->has_ping_interval ?
        o->ping_interval : DRBD_DEFAULT_PING_INTERVAL_MS) * SCALE_MS;
    conn->ping_timeout_ns = (uint64_t)(o->has_ping_timeout ?
        o->ping_timeout : DRBD_DEFAULT_PING_TIMEOUT_MS) * SCALE_MS;
    if (!conn->connect_interval_ns || !conn->ping_interval_ns ||
        !conn->ping_timeout_ns) {
        error_setg(errp, "connect-interval, ping-interval and ping-timeout "
                   "must not be 0");
        return -EINVAL;
    }
    conn->on_congestion = o->has_on_congestion ? o->on_congestion :
                          DRBD_ON_CONGESTION_BLOCK;
    conn->congestion_fill = o->has_congestion_fill ? o->congestion_fill : 0;
    conn->congestion_extents = o->has_congestion_extents ?
                               o->congestion_extents :
                               DRBD_CONGESTION_EXTENTS_AL;
    if (conn->on_congestion == DRBD_ON_CONGESTION_PULL_AHEAD &&
        conn->protocol != 'A') {
        error_setg(errp, "on-congestion=pull-ahead needs protocol A, and "
                   "the protocol with peer node %d is %c",
                   conn->peer_node_id, conn->protocol);
        error_append_hint(errp, "A write that the primary does not send "
                          "cannot wait for the peer's ack: give "
                          "protocol=A, or on-congestion=block.\n");
        return -EINVAL;
    }
    conn->max_epoch_size = o->has_max_epoch_size ? o->max_epoch_size :
                           DRBD_DEFAULT_MAX_EPOCH_SIZE;
    if (!conn->max_epoch_size) {
        error_setg(errp, "max-epoch-size must not be 0");
        return -EINVAL;
    }
    conn->max_buffers = o->has_max_buffers ? o->max_buffers :
                        DRBD_DEFAULT_MAX_BUFFERS;
    if (conn->max_buffers < DRBD_MIN_MAX_BUFFERS ||
        conn->max_buffers > DRBD_MAX_MAX_BUFFERS) {
        error_setg(errp, "max-buffers must be %d to %d (4 KiB pages)",
                   DRBD_MIN_MAX_BUFFERS, DRBD_MAX_MAX_BUFFERS);
        return -EINVAL;
    }
    conn->resync_rate = o->has_resync_rate ? o->resync_rate : 0;
    conn->pace = (DrbdPaceParams) {
        .plan_ahead_ns = (uint64_t)(o->has_c_plan_ahead ? o->c_plan_ahead :
                                    0) * SCALE_MS,
        .fill_target = o->has_c_fill_target ? o->c_fill_target : 0,
        .delay_target_ns = (uint64_t)(o->has_c_delay_target ?
                                      o->c_delay_target :
                                      DRBD_DEFAULT_C_DELAY_TARGET_MS) *
                           SCALE_MS,
        .max_rate = o->has_c_max_rate ? o->c_max_rate : 0,
        .min_rate = o->has_c_min_rate ? o->c_min_rate :
                    DRBD_DEFAULT_C_MIN_RATE,
    };
    if (!drbd_pace_params_check(&conn->pace, errp)) {
        return -EINVAL;
    }
    if (drbd_apply_after_sb(0, o->has_after_sb_0pri, o->after_sb_0pri,
                            &conn->sb_cfg.after_sb_0pri, errp) < 0 ||
        drbd_apply_after_sb(1, o->has_after_sb_1pri, o->after_sb_1pri,
                            &conn->sb_cfg.after_sb_1pri, errp) < 0 ||
        drbd_apply_after_sb(2, o->has_after_sb_2pri, o->after_sb_2pri,
                            &conn->sb_cfg.after_sb_2pri, errp) < 0) {
        return -EINVAL;
    }
    return drbd_secure_open(conn, o, po, errp);
}

/* The node's options, then its connection's (one peer, for now) */
/* The connections of a node given @peers: one per peer */
static int drbd_apply_peers(BDRVDrbdState *s, BlockdevOptionsDrbd *o,
                            Error **errp)
{
    DrbdPeerOptionsList *l;
    uint32_t seen = 0;
    int ret;

    if (o->listen || o->peer || o->has_peer_node_id) {
        error_setg(errp, "peers is given with listen, peer or "
                   "peer-node-id");
        error_append_hint(errp, "Give each peer's addresses in its entry "
                          "of peers (address, listen), or use listen, "
                          "peer and peer-node-id alone for one peer.\n");
        return -EINVAL;
    }
    for (l = o->peers; l; l = l->next) {
        DrbdConnection *conn;

        if (s->nr_conns == DRBD_PEERS_MAX) {
            error_setg(errp, "peers lists more than %d peers",
                       DRBD_PEERS_MAX);
            return -EINVAL;
        }
        if (l->value->node_id < 32 && (seen & (1u << l->value->node_id))) {
            error_setg(errp, "peers lists node-id %d twice",
                       l->value->node_id);
            return -EINVAL;
        }
        if (l->value->node_id < 32) {
            seen |= 1u << l->value->node_id;
        }
        conn = drbd_conn_new(s, l->value->node_id);
        s->conns[s->nr_conns++] = conn;
        ret = drbd_apply_conn_options(conn, o, l->value, errp);
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

/* quorum, quorum-minimum-redundancy and on-no-quorum, once the peers are */
static int drbd_apply_quorum(BDRVDrbdState *s, BlockdevOptionsDrbd *o,
                             Error **errp)
{
    unsigned nodes = s->nr_conns + 1;
    const char *q = o->quorum ?: "off";
    uint64_t n;

    if (!strcmp(q, "off")) {
        s->quorum.need = 0;
    } else if (!strcmp(q, "majority")) {
        s->quorum.need = nodes / 2 + 1;
    } else if (!strcmp(q, "all")) {
        s->quorum.need = nodes;
    } else if (!qemu_strtou64(q, NULL, 10, &n) && n >= 1 && n <= nodes) {
        s->quorum.need = n;
    } else {
        error_setg(errp, "quorum must be off, majority, all, or a number of "
                   "nodes from 1 to %u (the node and its peers), not '%s'",
                   nodes, q);
        return -EINVAL;
    }
    s->quorum.min_uptodate = o->has_quorum_minimum_redundancy ?
                             o->quorum_minimum_redundancy : 0;
    if (s->quorum.min_uptodate > nodes) {
        error_setg(errp, "quorum-minimum-redundancy must be at most %u, "
                   "the number of nodes", nodes);
        return -EINVAL;
    }
    if (s->quorum.min_uptodate && !s->quorum.need) {
        error_setg(errp, "quorum-minimum-redundancy is given, but quorum is "
                   "off");
        return -EINVAL;
    }
    s->quorum.on_no_quorum = o->has_on_no_quorum ? o->on_no_quorum :
                             DRBD_ON_NO_QUORUM_SUSPEND_IO;
    s->fencing = o->has_fencing ? o->fencing : DRBD_FENCING_DONT_CARE;
    return 0;
}

static int drbd_apply_options(BDRVDrbdState *s, BlockdevOptionsDrbd *o,
                              Error **errp)
{
    DrbdConnection *conn;
    unsigned i;
    int ret;

    s->resource = g_strdup(o->resource ?: "r0");
    if (!s->resource[0] || strlen(s->resource) > DRBD_RESOURCE_NAME_MAX) {
        error_setg(errp, "resource must have 1 to %d characters",
                   DRBD_RESOURCE_NAME_MAX);
        return -EINVAL;
    }
    s->node_id = o->has_node_id ? o->node_id : 0;
    /* auto starts as a secondary, and promotes itself for a writer */
    s->auto_promote = !o->has_role || o->role == DRBD_ROLE_OPTION_AUTO;
    s->role = o->has_role && o->role == DRBD_ROLE_OPTION_PRIMARY ?
              DRBD_ROLE_PRIMARY : DRBD_ROLE_SECONDARY;
    s->on_io_error = o->has_on_io_error ? o->on_io_error :
                     DRBD_ON_IO_ERROR_DETACH;
    if (o->has_disk_timeout && o->disk_timeout > DRBD_MAX_DISK_TIMEOUT_MS) {
        error_setg(errp, "disk-timeout must be at most %d ms",
                   DRBD_MAX_DISK_TIMEOUT_MS);
        return -EINVAL;
    }
    s->disk_timeout_ns = (uint64_t)(o->has_disk_timeout ? o->disk_timeout :
                                    0) * SCALE_MS;
    s->read_balancing = o->has_read_balancing ? o->read_balancing :
                        DRBD_READ_BALANCING_PREFER_LOCAL;
    if (o->resync_after) {
        BlockDriverState *other = bdrv_find_node(o->resync_after);

        if (other && !drbd_is_drbd_node(other)) {
            error_setg(errp, "resync-after names block node '%s', which is "
                       "not a drbd node (driver %s)", o->resync_after,
                       bdrv_get_format_name(other));
            return -EINVAL;
        }
        s->resync_after = g_strdup(o->resync_after);
        if (!drbd_resync_after_check(s, errp)) {
            return -EINVAL;
        }
    }

    s->meta_disk = o->has_meta_disk ? o->meta_disk :
                   s->meta ? DRBD_META_DISK_EXTERNAL :
                   DRBD_META_DISK_INTERNAL;
    if (s->meta_disk == DRBD_META_DISK_EXTERNAL && !s->meta) {
        error_setg(errp, "meta-disk=external needs a 'meta' child with the "
                   "metadata");
        return -EINVAL;
    }
    if (s->meta_disk != DRBD_META_DISK_EXTERNAL && s->meta) {
        error_setg(errp, "a 'meta' child is given, but meta-disk is %s",
                   DrbdMetaDisk_str(s->meta_disk));
        error_append_hint(errp, "Leave meta-disk out (or set it to "
                          "external) to use the 'meta' child.\n");
        return -EINVAL;
    }

    if (!o->peers) {
        conn = drbd_conn_new(s, o->has_peer_node_id ? o->peer_node_id :
                                (s->node_id == 0 ? 1 : 0));
        s->conns[s->nr_conns++] = conn;
        ret = drbd_apply_conn_options(conn, o, NULL, errp);
    } else {
        ret = drbd_apply_peers(s, o, errp);
    }
    for (i = 0; i < s->nr_conns; i++) {
        /*
         * A bitmap slot of its own (its bitmap UUID's place), also without
         * metadata; metadata on disk may give it another (meta.c)
         */
        s->conns[i]->slot = i;
    }
    return ret < 0 ? ret : drbd_apply_quorum(s, o, errp);
}

static void drbd_free_state(BDRVDrbdState *s)
{
    if (QLIST_IS_INSERTED(s, next)) {
        drbd_nodes_remove(s);
    }
    g_free(s->resync_after);
    drbd_tl_cleanup(s);
    drbd_chunk_bufs_free(s);
    drbd_md_free(s);
    drbd_oos_free(s);
    drbd_recent_free(s);
    while (s->nr_conns) {
        DrbdConnection *conn = s->conns[--s->nr_conns];

        drbd_conn_options_free(conn->next_options);
        drbd_conn_options_free(conn);
    }
    qapi_free_BlockdevOptionsDrbd(s->opts);
    g_free(s->resource);
    g_free(s->last_error);
    g_clear_pointer(&s->auto_demote_bh, qemu_bh_delete);
    if (s->unpark_source) {
        g_source_remove(s->unpark_source);
        s->unpark_source = 0;
    }
    g_clear_pointer(&s->disk_error_bh, qemu_bh_delete);
    qemu_mutex_destroy(&s->lock);
}

static gboolean drbd_unpark_idle(void *opaque);
static int drbd_open_diskless(BDRVDrbdState *s, BlockdevOptionsDrbd *o,
                              Error **errp);

/*
 * The node detached from its disk (drbd_local_error()), or a secondary's
 * data became inconsistent after a write error it passed on: the
 * superblock says so, best effort, and the peer learns our disk state
 * (a peer whose disk is gone gets no more data, and a full resync when
 * a disk comes back); a primary then starts a new data generation, which
 * the peers join.  Main loop.
 */
static void drbd_disk_error_bh(void *opaque)
{
    BDRVDrbdState *s = opaque;

    drbd_md_detached(s);
    drbd_announce_role(s);
    drbd_detached_new_generation(s);
}

/*
 * Give the children of an inactive replicating node their write
 * permission back, activating them first: the node's local disk is its
 * own, and the peer's writes must go on reaching it
 */
static int GRAPH_RDLOCK drbd_keep_children_active(BlockDriverState *bs,
                                                  Error **errp)
{
    BDRVDrbdState *s = bs->opaque;
    BdrvChild *c;
    int ret;

    s->keep_children_active = true;
    QLIST_FOREACH(c, &bs->children, next) {
        ret = bdrv_activate(c->bs, errp);
        if (ret == 0) {
            ret = bdrv_child_refresh_perms(bs, c, errp);
        }
        if (ret < 0) {
            s->keep_children_active = false;
            error_prepend(errp, "drbd node '%s': its local disk could not "
                          "be kept active: ", drbd_name(s));
            return ret;
        }
    }
    return 0;
}

/*
 * Opening as primary is a promotion while disconnected: the data counts
 * as up to date, and it starts a new generation that the peer lacks
 */
static void drbd_open_as_primary(BDRVDrbdState *s)
{
    s->disk = DRBD_DISK_STATE_UP_TO_DATE;
    if (s->md.child && !s->md.writable) {
        return;     /* a read-only look at the image shows it as it is */
    }
    drbd_new_generation_locked(s, true, false);
    s->md.sb.uuid_current |= DRBD_UUID_PRIMARY_FLAG;
}

/* Whether the handshake with every peer is over */
static bool drbd_all_connected(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (qatomic_read(&s->conns[i]->cstate) < DRBD_CONN_STATE_CONNECTED) {
            return false;
        }
    }
    return true;
}

/* After wfc-timeout: say which peers did not connect, and why */
static void drbd_warn_degraded(BDRVDrbdState *s, uint32_t ms)
{
    g_autoptr(GString) missing = g_string_new(NULL);
    g_autofree char *why = NULL;
    bool several;
    unsigned i;

    qemu_mutex_lock(&s->lock);
    for (i = 0; i < s->nr_conns; i++) {
        if (s->conns[i]->cstate < DRBD_CONN_STATE_CONNECTED) {
            g_string_append_printf(missing, "%s%u", missing->len ? ", " : "",
                                   s->conns[i]->peer_node_id);
        }
    }
    why = g_strdup(s->last_error);
    qemu_mutex_unlock(&s->lock);
    if (!missing->len) {
        return;
    }
    several = strchr(missing->str, ',');
    warn_report("drbd node '%s' (resource %s): wfc-timeout (%" PRIu32
                " ms) expired without peer node%s %s; it goes on without "
                "%s%s%s", drbd_name(s), s->resource, ms,
                several ? "s" : "", missing->str, several ? "them" : "it",
                why ? ": " : "", why ?: "");
}

/* Wait up to @ms for the handshake with every peer to finish */
static void drbd_wait_for_connection(BDRVDrbdState *s, uint32_t ms)
{
    AioContext *ctx = bdrv_get_aio_context(s->bs);
    bool timed_out = false;
    QEMUTimer *timer;

    timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_MS,
                          drbd_timer_set_flag, &timed_out);
    timer_mod(timer, qemu_clock_get_ms(QEMU_CLOCK_REALTIME) + ms);
    while (!timed_out && !drbd_all_connected(s)) {
        aio_poll(ctx, true);
    }
    timer_free(timer);
}

static int GRAPH_UNLOCKED
drbd_open(BlockDriverState *bs, QDict *options, int flags, Error **errp)
{
    BDRVDrbdState *s = bs->opaque;
    g_autoptr(BlockdevOptionsDrbd) opts = NULL;
    int64_t size;
    unsigned i;
    int ret;

    GLOBAL_STATE_CODE();
    ERRP_GUARD();

    s->bs = bs;
    qemu_mutex_init(&s->lock);
    qemu_co_mutex_init(&s->reqs_lock);
    qemu_co_mutex_init(&s->gen_lock);
    s->gen_acked = true;
    qemu_co_queue_init(&s->drain_queue);
    qemu_co_queue_init(&s->gen_confirm_queue);
    qemu_co_queue_init(&s->md.al_queue);
    QSLIST_INIT(&s->quorum.waiters);
    drbd_auto_init(s);
    s->disk_error_bh = aio_bh_new(qemu_get_aio_context(),
                                  drbd_disk_error_bh, s);
    drbd_tl_init(s);
    QLIST_INIT(&s->active_reqs);

    /* No file: a diskless client, whose data is all its peer's */
    bdrv_open_child(NULL, options, "file", bs, &child_of_bds,
                    BDRV_CHILD_IMAGE, true, errp);
    if (*errp) {
        ret = -EINVAL;
        goto fail;
    }
    s->meta = bdrv_open_child(NULL, options, "meta", bs, &child_of_bds,
                              BDRV_CHILD_METADATA, true, errp);
    if (*errp) {
        ret = -EINVAL;
        goto fail;
    }

    opts = drbd_parse_options(options, errp);
    if (!opts) {
        ret = -EINVAL;
        goto fail;
    }
    ret = drbd_apply_options(s, opts, errp);
    if (ret < 0) {
        goto fail;
    }
    s->opts = QAPI_CLONE(BlockdevOptionsDrbd, opts);
    if (drbd_replicates(s) && !(flags & BDRV_O_RDWR)) {
        error_setg(errp, "a read-only drbd node cannot replicate: it would "
                   "have to write what its peer sends");
        error_append_hint(errp, "Open it read-write, or leave out listen "
                          "and peer to look at the image alone.\n");
        ret = -EINVAL;
        goto fail;
    }

    if (!bs->file) {
        ret = drbd_open_diskless(s, opts, errp);
        if (ret < 0) {
            goto fail;
        }
        goto connect;
    }
    if (opts->has_size) {
        error_setg(errp, "size is for a diskless client only: a node with "
                   "a file has the size of its data");
        ret = -EINVAL;
        goto fail;
    }
    bdrv_graph_rdlock_main_loop();
    size = bdrv_getlength(bs->file->bs);
    bs->supported_write_flags = BDRV_REQ_FUA &
        bs->file->bs->supported_write_flags;
    bs->supported_zero_flags = (BDRV_REQ_FUA | BDRV_REQ_MAY_UNMAP) &
        bs->file->bs->supported_zero_flags;
    bdrv_graph_rdunlock_main_loop();
    if (size < 0) {
        error_setg_errno(errp, -size, "Could not get the size of '%s'",
                         bs->file->bs->filename);
        ret = size;
        goto fail;
    }
    if (!QEMU_IS_ALIGNED(size, BDRV_SECTOR_SIZE)) {
        error_setg(errp, "'%s' has %" PRId64 " bytes, not a multiple of %d",
                   bs->file->bs->filename, size, (int)BDRV_SECTOR_SIZE);
        ret = -EINVAL;
        goto fail;
    }
    /*
     * Without metadata, the local data is taken to be the newest: what a
     * secondary lacks is what its primary recorded.  With metadata, the
     * metadata says (a primary's data counts as the newest, as with
     * DRBD's forced promotion).
     */
    s->disk = DRBD_DISK_STATE_UP_TO_DATE;
    s->md.writable = (flags & BDRV_O_RDWR) && !(flags & BDRV_O_INACTIVE);
    if (drbd_replicates(s) && (flags & BDRV_O_RDWR) &&
        (flags & BDRV_O_INACTIVE)) {
        /*
         * Inactive (an incoming migration's destination, or
         * active=false): the node stays a secondary, and applies the
         * peer's writes to children that it keeps active
         */
        bdrv_graph_rdlock_main_loop();
        ret = drbd_keep_children_active(bs, errp);
        bdrv_graph_rdunlock_main_loop();
        if (ret < 0) {
            goto fail;
        }
        s->md.writable = true;
    }
    if (s->meta_disk == DRBD_META_DISK_NONE) {
        s->size = size;
        drbd_oos_alloc(s);
        /* No history: the data counts as a fresh image's */
        s->md.sb.uuid_current = DRBD_UUID_ZEROED;
        if (s->role == DRBD_ROLE_PRIMARY) {
            drbd_open_as_primary(s);
        }
    } else {
        s->md.child = s->meta_disk == DRBD_META_DISK_EXTERNAL ? s->meta :
                      bs->file;
        bdrv_graph_rdlock_main_loop();
        ret = drbd_md_open(s, s->meta_disk == DRBD_META_DISK_EXTERNAL ?
                           DRBD_MD_EXTERNAL : DRBD_MD_INTERNAL, size, errp);
        if (ret == 0 && s->role == DRBD_ROLE_PRIMARY) {
            drbd_open_as_primary(s);
        }
        if (ret == 0 && s->md.writable) {
            ret = drbd_md_open_commit(s, errp);
        }
        bdrv_graph_rdunlock_main_loop();
        if (ret < 0) {
            goto fail;
        }
        if (s->md.al_recovered && s->md.writable) {
            warn_report("drbd node '%s' (resource %s) was not closed "
                        "cleanly: the %" PRIu32 " extents of its activity "
                        "log (%" PRIu64 " MiB) are marked out of sync",
                        drbd_name(s), s->resource,
                        s->md.al_recovered,
                        (uint64_t)s->md.al_recovered * DRBD_AL_EXTENT_SIZE /
                        MiB);
        }
    }

connect:
    s->ctx = bdrv_get_aio_context(bs);
    /* For resync-after, its own and the others' */
    drbd_nodes_add(s);
    qemu_mutex_lock(&s->lock);
    for (i = 0; i < s->nr_conns; i++) {
        /* Not seen yet: its data may be up to date, unless fenced */
        s->conns[i]->fence_candidate =
            !(s->md.sb.flags & DRBD_MDF_PEER_OUTDATED);
    }
    drbd_quorum_update_locked(s);
    s->quorum.reported = s->quorum.has;
    qemu_mutex_unlock(&s->lock);

    trace_drbd_open(bs, bs->file ? bs->file->bs->filename : "(diskless)",
                    DrbdRole_str(s->role), drbd_conn(s)->protocol);
    if (drbd_replicates(s) && (flags & BDRV_O_INACTIVE) &&
        !s->keep_children_active) {
        /*
         * Inactive and read-only: the connection would apply the peer's
         * writes.  It starts when the node is activated.
         */
        s->last_error = g_strdup("the node is inactive: it connects when "
                                 "it is activated");
    } else if (drbd_replicates(s)) {
        ret = drbd_conn_start(s, errp);
        if (ret < 0) {
            /* Leave the metadata as a clean close would: nothing ran */
            bdrv_graph_rdlock_main_loop();
            drbd_md_close(s);
            bdrv_graph_rdunlock_main_loop();
            goto fail;
        }
        if (opts->has_wfc_timeout && opts->wfc_timeout) {
            drbd_wait_for_connection(s, opts->wfc_timeout);
            drbd_warn_degraded(s, opts->wfc_timeout);
        }
        /* Opened as primary: the peers not there yet are to be fenced */
        drbd_fence_peers(s);
    }
    return 0;

fail:
    /* The block layer does not call drbd_close() after a failed open */
    drbd_free_state(s);
    return ret;
}

static void drbd_close(BlockDriverState *bs)
{
    BDRVDrbdState *s = bs->opaque;

    trace_drbd_close(bs);
    /* The close demotes, if need be: not a demotion of its own later */
    qemu_bh_cancel(s->auto_demote_bh);
    qemu_bh_cancel(s->disk_error_bh);
    if (!s->md.failed || qatomic_read(&s->detached)) {
        Error *local_err = NULL;

        /*
         * A clean close demotes first, as "drbdadm down" does: the peer
         * sees a secondary go, and no new generation splits the brain
         * when it is promoted and this node comes back; the metadata of
         * a node without a peer says it is secondary too
         */
        if (drbd_demote(s, &local_err) < 0) {
            warn_reportf_err(local_err, "drbd node '%s': ",
                             drbd_name(s));
        }
    }
    drbd_conn_stop(s);
    /* Its resync and verify are over: their jobs end, saying why */
    drbd_job_detach(s);
    bdrv_graph_rdlock_main_loop();
    drbd_md_close(s);
    bdrv_graph_rdunlock_main_loop();
    drbd_free_state(s);
}

static void drbd_drain_begin(BlockDriverState *bs)
{
    drbd_drain_begin_gate(bs->opaque);
    /* Requests waiting for a frozen peer end within ping-timeout */
    drbd_ping_now(bs->opaque);
    /* ... and those waiting for quorum now: a drain must end */
    drbd_resume_io(bs->opaque);
}

static void drbd_drain_end(BlockDriverState *bs)
{
    drbd_drain_end_gate(bs->opaque);
}

/* The node moved (main loop, drained): the connection follows it */
static void drbd_attach_aio_context(BlockDriverState *bs,
                                    AioContext *new_context)
{
    drbd_conn_set_context(bs->opaque, new_context);
}

/*
 * Refuse guest I/O unless primary (role=auto: unless it can become
 * primary now, for a user that holds write permission); say why once per
 * refusal streak
 */
static int coroutine_fn GRAPH_RDLOCK
drbd_check_primary(BDRVDrbdState *s, const char *what)
{
    Error *local_err = NULL;
    DrbdRole role;
    int ret;

    qemu_mutex_lock(&s->lock);
    role = s->role;
    qemu_mutex_unlock(&s->lock);
    if (role == DRBD_ROLE_PRIMARY) {
        s->refusal_reported = false;
        s->auto_refusal_reported = false;
        return 0;
    }
    if (s->auto_promote && qatomic_read(&s->write_perm)) {
        ret = drbd_co_auto_promote_wait(s, &local_err);
        if (ret == 0) {
            s->refusal_reported = false;
            s->auto_refusal_reported = false;
            return 0;
        }
        /* Its own streak: a plain refusal may have come before */
        if (!s->auto_refusal_reported) {
            s->auto_refusal_reported = true;
            error_reportf_err(local_err, "drbd node '%s' (resource %s) "
                              "could not become primary (role auto): guest "
                              "%s refused: ", drbd_name(s),
                              s->resource, what);
        } else {
            error_free(local_err);
        }
        trace_drbd_refused(s->bs, what, DrbdRole_str(role));
        return -EPERM;
    }
    if (!s->refusal_reported) {
        s->refusal_reported = true;
        error_report("drbd node '%s' (resource %s) is %s: guest %s "
                     "refused; %s", drbd_name(s), s->resource,
                     DrbdRole_str(role), what,
                     s->auto_promote ? "with role auto it becomes primary "
                     "for a user that opens it for writing" :
                     "promote it with drbd-promote");
    }
    trace_drbd_refused(s->bs, what, DrbdRole_str(role));
    return -EPERM;
}

/*
 * A detached node serves guest I/O through its peer: without an
 * up-to-date one connected, the request fails, and the first refusal of
 * a streak is logged with its reason
 */
static int drbd_no_peer_for_io(BDRVDrbdState *s, const char *what)
{
    /* The message names the one peer's states (see drbd_conn()) */
    DrbdConnection *conn = drbd_conn(s);
    DrbdConnState c;
    DrbdDiskState pd;

    qemu_mutex_lock(&s->lock);
    c = conn->cstate;
    pd = conn->peer_disk;
    qemu_mutex_unlock(&s->lock);
    if (!qatomic_xchg(&s->no_peer_reported, true)) {
        error_report("drbd node '%s' (resource %s) %s, and its peer cannot "
                     "serve it (connection %s, peer disk %s): guest %s "
                     "failed", drbd_name(s), s->resource,
                     qatomic_read(&s->detached) ?
                     "is diskless (detached after a disk error)" :
                     "is primary over inconsistent data (a resync target)",
                     DrbdConnState_str(c), DrbdDiskState_str(pd), what);
        error_printf("Guest I/O goes on once an up-to-date peer is "
                     "connected.\n");
    }
    return -EIO;
}

/*
 * The local half of a guest write, zeroes or discard; on an error the
 * node's on-io-error decides: with the node detached, the write is the
 * peer's alone (*@diskless), else the error is the guest's, and the
 * range differs from the peer's, so it is marked out of sync.
 */
static int coroutine_fn GRAPH_RDLOCK
drbd_co_write_local(BlockDriverState *bs, uint16_t cmd, int64_t offset,
                    int64_t bytes, QEMUIOVector *qiov, size_t qiov_offset,
                    BdrvRequestFlags flags, bool *diskless)
{
    BDRVDrbdState *s = bs->opaque;
    int ret;

    ret = drbd_co_disk_write(s, cmd, offset, bytes, qiov, qiov_offset,
                             flags);
    if (ret < 0 && !(cmd == DRBD_CMD_DISCARD && ret == -ENOTSUP)) {
        if (drbd_local_error(s, DRBD_IO_OPERATION_WRITE, ret)) {
            *diskless = true;
        } else {
            qemu_mutex_lock(&s->lock);
            drbd_oos_set_all_locked(s, offset, bytes);
            qemu_mutex_unlock(&s->lock);
        }
    }
    return ret;
}

/*
 * Whether @conn's link is congested (DRBD's): the writes in flight to
 * its peer passed congestion-fill, or writes to it are in flight while
 * congestion-extents activity-log extents are in use (writes hold their
 * extents until every peer has them).  Under s->lock.
 */
static bool drbd_congested_locked(BDRVDrbdState *s, DrbdConnection *conn)
{
    uint32_t extents = conn->congestion_extents;

    if (conn->congestion_fill && conn->ap_bytes >= conn->congestion_fill) {
        return true;
    }
    if (!s->md.al || !extents || !conn->ap_bytes) {
        return false;
    }
    extents = MIN(extents, drbd_al_cache_nr_slots(s->md.al));
    return drbd_al_cache_nr_in_use(s->md.al) >= extents;
}

/*
 * Whether the primary goes ahead of @conn's peer now (on-congestion
 * pull-ahead): its link is congested while it was in sync, and it
 * understands AHEAD.  Under s->lock.
 */
static bool drbd_goes_ahead_locked(BDRVDrbdState *s, DrbdConnection *conn)
{
    return conn->on_congestion == DRBD_ON_CONGESTION_PULL_AHEAD &&
           !conn->ahead &&
           conn->cstate == DRBD_CONN_STATE_CONNECTED && conn->peer &&
           conn->peer->version >= DRBD_PROTO_VERSION_AHEAD &&
           drbd_congested_locked(s, conn);
}

/*
 * The established connection of each peer that gets a guest write, in
 * @peers (NULL where none: a bit in its bitmap records the write), in one
 * go with the bitmaps (see drbd_peer_run()), each with a reference.  A
 * peer whose disk is gone gets no data, nor one that the node is ahead
 * of; in @ahead, those that the node goes ahead of with this write, with
 * a reference too.  Returns whether an up-to-date peer gets it.  Under
 * s->lock.
 */
static bool drbd_write_peers_locked(BDRVDrbdState *s, DrbdPeer **peers,
                                    DrbdPeer **ahead)
{
    bool served = false;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];

        if (drbd_goes_ahead_locked(s, conn)) {
            conn->ahead = true;
            ahead[i] = drbd_peer_get_locked(conn);
        }
        if (conn->ahead) {
            conn->ahead_write_ns = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
        } else if (!drbd_disk_detached(conn->peer_disk)) {
            peers[i] = drbd_peer_get_locked(conn);
        }
        served |= peers[i] && conn->peer_disk == DRBD_DISK_STATE_UP_TO_DATE;
    }
    return served;
}

/*
 * The node went ahead of the peers in @ahead (drbd_write_peers_locked()):
 * each is told, and shown ahead; the references are dropped
 */
static void coroutine_fn drbd_go_ahead(BDRVDrbdState *s, DrbdPeer **ahead)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (ahead[i]) {
            if (!qatomic_read(&ahead[i]->broken)) {
                drbd_set_state(s, s->conns[i], -1, DRBD_CONN_STATE_AHEAD, -1,
                               -1, DRBD_DISK_STATE_OUTDATED,
                               "the link is congested: pull-ahead");
            }
            drbd_send_ahead(ahead[i]);
            /* The resync once the link drained */
            drbd_peer_spawn(ahead[i], drbd_resync_ahead_co, ahead[i]);
            drbd_peer_put(ahead[i]);
        }
    }
}

/*
 * Wait until each request of a guest write is complete: one at a time
 * holds the coroutine, so that it has one wake per yield.  Returns
 * whether no peer got the write.  Called with s->lock, which it lets go
 * of while it waits.
 */
static bool coroutine_fn drbd_write_wait_locked(BDRVDrbdState *s,
                                                DrbdRequest *reqs)
{
    bool all_oos = true;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        while (!(reqs[i].state & DRBD_RQ_COMPLETED)) {
            reqs[i].waiter = qemu_coroutine_self();
            qemu_mutex_unlock(&s->lock);
            qemu_coroutine_yield();
            qemu_mutex_lock(&s->lock);
        }
        all_oos &= !!(reqs[i].state & DRBD_RQ_NET_OOS);
    }
    return all_oos;
}

/*
 * A guest write's wait for the quorum (drbd_co_quorum_wait()).  When the
 * quorum went before a write of this generation was acknowledged, the
 * metadata says so (primary-lost-quorum) before the guest hears of it:
 * a kill -9 now does not leave the operator a split brain.
 */
static int coroutine_fn GRAPH_RDLOCK
drbd_co_write_quorum_wait(BDRVDrbdState *s)
{
    bool persist;

    if (!s->quorum.need || qatomic_read(&s->quorum.has)) {
        return drbd_co_quorum_wait(s, true);
    }
    qemu_mutex_lock(&s->lock);
    persist = s->gen_unacked_lost && !s->md.lost_quorum_written;
    qemu_mutex_unlock(&s->lock);
    if (persist) {
        drbd_md_sync_in_request(s, false);
    }
    return drbd_co_quorum_wait(s, true);
}

/*
 * A guest write, zeroes or discard on the primary: local and replicated
 * in parallel, complete when the protocol says so.  A detached node
 * writes to the peer alone, and completes when the peer's disk has it.
 */
static int coroutine_fn GRAPH_RDLOCK
drbd_co_write_common(BlockDriverState *bs, uint16_t cmd, int64_t offset,
                     int64_t bytes, QEMUIOVector *qiov, size_t qiov_offset,
                     BdrvRequestFlags flags)
{
    BDRVDrbdState *s = bs->opaque;
    DrbdPeer *peers[DRBD_PEERS_MAX] = { NULL };
    DrbdPeer *ahead[DRBD_PEERS_MAX] = { NULL };
    DrbdRequest *reqs;
    BlockReq active;
    uint32_t dp_flags = 0;
    bool diskless, peer_needed, served, all_oos;
    unsigned i;
    int ret = 0;

    ret = drbd_check_primary(s, "write");
    if (ret == 0) {
        ret = drbd_co_write_quorum_wait(s);
    }
    if (ret == 0 && bytes) {
        drbd_co_generation_due(s);
    }
    if (ret < 0 || !bytes) {
        return ret;
    }
    if (flags & BDRV_REQ_FUA) {
        dp_flags |= DRBD_DP_FUA;
    }
    if (flags & BDRV_REQ_MAY_UNMAP) {
        dp_flags |= DRBD_DP_MAY_UNMAP;
    }

    /* Stay clear of resync chunks in flight over the same blocks */
    qemu_co_mutex_lock(&s->reqs_lock);
    reqlist_wait_all(&s->active_reqs, offset, bytes, &s->reqs_lock);
    reqlist_init_req(&s->active_reqs, &active, offset, bytes);
    qemu_co_mutex_unlock(&s->reqs_lock);

    /* Its extents in the activity log before the write goes anywhere */
    diskless = qatomic_read(&s->detached);
    while (!diskless &&
           (ret = drbd_al_begin_io(s, offset, bytes)) == -EAGAIN) {
        /* The open epochs hold every slot: close them to free them */
        uint32_t epoch;
        DrbdPeer *peer;

        for (i = 0; i < s->nr_conns; i++) {
            peer = drbd_peer_get(s->conns[i]);
            if (peer) {
                drbd_send_barrier(peer, false, &epoch);
                drbd_peer_put(peer);
            }
        }
    }
    if (ret < 0 && qatomic_read(&s->detached)) {
        /* The activity log failed, and the node detached: the peer's */
        diskless = true;
        ret = 0;
    }
    if (ret < 0) {
        qemu_co_mutex_lock(&s->reqs_lock);
        reqlist_remove_req(&active);
        qemu_co_mutex_unlock(&s->reqs_lock);
        return ret;
    }

    /*
     * Without our disk, the peers' are the only copies: wait for their
     * write acks, which protocols A and B get by asking for FUA.  So
     * with inconsistent data (a primary sync target): a write that no
     * up-to-date peer has is overwritten by the next resync into this
     * node, from a source that never had it.
     */
    qemu_mutex_lock(&s->lock);
    peer_needed = diskless || s->disk != DRBD_DISK_STATE_UP_TO_DATE;
    served = drbd_write_peers_locked(s, peers, ahead);
    if (peer_needed && !served) {
        if (!diskless) {
            /* Nothing was issued: its extents may cool again */
            drbd_al_end_io_locked(s, offset, bytes);
        }
        qemu_mutex_unlock(&s->lock);
        for (i = 0; i < s->nr_conns; i++) {
            if (peers[i]) {
                drbd_peer_put(peers[i]);
            }
        }
        drbd_go_ahead(s, ahead);
        qemu_co_mutex_lock(&s->reqs_lock);
        reqlist_remove_req(&active);
        qemu_co_mutex_unlock(&s->reqs_lock);
        return drbd_no_peer_for_io(s, "write");
    }
    reqs = drbd_tl_submit_locked(s, peers, offset, bytes,
                                 peer_needed || (flags & BDRV_REQ_FUA),
                                 s->md.al && !diskless);
    qatomic_inc(&s->ap);
    qatomic_add(&s->lo, !diskless);
    qemu_mutex_unlock(&s->lock);

    for (i = 0; i < s->nr_conns; i++) {
        if (peers[i]) {
            drbd_send_write(peers[i], &reqs[i], cmd, qiov, qiov_offset,
                            dp_flags | (peer_needed &&
                                        s->conns[i]->protocol != 'C' ?
                                        DRBD_DP_FUA : 0));
            drbd_peer_put(peers[i]);
        }
    }
    drbd_go_ahead(s, ahead);

    if (!diskless) {
        ret = drbd_co_write_local(bs, cmd, offset, bytes, qiov, qiov_offset,
                                  flags, &diskless);
        qatomic_dec(&s->lo);
    }

    qemu_mutex_lock(&s->lock);
    if (cmd == DRBD_CMD_DATA && ret == 0 && !diskless) {
        stat64_add(&s->dw, bytes);
    }
    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];
        DrbdRequest *req = &reqs[i];

        if (ret == 0 && !diskless && s->whole_blocks && conn->peer &&
            conn->peer->sync_target && !(req->state & DRBD_RQ_NET_OOS)) {
            /*
             * A sync target: its blocks are the newest here now, and on
             * the peer, which has the write; the resync skips them
             * (peer.c)
             */
            drbd_oos_reset_locked(conn, offset, bytes);
        }
        /*
         * Detached, the local half counts as done: the write is the
         * peers', and succeeds if one of them got it
         */
        drbd_req_event_locked(s, req, ret < 0 && !diskless ?
                                      DRBD_EV_LOCAL_ERROR : DRBD_EV_LOCAL_OK);
    }
    all_oos = drbd_write_wait_locked(s, reqs);
    if (diskless) {
        ret = all_oos ? -EIO : 0;
        for (i = 0; i < s->nr_conns && ret == 0; i++) {
            s->conns[i]->missed_acked |= !!(reqs[i].state & DRBD_RQ_NET_OOS);
        }
    } else if (peer_needed && all_oos && ret == 0) {
        ret = -EIO;
    }
    qatomic_dec(&s->ap);
    drbd_tl_guest_done_locked(s, reqs);
    qemu_mutex_unlock(&s->lock);

    if (ret == 0) {
        /*
         * Done in a generation just started (without a peer just lost, or
         * after a promotion without all): the peers know it (channel.c)
         */
        drbd_co_gen_confirm_wait(s);
    }
    if (ret == 0 && s->quorum.need) {
        /*
         * A write done while the quorum went away may be missing where
         * it is now: the guest does not see it succeed (on-no-quorum)
         */
        ret = drbd_co_write_quorum_wait(s);
    }
    if (ret == 0 && !qatomic_read(&s->gen_acked)) {
        bool written;

        qemu_mutex_lock(&s->lock);
        qatomic_set(&s->gen_acked, true);
        s->gen_unacked_lost = false;
        written = s->md.lost_quorum_written;
        qemu_mutex_unlock(&s->lock);
        if (written) {
            /*
             * The first write of the generation that the guest sees
             * complete: the metadata no longer says that none was (it
             * did from the generation's start, or from the quorum's
             * loss), before the guest hears of it
             */
            drbd_md_sync_in_request(s, false);
        }
    }
    stat64_add(&s->app_bytes, ret == 0 ? bytes : 0);

    if (peer_needed && ret == 0) {
        qatomic_set(&s->no_peer_reported, false);
    } else if (peer_needed && (diskless || all_oos)) {
        drbd_no_peer_for_io(s, "write");
    }

    qemu_co_mutex_lock(&s->reqs_lock);
    reqlist_remove_req(&active);
    qemu_co_mutex_unlock(&s->reqs_lock);
    return ret;
}

/*
 * A diskless client: no file child, no metadata, its size given, and
 * its data all its peer's (the node is detached from the start)
 */
static int drbd_open_diskless(BDRVDrbdState *s, BlockdevOptionsDrbd *o,
                              Error **errp)
{
    if (!o->has_size || !o->size ||
        !QEMU_IS_ALIGNED(o->size, BDRV_SECTOR_SIZE)) {
        error_setg(errp, "a drbd node without a file is a diskless client: "
                   "give its size, a multiple of %d, the size of its "
                   "peer's disk", (int)BDRV_SECTOR_SIZE);
        return -EINVAL;
    }
    if (s->meta || (o->has_meta_disk &&
                    o->meta_disk != DRBD_META_DISK_NONE)) {
        error_setg(errp, "a diskless client (no file) has no metadata: "
                   "leave meta and meta-disk out");
        return -EINVAL;
    }
    if (!drbd_replicates(s)) {
        error_setg(errp, "a diskless client (no file) serves its guest "
                   "through its peer: give listen or peer");
        return -EINVAL;
    }
    if (s->role == DRBD_ROLE_PRIMARY) {
        error_setg(errp, "a diskless client (no file) starts as a "
                   "secondary: it becomes primary once an up-to-date peer "
                   "is connected");
        error_append_hint(errp, "Use role auto (promoted for a writer), "
                          "or role secondary and drbd-promote.\n");
        return -EINVAL;
    }
    s->meta_disk = DRBD_META_DISK_NONE;
    s->size = o->size;
    drbd_oos_alloc(s);
    s->md.sb.uuid_current = DRBD_UUID_ZEROED;
    s->md.writable = false;
    s->detached = true;
    s->disk = DRBD_DISK_STATE_DISKLESS;
    /* The peer does what its disk can: FUA, and unmapping zeroes */
    s->bs->supported_write_flags = BDRV_REQ_FUA;
    s->bs->supported_zero_flags = BDRV_REQ_FUA | BDRV_REQ_MAY_UNMAP;
    return 0;
}

/*
 * A guest read: from the local disk, or from the peer where the node is
 * detached; a local read that fails is retried on the peer (and the
 * node's on-io-error applies)
 */
/*
 * Whether [@offset, @offset + @bytes) holds blocks that this node, a
 * primary sync target, lacks still (the resync has not written them,
 * nor a guest write replaced them).  Its data is not up to date: a
 * block marked is one to read from the peer, or not at all, also once
 * the peer is gone.
 */
static bool drbd_read_lacking(BDRVDrbdState *s, int64_t offset,
                              int64_t bytes)
{
    bool lacking;

    if (qatomic_read(&s->disk) == DRBD_DISK_STATE_UP_TO_DATE) {
        /* Every guest read of an up-to-date node: no lock, no bitmap */
        return false;
    }
    qemu_mutex_lock(&s->lock);
    lacking = s->disk != DRBD_DISK_STATE_UP_TO_DATE &&
              drbd_oos_any_locked(s, offset, bytes);
    qemu_mutex_unlock(&s->lock);
    return lacking;
}

/*
 * Whether read-balancing sends this read to the peer: only while both
 * disks are up to date and the peer can serve reads
 */
static bool drbd_read_remote(BDRVDrbdState *s)
{
    DrbdConnection *conn;
    bool remote = false;

    if (s->read_balancing == DRBD_READ_BALANCING_PREFER_LOCAL) {
        return false;
    }
    qemu_mutex_lock(&s->lock);
    conn = drbd_reader_locked(s);
    if (s->disk == DRBD_DISK_STATE_UP_TO_DATE && conn &&
        conn->cstate == DRBD_CONN_STATE_CONNECTED) {
        switch (s->read_balancing) {
        case DRBD_READ_BALANCING_PREFER_REMOTE:
            remote = true;
            break;
        case DRBD_READ_BALANCING_ROUND_ROBIN:
            remote = qatomic_fetch_inc(&s->read_turn) & 1;
            break;
        default:
            remote = qatomic_read(&conn->pe) < qatomic_read(&s->lo);
        }
    }
    qemu_mutex_unlock(&s->lock);
    return remote;
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_read(BDRVDrbdState *s, int64_t offset, int64_t bytes,
             QEMUIOVector *qiov, size_t qiov_offset, BdrvRequestFlags flags)
{
    int ret;

    if (!qatomic_read(&s->detached) && drbd_read_lacking(s, offset, bytes)) {
        /* A primary sync target lacks blocks of it: the peer has them */
        return drbd_co_read_peer(s, offset, bytes, qiov, qiov_offset);
    }
    if (!qatomic_read(&s->detached) && drbd_read_remote(s) &&
        drbd_co_read_peer(s, offset, bytes, qiov, qiov_offset) == 0) {
        return 0;
    }
    if (!qatomic_read(&s->detached)) {
        qatomic_inc(&s->lo);
        ret = drbd_co_disk_read(s, offset, bytes, qiov, qiov_offset, flags);
        qatomic_dec(&s->lo);
        stat64_add(&s->dr, ret == 0 ? bytes : 0);
        if (ret == 0) {
            return 0;
        }
        drbd_local_error(s, DRBD_IO_OPERATION_READ, ret);
        if (drbd_co_read_peer(s, offset, bytes, qiov, qiov_offset) == 0) {
            return 0;
        }
        if (!qatomic_read(&s->detached)) {
            return ret;     /* pass-on, and the peer could not help */
        }
    } else if (drbd_co_read_peer(s, offset, bytes, qiov, qiov_offset) == 0) {
        qatomic_set(&s->no_peer_reported, false);
        return 0;
    }
    return drbd_no_peer_for_io(s, "read");
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_preadv_part(BlockDriverState *bs, int64_t offset, int64_t bytes,
                    QEMUIOVector *qiov, size_t qiov_offset,
                    BdrvRequestFlags flags)
{
    BDRVDrbdState *s = bs->opaque;
    /*
     * Reads of a node that can neither write nor replicate (qemu-img
     * info, compare or convert of a drbd image) are served whatever its
     * role; so are reads of an inactive node with up-to-date data, as
     * QEMU serves reads of any inactive image (a device on an incoming
     * migration's destination probes its disk's geometry)
     */
    bool inert = (!drbd_replicates(s) && bdrv_is_read_only(bs)) ||
                 ((bs->open_flags & BDRV_O_INACTIVE) &&
                  qatomic_read(&s->disk) == DRBD_DISK_STATE_UP_TO_DATE);
    int ret = inert ? 0 : drbd_check_primary(s, "read");

    if (ret == 0 && !inert) {
        ret = drbd_co_quorum_wait(s, false);
    }
    if (ret < 0) {
        return ret;
    }
    if (inert) {
        /* No replication: the disk's answer is the only one */
        return bdrv_co_preadv_part(bs->file, offset, bytes, qiov,
                                   qiov_offset, flags);
    }
    ret = drbd_co_read(s, offset, bytes, qiov, qiov_offset, flags);
    if (ret == 0) {
        stat64_add(&s->app_bytes, bytes);
    }
    return ret;
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_pwritev_part(BlockDriverState *bs, int64_t offset, int64_t bytes,
                     QEMUIOVector *qiov, size_t qiov_offset,
                     BdrvRequestFlags flags)
{
    return drbd_co_write_common(bs, DRBD_CMD_DATA, offset, bytes, qiov,
                                qiov_offset, flags);
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_pwrite_zeroes(BlockDriverState *bs, int64_t offset, int64_t bytes,
                      BdrvRequestFlags flags)
{
    return drbd_co_write_common(bs, DRBD_CMD_ZEROES, offset, bytes, NULL, 0,
                                flags);
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_pdiscard(BlockDriverState *bs, int64_t offset, int64_t bytes)
{
    return drbd_co_write_common(bs, DRBD_CMD_DISCARD, offset, bytes, NULL, 0,
                                0);
}

/*
 * The driver owns the whole flush (the block layer does not flush our
 * children behind our back): on a primary, a flush is durable on the peer
 * too, by a barrier that asks the peer to flush once the epoch's writes
 * are done, and whose ack we wait for.  A detached node's flush is the
 * peer's alone, and fails if the peer goes before it acks.
 */
static int coroutine_fn GRAPH_RDLOCK drbd_co_flush(BlockDriverState *bs)
{
    BDRVDrbdState *s = bs->opaque;
    DrbdPeer *peers[DRBD_PEERS_MAX] = { NULL };
    uint32_t epochs[DRBD_PEERS_MAX];
    int sent[DRBD_PEERS_MAX];
    bool diskless = qatomic_read(&s->detached);
    bool acked = false;
    unsigned i;
    int ret = 0;

    /* A barrier to every peer with a disk, while the local flush runs */
    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];

        qemu_mutex_lock(&s->lock);
        if (s->role == DRBD_ROLE_PRIMARY &&
            !drbd_disk_detached(conn->peer_disk)) {
            peers[i] = drbd_peer_get_locked(conn);
        }
        qemu_mutex_unlock(&s->lock);
        if (peers[i]) {
            sent[i] = drbd_send_barrier(peers[i], true, &epochs[i]);
        }
    }

    if (!diskless) {
        ret = drbd_co_disk_flush(s);
        if (ret < 0 && s->role == DRBD_ROLE_PRIMARY &&
            drbd_local_error(s, DRBD_IO_OPERATION_FLUSH, ret)) {
            /* Detached: what the guest wrote is durable if the peer's */
            diskless = true;
        }
    }

    for (i = 0; i < s->nr_conns; i++) {
        DrbdConnection *conn = s->conns[i];
        DrbdPeer *peer = peers[i];

        if (!peer) {
            continue;
        }
        qemu_mutex_lock(&s->lock);
        /* A peer that detaches meanwhile has no disk to flush any more */
        while (sent[i] == 0 && !qatomic_read(&peer->broken) &&
               !drbd_disk_detached(conn->peer_disk) &&
               (int32_t)(conn->barrier_acked_upto - epochs[i]) <= 0) {
            qemu_co_queue_wait(&conn->barrier_waiters, &s->lock);
        }
        /* Detached, the guest's writes are durable if one peer's are */
        acked |= sent[i] == 0 &&
                 (int32_t)(conn->barrier_acked_upto - epochs[i]) > 0;
        qemu_mutex_unlock(&s->lock);
        drbd_peer_put(peer);
    }
    if (diskless && s->role == DRBD_ROLE_PRIMARY) {
        if (!acked) {
            return drbd_no_peer_for_io(s, "flush");
        }
        qatomic_set(&s->no_peer_reported, false);
        ret = 0;
    }
    return ret;
}

/* What one packet can carry bounds what one request may be */
static void GRAPH_RDLOCK drbd_refresh_limits(BlockDriverState *bs,
                                             Error **errp)
{
    BDRVDrbdState *s = bs->opaque;

    bs->bl.request_alignment = MAX(bs->bl.request_alignment,
                                   s->whole_blocks ?
                                   1 << DRBD_BM_GRANULARITY :
                                   DRBD_WIRE_ALIGN);
    bs->bl.max_transfer = MIN_NON_ZERO(bs->bl.max_transfer,
                                       DRBD_WIRE_MAX_DATA);
    bs->bl.max_pwrite_zeroes = MIN_NON_ZERO(bs->bl.max_pwrite_zeroes,
                                            DRBD_WIRE_MAX_ZEROES);
    bs->bl.max_pdiscard = MIN_NON_ZERO(bs->bl.max_pdiscard,
                                       DRBD_WIRE_MAX_ZEROES);
    if (s->md.al) {
        /* A write's extents must fit in the activity log at once */
        bs->bl.max_pwrite_zeroes = MIN(bs->bl.max_pwrite_zeroes,
                                       drbd_al_max_request(s));
        bs->bl.max_pdiscard = MIN(bs->bl.max_pdiscard,
                                  drbd_al_max_request(s));
    }
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_block_status(BlockDriverState *bs, bool want_zero, int64_t offset,
                     int64_t bytes, int64_t *pnum, int64_t *map,
                     BlockDriverState **file)
{
    BDRVDrbdState *s = bs->opaque;

    *pnum = bytes;
    if (qatomic_read(&s->detached) ||
        qatomic_read(&s->disk) != DRBD_DISK_STATE_UP_TO_DATE) {
        /*
         * The data is the peer's, all of it or the blocks a resync has
         * not brought yet: the local disk's allocation says nothing
         */
        return BDRV_BLOCK_DATA;
    }
    *map = offset;
    *file = bs->file->bs;
    return BDRV_BLOCK_RAW | BDRV_BLOCK_OFFSET_VALID;
}

static int64_t coroutine_fn GRAPH_RDLOCK
drbd_co_getlength(BlockDriverState *bs)
{
    BDRVDrbdState *s = bs->opaque;

    return s->size;
}

/*
 * qemu-img resize -f drbd and block_resize: the data and its metadata
 * (drbd_co_resize_disk()); a node that replicates grows with every peer
 * (drbd_co_resize_online())
 */
static int coroutine_fn GRAPH_RDLOCK
drbd_co_truncate(BlockDriverState *bs, int64_t offset, bool exact,
                 PreallocMode prealloc, BdrvRequestFlags flags, Error **errp)
{
    BDRVDrbdState *s = bs->opaque;

    if (prealloc != PREALLOC_MODE_OFF) {
        error_setg(errp, "a drbd node resizes with preallocation=off only");
        return -ENOTSUP;
    }
    if (offset == s->size) {
        return 0;
    }
    if (!QEMU_IS_ALIGNED(offset, DRBD_WIRE_ALIGN)) {
        error_setg(errp, "a drbd node's size must be a multiple of %d bytes",
                   DRBD_WIRE_ALIGN);
        return -EINVAL;
    }
    if (drbd_replicates(s)) {
        return drbd_co_resize_online(s, offset, errp);
    }
    return drbd_co_resize_disk(s, offset, errp);
}

/*
 * Whether a live migration can hand the primary role over now: a
 * secondary has nothing to hand over; a primary needs a connected peer
 * whose data is up to date (the destination is that peer, which applies
 * our writes until the switchover).  Called with s->lock.
 */
static bool drbd_can_hand_over_locked(BDRVDrbdState *s)
{
    unsigned i;

    if (s->role != DRBD_ROLE_PRIMARY) {
        return true;
    }
    for (i = 0; i < s->nr_conns; i++) {
        if (s->conns[i]->cstate >= DRBD_CONN_STATE_CONNECTED &&
            s->conns[i]->peer_disk == DRBD_DISK_STATE_UP_TO_DATE) {
            return true;
        }
    }
    return false;
}

/*
 * How long an inactivation waits for a peer to take the primary role
 * over: a connect attempt (connect-interval) and a handshake
 * (ping-timeout), of the slowest connection
 */
static uint64_t drbd_hand_over_timeout_ns(BDRVDrbdState *s)
{
    uint64_t ns = 0;
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        ns = MAX(ns, s->conns[i]->connect_interval_ns +
                     s->conns[i]->ping_timeout_ns);
    }
    return ns;
}

/*
 * Wait, a bounded time, until the primary role can be handed over.  A
 * migration's destination is the peer, and it connects only once it
 * runs: libvirt starts it when the migration starts, so that at the
 * switchover it may still be connecting, in its handshake, or resyncing
 * what the source wrote meanwhile.  The migration thread (or the main
 * loop, for blockdev-set-active) polls the main loop meanwhile, holding
 * the BQL, as a drain does; a timer wakes it to look again, since a
 * connection in an iothread does not.  Returns whether it can.
 */
static bool drbd_wait_hand_over(BDRVDrbdState *s)
{
    int64_t start = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    int64_t deadline = start + drbd_hand_over_timeout_ns(s);
    int64_t now = start;
    bool can, tick = false;
    QEMUTimer *timer = NULL;

    for (;;) {
        qemu_mutex_lock(&s->lock);
        can = drbd_can_hand_over_locked(s);
        qemu_mutex_unlock(&s->lock);
        if (can || now >= deadline) {
            break;
        }
        if (!timer) {
            trace_drbd_hand_over_wait(s->bs, (deadline - start) / SCALE_MS);
            timer = aio_timer_new(qemu_get_aio_context(), QEMU_CLOCK_REALTIME,
                                  SCALE_MS, drbd_timer_set_flag, &tick);
        }
        if (!timer_pending(timer)) {
            timer_mod(timer, qemu_clock_get_ms(QEMU_CLOCK_REALTIME) + 10);
        }
        aio_poll(qemu_get_aio_context(), true);
        now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    }
    if (timer) {
        timer_free(timer);
        trace_drbd_hand_over_waited(s->bs, can, (now - start) / SCALE_MS);
    }
    return can;
}

static void drbd_child_perm(BlockDriverState *bs, BdrvChild *c,
                            BdrvChildRole role,
                            BlockReopenQueue *reopen_queue,
                            uint64_t perm, uint64_t shared,
                            uint64_t *nperm, uint64_t *nshared)
{
    BDRVDrbdState *s = bs->opaque;

    bdrv_default_perms(bs, c, role, reopen_queue, perm, shared,
                       nperm, nshared);
    if (s->keep_children_active && (bs->open_flags & BDRV_O_RDWR)) {
        /* Inactive, and still applying the peer's writes */
        *nperm |= BLK_PERM_WRITE;
    }
}

/* After a hand-over: the children are active again, the peer's writes go */
static void drbd_unpark(BDRVDrbdState *s)
{
    if (s->parked) {
        s->parked = false;
        drbd_drain_end_gate(s);
    }
}

/*
 * The metadata is written again, as the node is: it was left clean at
 * the inactivation, and nothing changed it since (the node was parked)
 */
static int GRAPH_RDLOCK drbd_md_resume(BDRVDrbdState *s, Error **errp)
{
    if (!s->md.child || s->md.writable) {
        return 0;
    }
    s->md.writable = true;
    if (drbd_md_open_commit(s, errp) < 0) {
        s->md.writable = false;
        return -EIO;
    }
    return 0;
}

/*
 * The inactivation is done, children included: activate the children
 * again and let the peer's writes in.  If that fails, the node cannot
 * go on replicating: it disconnects.  An idle source of the main loop,
 * not a BH: a BH would also run in the polls within the inactivation.
 */
static gboolean drbd_unpark_idle(void *opaque)
{
    BDRVDrbdState *s = opaque;
    BlockDriverState *bs = s->bs;
    Error *local_err = NULL;

    s->unpark_source = 0;
    if (!s->parked) {
        return G_SOURCE_REMOVE;     /* activated again meanwhile */
    }
    bdrv_graph_rdlock_main_loop();
    if ((bs->open_flags & BDRV_O_INACTIVE) &&
        (drbd_keep_children_active(bs, &local_err) < 0 ||
         drbd_md_resume(s, &local_err) < 0)) {
        error_report_err(local_err);
        bdrv_graph_rdunlock_main_loop();
        drbd_conn_stop(s);
        drbd_unpark(s);
        return G_SOURCE_REMOVE;
    }
    bdrv_graph_rdunlock_main_loop();
    drbd_unpark(s);
    return G_SOURCE_REMOVE;
}

/*
 * Inactivation: the source side of a migration, or active=false.  A
 * replicating primary hands its role over (demotes: its writes acked by
 * the peer, the peer told) and refuses if it cannot, so that the
 * destination's activation may promote the peer.  The node goes on
 * replicating, as a secondary: the children that QEMU inactivates next
 * are activated again by unpark_source.  The metadata is left as a clean
 * close leaves it.
 */
static int GRAPH_RDLOCK drbd_inactivate(BlockDriverState *bs)
{
    BDRVDrbdState *s = bs->opaque;
    Error *local_err = NULL;
    DrbdConnection *conn;

    if (drbd_conn_running(s)) {
        if (!drbd_wait_hand_over(s)) {
            /* The message names the one peer's states (see drbd_conn()) */
            conn = drbd_conn(s);
            qemu_mutex_lock(&s->lock);
            error_report("drbd node '%s' (resource %s) is primary, and its "
                         "peer was not connected with up-to-date data "
                         "within %" PRIu64 " ms (connection %s, peer disk "
                         "%s): it cannot hand its role over, and stays "
                         "active and primary (a migration fails, its "
                         "guest runs on here); start the migration's "
                         "destination, the node's peer, and wait until "
                         "query-drbd says it is connected and up-to-date",
                         drbd_name(s), s->resource,
                         drbd_hand_over_timeout_ns(s) / SCALE_MS,
                         DrbdConnState_str(conn->cstate),
                         DrbdDiskState_str(conn->peer_disk));
            qemu_mutex_unlock(&s->lock);
            return -EBUSY;
        }
        qemu_bh_cancel(s->auto_demote_bh);
        if (drbd_demote(s, &local_err) < 0) {
            error_report_err(local_err);
            return -EIO;
        }
        if (!s->parked) {
            s->parked = true;
            drbd_drain_begin_gate(s);
        }
        s->keep_children_active = false;
        if (!s->unpark_source) {
            s->unpark_source = g_idle_add(drbd_unpark_idle, s);
        }
    }
    if (s->md.child && s->md.writable) {
        drbd_md_close(s);
        s->md.writable = false;
    }
    return s->md.failed ? -EIO : 0;
}

/*
 * The node may write again (activation, or a reopen read-write): read
 * the metadata as it is on disk now, and say on disk that the node runs
 */
static int GRAPH_RDLOCK drbd_md_reactivate(BlockDriverState *bs,
                                           Error **errp)
{
    BDRVDrbdState *s = bs->opaque;
    int64_t len;

    if (!s->md.child || s->md.writable) {
        return 0;
    }
    len = bdrv_getlength(bs->file->bs);
    if (len < 0) {
        error_setg_errno(errp, -len, "Could not get the size of '%s'",
                         bs->file->bs->filename);
        return len;
    }
    drbd_oos_free(s);
    drbd_md_free(s);
    s->md.al_recovered = 0;
    s->md.al_damaged = false;
    s->md.failed = false;
    if (drbd_md_open(s, s->meta_disk == DRBD_META_DISK_EXTERNAL ?
                     DRBD_MD_EXTERNAL : DRBD_MD_INTERNAL, len, errp) < 0) {
        s->md.failed = true;    /* nothing could record the writes */
        drbd_oos_alloc(s);
        drbd_local_error(s, DRBD_IO_OPERATION_METADATA, -EIO);
        return -EIO;
    }
    s->md.writable = true;
    if (s->role == DRBD_ROLE_PRIMARY) {
        drbd_open_as_primary(s);
    }
    if (drbd_md_open_commit(s, errp) < 0) {
        s->md.writable = false;
        return -EIO;
    }
    return 0;
}

/* Activation: the metadata again, then the connection, if there is one */
static void coroutine_fn GRAPH_RDLOCK
drbd_co_invalidate_cache(BlockDriverState *bs, Error **errp)
{
    BDRVDrbdState *s = bs->opaque;

    if (!(bs->open_flags & BDRV_O_RDWR)) {
        return;
    }
    /* Active, the node's children are active for it anyway */
    s->keep_children_active = false;
    if (s->parked) {
        /* A migration failed before unpark_source ran: nothing changed */
        if (drbd_md_resume(s, errp) < 0) {
            return;
        }
        drbd_unpark(s);
    }
    if (drbd_md_reactivate(bs, errp) < 0) {
        return;
    }
    if (drbd_replicates(s) && !drbd_conn_running(s)) {
        qemu_mutex_lock(&s->lock);
        g_clear_pointer(&s->last_error, g_free);
        qemu_mutex_unlock(&s->lock);
        drbd_conn_start(s, errp);
    }
}

/*
 * role=auto: a user that asks for write permission gets it only if the
 * node can become primary; the promotion follows in set_perm
 */
static int GRAPH_RDLOCK drbd_check_perm(BlockDriverState *bs, uint64_t perm,
                                        uint64_t shared, Error **errp)
{
    BDRVDrbdState *s = bs->opaque;

    if ((perm & BLK_PERM_WRITE) && !s->write_perm &&
        !(bs->open_flags & BDRV_O_INACTIVE)) {
        return drbd_auto_promote_check(s, errp);
    }
    return 0;
}

static void GRAPH_RDLOCK drbd_set_perm(BlockDriverState *bs, uint64_t perm,
                                       uint64_t shared)
{
    drbd_auto_perm_changed(bs->opaque, perm & BLK_PERM_WRITE);
}

/* Fill in the defaults, so that options given and left out compare */
static QDict *drbd_options_effective(BDRVDrbdState *s,
                                     const BlockdevOptionsDrbd *given)
{
    g_autoptr(BlockdevOptionsDrbd) o = QAPI_CLONE(BlockdevOptionsDrbd,
                                                   given);
    QObject *obj = NULL;
    Visitor *v;

    if (!o->resource) {
        o->resource = g_strdup("r0");
    }
#define DRBD_DEFAULT(member, value) \
    do { \
        if (!o->has_##member) { \
            o->has_##member = true; \
            o->member = (value); \
        } \
    } while (0)
    DRBD_DEFAULT(node_id, 0);
    if (!o->peers) {
        DRBD_DEFAULT(peer_node_id, o->node_id == 0 ? 1 : 0);
    }
    DRBD_DEFAULT(role, DRBD_ROLE_OPTION_AUTO);
    DRBD_DEFAULT(protocol, DRBD_PROTOCOL_C);
    DRBD_DEFAULT(connect_interval, DRBD_DEFAULT_CONNECT_INTERVAL_MS);
    DRBD_DEFAULT(ping_interval, DRBD_DEFAULT_PING_INTERVAL_MS);
    DRBD_DEFAULT(ping_timeout, DRBD_DEFAULT_PING_TIMEOUT_MS);
    DRBD_DEFAULT(max_epoch_size, DRBD_DEFAULT_MAX_EPOCH_SIZE);
    DRBD_DEFAULT(max_buffers, DRBD_DEFAULT_MAX_BUFFERS);
    DRBD_DEFAULT(resync_rate, 0);
    DRBD_DEFAULT(c_plan_ahead, 0);
    DRBD_DEFAULT(c_fill_target, 0);
    DRBD_DEFAULT(c_delay_target, DRBD_DEFAULT_C_DELAY_TARGET_MS);
    DRBD_DEFAULT(c_max_rate, 0);
    DRBD_DEFAULT(c_min_rate, DRBD_DEFAULT_C_MIN_RATE);
    DRBD_DEFAULT(wfc_timeout, 0);
    DRBD_DEFAULT(meta_disk, s->meta ? DRBD_META_DISK_EXTERNAL :
                 DRBD_META_DISK_INTERNAL);
    DRBD_DEFAULT(after_sb_0pri, DRBD_AFTER_SB_DISCONNECT);
    DRBD_DEFAULT(after_sb_1pri, DRBD_AFTER_SB_DISCONNECT);
    DRBD_DEFAULT(after_sb_2pri, DRBD_AFTER_SB_DISCONNECT);
    DRBD_DEFAULT(on_io_error, DRBD_ON_IO_ERROR_DETACH);
    DRBD_DEFAULT(disk_timeout, 0);
    DRBD_DEFAULT(read_balancing, DRBD_READ_BALANCING_PREFER_LOCAL);
    DRBD_DEFAULT(quorum_minimum_redundancy, 0);
    DRBD_DEFAULT(on_no_quorum, DRBD_ON_NO_QUORUM_SUSPEND_IO);
    DRBD_DEFAULT(on_congestion, DRBD_ON_CONGESTION_BLOCK);
    DRBD_DEFAULT(congestion_fill, 0);
    DRBD_DEFAULT(congestion_extents, DRBD_CONGESTION_EXTENTS_AL);
    DRBD_DEFAULT(fencing, DRBD_FENCING_DONT_CARE);
#undef DRBD_DEFAULT
    if (!o->quorum) {
        o->quorum = g_strdup("off");
    }

    v = qobject_output_visitor_new(&obj);
    visit_type_BlockdevOptionsDrbd(v, NULL, &o, &error_abort);
    visit_complete(v, &obj);
    visit_free(v);
    return qobject_to(QDict, obj);
}

/*
 * The options that a reopen may change on a running node, as ``drbdadm
 * adjust`` does; the others are the node's identity, its peers and its
 * metadata, and change only by a close and an open.  Those of the
 * handshake and of the peers' connections need a new connection
 * (drbd_conn_adjust()).
 */
static const char *const drbd_adjust_at_once[] = {
    "connect-interval", "resync-rate", "c-plan-ahead", "c-fill-target",
    "c-delay-target", "c-max-rate", "c-min-rate", "wfc-timeout",
    "on-io-error", "disk-timeout", "read-balancing", "fencing",
    "on-congestion", "congestion-fill", "congestion-extents",
};
static const char *const drbd_adjust_reconnect[] = {
    "protocol", "ping-interval", "ping-timeout", "max-epoch-size",
    "max-buffers", "after-sb-0pri", "after-sb-1pri", "after-sb-2pri",
    "secret", "cram-hmac-alg", "tls-creds", "tls-authz", "tls-hostname",
    "data-integrity-alg", "csums-alg", "verify-alg",
};

/* A reopen's new options, from its prepare to its commit or abort */
typedef struct DrbdReopen {
    BlockdevOptionsDrbd *opts;
    bool reconnect;
    /* Per connection, the new options (drbd_conn_adjust()) */
    DrbdConnection *next[DRBD_PEERS_MAX];
} DrbdReopen;

static void drbd_reopen_free(DrbdReopen *r)
{
    unsigned i;

    if (r) {
        for (i = 0; i < DRBD_PEERS_MAX; i++) {
            drbd_conn_options_free(r->next[i]);
        }
        qapi_free_BlockdevOptionsDrbd(r->opts);
        g_free(r);
    }
}

static bool drbd_str_in(const char *key, const char *const *list,
                        size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (!strcmp(key, list[i])) {
            return true;
        }
    }
    return false;
}

/*
 * Which options @opts changes, from those the node runs with: 0 none, 1
 * some that apply at once, 2 some that need a new connection, or -EINVAL
 * for one that cannot change on a running node
 */
static int drbd_options_changed(BDRVDrbdState *s, BlockdevOptionsDrbd *opts,
                                Error **errp)
{
    g_autoptr(QDict) old = drbd_options_effective(s, s->opts);
    g_autoptr(QDict) new = drbd_options_effective(s, opts);
    const QDictEntry *e;
    int changed = 0;

    /* An option left out is its default: a change too */
    for (e = qdict_first(old); e; e = qdict_next(old, e)) {
        if (!qdict_haskey(new, qdict_entry_key(e))) {
            qdict_put_null(new, qdict_entry_key(e));
        }
    }
    for (e = qdict_first(new); e; e = qdict_next(new, e)) {
        const char *key = qdict_entry_key(e);
        QObject *was = qdict_get(old, key);

        if (was && qobject_is_equal(was, qdict_entry_value(e))) {
            continue;
        }
        if (drbd_str_in(key, drbd_adjust_reconnect,
                        ARRAY_SIZE(drbd_adjust_reconnect))) {
            changed = 2;
        } else if (drbd_str_in(key, drbd_adjust_at_once,
                               ARRAY_SIZE(drbd_adjust_at_once))) {
            changed = MAX(changed, 1);
        } else {
            error_setg(errp, "drbd option '%s' cannot be changed on a "
                       "running node", key);
            error_append_hint(errp, "A reopen (drbdadm adjust) may change "
                              "the net, resync and disk-error options; "
                              "the node's identity, its peers, its role, "
                              "its metadata and the quorum change only by "
                              "closing and opening the node again.\n");
            return -EINVAL;
        }
    }
    return changed;
}

/*
 * Reopen: the options that a running node may change (drbd_options_changed(),
 * as ``drbdadm adjust``); read-only is allowed for a node that does not
 * replicate, and so is read-write again.
 */
static int GRAPH_UNLOCKED
drbd_reopen_prepare(BDRVReopenState *state, BlockReopenQueue *queue,
                    Error **errp)
{
    BDRVDrbdState *s = state->bs->opaque;
    g_autoptr(BlockdevOptionsDrbd) opts = NULL;
    DrbdPeerOptionsList *po;
    DrbdReopen *r;
    QString *file;
    unsigned i;
    int changed;

    /*
     * The metadata was read from (or beside) this file child, and is
     * written there: another one would take writes meant for the old
     * one's disk.  A new disk comes by drbd-detach and drbd-attach.
     */
    file = qobject_to(QString, qdict_get(state->options, "file"));
    if (qdict_haskey(state->options, "file") &&
        (!state->bs->file || !file ||
         strcmp(qstring_get_str(file),
                bdrv_get_node_name(state->bs->file->bs)))) {
        error_setg(errp, "drbd node '%s': its file child cannot be "
                   "replaced by a reopen", drbd_name(s));
        error_append_hint(errp, "Give it another disk with drbd-detach and "
                          "drbd-attach.\n");
        return -EINVAL;
    }
    opts = drbd_parse_options(state->options, errp);
    if (!opts) {
        return -EINVAL;
    }
    changed = drbd_options_changed(s, opts, errp);
    if (changed < 0) {
        return changed;
    }
    if (changed) {
        /*
         * Check the new options as an open would, on connections that
         * never run: the peers and addresses are the same (above)
         */
        r = g_new0(DrbdReopen, 1);
        r->reconnect = changed == 2;
        for (i = 0, po = opts->peers; i < s->nr_conns;
             i++, po = po ? po->next : NULL) {
            r->next[i] = drbd_conn_new(s, s->conns[i]->peer_node_id);
            if (drbd_apply_conn_options(r->next[i], opts,
                                        po ? po->value : NULL, errp) < 0) {
                drbd_reopen_free(r);
                return -EINVAL;
            }
        }
        if (opts->has_disk_timeout &&
            opts->disk_timeout > DRBD_MAX_DISK_TIMEOUT_MS) {
            error_setg(errp, "disk-timeout must be at most %d ms",
                       DRBD_MAX_DISK_TIMEOUT_MS);
            drbd_reopen_free(r);
            return -EINVAL;
        }
        r->opts = g_steal_pointer(&opts);
        state->opaque = r;
    }
    if (drbd_replicates(s) && !(state->flags & BDRV_O_RDWR)) {
        error_setg(errp, "drbd node '%s' replicates to a peer: it cannot "
                   "become read-only", drbd_name(s));
        return -EINVAL;
    }
    if (s->md.child && s->md.writable && !(state->flags & BDRV_O_RDWR)) {
        /*
         * Read-only from the commit on, when the children have lost their
         * write permission already: leave the metadata clean now (the
         * node is drained), as a close does
         */
        int ret;

        bdrv_graph_rdlock_main_loop();
        ret = drbd_md_close(s);
        bdrv_graph_rdunlock_main_loop();
        if (ret < 0) {
            error_setg_errno(errp, -ret, "drbd node '%s': could not leave "
                             "its metadata clean", drbd_name(s));
            return ret;
        }
        s->md.reopen_closed = true;
    }
    return 0;
}

/* A reopen's new options (drbd_reopen_prepare()) take effect */
static void drbd_adjust(BDRVDrbdState *s, DrbdReopen *r)
{
    BlockdevOptionsDrbd *o = r->opts;
    unsigned i;

    trace_drbd_adjust(s, r->reconnect);
    qatomic_set(&s->on_io_error, o->has_on_io_error ? o->on_io_error :
                DRBD_ON_IO_ERROR_DETACH);
    qatomic_set(&s->disk_timeout_ns, (uint64_t)(o->has_disk_timeout ?
                                                o->disk_timeout : 0) *
                SCALE_MS);
    qatomic_set(&s->read_balancing, o->has_read_balancing ?
                o->read_balancing : DRBD_READ_BALANCING_PREFER_LOCAL);
    qemu_mutex_lock(&s->lock);
    s->fencing = o->has_fencing ? o->fencing : DRBD_FENCING_DONT_CARE;
    qemu_mutex_unlock(&s->lock);
    for (i = 0; i < s->nr_conns; i++) {
        drbd_conn_adjust(s->conns[i], g_steal_pointer(&r->next[i]),
                         r->reconnect);
    }
    if ((o->has_resync_rate ? o->resync_rate : 0) !=
        (s->opts->has_resync_rate ? s->opts->resync_rate : 0)) {
        /* As drbd-set-resync-rate: a resync asleep goes on at it */
        drbd_resync_set_rate(s, o->has_resync_rate ? o->resync_rate : 0);
    }
    qapi_free_BlockdevOptionsDrbd(s->opts);
    s->opts = g_steal_pointer(&r->opts);
}

static void GRAPH_UNLOCKED drbd_reopen_commit(BDRVReopenState *state)
{
    BlockDriverState *bs = state->bs;
    BDRVDrbdState *s = bs->opaque;
    bool writable = (state->flags & (BDRV_O_RDWR | BDRV_O_INACTIVE)) ==
                    BDRV_O_RDWR;
    Error *local_err = NULL;

    if (state->opaque) {
        drbd_adjust(s, state->opaque);
        drbd_reopen_free(state->opaque);
        state->opaque = NULL;
    }
    GRAPH_RDLOCK_GUARD_MAINLOOP();
    if (s->md.reopen_closed) {
        s->md.reopen_closed = false;
        s->md.writable = false;
    } else if (writable && drbd_md_reactivate(bs, &local_err) < 0) {
        error_reportf_err(local_err, "drbd node '%s': ", drbd_name(s));
    }
}

/* The node stays writable: its metadata says again that it runs */
static void GRAPH_UNLOCKED drbd_reopen_abort(BDRVReopenState *state)
{
    BDRVDrbdState *s = state->bs->opaque;
    Error *local_err = NULL;

    drbd_reopen_free(state->opaque);
    state->opaque = NULL;

    GRAPH_RDLOCK_GUARD_MAINLOOP();
    if (s->md.reopen_closed) {
        s->md.reopen_closed = false;
        if (drbd_md_open_commit(s, &local_err) < 0) {
            s->md.failed = true;
            error_reportf_err(local_err, "drbd node '%s': ",
                              drbd_name(s));
            drbd_local_error(s, DRBD_IO_OPERATION_METADATA, -EIO);
        }
    }
}

static int coroutine_fn GRAPH_RDLOCK
drbd_co_check(BlockDriverState *bs, BdrvCheckResult *res, BdrvCheckMode fix)
{
    return drbd_md_check(bs->opaque, res, fix);
}

static ImageInfoSpecific * GRAPH_RDLOCK
drbd_get_specific_info(BlockDriverState *bs, Error **errp)
{
    BDRVDrbdState *s = bs->opaque;
    ImageInfoSpecific *info;

    if (!s->md.child) {
        return NULL;
    }
    info = g_new0(ImageInfoSpecific, 1);
    info->type = IMAGE_INFO_SPECIFIC_KIND_DRBD;
    info->u.drbd.data = drbd_md_info(s);
    return info;
}

/*
 * Image creation: the data (zeroes, as the file's creation left them)
 * and fresh metadata
 */
static int coroutine_fn GRAPH_UNLOCKED
drbd_co_create(BlockdevCreateOptions *create_options, Error **errp)
{
    BlockdevCreateOptionsDrbd *opts = &create_options->u.drbd;
    BlockDriverState *file_bs = NULL, *meta_bs = NULL;
    BlockBackend *file = NULL, *meta = NULL;
    uint32_t al_extents = opts->has_al_extents ? opts->al_extents :
                          DRBD_AL_EXTENTS_DEFAULT;
    uint32_t max_peers = opts->has_max_peers ? opts->max_peers : 1;
    int ret;

    assert(create_options->driver == BLOCKDEV_DRIVER_DRBD);
    if (!QEMU_IS_ALIGNED(opts->size, DRBD_WIRE_ALIGN)) {
        error_setg(errp, "the size of a drbd image must be a multiple of "
                   "%d bytes", DRBD_WIRE_ALIGN);
        return -EINVAL;
    }
    if (drbd_al_extents_valid(al_extents, errp) < 0 ||
        drbd_md_max_peers_valid(max_peers, errp) < 0) {
        return -EINVAL;
    }

    file_bs = bdrv_co_open_blockdev_ref(opts->file, errp);
    if (!file_bs) {
        return -EIO;
    }
    file = blk_co_new_with_bs(file_bs, BLK_PERM_WRITE | BLK_PERM_RESIZE,
                              BLK_PERM_ALL, errp);
    if (!file) {
        ret = -EPERM;
        goto out;
    }
    blk_set_allow_write_beyond_eof(file, true);
    if (opts->meta) {
        meta_bs = bdrv_co_open_blockdev_ref(opts->meta, errp);
        if (!meta_bs) {
            ret = -EIO;
            goto out;
        }
        meta = blk_co_new_with_bs(meta_bs, BLK_PERM_WRITE | BLK_PERM_RESIZE,
                                  BLK_PERM_ALL, errp);
        if (!meta) {
            ret = -EPERM;
            goto out;
        }
        blk_set_allow_write_beyond_eof(meta, true);
    }

    if (opts->data_file_raw) {
        int64_t len = blk_co_getlength(file);

        if (len < 0) {
            error_setg_errno(errp, -len, "Could not get the size of '%s'",
                             file_bs->filename);
            ret = len;
            goto out;
        }
        if ((uint64_t)len > opts->size) {
            error_setg(errp, "'%s' holds %" PRId64 " bytes of data, more "
                       "than the %" PRIu64 " bytes asked for",
                       file_bs->filename, len, opts->size);
            error_append_hint(errp, "Give its size (or more) to keep all of "
                              "it: data-file-raw keeps the data there is.\n");
            ret = -EINVAL;
            goto out;
        }
    }
    ret = drbd_md_create(file, meta, opts->size, al_extents, max_peers,
                         opts->data_file_raw, errp);

out:
    if (meta) {
        blk_co_unref(meta);
    }
    if (file) {
        blk_co_unref(file);
    }
    bdrv_co_unref(meta_bs);
    bdrv_co_unref(file_bs);
    return ret;
}

#define DRBD_OPT_AL_EXTENTS "al-extents"
#define DRBD_OPT_MAX_PEERS  "max-peers"
#define DRBD_OPT_META       "meta"
#define DRBD_OPT_DATA_RAW   "data-file-raw"

static QemuOptsList drbd_create_opts = {
    .name = "drbd-create-opts",
    .head = QTAILQ_HEAD_INITIALIZER(drbd_create_opts.head),
    .desc = {
        {
            .name = BLOCK_OPT_SIZE,
            .type = QEMU_OPT_SIZE,
            .help = "Bytes of data (the metadata comes on top)",
        },
        {
            .name = DRBD_OPT_AL_EXTENTS,
            .type = QEMU_OPT_NUMBER,
            .help = "Activity-log extents of 4 MiB (7 to 6216)",
            .def_value_str = stringify(DRBD_AL_EXTENTS_DEFAULT),
        },
        {
            .name = DRBD_OPT_MAX_PEERS,
            .type = QEMU_OPT_NUMBER,
            .help = "Peers the metadata keeps a bitmap for (1 to 31)",
            .def_value_str = "1",
        },
        {
            .name = DRBD_OPT_META,
            .type = QEMU_OPT_STRING,
            .help = "File name of external metadata (default: internal)",
        },
        {
            .name = DRBD_OPT_DATA_RAW,
            .type = QEMU_OPT_BOOL,
            .help = "The file holds the data already: keep it, and make "
                    "the metadata say it is up to date",
            .def_value_str = "off",
        },
        { /* end of list */ }
    }
};

static int coroutine_fn GRAPH_UNLOCKED
drbd_co_create_opts(BlockDriver *drv, const char *filename, QemuOpts *opts,
                    Error **errp)
{
    BlockdevCreateOptions *create_options = NULL;
    BlockDriverState *bs = NULL, *meta_bs = NULL;
    g_autofree char *meta_file = NULL;
    bool data_raw;
    QDict *qdict;
    Visitor *v;
    int ret;

    meta_file = qemu_opt_get_del(opts, DRBD_OPT_META);
    data_raw = qemu_opt_get_bool(opts, DRBD_OPT_DATA_RAW, false);
    qdict = qemu_opts_to_qdict_filtered(opts, NULL, &drbd_create_opts, true);

    /*
     * The file (protocol layer), unless it holds the data already, and
     * the metadata file if external
     */
    if (!data_raw) {
        ret = bdrv_co_create_file(filename, opts, errp);
        if (ret < 0) {
            goto done;
        }
    }
    bs = bdrv_co_open(filename, NULL, NULL,
                      BDRV_O_RDWR | BDRV_O_RESIZE | BDRV_O_PROTOCOL, errp);
    if (!bs) {
        ret = -EIO;
        goto done;
    }
    if (meta_file) {
        ret = bdrv_co_create_file(meta_file, opts, errp);
        if (ret < 0) {
            goto done;
        }
        meta_bs = bdrv_co_open(meta_file, NULL, NULL,
                               BDRV_O_RDWR | BDRV_O_RESIZE | BDRV_O_PROTOCOL,
                               errp);
        if (!meta_bs) {
            ret = -EIO;
            goto done;
        }
        qdict_put_str(qdict, "meta", meta_bs->node_name);
    }

    qdict_put_str(qdict, "driver", "drbd");
    qdict_put_str(qdict, "file", bs->node_name);
    v = qobject_input_visitor_new_flat_confused(qdict, errp);
    if (!v) {
        ret = -EINVAL;
        goto done;
    }
    visit_type_BlockdevCreateOptions(v, NULL, &create_options, errp);
    visit_free(v);
    if (!create_options) {
        ret = -EINVAL;
        goto done;
    }
    create_options->u.drbd.size = ROUND_UP(create_options->u.drbd.size,
                                           DRBD_WIRE_ALIGN);
    ret = drbd_co_create(create_options, errp);

done:
    qobject_unref(qdict);
    bdrv_co_unref(meta_bs);
    bdrv_co_unref(bs);
    qapi_free_BlockdevCreateOptions(create_options);
    return ret;
}

#define DRBD_OPT_NODE_ID      "node-id"
#define DRBD_OPT_PEER_NODE_ID "peer-node-id"

static QemuOptsList drbd_amend_opts = {
    .name = "drbd-amend-opts",
    .head = QTAILQ_HEAD_INITIALIZER(drbd_amend_opts.head),
    .desc = {
        {
            .name = DRBD_OPT_MAX_PEERS,
            .type = QEMU_OPT_NUMBER,
            .help = "More bitmap slots, for more peers (up to 31)",
        },
        {
            .name = DRBD_OPT_NODE_ID,
            .type = QEMU_OPT_NUMBER,
            .help = "With max-peers, for metadata of one slot: this "
                    "node's id",
        },
        {
            .name = DRBD_OPT_PEER_NODE_ID,
            .type = QEMU_OPT_NUMBER,
            .help = "With max-peers, for metadata of one slot: the id of "
                    "the peer it replicated with",
        },
        { /* end of list */ }
    }
};

/* A node id amend option @name: into *@id if given (else -1) */
static int drbd_amend_node_id(QemuOpts *opts, const char *name, int64_t *id,
                              Error **errp)
{
    uint64_t v;

    *id = -1;
    if (!qemu_opt_find(opts, name)) {
        return 0;
    }
    v = qemu_opt_get_number(opts, name, 0);
    if (v > 31) {
        error_setg(errp, "%s must be between 0 and 31, not %" PRIu64, name,
                   v);
        return -EINVAL;
    }
    *id = v;
    return 0;
}

/*
 * qemu-img amend: more bitmap slots (meta.c), with the node alone: no
 * peer (qemu-img amend -f drbd IMG opens none) and no guest I/O
 */
static int GRAPH_RDLOCK
drbd_amend_options(BlockDriverState *bs, QemuOpts *opts,
                   BlockDriverAmendStatusCB *status_cb, void *cb_opaque,
                   bool force, Error **errp)
{
    BDRVDrbdState *s = bs->opaque;
    uint64_t max_peers;
    int64_t node_id, peer_node_id;

    if (!qemu_opt_find(opts, DRBD_OPT_MAX_PEERS)) {
        if (qemu_opt_find(opts, DRBD_OPT_NODE_ID) ||
            qemu_opt_find(opts, DRBD_OPT_PEER_NODE_ID)) {
            error_setg(errp, "node-id and peer-node-id go with max-peers");
            return -EINVAL;
        }
        return 0;
    }
    if (!s->md.child || !s->md.writable) {
        error_setg(errp, "drbd node '%s' has no writable metadata to amend",
                   drbd_name(s));
        return -EINVAL;
    }
    if (drbd_replicates(s) || qatomic_read(&s->detached)) {
        error_setg(errp, "drbd node '%s' is to be amended alone, not %s",
                   drbd_name(s), drbd_replicates(s) ? "with peers" :
                   "detached from its disk");
        error_append_hint(errp, "Stop the node, then: qemu-img amend -f "
                          "drbd -o max-peers=N IMG\n");
        return -EINVAL;
    }
    max_peers = qemu_opt_get_number(opts, DRBD_OPT_MAX_PEERS, 0);
    if (max_peers > DRBD_MD_MAX_PEERS) {
        error_setg(errp, "max-peers must be between 1 and %d, not %" PRIu64,
                   DRBD_MD_MAX_PEERS, max_peers);
        return -EINVAL;
    }
    if (drbd_amend_node_id(opts, DRBD_OPT_NODE_ID, &node_id, errp) < 0 ||
        drbd_amend_node_id(opts, DRBD_OPT_PEER_NODE_ID, &peer_node_id,
                           errp) < 0) {
        return -EINVAL;
    }
    if (max_peers == s->md.sb.max_peers && node_id < 0 &&
        peer_node_id < 0) {
        return 0;
    }
    return drbd_md_grow(s, max_peers, node_id, peer_node_id, errp);
}

static BlockDriver bdrv_drbd = {
    .format_name                = "drbd",
    .instance_size              = sizeof(BDRVDrbdState),
    .is_format                  = true,

    .bdrv_open                  = drbd_open,
    .bdrv_close                 = drbd_close,
    .bdrv_child_perm            = drbd_child_perm,
    .bdrv_check_perm            = drbd_check_perm,
    .bdrv_set_perm              = drbd_set_perm,
    .bdrv_refresh_limits        = drbd_refresh_limits,

    .bdrv_co_preadv_part        = drbd_co_preadv_part,
    .bdrv_co_pwritev_part       = drbd_co_pwritev_part,
    .bdrv_co_pwrite_zeroes      = drbd_co_pwrite_zeroes,
    .bdrv_co_pdiscard           = drbd_co_pdiscard,
    .bdrv_co_flush              = drbd_co_flush,
    .bdrv_co_block_status       = drbd_co_block_status,
    .bdrv_co_getlength          = drbd_co_getlength,
    .bdrv_co_truncate           = drbd_co_truncate,

    .bdrv_drain_begin           = drbd_drain_begin,
    .bdrv_drain_end             = drbd_drain_end,
    .bdrv_attach_aio_context    = drbd_attach_aio_context,

    .bdrv_reopen_prepare        = drbd_reopen_prepare,
    .bdrv_reopen_commit         = drbd_reopen_commit,
    .bdrv_reopen_abort          = drbd_reopen_abort,

    .bdrv_get_specific_info     = drbd_get_specific_info,
    .bdrv_co_check              = drbd_co_check,
    .bdrv_inactivate            = drbd_inactivate,
    .bdrv_co_invalidate_cache   = drbd_co_invalidate_cache,
    .bdrv_co_create             = drbd_co_create,
    .bdrv_co_create_opts        = drbd_co_create_opts,
    .create_opts                = &drbd_create_opts,
    .bdrv_amend_options         = drbd_amend_options,
    .amend_opts                 = &drbd_amend_opts,
    .supports_backing           = false,
};

/*
 * drbd-detach: stop using the local disk, as a disk error under
 * on-io-error=detach does, once the local requests in flight are done.
 * A QMP command, in a coroutine of the main loop: the drained section
 * yields rather than blocking the monitor.
 */
int coroutine_fn drbd_co_detach_disk(BDRVDrbdState *s, Error **errp)
{
    GLOBAL_STATE_CODE();

    if (qatomic_read(&s->detached)) {
        error_setg(errp, "'%s' is detached already", drbd_name(s));
        return -EALREADY;
    }
    bdrv_drained_begin(s->bs);
    drbd_detach(s, "detached (drbd-detach)", false);
    bdrv_drained_end(s->bs);
    return 0;
}

/* Put @new_bs in the place of @child's node, in the node's context */
static int drbd_replace_disk(BDRVDrbdState *s, BdrvChild *child,
                             BlockDriverState *new_bs, Error **errp)
{
    AioContext *ctx = bdrv_get_aio_context(s->bs);

    if (bdrv_get_aio_context(new_bs) != ctx &&
        bdrv_try_change_aio_context(new_bs, ctx, NULL, errp) < 0) {
        return -EINVAL;
    }
    return bdrv_replace_child_bs(child, new_bs, errp);
}

/*
 * drbd-attach: the disk @file (and the metadata @meta, with external
 * metadata) in the place of the failed one.  The new disk's metadata is
 * checked as at open; its data is not trusted: the node's data is
 * inconsistent, all of it out of sync, and the node reconnects so that
 * the handshake makes it the target of a full resync.  A failure leaves
 * the node detached, as it was.  Main loop.
 */
int drbd_attach_disk(BDRVDrbdState *s, const char *file, const char *meta,
                     Error **errp)
{
    BlockDriverState *bs = s->bs;
    BlockDriverState *new_file, *new_meta = NULL;
    const char *name = drbd_name(s);
    uint64_t size = s->size;
    /* What a refused disk's metadata must not leave behind */
    DrbdSuperblock md = s->md.sb;
    uint64_t md_sb_offset = s->md.sb_offset;
    uint64_t al_tr_number = s->md.al_tr_number;
    DrbdUuids u;
    bool same_file;
    unsigned i;
    int64_t len;
    int ret;

    GLOBAL_STATE_CODE();

    if (!bs->file) {
        error_setg(errp, "'%s' is a diskless client (opened without a "
                   "file): it has no disk to replace", name);
        return -EINVAL;
    }
    if (!qatomic_read(&s->detached)) {
        error_setg(errp, "'%s' has its disk: drbd-detach it first", name);
        return -EBUSY;
    }
    if (s->role == DRBD_ROLE_PRIMARY) {
        error_setg(errp, "'%s' is primary: a disk is attached to a "
                   "secondary", name);
        error_append_hint(errp, "Move the guest to the peer (migrate it, or "
                          "stop it and promote the peer), then attach; "
                          "the node resyncs from its peer.\n");
        return -EBUSY;
    }
    if (!bdrv_is_writable(bs)) {
        error_setg(errp, "'%s' is not writable: it cannot take a disk",
                   name);
        return -EINVAL;
    }
    if (!!meta != (s->meta_disk == DRBD_META_DISK_EXTERNAL)) {
        error_setg(errp, "'%s' has meta-disk %s: %s", name,
                   DrbdMetaDisk_str(s->meta_disk),
                   meta ? "'meta' is for external metadata only" :
                   "give the new metadata's node as 'meta'");
        return -EINVAL;
    }
    new_file = bdrv_find_node(file);
    if (!new_file) {
        error_setg(errp, "no block node named '%s'", file);
        return -ENOENT;
    }
    if (meta) {
        new_meta = bdrv_find_node(meta);
        if (!new_meta) {
            error_setg(errp, "no block node named '%s'", meta);
            return -ENOENT;
        }
    }
    same_file = bs->file && new_file == bs->file->bs;
    if (same_file || (new_meta && s->meta && new_meta == s->meta->bs)) {
        error_setg(errp, "'%s' is detached from '%s' already: attach a "
                   "new node", name, same_file ? file : meta);
        error_append_hint(errp, "Open the disk again as a node of its own "
                          "(blockdev-add) and give that node.\n");
        return -EINVAL;
    }

    bdrv_drained_begin(bs);
    ret = drbd_replace_disk(s, bs->file, new_file, errp);
    if (ret == 0 && new_meta) {
        ret = drbd_replace_disk(s, s->meta, new_meta, errp);
    }
    if (ret < 0) {
        error_prepend(errp, "'%s': ", name);
        goto out;
    }

    bdrv_graph_rdlock_main_loop();
    len = bdrv_getlength(bs->file->bs);
    if (len < 0) {
        error_setg_errno(errp, -len, "Could not get the size of '%s'",
                         bs->file->bs->filename);
        ret = len;
    } else if (s->meta_disk == DRBD_META_DISK_NONE) {
        if ((uint64_t)len != size) {
            error_setg(errp, "'%s' has %" PRId64 " bytes, the node %" PRIu64,
                       bs->file->bs->filename, len, size);
            ret = -EINVAL;
        }
    } else {
        drbd_oos_free(s);
        drbd_md_free(s);
        s->md.al_recovered = 0;
        s->md.al_damaged = false;
        ret = drbd_md_open(s, s->meta_disk == DRBD_META_DISK_EXTERNAL ?
                           DRBD_MD_EXTERNAL : DRBD_MD_INTERNAL, len, errp);
        if (ret == 0 && s->size != size) {
            error_setg(errp, "the new disk's metadata says %" PRIu64
                       " bytes of data, the node has %" PRIu64, s->size,
                       size);
            error_append_hint(errp, "Make the new disk with qemu-img "
                              "create -f drbd and the node's size.\n");
            ret = -EINVAL;
        }
        if (ret < 0) {
            /* Still detached, as before: nothing of the new disk stays */
            drbd_md_free(s);
            s->size = size;
            s->md.sb = md;
            s->md.sb_offset = md_sb_offset;
            s->md.al_tr_number = al_tr_number;
            s->md.al_recovered = 0;
            s->md.al_damaged = false;
            qemu_mutex_lock(&s->lock);
            s->disk = DRBD_DISK_STATE_DISKLESS;
            qemu_mutex_unlock(&s->lock);
            drbd_oos_free(s);
        }
    }
    drbd_oos_alloc(s);
    if (ret < 0) {
        bdrv_graph_rdunlock_main_loop();
        error_prepend(errp, "'%s': the new disk is refused: ", name);
        goto out;
    }

    /* Nothing on the new disk is trusted: all of it comes from the peer */
    qemu_mutex_lock(&s->lock);
    s->partial_gen = 0;
    drbd_oos_set_all_locked(s, 0, s->size);
    for (i = 0; i < s->nr_conns; i++) {
        drbd_uuid_init(&u);
        drbd_uuids_set_locked(s->conns[i], &u);
        /* With a disk, the node resyncs what a peer missed itself */
        s->conns[i]->missed_acked = false;
    }
    s->md.failed = false;
    s->md.writable = s->meta_disk != DRBD_META_DISK_NONE;
    s->no_peer_reported = false;
    s->pass_on_reported = false;
    qatomic_set(&s->detached, false);
    qemu_mutex_unlock(&s->lock);
    drbd_set_state(s, NULL, -1, -1, DRBD_DISK_STATE_INCONSISTENT, -1, -1,
                   "a disk was attached: full resync from the peer");
    if (s->md.writable) {
        ret = drbd_md_open_commit(s, errp);
    }
    bdrv_graph_rdunlock_main_loop();
    if (ret == 0) {
        ret = drbd_md_sync_all(s);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "could not write the metadata");
        }
    }
    if (ret < 0) {
        error_prepend(errp, "'%s': ", name);
        drbd_detach(s, "the attached disk failed", true);
        goto out;
    }

    /* The handshakes, again, see the disk and start the resync */
    drbd_peers_fail(s, "a disk was attached");
out:
    bdrv_drained_end(bs);
    return ret;
}

bool drbd_is_drbd_node(BlockDriverState *bs)
{
    return bs->drv == &bdrv_drbd;
}

static void bdrv_drbd_init(void)
{
    bdrv_register(&bdrv_drbd);
}

block_init(bdrv_drbd_init);
