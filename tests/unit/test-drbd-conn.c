/*
 * drbd connection layer: two nodes in one process, connected over a unix
 * socket, replicate what the primary writes, refuse guest I/O on the
 * secondary, resynchronize after a disconnect, a node survives a peer
 * that sends it garbage, and it refuses a peer whose answer to its
 * challenge is anything but the right HMAC.  A fake secondary checks the
 * epochs a primary sends and how it takes a failed resync write; a fake
 * primary checks the order in which a secondary starts writes, and that
 * a sync target serves no reads and no verify.
 *
 * Everything runs in the main loop: the test drives it with poll_until()
 * and reads the nodes' states with qmp_query_drbd().
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/aio.h"
#include "block/block-global-state.h"
#include "crypto/init.h"
#include "crypto/secret.h"
#include "io/channel-socket.h"
#include "qapi/error.h"
#include "qapi/qapi-commands-drbd.h"
#include "qapi/qapi-types-sockets.h"
#include "qemu/bswap.h"
#include "qemu/coroutine.h"
#include "qemu/cutils.h"
#include "qemu/hbitmap.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/timer.h"
#include "qemu/units.h"
#include "qobject/qdict.h"
#include "system/block-backend.h"
#include "../../block/drbd/drbd-int.h"   /* drbd_auth_answer() */
#include "../../block/drbd/rle.h"
#include "../../block/drbd/wire.h"

#define IMG_SIZE            (8 * MiB)
#define BM_GRANULARITY      (4 * KiB)   /* one out-of-sync bit */
#define POLL_TIMEOUT_MS     10000
#define NODE_A              "drbd-a"
#define NODE_B              "drbd-b"

/* A condition that poll_until() waits for */
typedef bool PollCond(void *opaque);

static void set_flag(void *opaque)
{
    *(bool *)opaque = true;
}

/* The state of one node, as query-drbd reports it */
static DrbdInfo *query(const char *node_name)
{
    g_autoptr(DrbdInfoList) list = qmp_query_drbd(&error_abort);
    DrbdInfoList *e;

    for (e = list; e; e = e->next) {
        if (!strcmp(e->value->node_name, node_name)) {
            return g_steal_pointer(&e->value);
        }
    }
    g_error("query-drbd does not list node '%s'", node_name);
}

static void dump_states(void)
{
    g_autoptr(DrbdInfoList) list = qmp_query_drbd(&error_abort);
    DrbdInfoList *e;

    for (e = list; e; e = e->next) {
        DrbdInfo *i = e->value;

        g_test_message("%s: role %s, peer %s, connection %s, disk %s, "
                       "peer disk %s, oos %" PRIu64 " bytes, pe %" PRIu32
                       ", last error: %s", i->node_name,
                       DrbdRole_str(i->role), DrbdRole_str(i->peer_role),
                       DrbdConnState_str(i->connection),
                       DrbdDiskState_str(i->disk),
                       DrbdDiskState_str(i->peer_disk), i->counters->oos,
                       i->counters->pe, i->last_error ?: "none");
    }
}

/*
 * Run the main loop until @cond holds; false if it did not within
 * @timeout_ms.  poll_until() fails the test then.
 */
static bool poll_for(PollCond *cond, void *opaque, int64_t timeout_ms)
{
    AioContext *ctx = qemu_get_aio_context();
    bool expired = false;
    QEMUTimer *timer;
    bool ok;

    timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_MS, set_flag,
                          &expired);
    timer_mod(timer, qemu_clock_get_ms(QEMU_CLOCK_REALTIME) + timeout_ms);
    while (!(ok = cond(opaque)) && !expired) {
        aio_poll(ctx, true);
    }
    timer_free(timer);
    return ok;
}

static void poll_until(PollCond *cond, void *opaque, int64_t timeout_ms,
                       const char *what)
{
    if (!poll_for(cond, opaque, timeout_ms)) {
        dump_states();
        g_error("%s: not reached within %" PRId64 " ms", what, timeout_ms);
    }
}

/* Conditions on one node, by name */
static bool node_connected(void *opaque)
{
    g_autoptr(DrbdInfo) i = query(opaque);

    return i->connection == DRBD_CONN_STATE_CONNECTED;
}

static bool node_waiting(void *opaque)
{
    g_autoptr(DrbdInfo) i = query(opaque);

    return i->connection == DRBD_CONN_STATE_WF_CONNECTION;
}

/*
 * A pair: node A primary and connecting, node B secondary and listening,
 * each over an image of its own
 */
typedef struct Pair {
    char *dir;
    char *path_a;
    char *path_b;
    char *sock;
    const char *protocol;
    BlockBackend *a;
    BlockBackend *b;
    uint8_t *expect;            /* what both images must hold */
} Pair;

static char *make_image(const char *dir, const char *name)
{
    char *path = g_build_filename(dir, name, NULL);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, IMG_SIZE), ==, 0);
    close(fd);
    return path;
}

static QDict *node_options(const char *node_name, const char *image,
                           const char *role, const char *node_id,
                           const char *protocol)
{
    QDict *opts = qdict_new();

    qdict_put_str(opts, "driver", "drbd");
    qdict_put_str(opts, "node-name", node_name);
    qdict_put_str(opts, "role", role);
    qdict_put_str(opts, "node-id", node_id);
    qdict_put_str(opts, "protocol", protocol);
    qdict_put_str(opts, "meta-disk", "none");
    qdict_put_str(opts, "file.driver", "file");
    qdict_put_str(opts, "file.filename", image);
    return opts;
}

/*
 * Node A: primary, node-id 0, connects to @sock every @interval ms, and
 * resyncs at @resync_rate bytes per second (if not NULL)
 */
static BlockBackend *open_a(const char *image, const char *sock,
                            const char *protocol, const char *interval,
                            const char *resync_rate)
{
    QDict *opts = node_options(NODE_A, image, "primary", "0", protocol);

    qdict_put_str(opts, "peer.type", "unix");
    qdict_put_str(opts, "peer.path", sock);
    qdict_put_str(opts, "connect-interval", interval);
    if (resync_rate) {
        qdict_put_str(opts, "resync-rate", resync_rate);
    }
    return blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
}

/* Node B: secondary, node-id 1, listens on @sock */
static BlockBackend *open_b(Pair *p)
{
    QDict *opts = node_options(NODE_B, p->path_b, "secondary", "1",
                               p->protocol);

    qdict_put_str(opts, "listen.type", "unix");
    qdict_put_str(opts, "listen.path", p->sock);
    return blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
}

static bool pair_connected(void *opaque)
{
    return node_connected((char *)NODE_A) && node_connected((char *)NODE_B);
}

/* The images and the socket's path; no node open yet */
static void pair_init(Pair *p, const char *protocol)
{
    p->dir = g_dir_make_tmp("test-drbd-conn-XXXXXX", NULL);
    g_assert_nonnull(p->dir);
    p->path_a = make_image(p->dir, "a.img");
    p->path_b = make_image(p->dir, "b.img");
    p->sock = g_build_filename(p->dir, "sock", NULL);
    p->protocol = protocol;
    p->expect = g_malloc0(IMG_SIZE);
    p->a = NULL;
    p->b = NULL;
}

static void pair_setup_rate(Pair *p, const char *protocol,
                            const char *resync_rate)
{
    pair_init(p, protocol);
    /* B listens first, so that A's first attempt connects */
    p->b = open_b(p);
    p->a = open_a(p->path_a, p->sock, protocol, "100", resync_rate);
    poll_until(pair_connected, p, POLL_TIMEOUT_MS, "both nodes connected");
}

static void pair_setup(Pair *p, const char *protocol)
{
    pair_setup_rate(p, protocol, NULL);
}

static void pair_close(Pair *p)
{
    g_clear_pointer(&p->a, blk_unref);
    g_clear_pointer(&p->b, blk_unref);
}

static void pair_teardown(Pair *p)
{
    pair_close(p);
    unlink(p->path_a);
    unlink(p->path_b);
    unlink(p->sock);
    g_assert_cmpint(rmdir(p->dir), ==, 0);
    g_free(p->dir);
    g_free(p->path_a);
    g_free(p->path_b);
    g_free(p->sock);
    g_free(p->expect);
}

/* A pattern that differs from write to write and from sector to sector */
static void fill_pattern(uint8_t *buf, size_t len, unsigned seed)
{
    size_t i;

    for (i = 0; i < len; i++) {
        buf[i] = (seed * 151 + (i >> 9) * 13 + i) & 0xff;
    }
    buf[0] = seed;  /* never all zeroes */
}

/* Writes in flight, counted down as they complete, each successfully */
static void count_down_cb(void *opaque, int ret)
{
    g_assert_cmpint(ret, ==, 0);
    (*(int *)opaque)--;
}

static bool counted_down(void *opaque)
{
    return *(int *)opaque == 0;
}

/*
 * Write through @blk with @flags and record what the images must hold;
 * a write that does not complete in time fails the test
 */
static void pair_write_flags(Pair *p, BlockBackend *blk, int64_t offset,
                             int64_t bytes, unsigned seed,
                             BdrvRequestFlags flags)
{
    g_autofree uint8_t *buf = g_malloc(bytes);
    QEMUIOVector qiov;
    int pending = 1;

    fill_pattern(buf, bytes, seed);
    qemu_iovec_init_buf(&qiov, buf, bytes);
    blk_aio_pwritev(blk, offset, &qiov, flags, count_down_cb, &pending);
    poll_until(counted_down, &pending, POLL_TIMEOUT_MS, "a write completes");
    memcpy(p->expect + offset, buf, bytes);
}

static void pair_write(Pair *p, BlockBackend *blk, int64_t offset,
                       int64_t bytes, unsigned seed)
{
    pair_write_flags(p, blk, offset, bytes, seed, 0);
}

/* The first offset where @path differs from @expect, or -1 */
static int64_t image_differs(const char *path, const uint8_t *expect)
{
    g_autofree uint8_t *buf = g_malloc(IMG_SIZE);
    int fd = open(path, O_RDONLY);
    int64_t i;

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, buf, IMG_SIZE, 0), ==, IMG_SIZE);
    close(fd);
    if (!memcmp(buf, expect, IMG_SIZE)) {
        return -1;
    }
    for (i = 0; buf[i] == expect[i]; i++) {
        /* find it */
    }
    return i;
}

