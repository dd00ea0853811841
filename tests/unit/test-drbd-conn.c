/*
 * drbd connection layer: two nodes in one process, connected over a unix
 * socket, replicate what the primary writes, refuse guest I/O on the
 * secondary, resynchronize after a disconnect, and a node survives a peer
 * that sends it garbage
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

/* Write through @blk and record what the images must hold */
static void pair_write(Pair *p, BlockBackend *blk, int64_t offset,
                       int64_t bytes, unsigned seed)
{
    g_autofree uint8_t *buf = g_malloc(bytes);

    fill_pattern(buf, bytes, seed);
    g_assert_cmpint(blk_pwrite(blk, offset, bytes, buf, 0), ==, 0);
    memcpy(p->expect + offset, buf, bytes);
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

/* Read a packet that must be @cmd, as the driver's own decoder sees it */
static int coroutine_fn fake_read(QIOChannelSocket *sioc, uint16_t cmd,
                                  uint8_t **payload, uint32_t *len,
                                  Error **errp)
{
    uint8_t hbuf[DRBD_WIRE_HEADER_SIZE];
    DrbdHeader h;

    *payload = NULL;
    if (qio_channel_read_all(QIO_CHANNEL(sioc), (char *)hbuf, sizeof(hbuf),
                             errp) < 0 ||
        drbd_wire_get_header(hbuf, &h, errp) < 0) {
        return -EIO;
    }
    if (h.cmd != cmd) {
        error_setg(errp, "expected %s from node A, got %s",
                   drbd_cmd_name(cmd), drbd_cmd_name(h.cmd));
        return -EPROTO;
    }
    *payload = g_malloc(h.length + 1);
    *len = h.length;
    if (h.length && qio_channel_read_all(QIO_CHANNEL(sioc),
                                         (char *)*payload, h.length,
                                         errp) < 0) {
        g_clear_pointer(payload, g_free);
        return -EIO;
    }
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
    if (hbitmap_count(hb)) {
        error_setg(errp, "node A sent a bitmap with bits set");
        goto out;
    }
    pos = 0;
    while ((len = drbd_rle_encode(hb, nbits, &pos, chunk,
                                  DRBD_WIRE_MAX_BITMAP)) > 0) {
        g_byte_array_set_size(pkt, 0);
        drbd_wire_put_bitmap(pkt, chunk, len);
        if (fake_write(h->data, pkt->data, pkt->len, errp) < 0) {
            goto out;
        }
    }
    ret = 0;
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
    h->meta = fake_accept(h);
    if (!h->meta) {
        goto out;
    }
    if (fake_hello(h->meta, true, &err) < 0 || fake_params(h, &err) < 0) {
        goto fail;
    }
    h->handshake_done = true;
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
    qemu_coroutine_enter(qemu_coroutine_create(fake_peer_co, h));

    /* One attempt only: a retry would replace the error under test */
    h->a = open_a(h->path_a, h->sock, "c", "60000", NULL);
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
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/drbd/conn/connect", test_connect);
    g_test_add_data_func("/drbd/conn/replicate/protocol-c", "c",
                         test_replicate);
    g_test_add_data_func("/drbd/conn/replicate/protocol-a", "a",
                         test_replicate);
    g_test_add_data_func("/drbd/conn/replicate/protocol-b", "b",
                         test_replicate);
    g_test_add_func("/drbd/conn/secondary-refuses-io",
                    test_secondary_refuses_io);
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

    return g_test_run();
}
