/*
 * drbd: the /proc/drbd view of HMP "info drbd" (block/drbd/proc.c)
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qapi/qapi-types-drbd.h"
#include "../../block/drbd/proc.h"

/* Every QAPI value has DRBD's name, spelled as drbd_strings.c spells it */
static void test_names(void)
{
    static const char *const cstates[] = {
        "StandAlone", "WFConnection", "WFReportParams", "Connected",
        "SyncSource", "SyncTarget", "Ahead", "Behind",
    };
    static const char *const roles[] = { "Primary", "Secondary", "Unknown" };
    static const char *const disks[] = {
        "Diskless", "Attaching", "Failed", "Inconsistent", "Outdated",
        "DUnknown", "Consistent", "UpToDate",
    };
    int i;

    g_assert_cmpint(ARRAY_SIZE(cstates), ==, DRBD_CONN_STATE__MAX);
    for (i = 0; i < DRBD_CONN_STATE__MAX; i++) {
        g_assert_cmpstr(drbd_proc_cstate_name(i), ==, cstates[i]);
    }
    g_assert_cmpint(ARRAY_SIZE(roles), ==, DRBD_ROLE__MAX);
    for (i = 0; i < DRBD_ROLE__MAX; i++) {
        g_assert_cmpstr(drbd_proc_role_name(i), ==, roles[i]);
    }
    g_assert_cmpint(ARRAY_SIZE(disks), ==, DRBD_DISK_STATE__MAX);
    for (i = 0; i < DRBD_DISK_STATE__MAX; i++) {
        g_assert_cmpstr(drbd_proc_disk_name(i), ==, disks[i]);
    }

    /* Not in the order of the enums by accident: by value */
    g_assert_cmpstr(drbd_proc_cstate_name(DRBD_CONN_STATE_WF_REPORT_PARAMS),
                    ==, "WFReportParams");
    g_assert_cmpstr(drbd_proc_disk_name(DRBD_DISK_STATE_DUNKNOWN), ==,
                    "DUnknown");
    g_assert_cmpstr(drbd_proc_disk_name(DRBD_DISK_STATE_UP_TO_DATE), ==,
                    "UpToDate");
}

typedef struct Node {
    DrbdInfo info;
    DrbdCounters counters;
    DrbdUuidInfo uuids;
    DrbdResyncInfo resync;
    strList history[2];
} Node;

/* A primary connected to its secondary, no resync, counters in bytes */
static void node_init(Node *n)
{
    *n = (Node) {
        .info = {
            .node_name = (char *)"disk0",
            .resource = (char *)"r0",
            .node_id = 1,
            .role = DRBD_ROLE_PRIMARY,
            .peer_role = DRBD_ROLE_SECONDARY,
            .connection = DRBD_CONN_STATE_CONNECTED,
            .disk = DRBD_DISK_STATE_UP_TO_DATE,
            .peer_disk = DRBD_DISK_STATE_UP_TO_DATE,
            .protocol = DRBD_PROTOCOL_C,
            .quorum = true,
        },
        .counters = {
            .ns = 5184 * KiB, .nr = 0, .dw = 5184 * KiB + 512,
            .dr = 1023, .al = 2, .bm = 3, .lo = 4, .pe = 5, .ua = 6,
            .ap = 7, .ep = 1, .oos = 0,
        },
        .uuids = {
            .current = (char *)"8E33C2A0A4F1B7D1",
            .bitmap = (char *)"0000000000000000",
        },
        .history = {
            { .next = &n->history[1], .value = (char *)"5A45524F45440000" },
            { .next = NULL, .value = (char *)"0000000000000000" },
        },
    };
    n->info.counters = &n->counters;
    n->info.uuids = &n->uuids;
    n->uuids.history = &n->history[0];
}

static char *format(unsigned minor, const DrbdInfo *info)
{
    GString *out = g_string_new(NULL);

    drbd_proc_format(out, minor, info);
    return g_string_free(out, false);
}

static void test_format_connected(void)
{
    g_autofree char *out = NULL;
    Node n;

    node_init(&n);
    out = format(0, &n.info);
    g_assert_cmpstr(out, ==,
        "disk0: resource r0, node-id 1\n"
        " 0: cs:Connected ro:Primary/Secondary ds:UpToDate/UpToDate C r-----\n"
        "    ns:5184 nr:0 dw:5184 dr:0 al:2 bm:3 lo:4 pe:5 ua:6 ap:7 ep:1 "
        "wo:f oos:0\n"
        "    uuids: 8E33C2A0A4F1B7D1:0000000000000000:5A45524F45440000:"
        "0000000000000000\n");
}