/* Writes of several sizes at several offsets, replicated */
static const struct {
    int64_t offset;
    int64_t bytes;
} writes[] = {
    { 0, 4 * KiB },
    { 64 * KiB, 64 * KiB },
    { 1 * MiB, 1 * MiB },
    { 3 * MiB + 12 * KiB, 1 * MiB },        /* not 64 KiB aligned */
    { 5 * MiB - 4 * KiB, 64 * KiB },        /* across a MiB boundary */
    { 7 * MiB + 512, 512 },                 /* one sector */
    { 64 * KiB + 4 * KiB, 4 * KiB },        /* over an earlier write */
};

static void test_connect(void)
{
    Pair p;
    g_autoptr(DrbdInfo) a = NULL;
    g_autoptr(DrbdInfo) b = NULL;

    pair_setup(&p, "c");
    a = query(NODE_A);
    b = query(NODE_B);

    g_assert_cmpint(a->connection, ==, DRBD_CONN_STATE_CONNECTED);
    g_assert_cmpint(a->role, ==, DRBD_ROLE_PRIMARY);
    g_assert_cmpint(a->peer_role, ==, DRBD_ROLE_SECONDARY);
    g_assert_cmpint(a->disk, ==, DRBD_DISK_STATE_UP_TO_DATE);
    g_assert_cmpint(a->peer_disk, ==, DRBD_DISK_STATE_UP_TO_DATE);
    g_assert_cmpint(a->protocol, ==, DRBD_PROTOCOL_C);
    g_assert_cmpint(a->node_id, ==, 0);
    g_assert_null(a->resync);

    g_assert_cmpint(b->connection, ==, DRBD_CONN_STATE_CONNECTED);
    g_assert_cmpint(b->role, ==, DRBD_ROLE_SECONDARY);
    g_assert_cmpint(b->peer_role, ==, DRBD_ROLE_PRIMARY);
    g_assert_cmpint(b->disk, ==, DRBD_DISK_STATE_UP_TO_DATE);
    g_assert_cmpint(b->node_id, ==, 1);
    g_assert_cmpstr(a->resource, ==, b->resource);

    /* Nothing was written, so nothing needed a resync */
    g_assert_cmpuint(a->counters->oos, ==, 0);
    g_assert_cmpuint(a->counters->ns, ==, 0);
    g_assert_cmpuint(b->counters->nr, ==, 0);

    pair_teardown(&p);
}

/* Write through A, flush, check the counters and then both images */
static void test_replicate(gconstpointer data)
{
    const char *protocol = data;
    g_autoptr(DrbdInfo) a = NULL;
    g_autoptr(DrbdInfo) b = NULL;
    uint64_t total = 0;
    Pair p;
    int i;

    pair_setup(&p, protocol);
    /* FUA: on the peer's disk too when it completes, whatever protocol */
    pair_write_flags(&p, p.a, 6 * MiB, 64 * KiB, 99, BDRV_REQ_FUA);
    total += 64 * KiB;
    for (i = 0; i < ARRAY_SIZE(writes); i++) {
        pair_write(&p, p.a, writes[i].offset, writes[i].bytes, i + 1);
        total += writes[i].bytes;
    }
    g_assert_cmpint(blk_flush(p.a), ==, 0);

    /* After the flush the peer has applied every write */
    a = query(NODE_A);
    b = query(NODE_B);
    g_assert_cmpint(a->connection, ==, DRBD_CONN_STATE_CONNECTED);
    g_assert_cmpint(b->connection, ==, DRBD_CONN_STATE_CONNECTED);
    g_assert_cmpuint(a->counters->ns, ==, total);
    g_assert_cmpuint(a->counters->dw, ==, total);
    g_assert_cmpuint(a->counters->oos, ==, 0);
    g_assert_cmpuint(a->counters->pe, ==, 0);
    g_assert_cmpuint(a->counters->ap, ==, 0);
    g_assert_cmpuint(b->counters->nr, ==, total);
    g_assert_cmpuint(b->counters->dw, ==, total);
    g_assert_cmpuint(b->counters->ns, ==, 0);

    /* Reads on the primary see what was written */
    for (i = 0; i < ARRAY_SIZE(writes); i++) {
        g_autofree uint8_t *buf = g_malloc(writes[i].bytes);

        g_assert_cmpint(blk_pread(p.a, writes[i].offset, writes[i].bytes,
                                  buf, 0), ==, 0);
        g_assert(!memcmp(buf, p.expect + writes[i].offset,
                         writes[i].bytes));
    }

    pair_close(&p);
    g_assert_cmpint(image_differs(p.path_a, p.expect), ==, -1);
    g_assert_cmpint(image_differs(p.path_b, p.expect), ==, -1);
    pair_teardown(&p);
}

/* A secondary serves no guest I/O, and refusing it keeps it connected */
static void test_secondary_refuses_io(void)
{
    g_autofree uint8_t *buf = g_malloc(4 * KiB);
    g_autoptr(DrbdInfo) b = NULL;
    Pair p;

    pair_setup(&p, "c");
    fill_pattern(buf, 4 * KiB, 0x42);
    g_assert_cmpint(blk_pwrite(p.b, 0, 4 * KiB, buf, 0), ==, -EPERM);
    g_assert_cmpint(blk_pread(p.b, 0, 4 * KiB, buf, 0), ==, -EPERM);

    b = query(NODE_B);
    g_assert_cmpint(b->connection, ==, DRBD_CONN_STATE_CONNECTED);
    g_assert_cmpint(b->role, ==, DRBD_ROLE_SECONDARY);
    g_assert_cmpuint(b->counters->dw, ==, 0);

    pair_close(&p);
    /* Neither image was touched */
    g_assert_cmpint(image_differs(p.path_a, p.expect), ==, -1);
    g_assert_cmpint(image_differs(p.path_b, p.expect), ==, -1);
    pair_teardown(&p);
}

/* drbd-promote and drbd-demote, coroutine QMP commands, from the test */
typedef struct RoleCall {
    const char *node;
    bool demote;
    Error *err;
    bool done;
} RoleCall;

static void coroutine_fn role_call_co(void *opaque)
{
    RoleCall *c = opaque;

    if (c->demote) {
        qmp_drbd_demote(c->node, &c->err);
    } else {
        qmp_drbd_promote(c->node, false, false, &c->err);
    }
    c->done = true;
}

static bool role_call_done(void *opaque)
{
    return ((RoleCall *)opaque)->done;
}

/* The error of drbd-promote (or drbd-demote) of @node; NULL if none */
static Error *role_call(const char *node, bool demote)
{
    RoleCall c = { .node = node, .demote = demote };

    qemu_coroutine_enter(qemu_coroutine_create(role_call_co, &c));
    poll_until(role_call_done, &c, POLL_TIMEOUT_MS,
               demote ? "drbd-demote" : "drbd-promote");
    return c.err;
}

/*
 * A secondary whose peer is primary is not promoted, and says why (the
 * peer would refuse too, but only the node knows what to tell the
 * operator); once the peer is demoted, it is
 */
static void test_promote_peer_primary(void)
{
    g_autoptr(DrbdInfo) b = NULL;
    Error *err;
    Pair p;

    pair_setup(&p, "c");
    err = role_call(NODE_B, false);
    g_assert_nonnull(err);
    g_test_message("drbd-promote: %s", error_get_pretty(err));
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "the peer is primary; demote it first"));
    error_free(err);

    g_assert_null(role_call(NODE_A, true));
    g_assert_null(role_call(NODE_B, false));
    b = query(NODE_B);
    g_assert_cmpint(b->role, ==, DRBD_ROLE_PRIMARY);
    pair_teardown(&p);
}

/* The primary is connected again, the resync done, the peer up to date */
static bool pair_synced(void *opaque)
{
    g_autoptr(DrbdInfo) a = query(NODE_A);
    g_autoptr(DrbdInfo) b = query(NODE_B);

    return a->connection == DRBD_CONN_STATE_CONNECTED &&
           a->counters->oos == 0 &&
           a->peer_disk == DRBD_DISK_STATE_UP_TO_DATE &&
           b->connection == DRBD_CONN_STATE_CONNECTED &&
           b->disk == DRBD_DISK_STATE_UP_TO_DATE &&
           b->peer_role == DRBD_ROLE_PRIMARY;
}

static void test_disconnect_resync(void)
{
    /* Written while B is away: 4 KiB-aligned, apart from each other */
    static const struct {
        int64_t offset;
        int64_t bytes;
    } missed[] = {
        { 64 * KiB, 4 * KiB },              /* over a replicated write */
        { 2 * MiB + 8 * KiB, 64 * KiB },
        { 6 * MiB, 1 * MiB },
    };
    g_autoptr(DrbdInfo) a = NULL;
    g_autoptr(DrbdInfo) a2 = NULL;
    g_autoptr(DrbdInfo) b = NULL;
    uint64_t missed_bytes = 0;
    Pair p;
    int i;

    pair_setup(&p, "c");
    for (i = 0; i < 3; i++) {
        pair_write(&p, p.a, writes[i].offset, writes[i].bytes, i + 1);
    }

    /* B goes away: A notices, and goes on alone */
    g_clear_pointer(&p.b, blk_unref);
    poll_until(node_waiting, (char *)NODE_A, POLL_TIMEOUT_MS,
               "A sees its peer gone");
    a = query(NODE_A);
    g_assert_cmpint(a->role, ==, DRBD_ROLE_PRIMARY);
    g_assert_cmpint(a->peer_role, ==, DRBD_ROLE_UNKNOWN);
    g_assert_cmpint(a->peer_disk, ==, DRBD_DISK_STATE_DUNKNOWN);
    g_assert_cmpuint(a->counters->oos, ==, 0);
    g_assert_nonnull(a->last_error);

    for (i = 0; i < ARRAY_SIZE(missed); i++) {
        pair_write(&p, p.a, missed[i].offset, missed[i].bytes, 100 + i);
        missed_bytes += missed[i].bytes;
    }
    g_assert_cmpint(blk_flush(p.a), ==, 0);
    a2 = query(NODE_A);
    g_assert_cmpuint(a2->counters->oos, ==, missed_bytes);
    g_assert_cmpint(a2->connection, ==, DRBD_CONN_STATE_WF_CONNECTION);

    /* B comes back: A resyncs what it missed */
    p.b = open_b(&p);
    poll_until(pair_synced, &p, POLL_TIMEOUT_MS,
               "the resync to B is done");
    /*
     * Without metadata B's data counts as the generation it had: it is
     * sent what A recorded, not the whole disk
     */
    b = query(NODE_B);
    g_assert_cmpuint(b->counters->nr, ==, missed_bytes);
    g_assert_cmpuint(b->counters->dw, ==, b->counters->nr);
    g_assert_cmpuint(b->counters->oos, ==, 0);

    /* ... and replicates again */
    pair_write(&p, p.a, 4 * MiB, 64 * KiB, 200);
    g_assert_cmpint(blk_flush(p.a), ==, 0);

    pair_close(&p);
    g_assert_cmpint(image_differs(p.path_a, p.expect), ==, -1);
    g_assert_cmpint(image_differs(p.path_b, p.expect), ==, -1);
    pair_teardown(&p);
}