static void test_format_standalone(void)
{
    g_autofree char *out = NULL;
    Node n;

    node_init(&n);
    n.info.node_name = (char *)"a.img";
    n.info.role = DRBD_ROLE_SECONDARY;
    n.info.peer_role = DRBD_ROLE_UNKNOWN;
    n.info.connection = DRBD_CONN_STATE_WF_CONNECTION;
    n.info.peer_disk = DRBD_DISK_STATE_DUNKNOWN;
    n.info.protocol = DRBD_PROTOCOL_A;
    n.counters.oos = 64 * KiB;
    n.info.last_error = (char *)"connecting: Connection refused";
    out = format(12, &n.info);
    g_assert_cmpstr(out, ==,
        "a.img: resource r0, node-id 1\n"
        "12: cs:WFConnection ro:Secondary/Unknown ds:UpToDate/DUnknown A "
        "r-----\n"
        "    ns:5184 nr:0 dw:5184 dr:0 al:2 bm:3 lo:4 pe:5 ua:6 ap:7 ep:1 "
        "wo:f oos:64\n"
        "    uuids: 8E33C2A0A4F1B7D1:0000000000000000:5A45524F45440000:"
        "0000000000000000\n"
        "    last error: connecting: Connection refused\n");
}

/* Three nodes: a line per peer; a primary that lost quorum says so */
static void test_format_peers(void)
{
    g_autofree char *out = NULL;
    DrbdPeerInfo p[2] = {
        { .node_id = 0, .connection = DRBD_CONN_STATE_CONNECTED,
          .role = DRBD_ROLE_SECONDARY, .disk = DRBD_DISK_STATE_UP_TO_DATE,
          .protocol = DRBD_PROTOCOL_C, .ns = 2048 * KiB, .pe = 1 },
        { .node_id = 2, .connection = DRBD_CONN_STATE_WF_CONNECTION,
          .role = DRBD_ROLE_UNKNOWN, .disk = DRBD_DISK_STATE_DUNKNOWN,
          .protocol = DRBD_PROTOCOL_A, .out_of_sync = 256 * KiB },
    };
    DrbdPeerInfoList l[2] = {
        { .next = &l[1], .value = &p[0] },
        { .next = NULL, .value = &p[1] },
    };
    Node n;

    node_init(&n);
    n.info.peers = &l[0];
    n.info.quorum = false;
    n.info.io_suspended = true;
    out = format(0, &n.info);
    g_assert_cmpstr(out, ==,
        "disk0: resource r0, node-id 1, quorum:no, suspended:quorum\n"
        " 0: cs:Connected ro:Primary/Secondary ds:UpToDate/UpToDate C r-----\n"
        "    ns:5184 nr:0 dw:5184 dr:0 al:2 bm:3 lo:4 pe:5 ua:6 ap:7 ep:1 "
        "wo:f oos:0\n"
        "    peer 0: cs:Connected ro:Secondary ds:UpToDate C ns:2048 nr:0 "
        "pe:1 ua:0 oos:0\n"
        "    peer 2: cs:WFConnection ro:Unknown ds:DUnknown A ns:0 nr:0 "
        "pe:0 ua:0 oos:256\n"
        "    uuids: 8E33C2A0A4F1B7D1:0000000000000000:5A45524F45440000:"
        "0000000000000000\n");
    g_free(out);

    /* With quorum, writes wait for a peer to be fenced */
    n.info.quorum = true;
    out = format(0, &n.info);
    g_assert_true(g_str_has_prefix(out, "disk0: resource r0, node-id 1, "
                                   "suspended:fencing\n"));
    g_free(out);

    /* A peer's own last error, and a node that started without a peer */
    p[1].last_error = (char *)"connecting: Connection refused";
    n.info.degraded = (char *)"running degraded: peer node 2 not connected "
                      "since the start";
    out = format(0, &n.info);
    g_assert_true(g_str_has_suffix(out, "0000000000000000\n"
        "    peer 2 last error: connecting: Connection refused\n"
        "    running degraded: peer node 2 not connected since the start\n"));
}

/* The progress line of a resync with @done of @total KiB */
static char *resync_line(uint64_t done, uint64_t total)
{
    g_autofree char *out = NULL;
    g_auto(GStrv) lines = NULL;
    Node n;

    node_init(&n);
    n.info.connection = DRBD_CONN_STATE_SYNC_SOURCE;
    n.info.peer_disk = DRBD_DISK_STATE_INCONSISTENT;
    n.resync = (DrbdResyncInfo) { .total = total * KiB, .done = done * KiB };
    n.info.resync = &n.resync;
    out = format(0, &n.info);
    lines = g_strsplit(out, "\n", 0);
    g_assert_true(g_str_has_prefix(lines[1], " 0: cs:SyncSource "));
    g_assert_true(g_str_has_prefix(lines[5], "    uuids: "));
    return g_strdup(lines[3]);
}

static void test_format_resync(void)
{
    char *line;

    /* As DRBD draws it: x = permille / 50 steps, '>' at the x-th */
    line = resync_line(0, 4608);
    g_assert_cmpstr(line, ==,
                    "\t[>....................] sync'ed:  0.0% (4608/4608)K");
    g_free(line);

    line = resync_line(1536, 4608);
    g_assert_cmpstr(line, ==,
                    "\t[=====>..............] sync'ed: 33.3% (3072/4608)K");
    g_free(line);

    line = resync_line(4608, 4608);
    g_assert_cmpstr(line, ==,
                    "\t[===================>] sync'ed:100.0% (0/4608)K");
    g_free(line);
}

static void test_format_resync_rate(void)
{
    g_autofree char *out = NULL;
    Node n;

    node_init(&n);
    n.info.connection = DRBD_CONN_STATE_SYNC_TARGET;
    n.info.disk = DRBD_DISK_STATE_INCONSISTENT;
    n.resync = (DrbdResyncInfo) {
        .total = 1 * MiB, .done = 1 * MiB + 1, .rate = 100 * MiB,
        .speed = 60 * MiB, .average_speed = 56750 * KiB,
        .has_finish = true, .finish = 3 * 3600 + 4 * 60 + 5,
    };
    n.info.resync = &n.resync;
    out = format(0, &n.info);
    /* As DRBD prints it: digits grouped, "want" with a resync-rate */
    g_assert_nonnull(strstr(out, "\n\t[===================>] sync'ed:"
                            "100.0% (0/1024)K\n\tfinish: 3:04:05 speed: "
                            "61,440 (56,750) want: 102,400 K/sec\n"
                            "    uuids: "));
}

/* Nothing moves: no time left to tell */
static void test_format_resync_stalled(void)
{
    g_autofree char *out = NULL;
    Node n;

    node_init(&n);
    n.info.connection = DRBD_CONN_STATE_SYNC_SOURCE;
    n.resync = (DrbdResyncInfo) {
        .total = 4 * MiB, .done = MiB, .average_speed = 999 * KiB,
    };
    n.info.resync = &n.resync;
    out = format(0, &n.info);
    g_assert_nonnull(strstr(out, "(3072/4096)K\n\tfinish: -:--:-- "
                            "speed: 0 (999) K/sec (stalled)\n"));
}

/* The flags: "a" waiting for resync-after, "u" paused by the user */
static void test_format_resync_paused(void)
{
    g_autofree char *out = NULL;
    g_autofree char *out2 = NULL;
    Node n;

    node_init(&n);
    n.info.connection = DRBD_CONN_STATE_SYNC_SOURCE;
    n.resync = (DrbdResyncInfo) {
        .total = 4 * MiB, .paused_after = (char *)"disk1",
    };
    n.info.resync = &n.resync;
    out = format(0, &n.info);
    g_assert_nonnull(strstr(out, " C ra----\n"));

    n.resync.paused_after = NULL;
    n.resync.paused = true;
    out2 = format(0, &n.info);
    g_assert_nonnull(strstr(out2, " C r--u--\n"));
}

static void test_format_verify(void)
{
    g_autofree char *out = NULL;
    DrbdVerifyInfo v = {
        .start = 0, .length = 4608 * KiB, .done = 1536 * KiB,
        .out_of_sync = 8 * KiB,
    };
    Node n;

    /* A verify leaves the connection as it is, and draws its own bar */
    node_init(&n);
    n.info.verify = &v;
    out = format(0, &n.info);
    g_assert_nonnull(strstr(out, " 0: cs:Connected "));
    g_assert_nonnull(strstr(out, "\n\t[=====>..............] verified: "
                            "33.3% (3072/4608)K\n\tfinish: -:--:-- speed: "
                            "0 (0) K/sec (stalled)\n    uuids: "));

    v.speed = 1536 * KiB;
    v.average_speed = 2 * MiB;
    v.has_finish = true;
    v.finish = 2;
    g_free(out);
    out = format(0, &n.info);
    g_assert_nonnull(strstr(out, "\n\tfinish: 0:00:02 speed: 1,536 (2,048) "
                            "K/sec\n    uuids: "));
    g_assert_null(strstr(out, "sync'ed"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/drbd-proc/names", test_names);
    g_test_add_func("/drbd-proc/format/connected", test_format_connected);
    g_test_add_func("/drbd-proc/format/standalone", test_format_standalone);
    g_test_add_func("/drbd-proc/format/peers", test_format_peers);
    g_test_add_func("/drbd-proc/format/resync", test_format_resync);
    g_test_add_func("/drbd-proc/format/verify", test_format_verify);
    g_test_add_func("/drbd-proc/format/resync-stalled",
                    test_format_resync_stalled);
    g_test_add_func("/drbd-proc/format/resync-paused",
                    test_format_resync_paused);
    g_test_add_func("/drbd-proc/format/resync-rate",
                    test_format_resync_rate);
    return g_test_run();
}