static bool node_a_sync_source(void *opaque)
{
    g_autoptr(DrbdInfo) a = query(NODE_A);

    return a->connection == DRBD_CONN_STATE_SYNC_SOURCE;
}

/*
 * Guest writes while the resync runs, over what it is to send and
 * beside it: the peer ends up with the newest data everywhere
 */
static void test_write_during_resync(void)
{
    g_autoptr(DrbdInfo) a = NULL;
    g_autoptr(DrbdInfo) b = NULL;
    Pair p;
    int i;

    /* About a second of resync for 2 MiB */
    pair_setup_rate(&p, "c", "2097152");
    g_clear_pointer(&p.b, blk_unref);
    poll_until(node_waiting, (char *)NODE_A, POLL_TIMEOUT_MS,
               "A sees its peer gone");
    pair_write(&p, p.a, 0, 1 * MiB, 1);
    pair_write(&p, p.a, 4 * MiB, 1 * MiB, 2);

    p.b = open_b(&p);
    poll_until(node_a_sync_source, NULL, POLL_TIMEOUT_MS,
               "A starts the resync");
    for (i = 0; i < 16; i++) {
        /* Over the resync's ranges, at both ends, and beside them */
        pair_write(&p, p.a, i * 64 * KiB + 4 * KiB, 8 * KiB, 10 + i);
        pair_write(&p, p.a, 5 * MiB - (i + 1) * 64 * KiB, 64 * KiB, 40 + i);
        pair_write(&p, p.a, 6 * MiB + i * 4 * KiB, 4 * KiB, 70 + i);
    }
    a = query(NODE_A);
    g_assert_cmpint(a->connection, ==, DRBD_CONN_STATE_SYNC_SOURCE);
    g_test_message("resync: %" PRIu64 " of %" PRIu64 " bytes done after "
                   "the writes", a->resync->done, a->resync->total);

    poll_until(pair_synced, &p, POLL_TIMEOUT_MS,
               "the resync to B is done");
    b = query(NODE_B);
    g_assert_cmpuint(b->counters->oos, ==, 0);
    g_assert_cmpint(blk_flush(p.a), ==, 0);

    pair_close(&p);
    g_assert_cmpint(image_differs(p.path_a, p.expect), ==, -1);
    g_assert_cmpint(image_differs(p.path_b, p.expect), ==, -1);
    pair_teardown(&p);
}

/*
 * A hostile peer: the test listens where node A connects, and answers
 * with garbage, either at once (up to HOSTILE_TRUNCATED_HELLO) or after
 * a proper handshake (from HOSTILE_LONG_DATA on)
 */
typedef enum HostileMode {
    HOSTILE_BAD_MAGIC,          /* a header with a wrong magic for HELLO */
    HOSTILE_LONG_HELLO,         /* a HELLO header with a huge length */
    HOSTILE_TRUNCATED_HELLO,    /* a HELLO cut short, then end of file */
    HOSTILE_LONG_DATA,          /* handshake; DATA with a huge length */
    HOSTILE_WRITE_PRIMARY,      /* handshake; a valid DATA to the primary */
    HOSTILE_BAD_META,           /* handshake; a PING with a payload */
    HOSTILE_BARRIER_ACK,        /* handshake; ack an epoch never closed */
    HOSTILE_OOS_MISALIGNED,     /* handshake; OUT_OF_SYNC from mid-block */
} HostileMode;

typedef struct Hostile {
    HostileMode mode;
    const char *expect_error;   /* what A's last-error must mention */
    char *dir;
    char *path_a;
    char *sock;
    BlockBackend *a;
    QIOChannelSocket *listener;
    QIOChannelSocket *data;
    QIOChannelSocket *meta;
    bool stop;
    bool done;                  /* the fake peer's coroutine returned */
    bool handshake_done;        /* it took A through the handshake */
    char *error;                /* what went wrong on the fake peer's side */
    const struct AuthCase *auth; /* A has a secret; the fake peer's answer */
    bool proven;                /* A took it, and opened its meta channel */
    const char *const *a_opts;  /* more options of A: key, value, ..., NULL */
    bool a_has_bits;            /* A's bitmap may have bits set */
    bool deferred;              /* the test starts the fake peer itself */
    /* After the handshake, what the fake peer does as a secondary */
    int coroutine_fn (*serve)(struct Hostile *h, Error **errp);
    /* WRITE_ACKs wait for a BARRIER, or until this many DATA came */
    unsigned hold_acks;
    unsigned ndata;             /* DATA received */
    uint32_t data_epoch[64];    /* ... the epoch of each */
    unsigned barriers_before[64]; /* ... BARRIERs received before each */
    unsigned nbarriers;         /* BARRIERs received */
    DrbdBarrier barrier[64];    /* ... each */
    Coroutine *held_co;         /* the fake peer, waiting for the test */
    uint64_t oos_before;        /* A's oos when its first chunk came */
    bool neg_acked;             /* a resync chunk was answered NEG_ACK */
} Hostile;

static bool hostile_handshakes(HostileMode mode)
{
    return mode > HOSTILE_TRUNCATED_HELLO;
}

static void setup_channel(QIOChannelSocket *sioc)
{
    qio_channel_set_blocking(QIO_CHANNEL(sioc), false, NULL);
    qio_channel_set_follow_coroutine_ctx(QIO_CHANNEL(sioc), true);
}

static QIOChannelSocket *coroutine_fn fake_accept(Hostile *h)
{
    while (!h->stop) {
        QIOChannelSocket *sioc = qio_channel_socket_accept(h->listener, NULL);

        if (sioc) {
            setup_channel(sioc);
            return sioc;
        }
        qio_channel_yield(QIO_CHANNEL(h->listener), G_IO_IN);
    }
    return NULL;
}

static int coroutine_fn fake_write(QIOChannelSocket *sioc, const void *buf,
                                   size_t len, Error **errp)
{
    return qio_channel_write_all(QIO_CHANNEL(sioc), (const char *)buf, len,
                                 errp);
}

/* Read the next packet, as the driver's own decoder sees it */
static int coroutine_fn fake_read_any(QIOChannelSocket *sioc, DrbdHeader *h,
                                      uint8_t **payload, Error **errp)
{
    uint8_t hbuf[DRBD_WIRE_HEADER_SIZE];

    *payload = NULL;
    if (qio_channel_read_all(QIO_CHANNEL(sioc), (char *)hbuf, sizeof(hbuf),
                             errp) < 0 ||
        drbd_wire_get_header(hbuf, h, errp) < 0) {
        return -EIO;
    }
    *payload = g_malloc(h->length + 1);
    if (h->length && qio_channel_read_all(QIO_CHANNEL(sioc),
                                          (char *)*payload, h->length,
                                          errp) < 0) {
        g_clear_pointer(payload, g_free);
        return -EIO;
    }
    return 0;
}

/* Read a packet that must be @cmd */
static int coroutine_fn fake_read(QIOChannelSocket *sioc, uint16_t cmd,
                                  uint8_t **payload, uint32_t *len,
                                  Error **errp)
{
    DrbdHeader h;

    if (fake_read_any(sioc, &h, payload, errp) < 0) {
        return -EIO;
    }
    if (h.cmd != cmd) {
        g_clear_pointer(payload, g_free);
        error_setg(errp, "expected %s from node A, got %s",
                   drbd_cmd_name(cmd), drbd_cmd_name(h.cmd));
        return -EPROTO;
    }
    *len = h.length;
    return 0;
}

static int coroutine_fn fake_recv_hello(QIOChannelSocket *sioc, bool meta,
                                        DrbdHello *hello, Error **errp)
{
    g_autofree uint8_t *payload = NULL;
    uint32_t len;

    if (fake_read(sioc, DRBD_CMD_HELLO, &payload, &len, errp) < 0 ||
        drbd_wire_get_hello(payload, len, hello, errp) < 0) {
        return -EIO;
    }
    if (!(hello->flags & DRBD_HELLO_META_CHANNEL) != !meta ||
        hello->node_id != 0) {
        error_setg(errp, "unexpected HELLO from node A (node %" PRIu32
                   ", flags 0x%" PRIx32 ")", hello->node_id, hello->flags);
        return -EPROTO;
    }
    return 0;
}

/* Answer A's HELLO as node 1 of the same resource */
static int coroutine_fn fake_hello(QIOChannelSocket *sioc, bool meta,
                                   Error **errp)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdHello hello;

    if (fake_recv_hello(sioc, meta, &hello, errp) < 0) {
        return -EIO;
    }
    hello.node_id = 1;
    drbd_wire_put_hello(pkt, &hello);
    return fake_write(sioc, pkt->data, pkt->len, errp);
}

/*
 * Version 12: read the node's DECISION, which must be @expected (any but
 * a refusal if -1), and agree: answer with the same seen from this end
 */
static int coroutine_fn fake_decide(QIOChannelSocket *data, int64_t expected,
                                    Error **errp)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    g_autofree uint8_t *payload = NULL;
    DrbdDecision d;
    uint32_t len;

    if (fake_read(data, DRBD_CMD_DECISION, &payload, &len, errp) < 0 ||
        drbd_wire_get_decision(payload, len, &d, errp) < 0) {
        return -EIO;
    }
    if (d.outcome == DRBD_DECISION_REFUSED ||
        (expected >= 0 && d.outcome != expected)) {
        error_setg(errp, "the node decided %" PRIu32 ", not %" PRId64,
                   d.outcome, expected);
        return -EPROTO;
    }
    switch (d.outcome) {
    case DRBD_DECISION_SOURCE:
        d.outcome = DRBD_DECISION_TARGET;
        break;
    case DRBD_DECISION_TARGET:
        d.outcome = DRBD_DECISION_SOURCE;
        break;
    case DRBD_DECISION_FULL_SOURCE:
        d.outcome = DRBD_DECISION_FULL_TARGET;
        break;
    case DRBD_DECISION_FULL_TARGET:
        d.outcome = DRBD_DECISION_FULL_SOURCE;
        break;
    default:
        break;
    }
    drbd_wire_put_decision(pkt, &d);
    return fake_write(data, pkt->data, pkt->len, errp);
}

/*
 * The rest of the handshake on the data channel, as a secondary whose
 * data is the generation A had before its promotion: A becomes connected
 * with nothing to resync
 */
static int coroutine_fn fake_params(Hostile *h, Error **errp)
{
    uint64_t nbits = DIV_ROUND_UP(IMG_SIZE, BM_GRANULARITY);
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    g_autofree uint8_t *chunk = g_malloc(DRBD_WIRE_MAX_BITMAP);
    DrbdSizes sizes = {
        .disk_size = IMG_SIZE,
        .max_epoch_size = 2048,
        .protocol = 'C',
    };
    DrbdStatePacket state = {
        .role = DRBD_ROLE_SECONDARY,
        .disk_state = DRBD_DISK_STATE_UP_TO_DATE,
    };
    DrbdUuidsPacket theirs, mine = { 0 };   /* after-sb: disconnect */
    DrbdSizes their_sizes;
    DrbdStatePacket their_state;
    HBitmap *hb = hbitmap_alloc(nbits, 0);
    uint64_t pos = 0;
    size_t len;
    int ret = -EIO;

    {
        g_autofree uint8_t *p1 = NULL;
        g_autofree uint8_t *p2 = NULL;
        g_autofree uint8_t *p3 = NULL;
        uint32_t l1, l2, l3;

        if (fake_read(h->data, DRBD_CMD_SIZES, &p1, &l1, errp) < 0 ||
            drbd_wire_get_sizes(p1, l1, &their_sizes, errp) < 0 ||
            fake_read(h->data, DRBD_CMD_STATE, &p2, &l2, errp) < 0 ||
            drbd_wire_get_state(p2, l2, &their_state, errp) < 0 ||
            fake_read(h->data, DRBD_CMD_UUIDS, &p3, &l3, errp) < 0 ||
            drbd_wire_get_uuids(p3, l3, &theirs, errp) < 0) {
            goto out;
        }
    }
    if (their_sizes.disk_size != IMG_SIZE ||
        their_state.role != DRBD_ROLE_PRIMARY) {
        error_setg(errp, "node A says it has %" PRIu64 " bytes, role %d",
                   their_sizes.disk_size, their_state.role);
        goto out;
    }

    mine.current = theirs.bitmap;
    drbd_wire_put_sizes(pkt, &sizes);
    drbd_wire_put_state(pkt, &state);
    drbd_wire_put_uuids(pkt, &mine);
    if (fake_write(h->data, pkt->data, pkt->len, errp) < 0) {
        goto out;
    }

    /* A, the lower node id, sends its bitmap first */
    while (pos < nbits) {
        g_autofree uint8_t *payload = NULL;
        uint32_t plen;

        if (fake_read(h->data, DRBD_CMD_BITMAP, &payload, &plen, errp) < 0 ||
            drbd_rle_decode(payload, plen, pos, hb, nbits, &pos, errp) < 0) {
            goto out;
        }
    }
    if (hbitmap_count(hb) && !h->a_has_bits) {
        error_setg(errp, "node A sent a bitmap with bits set");
        goto out;
    }
    hbitmap_reset_all(hb);
    pos = 0;
    while ((len = drbd_rle_encode(hb, nbits, &pos, chunk,
                                  DRBD_WIRE_MAX_BITMAP)) > 0) {
        g_byte_array_set_size(pkt, 0);
        drbd_wire_put_bitmap(pkt, chunk, len);
        if (fake_write(h->data, pkt->data, pkt->len, errp) < 0) {
            goto out;
        }
    }
    ret = fake_decide(h->data, -1, errp);
out:
    hbitmap_free(hb);
    return ret;
}

/* What the fake peer sends instead of its HELLO */
static int coroutine_fn fake_bad_hello(Hostile *h, Error **errp)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + 3] = { 0 };
    size_t len = DRBD_WIRE_HEADER_SIZE;

    stl_be_p(buf, DRBD_WIRE_MAGIC);
    stw_be_p(buf + 4, DRBD_CMD_HELLO);
    stl_be_p(buf + 8, 20);
    switch (h->mode) {
    case HOSTILE_BAD_MAGIC:
        stl_be_p(buf, 0x44524250);          /* "DRBP" */
        break;
    case HOSTILE_LONG_HELLO:
        stl_be_p(buf + 8, UINT32_MAX - 11);
        break;
    case HOSTILE_TRUNCATED_HELLO:
        memcpy(buf + DRBD_WIRE_HEADER_SIZE, "\0\0\0", 3);
        len += 3;
        break;
    default:
        g_assert_not_reached();
    }
    if (fake_write(h->data, buf, len, errp) < 0) {
        return -EIO;
    }
    if (h->mode == HOSTILE_TRUNCATED_HELLO) {
        /* ... and the end of the stream, 17 bytes short */
        qio_channel_shutdown(QIO_CHANNEL(h->data),
                             QIO_CHANNEL_SHUTDOWN_WRITE, NULL);
    }
    return 0;
}

static int coroutine_fn fake_auth(Hostile *h, Error **errp);

static void coroutine_fn fake_peer_co(void *opaque)
{
    Hostile *h = opaque;
    Error *err = NULL;
    DrbdHello hello;

    h->data = fake_accept(h);
    if (!h->data) {
        goto out;
    }
    if (!hostile_handshakes(h->mode)) {
        if (fake_recv_hello(h->data, false, &hello, &err) < 0 ||
            fake_bad_hello(h, &err) < 0) {
            goto fail;
        }
        goto out;
    }
    if (fake_hello(h->data, false, &err) < 0) {
        goto fail;
    }
    if (h->auth) {
        if (fake_auth(h, &err) < 0) {
            goto fail;
        }
        /* A, satisfied, connects its meta channel; refused, it does not */
        h->meta = fake_accept(h);
        h->proven = h->meta != NULL;
        goto out;
    }
    h->meta = fake_accept(h);
    if (!h->meta) {
        goto out;
    }
    if (fake_hello(h->meta, true, &err) < 0 || fake_params(h, &err) < 0) {
        goto fail;
    }
    h->handshake_done = true;
    if (h->serve && h->serve(h, &err) < 0) {
        goto fail;
    }
    goto out;

fail:
    if (!h->stop) {
        h->error = g_strdup(error_get_pretty(err));
    }
    error_free(err);
out:
    h->done = true;
}

static bool fake_peer_done(void *opaque)
{
    Hostile *h = opaque;

    return h->done;
}

static bool node_a_failed(void *opaque)
{
    Hostile *h = opaque;
    g_autoptr(DrbdInfo) a = query(NODE_A);

    return a->connection == DRBD_CONN_STATE_WF_CONNECTION &&
           a->last_error && strstr(a->last_error, h->expect_error);
}

/* Node A as open_a() makes it, once, with the options of @h->a_opts */
static BlockBackend *open_a_hostile(Hostile *h)
{
    QDict *opts = node_options(NODE_A, h->path_a, "primary", "0", "c");

    qdict_put_str(opts, "peer.type", "unix");
    qdict_put_str(opts, "peer.path", h->sock);
    /* One attempt only: a retry would replace the error under test */
    qdict_put_str(opts, "connect-interval", "60000");
    for (int i = 0; h->a_opts && h->a_opts[i]; i += 2) {
        qdict_put_str(opts, h->a_opts[i], h->a_opts[i + 1]);
    }
    return blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
}

static void hostile_setup(Hostile *h)
{
    g_autoptr(SocketAddress) addr = g_new0(SocketAddress, 1);

    h->dir = g_dir_make_tmp("test-drbd-conn-XXXXXX", NULL);
    g_assert_nonnull(h->dir);
    h->path_a = make_image(h->dir, "a.img");
    h->sock = g_build_filename(h->dir, "sock", NULL);

    addr->type = SOCKET_ADDRESS_TYPE_UNIX;
    addr->u.q_unix.path = g_strdup(h->sock);
    h->listener = qio_channel_socket_new();
    g_assert_cmpint(qio_channel_socket_listen_sync(h->listener, addr, 4,
                                                   &error_abort), ==, 0);
    setup_channel(h->listener);
    if (!h->deferred) {
        qemu_coroutine_enter(qemu_coroutine_create(fake_peer_co, h));
    }
    h->a = open_a_hostile(h);
}

static void hostile_teardown(Hostile *h)
{
    g_clear_pointer(&h->a, blk_unref);

    h->stop = true;
    qio_channel_wake_read(QIO_CHANNEL(h->listener));
    if (h->data) {
        qio_channel_shutdown(QIO_CHANNEL(h->data),
                             QIO_CHANNEL_SHUTDOWN_BOTH, NULL);
    }
    if (h->meta) {
        qio_channel_shutdown(QIO_CHANNEL(h->meta),
                             QIO_CHANNEL_SHUTDOWN_BOTH, NULL);
    }
    poll_until(fake_peer_done, h, POLL_TIMEOUT_MS, "the fake peer ended");
    g_clear_pointer(&h->data, object_unref);
    g_clear_pointer(&h->meta, object_unref);
    g_clear_pointer(&h->listener, object_unref);

    unlink(h->path_a);
    unlink(h->sock);
    g_assert_cmpint(rmdir(h->dir), ==, 0);
    g_free(h->dir);
    g_free(h->path_a);
    g_free(h->sock);
    g_free(h->error);
}

/* Once the handshake is done, A is connected: then the garbage */
static void hostile_after_handshake(Hostile *h)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    g_autofree uint8_t *buf = NULL;
    QIOChannelSocket *sioc;

    poll_until(fake_peer_done, h, POLL_TIMEOUT_MS, "the fake handshake");
    g_assert_null(h->error);
    g_assert_true(h->handshake_done);
    poll_until(node_connected, (char *)NODE_A, POLL_TIMEOUT_MS,
               "A connected to the fake peer");

    sioc = h->data;
    switch (h->mode) {
    case HOSTILE_LONG_DATA:
        buf = g_malloc0(DRBD_WIRE_HEADER_SIZE);
        stl_be_p(buf, DRBD_WIRE_MAGIC);
        stw_be_p(buf + 4, DRBD_CMD_DATA);
        stl_be_p(buf + 8, 0x7fffff00);
        g_byte_array_append(pkt, buf, DRBD_WIRE_HEADER_SIZE);
        break;
    case HOSTILE_WRITE_PRIMARY: {
        DrbdDataPacket d = {
            .offset = 0, .id = 1, .epoch = 0, .bytes = 4 * KiB,
        };

        buf = g_malloc(4 * KiB);
        memset(buf, 0xee, 4 * KiB);
        d.data = buf;
        drbd_wire_put_data(pkt, DRBD_CMD_DATA, &d);
        break;
    }
    case HOSTILE_BARRIER_ACK: {
        /* Nothing was written: not even epoch 0 is closed */
        DrbdBarrier ack = { .epoch = 5, .set_size = 1 };

        drbd_wire_put_barrier(pkt, DRBD_CMD_BARRIER_ACK, &ack);
        sioc = h->meta;
        break;
    }
    case HOSTILE_OOS_MISALIGNED: {
        /* Sector aligned, and its end on a 4 KiB boundary: the start not */
        DrbdBlockAck range = { .offset = 512, .bytes = 4 * KiB - 512 };

        drbd_wire_put_block_ack(pkt, DRBD_CMD_OUT_OF_SYNC, &range);
        break;
    }
    case HOSTILE_BAD_META:
        buf = g_malloc0(DRBD_WIRE_HEADER_SIZE + 8);
        stl_be_p(buf, DRBD_WIRE_MAGIC);
        stw_be_p(buf + 4, DRBD_CMD_PING);
        stl_be_p(buf + 8, 8);
        g_byte_array_append(pkt, buf, DRBD_WIRE_HEADER_SIZE + 8);
        sioc = h->meta;
        break;
    default:
        g_assert_not_reached();
    }
    g_assert_cmpint(qio_channel_write_all(QIO_CHANNEL(sioc),
                                          (char *)pkt->data, pkt->len,
                                          &error_abort), ==, 0);
}

/* What the hostile peer does, and what A's last-error must mention */
typedef struct HostileCase {
    const char *name;
    HostileMode mode;
    const char *expect_error;
} HostileCase;

static const HostileCase hostile_cases[] = {
    { "bad-magic", HOSTILE_BAD_MAGIC, "magic" },
    { "long-hello", HOSTILE_LONG_HELLO, "length" },
    { "truncated-hello", HOSTILE_TRUNCATED_HELLO, "end-of-file" },
    { "long-data", HOSTILE_LONG_DATA, "length" },
    { "write-to-primary", HOSTILE_WRITE_PRIMARY, "primary" },
    { "bad-meta", HOSTILE_BAD_META, "length" },
    { "out-of-sync-misaligned", HOSTILE_OOS_MISALIGNED, "not aligned" },
};

static void test_hostile(gconstpointer data)
{
    const HostileCase *hc = data;
    Hostile h = { 0 };
    g_autoptr(DrbdInfo) a = NULL;
    g_autoptr(DrbdInfo) a2 = NULL;
    g_autofree uint8_t *buf = g_malloc(64 * KiB);
    g_autofree uint8_t *back = g_malloc(64 * KiB);
    g_autofree uint8_t *zero = g_malloc0(4 * KiB);
    int fd;

    h.mode = hc->mode;
    h.expect_error = hc->expect_error;
    hostile_setup(&h);
    if (hostile_handshakes(h.mode)) {
        hostile_after_handshake(&h);
    }
    poll_until(node_a_failed, &h, POLL_TIMEOUT_MS,
               "A refuses the hostile peer");
    g_assert_null(h.error);

    a = query(NODE_A);
    g_test_message("A's last error: %s", a->last_error);
    g_assert_cmpint(a->role, ==, DRBD_ROLE_PRIMARY);
    g_assert_cmpint(a->disk, ==, DRBD_DISK_STATE_UP_TO_DATE);
    g_assert_cmpint(a->peer_role, ==, DRBD_ROLE_UNKNOWN);
    g_assert_cmpuint(a->counters->nr, ==, 0);
    g_assert_cmpuint(a->counters->dw, ==, 0);

    /* A goes on as a primary without its peer */
    fill_pattern(buf, 64 * KiB, 0x5a);
    g_assert_cmpint(blk_pwrite(h.a, 1 * MiB, 64 * KiB, buf, 0), ==, 0);
    g_assert_cmpint(blk_flush(h.a), ==, 0);
    g_assert_cmpint(blk_pread(h.a, 1 * MiB, 64 * KiB, back, 0), ==, 0);
    g_assert(!memcmp(buf, back, 64 * KiB));
    a2 = query(NODE_A);
    g_assert_cmpint(a2->connection, !=, DRBD_CONN_STATE_CONNECTED);
    g_assert_cmpuint(a2->counters->oos, ==, 64 * KiB);
    g_assert_cmpuint(a2->counters->dw, ==, 64 * KiB);

    g_clear_pointer(&h.a, blk_unref);
    /* Nothing the hostile peer sent reached A's image */
    fd = open(h.path_a, O_RDONLY);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, back, 4 * KiB, 0), ==, 4 * KiB);
    g_assert(!memcmp(back, zero, 4 * KiB));
    g_assert_cmpint(pread(fd, back, 64 * KiB, 1 * MiB), ==, 64 * KiB);
    g_assert(!memcmp(buf, back, 64 * KiB));
    close(fd);

    hostile_teardown(&h);
}

/*
 * A BARRIER_ACK for an epoch that was never closed is a protocol error,
 * as in DRBD ("BarrierAck #n received, expected #m"): taken for what it
 * says, it would let later flushes return before the peer has the data
 */
static void test_hostile_barrier_ack(void)
{
    Hostile h = {
        .mode = HOSTILE_BARRIER_ACK,
        .expect_error = "BARRIER_ACK",
    };
    g_autoptr(DrbdInfo) a = NULL;

    hostile_setup(&h);
    hostile_after_handshake(&h);
    if (!poll_for(node_a_failed, &h, POLL_TIMEOUT_MS)) {
        a = query(NODE_A);
        g_test_message("A took a BARRIER_ACK for an epoch it never closed: "
                       "connection %s, ep %" PRIu32 ", last error: %s",
                       DrbdConnState_str(a->connection), a->counters->ep,
                       a->last_error ?: "none");
        g_test_fail();
    }
    hostile_teardown(&h);
}

/*
 * The fake peer as a secondary (Hostile.serve): it takes A's writes and
 * barriers, acks them as protocol C asks, and records the epoch of each
 * write and the barriers between them.  A's closing the connection ends
 * it.
 */
static int coroutine_fn fake_ack_writes(Hostile *h, GArray *held,
                                        Error **errp)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();

    for (guint i = 0; i < held->len; i++) {
        drbd_wire_put_block_ack(pkt, DRBD_CMD_WRITE_ACK,
                                &g_array_index(held, DrbdBlockAck, i));
    }
    g_array_set_size(held, 0);
    return pkt->len ? fake_write(h->meta, pkt->data, pkt->len, errp) : 0;
}

static int coroutine_fn fake_serve_writes(Hostile *h, Error **errp)
{
    g_autoptr(GArray) held = g_array_new(false, false, sizeof(DrbdBlockAck));

    for (;;) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        g_autofree uint8_t *payload = NULL;
        DrbdDataPacket p;
        DrbdBlockAck ack;
        DrbdHeader hdr;
        DrbdBarrier b;

        if (fake_read_any(h->data, &hdr, &payload, NULL) < 0) {
            return 0;
        }
        switch (hdr.cmd) {
        case DRBD_CMD_DATA:
            if (drbd_wire_get_data(hdr.cmd, payload, hdr.length, IMG_SIZE,
                                   &p, errp) < 0) {
                return -EPROTO;
            }
            g_assert_cmpuint(h->ndata, <, ARRAY_SIZE(h->data_epoch));
            h->data_epoch[h->ndata] = p.epoch;
            h->barriers_before[h->ndata] = h->nbarriers;
            h->ndata++;
            ack = (DrbdBlockAck) {
                .offset = p.offset, .id = p.id, .bytes = p.bytes,
            };
            g_array_append_val(held, ack);
            if (h->ndata >= h->hold_acks &&
                fake_ack_writes(h, held, errp) < 0) {
                return -EIO;
            }
            break;
        case DRBD_CMD_BARRIER:
            if (drbd_wire_get_barrier(hdr.cmd, payload, hdr.length, &b,
                                      errp) < 0) {
                return -EPROTO;
            }
            g_assert_cmpuint(h->nbarriers, <, ARRAY_SIZE(h->barrier));
            h->barrier[h->nbarriers++] = b;
            /* The epoch's writes are on disk, then the epoch is */
            if (fake_ack_writes(h, held, errp) < 0) {
                return -EIO;
            }
            b.flags = 0;
            drbd_wire_put_barrier(pkt, DRBD_CMD_BARRIER_ACK, &b);
            if (fake_write(h->meta, pkt->data, pkt->len, errp) < 0) {
                return -EIO;
            }
            break;
        default:
            break;
        }
    }
}

/*
 * The epochs A sends its secondary: a write issued after another one
 * completed goes in a new epoch, after the BARRIER that closes the old
 * one (the secondary must not apply it first), and no epoch holds more
 * than max-epoch-size writes
 */
static void test_epochs(void)
{
    static const char *const opts[] = { "max-epoch-size", "4", NULL };
    Hostile h = {
        .mode = HOSTILE_LONG_DATA,      /* any mode that handshakes */
        .a_opts = opts,
        .serve = fake_serve_writes,
    };
    g_autofree uint8_t *buf = g_malloc(4 * KiB);
    QEMUIOVector qiov;
    int pending = 10;
    unsigned i, first, run;

    hostile_setup(&h);
    poll_until(node_connected, (char *)NODE_A, POLL_TIMEOUT_MS,
               "A connected to the fake secondary");
    fill_pattern(buf, 4 * KiB, 0x31);

    /* One write after the other: the second depends on the first */
    g_assert_cmpint(blk_pwrite(h.a, 0, 4 * KiB, buf, 0), ==, 0);
    g_assert_cmpint(blk_pwrite(h.a, 64 * KiB, 4 * KiB, buf, 0), ==, 0);
    g_assert_null(h.error);
    g_assert_cmpuint(h.ndata, ==, 2);
    g_assert_cmpuint(h.data_epoch[1], !=, h.data_epoch[0]);
    g_assert_cmpuint(h.barriers_before[1], ==, h.barriers_before[0] + 1);
    g_assert_cmpuint(h.barrier[h.barriers_before[0]].epoch, ==,
                     h.data_epoch[0]);
    g_assert_cmpuint(h.barrier[h.barriers_before[0]].set_size, ==, 1);

    /* Ten at once, none acked before its epoch is closed or all came */
    first = h.ndata;
    h.hold_acks = first + 10;
    qemu_iovec_init_buf(&qiov, buf, 4 * KiB);
    for (i = 0; i < 10; i++) {
        blk_aio_pwritev(h.a, 1 * MiB + i * 64 * KiB, &qiov, 0,
                        count_down_cb, &pending);
    }
    poll_until(counted_down, &pending, POLL_TIMEOUT_MS,
               "the ten writes complete");
    g_assert_null(h.error);
    g_assert_cmpuint(h.ndata, ==, first + 10);
    for (i = first, run = 0; i < h.ndata; i++) {
        run = i > first && h.data_epoch[i] == h.data_epoch[i - 1] ?
              run + 1 : 1;
        g_test_message("write %u: epoch %" PRIu32 ", %u in it so far", i,
                       h.data_epoch[i], run);
        g_assert_cmpuint(run, <=, 4);
    }
    for (i = 0; i < h.nbarriers; i++) {
        g_assert_cmpuint(h.barrier[i].set_size, <=, 4);
    }
    hostile_teardown(&h);
}

/*
 * The fake peer as a resync target that fails to write the first chunk
 * it gets: NEG_ACK, and nothing acked after it
 */
static int coroutine_fn fake_serve_resync_neg_ack(Hostile *h, Error **errp)
{
    for (;;) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        g_autofree uint8_t *payload = NULL;
        DrbdDataPacket p;
        DrbdBlockAck ack;
        DrbdHeader hdr;

        if (fake_read_any(h->data, &hdr, &payload, NULL) < 0) {
            return 0;
        }
        if ((hdr.cmd != DRBD_CMD_RS_DATA && hdr.cmd != DRBD_CMD_RS_ZEROES) ||
            h->neg_acked) {
            continue;
        }
        if (drbd_wire_get_data(hdr.cmd, payload, hdr.length, IMG_SIZE, &p,
                               errp) < 0) {
            return -EPROTO;
        }
        /* The test notes A's bitmap now (not from a coroutine) */
        h->held_co = qemu_coroutine_self();
        qemu_coroutine_yield();
        ack = (DrbdBlockAck) {
            .offset = p.offset, .id = p.id, .bytes = p.bytes,
        };
        drbd_wire_put_block_ack(pkt, DRBD_CMD_NEG_ACK, &ack);
        if (fake_write(h->meta, pkt->data, pkt->len, errp) < 0) {
            return -EIO;
        }
        h->neg_acked = true;
    }
}

/*
 * A resync chunk the target failed to write stays out of sync on the
 * source: the next resync sends it again
 */
static bool fake_peer_held(void *opaque)
{
    Hostile *h = opaque;

    return h->held_co || h->done;
}

static void test_resync_neg_ack(void)
{
    Hostile h = {
        .mode = HOSTILE_LONG_DATA,      /* any mode that handshakes */
        .deferred = true,
        .a_has_bits = true,
        .serve = fake_serve_resync_neg_ack,
        .expect_error = "failed to write resync data",
    };
    g_autofree uint8_t *buf = g_malloc(64 * KiB);
    g_autoptr(DrbdInfo) a = NULL;

    hostile_setup(&h);
    /* Before the fake peer answers A's HELLO: the peer lacks it */
    fill_pattern(buf, 64 * KiB, 0x41);
    g_assert_cmpint(blk_pwrite(h.a, 1 * MiB, 64 * KiB, buf, 0), ==, 0);
    qemu_coroutine_enter(qemu_coroutine_create(fake_peer_co, &h));

    poll_until(fake_peer_held, &h, POLL_TIMEOUT_MS,
               "A sends the fake peer a resync chunk");
    g_assert_nonnull(h.held_co);
    a = query(NODE_A);
    h.oos_before = a->counters->oos;
    qapi_free_DrbdInfo(g_steal_pointer(&a));
    qemu_coroutine_enter(g_steal_pointer(&h.held_co));

    poll_until(node_a_failed, &h, POLL_TIMEOUT_MS,
               "A drops the peer that failed a resync write");
    g_assert_null(h.error);
    g_assert_true(h.neg_acked);
    a = query(NODE_A);
    g_test_message("A's oos: %" PRIu64 " bytes when the chunk was sent, %"
                   PRIu64 " after its NEG_ACK", h.oos_before,
                   a->counters->oos);
    g_assert_cmpuint(h.oos_before, >=, 64 * KiB);
    g_assert_cmpuint(a->counters->oos, ==, h.oos_before);
    hostile_teardown(&h);
}

/*
 * The challenge-response, A connecting with a secret: the fake peer
 * (the accepting side) answers A's challenge with the right HMAC, or
 * with one that is right only in part.  The decoder takes answers of 16
 * to 64 bytes, so every wrong answer here reaches the comparison.
 */
#define AUTH_SECRET_ID      "drbd-test-secret"
#define AUTH_SECRET         "a shared secret"
#define AUTH_SECRET_WRONG   "failed to prove the shared secret"

typedef enum AuthAnswer {
    AUTH_RIGHT,             /* the HMAC (SHA-256, 32 bytes) */
    AUTH_PREFIX,            /* its first 16 bytes only */
    AUTH_HALF_RIGHT,        /* 32 bytes: the first 16 right, then wrong */
    AUTH_LAST_BYTE,         /* the last byte flipped */
    AUTH_FIRST_BYTE,        /* the first byte flipped */
    AUTH_LONGER,            /* the HMAC and 32 more bytes */
} AuthAnswer;

typedef struct AuthCase {
    const char *name;
    AuthAnswer answer;
} AuthCase;

static const AuthCase auth_cases[] = {
    { "right-answer", AUTH_RIGHT },
    { "prefix-refused", AUTH_PREFIX },
    { "half-right-refused", AUTH_HALF_RIGHT },
    { "last-byte-wrong-refused", AUTH_LAST_BYTE },
    { "first-byte-wrong-refused", AUTH_FIRST_BYTE },
    { "longer-refused", AUTH_LONGER },
};

static int coroutine_fn fake_auth(Hostile *h, Error **errp)
{
    static const uint8_t key[] = AUTH_SECRET;
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    g_autofree uint8_t *p1 = NULL;
    g_autofree uint8_t *p2 = NULL;
    DrbdAuthChallenge theirs, ours = { .digest = DRBD_DIGEST_SHA256 };
    DrbdAuthResponse their_answer, want, right, sent;
    uint32_t l1, l2;
    int i;

    for (i = 0; i < DRBD_AUTH_NONCE_SIZE; i++) {
        ours.nonce[i] = 0xa0 + i;
    }
    if (fake_read(h->data, DRBD_CMD_AUTH_CHALLENGE, &p1, &l1, errp) < 0 ||
        drbd_wire_get_auth_challenge(p1, l1, &theirs, errp) < 0) {
        return -EIO;
    }
    drbd_wire_put_auth_challenge(pkt, &ours);
    if (fake_write(h->data, pkt->data, pkt->len, errp) < 0 ||
        fake_read(h->data, DRBD_CMD_AUTH_RESPONSE, &p2, &l2, errp) < 0 ||
        drbd_wire_get_auth_response(p2, l2, &their_answer, errp) < 0) {
        return -EIO;
    }
    /* A proves the secret to us first, as secure.c documents */
    if (drbd_auth_answer(DRBD_DIGEST_SHA256, key, sizeof(key) - 1, true,
                         ours.nonce, theirs.nonce, &want, errp) < 0) {
        return -EIO;
    }
    if (their_answer.len != want.len ||
        memcmp(their_answer.digest, want.digest, want.len)) {
        error_setg(errp, "node A's answer to the fake peer's challenge is "
                   "not the HMAC of the secret");
        return -EPROTO;
    }

    /* Our answer to A's challenge, as h->auth says */
    if (drbd_auth_answer(DRBD_DIGEST_SHA256, key, sizeof(key) - 1, false,
                         theirs.nonce, ours.nonce, &right, errp) < 0) {
        return -EIO;
    }
    g_assert_cmpuint(right.len, ==, 32);
    sent = right;
    switch (h->auth->answer) {
    case AUTH_RIGHT:
        break;
    case AUTH_PREFIX:
        sent.len = DRBD_AUTH_DIGEST_MIN;
        break;
    case AUTH_HALF_RIGHT:
        for (i = 16; i < 32; i++) {
            sent.digest[i] ^= 0xff;
        }
        break;
    case AUTH_LAST_BYTE:
        sent.digest[31] ^= 0x01;
        break;
    case AUTH_FIRST_BYTE:
        sent.digest[0] ^= 0x80;
        break;
    case AUTH_LONGER:
        sent.len = 64;
        memset(sent.digest + 32, 0x5a, 32);
        break;
    }
    g_byte_array_set_size(pkt, 0);
    drbd_wire_put_auth_response(pkt, &sent);
    return fake_write(h->data, pkt->data, pkt->len, errp);
}

static bool auth_settled(void *opaque)
{
    Hostile *h = opaque;

    return h->done || node_a_failed(h);
}

/*
 * A refuses every answer but the right one: a comparison that stops
 * early, or at the shorter answer, or skips a byte, lets a peer without
 * the secret in
 */
static void test_auth_answer(gconstpointer data)
{
    static const char *const secret[] = { "secret", AUTH_SECRET_ID, NULL };
    const AuthCase *ac = data;
    Hostile h = {
        .mode = HOSTILE_LONG_DATA,      /* any mode that handshakes */
        .auth = ac,
        .a_opts = secret,
        .expect_error = AUTH_SECRET_WRONG,
    };
    g_autoptr(DrbdInfo) a = NULL;

    hostile_setup(&h);
    poll_until(auth_settled, &h, POLL_TIMEOUT_MS,
               "A takes or refuses the answer");
    g_assert_null(h.error);
    a = query(NODE_A);
    g_test_message("answer %s: A %s it; last error: %s", ac->name,
                   h.proven ? "took" : "refused", a->last_error ?: "none");
    if (ac->answer == AUTH_RIGHT) {
        /* The positive control: the same exchange, the answer right */
        g_assert_true(h.proven);
        g_assert_true(!a->last_error ||
                      !strstr(a->last_error, AUTH_SECRET_WRONG));
    } else {
        g_assert_false(h.proven);
        g_assert_true(node_a_failed(&h));
        g_assert_cmpint(a->peer_role, ==, DRBD_ROLE_UNKNOWN);
    }
    hostile_teardown(&h);
}

/*
 * A fake primary: the test connects to node B as node 0 would, over the
 * wire protocol, and drives it packet by packet.  Each step runs in a
 * coroutine of the main loop, which the test polls until it is done.
 */
typedef struct FakePrimary {
    Pair p;                     /* B's image and socket (p.a unused) */
    QIOChannelSocket *data;
    QIOChannelSocket *meta;
    Error *err;
} FakePrimary;

typedef int coroutine_fn FakeStepFn(FakePrimary *f, void *arg,
                                    Error **errp);

typedef struct FakeStep {
    FakePrimary *f;
    FakeStepFn *fn;
    void *arg;
    int ret;
    bool done;
} FakeStep;

static void coroutine_fn fake_step_co(void *opaque)
{
    FakeStep *st = opaque;

    st->ret = st->fn(st->f, st->arg, &st->f->err);
    st->done = true;
}

static bool fake_step_done(void *opaque)
{
    return ((FakeStep *)opaque)->done;
}

static void fake_step(FakePrimary *f, FakeStepFn *fn, void *arg,
                      const char *what)
{
    FakeStep st = { .f = f, .fn = fn, .arg = arg };

    qemu_coroutine_enter(qemu_coroutine_create(fake_step_co, &st));
    poll_until(fake_step_done, &st, POLL_TIMEOUT_MS, what);
    if (st.ret < 0) {
        g_error("%s: %s", what, error_get_pretty(f->err));
    }
}

/* Connect one channel to B and exchange HELLOs as node 0 */
static int coroutine_fn fake_connect(FakePrimary *f, bool meta,
                                     QIOChannelSocket **out, Error **errp)
{
    g_autoptr(SocketAddress) addr = g_new0(SocketAddress, 1);
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    g_autofree uint8_t *payload = NULL;
    QIOChannelSocket *sioc = qio_channel_socket_new();
    DrbdHello hello = {
        .version_min = DRBD_PROTO_VERSION_MIN,
        .version_max = DRBD_PROTO_VERSION_MAX,
        .node_id = 0,
        .flags = meta ? DRBD_HELLO_META_CHANNEL : 0,
    };
    uint32_t len;

    *out = sioc;
    addr->type = SOCKET_ADDRESS_TYPE_UNIX;
    addr->u.q_unix.path = g_strdup(f->p.sock);
    if (qio_channel_socket_connect_sync(sioc, addr, errp) < 0) {
        return -EIO;
    }
    setup_channel(sioc);
    pstrcpy(hello.resource, sizeof(hello.resource), "r0");
    drbd_wire_put_hello(pkt, &hello);
    if (fake_write(sioc, pkt->data, pkt->len, errp) < 0 ||
        fake_read(sioc, DRBD_CMD_HELLO, &payload, &len, errp) < 0 ||
        drbd_wire_get_hello(payload, len, &hello, errp) < 0) {
        return -EIO;
    }
    return hello.node_id == 1 ? 0 : -EPROTO;
}

/*
 * Both channels, then the handshake as an up-to-date primary: in sync
 * with B, or (@arg non-NULL) one generation ahead of it, with the first
 * 64 KiB changed since, which makes B its sync target
 */
static int coroutine_fn fake_primary_params(FakePrimary *f, bool target,
                                            HBitmap *hb, Error **errp)
{
    uint64_t nbits = DIV_ROUND_UP(IMG_SIZE, BM_GRANULARITY);
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    g_autofree uint8_t *chunk = g_malloc(DRBD_WIRE_MAX_BITMAP);
    g_autofree uint8_t *p1 = NULL;
    g_autofree uint8_t *p2 = NULL;
    g_autofree uint8_t *p3 = NULL;
    DrbdSizes sizes;            /* B's: the same size and options */
    DrbdStatePacket state = {
        .role = DRBD_ROLE_PRIMARY,
        .disk_state = DRBD_DISK_STATE_UP_TO_DATE,
    };
    DrbdUuidsPacket theirs, mine = { 0 };
    uint32_t l1, l2, l3;
    uint64_t pos = 0;
    size_t len;

    if (fake_connect(f, false, &f->data, errp) < 0 ||
        fake_connect(f, true, &f->meta, errp) < 0 ||
        fake_read(f->data, DRBD_CMD_SIZES, &p1, &l1, errp) < 0 ||
        drbd_wire_get_sizes(p1, l1, &sizes, errp) < 0 ||
        fake_read(f->data, DRBD_CMD_STATE, &p2, &l2, errp) < 0 ||
        fake_read(f->data, DRBD_CMD_UUIDS, &p3, &l3, errp) < 0 ||
        drbd_wire_get_uuids(p3, l3, &theirs, errp) < 0) {
        return -EIO;
    }
    mine.current = theirs.current;
    if (target) {
        mine.current = theirs.current ^ 0x1234567800;
        mine.bitmap = theirs.current;
        hbitmap_set(hb, 0, 64 * KiB / BM_GRANULARITY);
        mine.changes = hbitmap_count(hb);
    }
    drbd_wire_put_sizes(pkt, &sizes);
    drbd_wire_put_state(pkt, &state);
    drbd_wire_put_uuids(pkt, &mine);
    /* Node 0 sends its bitmap first */
    while ((len = drbd_rle_encode(hb, nbits, &pos, chunk,
                                  DRBD_WIRE_MAX_BITMAP)) > 0) {
        drbd_wire_put_bitmap(pkt, chunk, len);
    }
    if (fake_write(f->data, pkt->data, pkt->len, errp) < 0) {
        return -EIO;
    }
    hbitmap_reset_all(hb);
    pos = 0;
    while (pos < nbits) {
        g_autofree uint8_t *payload = NULL;
        uint32_t plen;

        if (fake_read(f->data, DRBD_CMD_BITMAP, &payload, &plen,
                      errp) < 0 ||
            drbd_rle_decode(payload, plen, pos, hb, nbits, &pos,
                            errp) < 0) {
            return -EIO;
        }
    }
    return fake_decide(f->data,
                       target ? DRBD_DECISION_TARGET : DRBD_DECISION_NONE,
                       errp);
}

static int coroutine_fn fake_primary_handshake(FakePrimary *f, void *arg,
                                               Error **errp)
{
    HBitmap *hb = hbitmap_alloc(DIV_ROUND_UP(IMG_SIZE, BM_GRANULARITY), 0);
    int ret = fake_primary_params(f, arg != NULL, hb, errp);

    hbitmap_free(hb);
    return ret;
}

static int coroutine_fn fake_primary_send(FakePrimary *f, void *arg,
                                          Error **errp)
{
    GByteArray *pkt = arg;

    return fake_write(f->data, pkt->data, pkt->len, errp);
}

/* Send a guest write: @unordered writes before it may come after it */
static void fake_primary_write(FakePrimary *f, uint64_t id, uint64_t offset,
                               uint32_t bytes, uint32_t unordered)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    g_autofree uint8_t *buf = g_malloc(bytes);
    DrbdDataPacket d = {
        .offset = offset, .id = id, .bytes = bytes,
        .unordered = unordered, .data = buf,
    };

    fill_pattern(buf, bytes, id);
    drbd_wire_put_data(pkt, DRBD_CMD_DATA, &d);
    fake_step(f, fake_primary_send, pkt, "sending a write to B");
}

typedef struct FakeRecv {
    bool meta;                  /* from the meta channel, else data */
    DrbdHeader h;
    uint8_t *payload;
} FakeRecv;

/* The next packet from B but pings, on the channel @arg says */
static int coroutine_fn fake_primary_recv(FakePrimary *f, void *arg,
                                          Error **errp)
{
    FakeRecv *r = arg;

    do {
        g_clear_pointer(&r->payload, g_free);
        if (fake_read_any(r->meta ? f->meta : f->data, &r->h, &r->payload,
                          errp) < 0) {
            return -EIO;
        }
    } while (r->h.cmd == DRBD_CMD_PING || r->h.cmd == DRBD_CMD_PING_ACK);
    return 0;
}

/* The id of the next WRITE_ACK from B */
static uint64_t fake_primary_write_ack(FakePrimary *f)
{
    FakeRecv r = { .meta = true };
    DrbdBlockAck ack;

    fake_step(f, fake_primary_recv, &r, "a write ack from B");
    g_assert_cmpstr(drbd_cmd_name(r.h.cmd), ==,
                    drbd_cmd_name(DRBD_CMD_WRITE_ACK));
    g_assert_cmpint(drbd_wire_get_block_ack(r.h.cmd, r.payload, r.h.length,
                                            IMG_SIZE, &ack, &error_abort),
                    ==, 0);
    g_free(r.payload);
    return ack.id;
}

static bool b_sync_target(void *opaque)
{
    g_autoptr(DrbdInfo) b = query(NODE_B);

    return b->connection == DRBD_CONN_STATE_SYNC_TARGET;
}

/*
 * B, secondary and listening, with @opts (key, value, ..., NULL) and
 * blkdebug over its image, connected to the fake primary
 */
static void fake_primary_setup(FakePrimary *f, const char *const *opts,
                               bool target)
{
    QDict *o;

    pair_init(&f->p, "c");
    o = node_options(NODE_B, f->p.path_b, "secondary", "1", "c");
    qdict_del(o, "file.filename");
    qdict_put_str(o, "file.driver", "blkdebug");
    qdict_put_str(o, "file.image.driver", "file");
    qdict_put_str(o, "file.image.filename", f->p.path_b);
    qdict_put_str(o, "listen.type", "unix");
    qdict_put_str(o, "listen.path", f->p.sock);
    for (int i = 0; opts && opts[i]; i += 2) {
        qdict_put_str(o, opts[i], opts[i + 1]);
    }
    f->p.b = blk_new_open(NULL, NULL, o, BDRV_O_RDWR, &error_abort);
    fake_step(f, fake_primary_handshake, target ? f : NULL,
              "the fake primary's handshake");
    poll_until(target ? b_sync_target : node_connected, (char *)NODE_B,
               POLL_TIMEOUT_MS, "B connected to the fake primary");
}

static void fake_primary_teardown(FakePrimary *f)
{
    g_clear_pointer(&f->p.b, blk_unref);
    g_clear_pointer(&f->data, object_unref);
    g_clear_pointer(&f->meta, object_unref);
    pair_teardown(&f->p);
}

typedef struct WaitTag {
    BlockDriverState *bs;
    const char *tag;
} WaitTag;

static bool write_held(void *opaque)
{
    WaitTag *w = opaque;

    return bdrv_debug_is_suspended(w->bs, w->tag);
}

static bool b_has_unacked(void *opaque)
{
    g_autoptr(DrbdInfo) b = query(NODE_B);

    return b->counters->ua == *(uint32_t *)opaque;
}

/* Hold B's next write in blkdebug, tagged @tag */
static void hold_next_write(BlockDriverState *bs, const char *tag)
{
    g_assert_cmpint(bdrv_debug_breakpoint(bs, "pwritev", tag), ==, 0);
}

static void wait_held(BlockDriverState *bs, const char *tag)
{
    WaitTag w = { bs, tag };

    poll_until(write_held, &w, POLL_TIMEOUT_MS, tag);
}

/*
 * The secondary starts a write only once every write it depends on is
 * done, however often it is woken meanwhile: W3 depends on W1 and W2;
 * W2 (independent of W1) completing while W1 is held must not start it
 */
static void test_fake_primary_order(void)
{
    FakePrimary f = { 0 };
    BlockDriverState *bs;
    uint32_t three = 3;

    fake_primary_setup(&f, NULL, false);
    bs = blk_bs(f.p.b);

    hold_next_write(bs, "w1");
    fake_primary_write(&f, 1, 0, 64 * KiB, 0);
    wait_held(bs, "w1");
    hold_next_write(bs, "w2");
    fake_primary_write(&f, 2, 1 * MiB, 4 * KiB, 1);
    wait_held(bs, "w2");
    hold_next_write(bs, "w3");
    fake_primary_write(&f, 3, 2 * MiB, 4 * KiB, 0);
    poll_until(b_has_unacked, &three, POLL_TIMEOUT_MS, "B took W3");

    g_assert_cmpint(bdrv_debug_resume(bs, "w2"), ==, 0);
    g_assert_cmpuint(fake_primary_write_ack(&f), ==, 2);
    g_assert_false(bdrv_debug_is_suspended(bs, "w3"));   /* not started */

    g_assert_cmpint(bdrv_debug_resume(bs, "w1"), ==, 0);
    g_assert_cmpuint(fake_primary_write_ack(&f), ==, 1);
    wait_held(bs, "w3");                /* started once W1 was done */
    g_assert_cmpint(bdrv_debug_resume(bs, "w3"), ==, 0);
    g_assert_cmpuint(fake_primary_write_ack(&f), ==, 3);
    fake_primary_teardown(&f);
}

/*
 * A sync target's data is not up to date: it answers neither the
 * primary's reads (NEG_DREPLY) nor a verify (SKIPPED) from it
 */
static void test_fake_primary_sync_target(void)
{
    static const char *const opts[] = { "verify-alg", "crc32c", NULL };
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdBlockAck range = { .offset = 0, .bytes = 64 * KiB };
    DrbdBlockAck read = { .offset = 4 * KiB, .id = 7, .bytes = 4 * KiB };
    uint8_t digest[4] = { 0 };
    DrbdOvPacket ov = {
        .offset = 1 * MiB, .id = 9, .bytes = 4 * KiB,
        .flags = DRBD_OV_DIGESTS, .digests = digest, .digest_size = 4,
    };
    FakePrimary f = { 0 };
    bool read_answered = false, ov_answered = false;
    g_autoptr(DrbdInfo) b = NULL;

    fake_primary_setup(&f, opts, true);
    drbd_wire_put_block_ack(pkt, DRBD_CMD_OUT_OF_SYNC, &range);
    fake_step(&f, fake_primary_send, pkt, "OUT_OF_SYNC to B");
    b = query(NODE_B);
    g_assert_cmpint(b->disk, ==, DRBD_DISK_STATE_INCONSISTENT);

    g_byte_array_set_size(pkt, 0);
    drbd_wire_put_block_ack(pkt, DRBD_CMD_DATA_REQUEST, &read);
    drbd_wire_put_ov(pkt, DRBD_CMD_OV_REQUEST, &ov);
    fake_step(&f, fake_primary_send, pkt, "a read and a verify to B");
    while (!read_answered || !ov_answered) {
        FakeRecv r = { .meta = false };
        DrbdOvPacket reply;

        fake_step(&f, fake_primary_recv, &r, "B's answers");
        g_test_message("B answers %s", drbd_cmd_name(r.h.cmd));
        if (r.h.cmd == DRBD_CMD_OV_REPLY) {
            g_assert_cmpint(drbd_wire_get_ov(r.h.cmd, r.payload, r.h.length,
                                             IMG_SIZE, 4, &reply,
                                             &error_abort), ==, 0);
            g_assert_cmpuint(reply.id, ==, ov.id);
            g_assert_cmphex(reply.flags & DRBD_OV_REPLY_KINDS, ==,
                            DRBD_OV_SKIPPED);
            ov_answered = true;
        } else {
            g_assert_cmpstr(drbd_cmd_name(r.h.cmd), ==,
                            drbd_cmd_name(DRBD_CMD_NEG_DREPLY));
            read_answered = true;
        }
        g_free(r.payload);
    }
    fake_primary_teardown(&f);
}

static bool node_b_refused(void *opaque)
{
    g_autoptr(DrbdInfo) b = query(NODE_B);

    return b->last_error && strstr(b->last_error, "magic");
}

/*
 * The listening side: a stranger that connects and sends garbage is
 * dropped, and the real peer connects after it
 */
static void test_hostile_listener(void)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    static const char garbage[] = "GET / HTTP/1.0\r\n\r\n";
    g_autoptr(DrbdInfo) b = NULL;
    g_autoptr(DrbdInfo) b2 = NULL;
    Pair p;
    int fd;

    pair_init(&p, "c");
    p.b = open_b(&p);

    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    g_assert_cmpint(fd, >=, 0);
    pstrcpy(sun.sun_path, sizeof(sun.sun_path), p.sock);
    g_assert_cmpint(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), ==, 0);
    g_assert_cmpint(write(fd, garbage, sizeof(garbage) - 1), ==,
                    sizeof(garbage) - 1);
    poll_until(node_b_refused, NULL, POLL_TIMEOUT_MS,
               "B drops the stranger");
    close(fd);
    b = query(NODE_B);
    g_test_message("B's last error: %s", b->last_error);
    g_assert_cmpint(b->connection, ==, DRBD_CONN_STATE_WF_CONNECTION);
    g_assert_cmpuint(b->counters->dw, ==, 0);

    p.a = open_a(p.path_a, p.sock, "c", "100", NULL);
    poll_until(pair_connected, &p, POLL_TIMEOUT_MS, "both nodes connected");
    b2 = query(NODE_B);
    g_assert_null(b2->last_error);
    pair_write(&p, p.a, 1 * MiB, 64 * KiB, 7);

    pair_close(&p);
    g_assert_cmpint(image_differs(p.path_a, p.expect), ==, -1);
    g_assert_cmpint(image_differs(p.path_b, p.expect), ==, -1);
    pair_teardown(&p);
}

int main(int argc, char **argv)
{
    int i;

    /* As QEMU's programs do: a peer gone is an EPIPE, not a signal */
    signal(SIGPIPE, SIG_IGN);
    module_call_init(MODULE_INIT_QOM);
    bdrv_init();
    qemu_init_main_loop(&error_abort);
    qcrypto_init(&error_abort);
    g_test_init(&argc, &argv, NULL);
    object_new_with_props(TYPE_QCRYPTO_SECRET, object_get_objects_root(),
                          AUTH_SECRET_ID, &error_abort,
                          "data", AUTH_SECRET, NULL);

    g_test_add_func("/drbd/conn/connect", test_connect);
    g_test_add_data_func("/drbd/conn/replicate/protocol-c", "c",
                         test_replicate);
    g_test_add_data_func("/drbd/conn/replicate/protocol-a", "a",
                         test_replicate);
    g_test_add_data_func("/drbd/conn/replicate/protocol-b", "b",
                         test_replicate);
    g_test_add_func("/drbd/conn/secondary-refuses-io",
                    test_secondary_refuses_io);
    g_test_add_func("/drbd/conn/promote-peer-primary",
                    test_promote_peer_primary);
    g_test_add_func("/drbd/conn/disconnect-resync", test_disconnect_resync);
    g_test_add_func("/drbd/conn/write-during-resync",
                    test_write_during_resync);
    for (i = 0; i < ARRAY_SIZE(hostile_cases); i++) {
        g_autofree char *path = g_strdup_printf("/drbd/conn/hostile/%s",
                                                hostile_cases[i].name);

        g_test_add_data_func(path, &hostile_cases[i], test_hostile);
    }
    g_test_add_func("/drbd/conn/hostile/listener", test_hostile_listener);
    g_test_add_func("/drbd/conn/hostile/barrier-ack-unsent-epoch",
                    test_hostile_barrier_ack);
    g_test_add_func("/drbd/conn/secondary/epochs", test_epochs);
    g_test_add_func("/drbd/conn/secondary/resync-neg-ack",
                    test_resync_neg_ack);
    g_test_add_func("/drbd/conn/primary/order", test_fake_primary_order);
    g_test_add_func("/drbd/conn/primary/sync-target",
                    test_fake_primary_sync_target);
    for (i = 0; i < ARRAY_SIZE(auth_cases); i++) {
        g_autofree char *path = g_strdup_printf("/drbd/conn/auth/%s",
                                                auth_cases[i].name);

        g_test_add_data_func(path, &auth_cases[i], test_auth_answer);
    }

    return g_test_run();
}
