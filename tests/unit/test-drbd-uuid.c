/*
 * drbd generation UUIDs: the decision table rule by rule, the handshake
 * with its disk-state rule and every split-brain policy, the UUID life
 * cycle, and a simulation of two nodes that checks that the decisions
 * never lose or leave behind data (block/drbd/uuid.c)
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/host-utils.h"
#include "../../block/drbd/uuid.h"

#define JC      DRBD_UUID_JUST_CREATED
#define PRI     DRBD_UUID_PRIMARY_FLAG

/* Generations: all with the flag bit clear, none 0 or "just created" */
#define GX      0x1000ULL
#define GY      0x2000ULL
#define GZ      0x3000ULL
#define GA      0xa000ULL
#define GB      0xb000ULL
#define GS      0x5000ULL
#define H1      0x1100ULL
#define H2      0x2200ULL
#define H3      0x3300ULL

static DrbdUuids U(uint64_t cur, uint64_t bm, uint64_t h0, uint64_t h1)
{
    return (DrbdUuids) {
        .current = cur, .bitmap = bm, .history = { h0, h1 },
    };
}

static void assert_uuids(const DrbdUuids *u, uint64_t cur, uint64_t bm,
                         uint64_t h0, uint64_t h1)
{
    g_assert_cmphex(u->current, ==, cur);
    g_assert_cmphex(u->bitmap, ==, bm);
    g_assert_cmphex(u->history[0], ==, h0);
    g_assert_cmphex(u->history[1], ==, h1);
}

/* Equal but for the flag bit of the current UUID */
static void assert_same_generations(const DrbdUuids *a, const DrbdUuids *b)
{
    g_assert_cmphex(a->current & ~PRI, ==, b->current & ~PRI);
    g_assert_cmphex(a->bitmap, ==, b->bitmap);
    g_assert_cmphex(a->history[0], ==, b->history[0]);
    g_assert_cmphex(a->history[1], ==, b->history[1]);
}

/* The number the peer's view reports when ours reports @rule */
static int mirror_rule(int rule)
{
    switch (rule) {
    case 20:
        return 30;
    case 30:
        return 20;
    case 34:
        return 35;
    case 35:
        return 34;
    case 36:
        return 37;
    case 37:
        return 36;
    case 50:
        return 70;
    case 70:
        return 50;
    case 110:
        return 111;
    case 111:
        return 110;
    case 51:
        return 71;
    case 71:
        return 51;
    case 60:
        return 80;
    case 80:
        return 60;
    default:
        return rule;
    }
}

/* The decision the peer reaches when this node reaches @d */
static DrbdSyncDecision mirror_decision(DrbdSyncDecision d)
{
    switch (d) {
    case DRBD_SYNC_SOURCE:
        return DRBD_SYNC_TARGET;
    case DRBD_SYNC_TARGET:
        return DRBD_SYNC_SOURCE;
    case DRBD_SYNC_FULL_SOURCE:
        return DRBD_SYNC_FULL_TARGET;
    case DRBD_SYNC_FULL_TARGET:
        return DRBD_SYNC_FULL_SOURCE;
    default:
        return d;
    }
}

static DrbdUuidCmp mirror_cmp(DrbdUuidCmp c)
{
    switch (c) {
    case DRBD_UUID_CMP_UNRELATED:
    case DRBD_UUID_CMP_SPLIT_BRAIN:
    case DRBD_UUID_CMP_SPLIT_BRAIN_FULL:
        return c;
    default:
        return -c;
    }
}

/*
 * Compare @self with @peer, check the answer and the rule, and that the
 * peer, comparing the other way round, reaches the mirror image
 */
static void check_cmp_crash(DrbdUuids self, DrbdUuids peer,
                            bool self_crashed, bool peer_crashed,
                            bool self_dc, DrbdUuidCmp want, int want_rule)
{
    int rule = -1, peer_rule = -1;
    DrbdUuidCmp got, peer_got;

    got = drbd_uuid_compare(&self, &peer, self_crashed, peer_crashed,
                            self_dc, &rule);
    if (got != want || rule != want_rule) {
        g_test_message("got %s by rule %d, expected %s by rule %d",
                       drbd_uuid_cmp_str(got), rule,
                       drbd_uuid_cmp_str(want), want_rule);
    }
    g_assert_cmpint(got, ==, want);
    g_assert_cmpint(rule, ==, want_rule);

    peer_got = drbd_uuid_compare(&peer, &self, peer_crashed, self_crashed,
                                 !self_dc, &peer_rule);
    g_assert_cmpint(peer_got, ==, mirror_cmp(want));
    g_assert_cmpint(peer_rule, ==, mirror_rule(want_rule));
}

static void check_cmp(DrbdUuids self, DrbdUuids peer, DrbdUuidCmp want,
                      int want_rule)
{
    check_cmp_crash(self, peer, false, false, false, want, want_rule);
    check_cmp_crash(self, peer, false, false, true, want, want_rule);
}

/*
 * The decision table, rule by rule
 */

static void test_rule_both_just_created(void)
{
    check_cmp(U(JC, 0, 0, 0), U(JC, 0, 0, 0), DRBD_UUID_CMP_EQUAL, 10);
    /* the flag bit does not count */
    check_cmp(U(JC | PRI, 0, 0, 0), U(JC, 0, 0, 0), DRBD_UUID_CMP_EQUAL, 10);
}

static void test_rule_one_just_created(void)
{
    check_cmp(U(JC, 0, 0, 0), U(GX, 0, H1, 0),
              DRBD_UUID_CMP_FULL_TARGET, 20);
    check_cmp(U(GX | PRI, GY, H1, H2), U(JC, 0, 0, 0),
              DRBD_UUID_CMP_FULL_SOURCE, 30);
    /* a current of 0 counts as "just created" on our side */
    check_cmp(U(0, 0, 0, 0), U(GX, 0, 0, 0), DRBD_UUID_CMP_FULL_TARGET, 20);
}

static void test_rule_equal_current(void)
{
    DrbdUuids a = U(GX, 0, H1, H2), b = U(GX | PRI, 0, H1, H2);

    /* neither crashed as primary: in sync */
    check_cmp_crash(a, b, false, false, false, DRBD_UUID_CMP_EQUAL, 40);
    check_cmp_crash(a, b, false, false, true, DRBD_UUID_CMP_EQUAL, 40);
    /* the crashed primary may have written what the other lacks */
    check_cmp_crash(a, b, true, false, false, DRBD_UUID_CMP_SOURCE, 40);
    check_cmp_crash(a, b, true, false, true, DRBD_UUID_CMP_SOURCE, 40);
    check_cmp_crash(a, b, false, true, false, DRBD_UUID_CMP_TARGET, 40);
    check_cmp_crash(a, b, false, true, true, DRBD_UUID_CMP_TARGET, 40);
    /* both: the node that resolves conflicts yields */
    check_cmp_crash(a, b, true, true, true, DRBD_UUID_CMP_TARGET, 40);
    check_cmp_crash(a, b, true, true, false, DRBD_UUID_CMP_SOURCE, 40);
    /* equal bitmap UUIDs do not change that */
    check_cmp(U(GX, GY, H1, 0), U(GX, GY, H1, 0), DRBD_UUID_CMP_EQUAL, 40);
}

static void test_rule_missed_resync_end(void)
{
    DrbdUuids src, tgt, tgt_copy;

    /*
     * A resync from src ({GX, GY, H1, H2}) to tgt ended; tgt recorded it
     * ({GX, 0, GY, H1}: src's UUIDs with the bitmap UUID moved to the
     * history), src did not (its bitmap UUID is still GY)
     */
    src = U(GX | PRI, GY, H1, H2);
    tgt = U(GX, 0, GY, H1);
    check_cmp(src, tgt, DRBD_UUID_CMP_SOURCE, 34);
    check_cmp(tgt, src, DRBD_UUID_CMP_TARGET, 35);

    /* 34: the source corrects itself; then the two are in sync */
    tgt_copy = tgt;
    g_assert_true(drbd_uuid_repair(34, &src, &tgt_copy));
    assert_uuids(&src, GX | PRI, 0, GY, H1);
    assert_uuids(&tgt_copy, GX, 0, GY, H1);
    check_cmp(src, tgt, DRBD_UUID_CMP_EQUAL, 40);

    /* 35: the target corrects its copy of the source's UUIDs */
    src = U(GX | PRI, GY, H1, H2);
    g_assert_true(drbd_uuid_repair(35, &tgt_copy, &src));
    assert_uuids(&src, GX | PRI, 0, GY, H1);
    assert_uuids(&tgt_copy, GX, 0, GY, H1);
}

static void test_rule_bitmap_uuid_one_side(void)
{
    DrbdUuids a = U(GX, 0, GY, H1), b = U(GX, GZ, H2, H3);

    /*
     * A bitmap UUID on one side, without the history of rule 34 (DRBD:
     * the peer missed the sync UUID of a resync; this driver makes none)
     */
    check_cmp(b, a, DRBD_UUID_CMP_SOURCE, 36);
    check_cmp(a, b, DRBD_UUID_CMP_TARGET, 37);
    /* nothing to repair */
    g_assert_false(drbd_uuid_repair(36, &b, &a));
    g_assert_false(drbd_uuid_repair(37, &a, &b));
    assert_uuids(&a, GX, 0, GY, H1);
    assert_uuids(&b, GX, GZ, H2, H3);
}

static void test_rule_peer_bitmap_is_our_current(void)
{
    /* the peer moved on from GX, we did not: bitmap-based resync */
    check_cmp(U(GX, 0, H1, 0), U(GY | PRI, GX, H1, 0),
              DRBD_UUID_CMP_TARGET, 50);
    check_cmp(U(GY | PRI, GX | PRI, H1, 0), U(GX, 0, H1, 0),
              DRBD_UUID_CMP_SOURCE, 70);
}

static void test_rule_missed_resync_end_target(void)
{
    /*
     * A resync from src ({GY, GX, H1, 0}) to tgt ended; src recorded it
     * (its bitmap UUID GX moved to the history), tgt did not
     */
    DrbdUuids tgt = U(GX, 0, H1, 0);
    DrbdUuids src = U(GY | PRI, 0, GX, H1);
    DrbdUuids src_copy = src, tgt_copy = tgt;

    check_cmp(tgt, src, DRBD_UUID_CMP_TARGET, 51);
    check_cmp(src, tgt, DRBD_UUID_CMP_SOURCE, 71);

    /* both undo the end of that resync, each in its own view */
    g_assert_true(drbd_uuid_repair(51, &tgt_copy, &src_copy));
    assert_uuids(&src_copy, GY | PRI, GX, H1, H1);
    assert_uuids(&tgt_copy, GX, 0, H1, 0);
    g_assert_true(drbd_uuid_repair(71, &src, &tgt));
    assert_uuids(&src, GY | PRI, GX, H1, H1);
    assert_uuids(&tgt, GX, 0, H1, 0);
    /* and then agree on a plain bitmap-based resync */
    check_cmp(tgt, src, DRBD_UUID_CMP_TARGET, 50);

    /* DRBD's case: a sync UUID GS made at the start never reached tgt */
    src = U(GY | PRI, GS, GX, H1);
    check_cmp(tgt, src, DRBD_UUID_CMP_TARGET, 51);
    check_cmp(src, tgt, DRBD_UUID_CMP_SOURCE, 71);
}

static void test_rule_history(void)
{
    /* our current is in the peer's history: it moved on further */
    check_cmp(U(GX, 0, H1, 0), U(GY, GZ, GX, 0),
              DRBD_UUID_CMP_FULL_TARGET, 60);
    check_cmp(U(GX, 0, H1, 0), U(GY, GZ, H2, GX),
              DRBD_UUID_CMP_FULL_TARGET, 60);
    check_cmp(U(GY, GZ, GX, 0), U(GX, 0, H1, 0),
              DRBD_UUID_CMP_FULL_SOURCE, 80);
    check_cmp(U(GY, GZ, H2, GX | PRI), U(GX | PRI, 0, H1, 0),
              DRBD_UUID_CMP_FULL_SOURCE, 80);
}

static void test_rule_split_brain(void)
{
    /* both moved on from GX */
    check_cmp(U(GA, GX, H1, 0), U(GB, GX, H1, 0),
              DRBD_UUID_CMP_SPLIT_BRAIN, 90);
    check_cmp(U(GA, GX | PRI, H1, 0), U(GB | PRI, GX, H2, 0),
              DRBD_UUID_CMP_SPLIT_BRAIN, 90);
}

static void test_rule_split_brain_full(void)
{
    int i, j;

    /* common history, but no bitmap covers what differs */
    for (i = 0; i < 2; i++) {
        for (j = 0; j < 2; j++) {
            DrbdUuids a = U(GA, GX, H1, H2), b = U(GB, GY, H3, 0x4400);

            a.history[i] = GZ;
            b.history[j] = GZ | PRI;
            check_cmp(a, b, DRBD_UUID_CMP_SPLIT_BRAIN_FULL, 100);
        }
    }
    /* a bitmap UUID names an older generation just as well */
    for (i = 0; i < 2; i++) {
        DrbdUuids a = U(GA, GZ | PRI, H1, H2), b = U(GB, GY, H3, 0x4400);

        b.history[i] = GZ;
        check_cmp(a, b, DRBD_UUID_CMP_SPLIT_BRAIN_FULL, 100);
        check_cmp(b, a, DRBD_UUID_CMP_SPLIT_BRAIN_FULL, 100);
    }
}

static void test_rule_unrelated(void)
{
    check_cmp(U(GA, GX, H1, 0), U(GB, GY, H2, 0),
              DRBD_UUID_CMP_UNRELATED, 100);
    /* 0 and "just created" name no generation: they never match */
    check_cmp(U(GA, 0, 0, 0), U(GB, 0, 0, 0), DRBD_UUID_CMP_UNRELATED, 100);
    check_cmp(U(GA, JC, JC, 0), U(GB, JC, JC, 0),
              DRBD_UUID_CMP_UNRELATED, 100);
}

/* A fresh image of zeroes joins a resource whose data moved on */
static void test_rule_pristine_zeroes(void)
{
    const uint64_t Z = DRBD_UUID_ZEROED;

    check_cmp(U(Z, 0, 0, 0), U(GB, GY, H2, 0),
              DRBD_UUID_CMP_FULL_TARGET, 110);
    check_cmp(U(GB, GY, H2, 0), U(Z, 0, 0, 0),
              DRBD_UUID_CMP_FULL_SOURCE, 111);
    check_cmp(U(Z | PRI, 0, 0, 0), U(GB, 0, 0, 0),
              DRBD_UUID_CMP_FULL_TARGET, 110);
    /* both fresh: the same generation */
    check_cmp(U(Z, 0, 0, 0), U(Z, 0, 0, 0), DRBD_UUID_CMP_EQUAL, 40);
    /* the peer started from zeroes too: by bitmap, as before */
    check_cmp(U(Z, 0, 0, 0), U(GB, Z, 0, 0), DRBD_UUID_CMP_TARGET, 50);
    /* written once (a history, or a bitmap UUID): not fresh any more */
    check_cmp(U(Z, 0, H1, 0), U(GB, GY, H2, 0),
              DRBD_UUID_CMP_UNRELATED, 100);
    check_cmp(U(Z, GX, 0, 0), U(GB, GY, H2, 0),
              DRBD_UUID_CMP_UNRELATED, 100);
}

static void test_repair_other_rules(void)
{
    static const int rules[] = { 0, 10, 20, 30, 36, 37, 40, 50, 60, 70,
                                 80, 90, 100 };
    int i;

    for (i = 0; i < ARRAY_SIZE(rules); i++) {
        DrbdUuids a = U(GA, GX, H1, H2), b = U(GB, GY, H3, 0);

        g_assert_false(drbd_uuid_repair(rules[i], &a, &b));
        assert_uuids(&a, GA, GX, H1, H2);
        assert_uuids(&b, GB, GY, H3, 0);
    }
}

/*
 * The handshake
 */

static DrbdHandshakeSide side(DrbdUuids u)
{
    return (DrbdHandshakeSide) {
        .uuids = u, .disk = DRBD_HS_DISK_UP_TO_DATE,
    };
}

/* The peer's configuration, compatible with @cfg */
static DrbdHandshakeConfig peer_cfg(const DrbdHandshakeConfig *cfg)
{
    DrbdHandshakeConfig p = *cfg;
    DrbdAfterSbPolicy *slots[] = {
        &p.after_sb_0pri, &p.after_sb_1pri, &p.after_sb_2pri,
    };
    int i;

    for (i = 0; i < ARRAY_SIZE(slots); i++) {
        if (*slots[i] == DRBD_ASB_DISCARD_LOCAL) {
            *slots[i] = DRBD_ASB_DISCARD_REMOTE;
        } else if (*slots[i] == DRBD_ASB_DISCARD_REMOTE) {
            *slots[i] = DRBD_ASB_DISCARD_LOCAL;
        }
    }
    return p;
}

/* Run the handshake on both nodes and check that they agree */
static DrbdSyncDecision handshake(const DrbdHandshakeSide *self,
                                  const DrbdHandshakeSide *peer,
                                  bool self_dc, const DrbdHandshakeConfig *cfg,
                                  DrbdHandshakeResult *res)
{
    DrbdHandshakeConfig pcfg = peer_cfg(cfg);
    DrbdHandshakeResult pres;
    DrbdSyncDecision d;

    d = drbd_sync_handshake(self, peer, self_dc, cfg, res);
    g_assert_cmpint(d, ==, res->decision);
    g_assert_cmpint(drbd_handshake_config_compatible(cfg, &pcfg,
                                                     &error_abort), ==, 0);

    drbd_sync_handshake(peer, self, !self_dc, &pcfg, &pres);
    if (pres.decision != mirror_decision(d)) {
        g_test_message("self: %s, peer: %s", drbd_sync_decision_str(d),
                       drbd_sync_decision_str(pres.decision));
    }
    g_assert_cmpint(pres.decision, ==, mirror_decision(d));
    g_assert_cmpint(pres.views_disagree, ==, res->views_disagree);
    if (!res->views_disagree) {
        g_assert_cmpint(pres.uuid_cmp, ==, mirror_cmp(res->uuid_cmp));
        g_assert_cmpint(pres.rule, ==, mirror_rule(res->rule));
    }
    g_assert_cmpint(pres.by_disk_state, ==, res->by_disk_state);
    g_assert_cmpint(pres.resolution, ==, res->resolution);
    g_assert_cmpint(pres.primaries, ==, res->primaries);
    return d;
}

static const DrbdHandshakeConfig default_cfg;
static const DrbdHandshakeConfig two_nodes_cfg = {
    .idle_secondary_loses = true,
};

static void test_handshake_plain(void)
{
    DrbdHandshakeSide a = side(U(GY | PRI, GX, H1, 0));
    DrbdHandshakeSide b = side(U(GX, 0, H1, 0));
    DrbdHandshakeResult res;

    a.primary = true;
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_SOURCE);
    g_assert_cmpint(res.uuid_cmp, ==, DRBD_UUID_CMP_SOURCE);
    g_assert_cmpint(res.rule, ==, 70);
    g_assert_false(res.by_disk_state);
    g_assert_false(res.views_disagree);
    g_assert_cmpint(res.resolution, ==, DRBD_SB_NONE);

    /* b moved on twice since it had a's generation */
    a.primary = false;
    b.uuids = U(GZ, GB, H2, GY);
    g_assert_cmpint(handshake(&a, &b, true, &default_cfg, &res), ==,
                    DRBD_SYNC_FULL_TARGET);
    g_assert_cmpint(res.rule, ==, 60);

    /* the operator's flag means nothing without a split brain */
    b.uuids = a.uuids;
    a.discard_my_data = true;
    g_assert_cmpint(handshake(&a, &b, true, &default_cfg, &res), ==,
                    DRBD_SYNC_NONE);
    g_assert_cmpint(res.rule, ==, 40);
    g_assert_cmpint(res.resolution, ==, DRBD_SB_NONE);
}

static void test_handshake_diskless(void)
{
    DrbdHandshakeSide a = side(U(GA, 0, 0, 0)), b = side(U(GB, 0, 0, 0));
    DrbdHandshakeResult res;

    a.disk = DRBD_HS_DISK_DISKLESS;
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_NONE);
    g_assert_cmpint(res.rule, ==, 0);
    g_assert_cmpint(res.uuid_cmp, ==, DRBD_UUID_CMP_EQUAL);
}

static void test_handshake_disk_state(void)
{
    DrbdHandshakeSide a = side(U(GX, 0, H1, 0)), b = side(U(GX, 0, H1, 0));
    DrbdHandshakeResult res;
    int d;

    /* equal UUIDs, but one disk is Inconsistent (an interrupted sync) */
    a.disk = DRBD_HS_DISK_INCONSISTENT;
    for (d = DRBD_HS_DISK_OUTDATED; d <= DRBD_HS_DISK_UP_TO_DATE; d++) {
        b.disk = d;
        g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                        DRBD_SYNC_TARGET);
        g_assert_true(res.by_disk_state);
        g_assert_cmpint(res.uuid_cmp, ==, DRBD_UUID_CMP_EQUAL);
    }
    /* both Inconsistent: the UUIDs decide */
    b.disk = DRBD_HS_DISK_INCONSISTENT;
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_NONE);
    g_assert_false(res.by_disk_state);

    /* against the UUIDs, and full where they asked for full */
    a = side(U(GY, GX, H1, 0));
    b = side(U(GX, 0, H1, 0));
    b.disk = DRBD_HS_DISK_OUTDATED;
    a.disk = DRBD_HS_DISK_INCONSISTENT;
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_TARGET);
    g_assert_cmpint(res.uuid_cmp, ==, DRBD_UUID_CMP_SOURCE);
    a.uuids = U(GY, GZ, GX, 0);
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_FULL_TARGET);
    g_assert_cmpint(res.rule, ==, 80);

    /* a split brain is no split brain when one side has no good data */
    a = side(U(GA, GX, H1, 0));
    b = side(U(GB, GX, H1, 0));
    b.disk = DRBD_HS_DISK_INCONSISTENT;
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_SOURCE);
    g_assert_true(res.by_disk_state);
    g_assert_cmpint(res.resolution, ==, DRBD_SB_NONE);
    a.uuids = U(GA, GY, H1, 0);
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_FULL_SOURCE);
    g_assert_cmpint(res.uuid_cmp, ==, DRBD_UUID_CMP_SPLIT_BRAIN_FULL);

    /*
     * both Inconsistent in two generations: nothing of either to keep,
     * and neither is a source; no split brain to hold the connection for
     */
    a.disk = DRBD_HS_DISK_INCONSISTENT;
    a.uuids = U(GA, GX, H1, 0);
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_INCONSISTENT_SOURCE);
    g_assert_cmpint(res.uuid_cmp, ==, DRBD_UUID_CMP_SPLIT_BRAIN);
    g_assert_cmpint(res.resolution, ==, DRBD_SB_NONE);
    a.uuids = U(GA, GY, H1, 0);
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_INCONSISTENT_SOURCE);
    g_assert_cmpint(res.uuid_cmp, ==, DRBD_UUID_CMP_SPLIT_BRAIN_FULL);
    a.disk = DRBD_HS_DISK_UP_TO_DATE;

    /* no disk state turns unrelated data into related data */
    a.uuids = U(GA, GY, H2, 0);
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_UNRELATED);
}

static void test_handshake_refusals(void)
{
    DrbdHandshakeSide a, b;
    DrbdHandshakeResult res;

    /* both Inconsistent, and the UUIDs make one of them the source */
    a = side(U(GY, GX, H1, 0));
    b = side(U(GX, 0, H1, 0));
    a.disk = b.disk = DRBD_HS_DISK_INCONSISTENT;
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_INCONSISTENT_SOURCE);

    /* a primary would see its data change under it */
    a.disk = b.disk = DRBD_HS_DISK_UP_TO_DATE;
    b.primary = true;
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_PRIMARY_TARGET);
    /* unless its data is not worth keeping anyway */
    b.disk = DRBD_HS_DISK_OUTDATED;
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_SOURCE);
}

static void test_handshake_views_disagree(void)
{
    DrbdHandshakeSide a, b;
    DrbdHandshakeResult res;
    DrbdUuidCmp c;
    int rule;

    /* blank metadata on both sides: each would be target */
    a = side(U(0, 0, 0, 0));
    b = side(U(0, 0, 0, 0));
    c = drbd_uuid_compare(&a.uuids, &b.uuids, false, false, false, &rule);
    g_assert_cmpint(c, ==, DRBD_UUID_CMP_FULL_TARGET);
    g_assert_cmpint(handshake(&a, &b, false, &default_cfg, &res), ==,
                    DRBD_SYNC_UNRELATED);
    g_assert_true(res.views_disagree);

    /* crossed generations that no life cycle produces */
    a = side(U(GX, 0, GY, 0));
    b = side(U(GY, GX, 0, 0));
    g_assert_cmpint(handshake(&a, &b, true, &default_cfg, &res), ==,
                    DRBD_SYNC_UNRELATED);
    g_assert_true(res.views_disagree);
    g_assert_cmpint(res.rule, ==, 50);
}

/*
 * Split-brain policies
 */

typedef struct SbCase {
    DrbdHandshakeConfig cfg;
    bool self_primary, peer_primary;
    uint64_t self_changes, peer_changes;
    bool self_older, peer_older;    /* primary already when they split */
    bool self_dc;                   /* self resolves conflicts */
    bool self_discard, peer_discard;
    bool full;                      /* rule 100 rather than 90 */
} SbCase;

static DrbdSyncDecision run_sb(const SbCase *c, DrbdHandshakeResult *res)
{
    DrbdHandshakeSide self = side(U(GA, GX, H1, 0));
    DrbdHandshakeSide peer = side(U(GB, GX, H1, 0));

    if (c->full) {
        self.uuids.bitmap = GY;
        peer.uuids.bitmap = GZ;
    }
    self.uuids.bitmap |= c->self_older ? PRI : 0;
    peer.uuids.bitmap |= c->peer_older ? PRI : 0;
    self.uuids.current |= c->self_primary ? PRI : 0;
    peer.uuids.current |= c->peer_primary ? PRI : 0;
    self.primary = c->self_primary;
    peer.primary = c->peer_primary;
    self.changes = c->self_changes;
    peer.changes = c->peer_changes;
    self.discard_my_data = c->self_discard;
    peer.discard_my_data = c->peer_discard;

    handshake(&self, &peer, c->self_dc, &c->cfg, res);
    g_assert_cmpint(res->rule, ==, c->full ? 100 : 90);
    g_assert_cmpint(res->primaries, ==, c->self_primary + c->peer_primary);
    return res->decision;
}

static void check_sb(const SbCase *c, DrbdSyncDecision want,
                     DrbdSbResolution want_resolution)
{
    DrbdHandshakeResult res;
    DrbdSyncDecision got = run_sb(c, &res);

    if (got != want || res.resolution != want_resolution) {
        g_test_message("got %s (%s), expected %s (%s)",
                       drbd_sync_decision_str(got),
                       drbd_sb_resolution_str(res.resolution),
                       drbd_sync_decision_str(want),
                       drbd_sb_resolution_str(want_resolution));
    }
    g_assert_cmpint(got, ==, want);
    g_assert_cmpint(res.resolution, ==, want_resolution);
    g_assert_false(res.by_disk_state);
}

#define RESOLVED    DRBD_SB_BY_POLICY
#define UNRESOLVED  DRBD_SB_UNRESOLVED

/* ... where each side changed data, or where a primary did not */
static void test_sb_default_never_resolves(void)
{
    SbCase c = { .self_changes = 1, .peer_changes = 100 };
    int p;

    for (p = 0; p < 3; p++) {
        c.self_primary = p >= 1;
        c.peer_primary = p >= 2;
        check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
    }
}

/*
 * A secondary without changes since the split (promoted apart, demoted
 * without a write) takes the other's data whatever the policies: it
 * loses no write.  Not a primary (it would become PRIMARY_TARGET), not
 * a crashed primary (its changes are not known), not on rule 100.
 */
static void test_sb_idle_secondary(void)
{
    SbCase c = { .self_changes = 0, .peer_changes = 100 };

    /* Only in a resource of two nodes (the caller says so) */
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
    c.cfg.idle_secondary_loses = true;
    check_sb(&c, DRBD_SYNC_TARGET, DRBD_SB_BY_NO_CHANGES);
    c.peer_primary = true;
    check_sb(&c, DRBD_SYNC_TARGET, DRBD_SB_BY_NO_CHANGES);
    c.peer_primary = false;
    c.self_changes = 100;
    c.peer_changes = 0;
    check_sb(&c, DRBD_SYNC_SOURCE, DRBD_SB_BY_NO_CHANGES);
    c.self_primary = true;
    check_sb(&c, DRBD_SYNC_SOURCE, DRBD_SB_BY_NO_CHANGES);

    /* a primary without changes is no such side */
    c.self_primary = false;
    c.peer_primary = true;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);

    /* both without changes: the node that resolves conflicts */
    c.peer_primary = false;
    c.self_changes = 0;
    c.self_dc = true;
    check_sb(&c, DRBD_SYNC_TARGET, DRBD_SB_BY_NO_CHANGES);
    c.self_dc = false;
    check_sb(&c, DRBD_SYNC_SOURCE, DRBD_SB_BY_NO_CHANGES);

    /* a policy or discard-my-data that decides comes first */
    c.self_changes = 0;
    c.peer_changes = 100;
    c.cfg.after_sb_0pri = DRBD_ASB_DISCARD_REMOTE;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    c.cfg.after_sb_0pri = DRBD_ASB_DISCONNECT;
    c.peer_discard = true;
    check_sb(&c, DRBD_SYNC_SOURCE, DRBD_SB_BY_DISCARD_MY_DATA);
    c.peer_discard = false;

    /* no common bitmap: the changes do not tell what differs */
    c.full = true;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
}

static void test_sb_0pri(void)
{
    SbCase c = { .self_changes = 3, .peer_changes = 5 };
    DrbdHandshakeResult res;

    c.cfg.after_sb_0pri = DRBD_ASB_DISCONNECT;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
    g_assert_cmpint(run_sb(&c, &res), ==, DRBD_SYNC_SPLIT_BRAIN);
    g_assert_cmpint(res.policy, ==, DRBD_ASB_DISCONNECT);

    /* younger: we were promoted after the split, the peer before */
    c.cfg.after_sb_0pri = DRBD_ASB_DISCARD_YOUNGER_PRIMARY;
    c.peer_older = true;
    check_sb(&c, DRBD_SYNC_TARGET, RESOLVED);
    g_assert_cmpint(run_sb(&c, &res), ==, DRBD_SYNC_TARGET);
    g_assert_cmpint(res.policy, ==, DRBD_ASB_DISCARD_YOUNGER_PRIMARY);
    g_assert_cmpint(res.primaries, ==, 0);
    c.peer_older = false;
    c.self_older = true;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    /* no age difference: falls back on the changes, so never unresolved */
    c.self_older = c.peer_older = false;
    check_sb(&c, DRBD_SYNC_TARGET, RESOLVED);
    c.self_older = c.peer_older = true;
    c.peer_changes = 0;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    c.self_older = c.peer_older = false;
    c.peer_changes = 5;

    c.cfg.after_sb_0pri = DRBD_ASB_DISCARD_OLDER_PRIMARY;
    c.peer_older = true;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    c.peer_older = false;
    c.self_older = true;
    check_sb(&c, DRBD_SYNC_TARGET, RESOLVED);
    c.self_older = false;
    c.self_changes = 9;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    c.self_changes = 3;

    c.cfg.after_sb_0pri = DRBD_ASB_DISCARD_ZERO_CHANGES;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
    c.self_changes = 0;
    check_sb(&c, DRBD_SYNC_TARGET, RESOLVED);
    c.self_changes = 3;
    c.peer_changes = 0;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    c.self_changes = 0;
    c.self_dc = true;
    check_sb(&c, DRBD_SYNC_TARGET, RESOLVED);
    c.self_dc = false;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    c.self_changes = 3;
    c.peer_changes = 5;

    /* least changes always decides; a tie goes against the resolver */
    c.cfg.after_sb_0pri = DRBD_ASB_DISCARD_LEAST_CHANGES;
    check_sb(&c, DRBD_SYNC_TARGET, RESOLVED);
    c.self_changes = 6;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    c.self_changes = 5;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    c.self_dc = true;
    check_sb(&c, DRBD_SYNC_TARGET, RESOLVED);
    c.self_dc = false;

    c.cfg.after_sb_0pri = DRBD_ASB_DISCARD_LOCAL;
    check_sb(&c, DRBD_SYNC_TARGET, RESOLVED);
    c.cfg.after_sb_0pri = DRBD_ASB_DISCARD_REMOTE;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
}

static void test_sb_1pri(void)
{
    SbCase c = {
        .self_primary = true,
        .self_changes = 3, .peer_changes = 5,
        .cfg.after_sb_0pri = DRBD_ASB_DISCARD_LEAST_CHANGES,
    };
    DrbdHandshakeResult res;

    c.cfg.after_sb_1pri = DRBD_ASB_DISCONNECT;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);

    /* consensus: only if 0pri discards the secondary */
    c.cfg.after_sb_1pri = DRBD_ASB_CONSENSUS;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
    c.self_changes = 9;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    g_assert_cmpint(run_sb(&c, &res), ==, DRBD_SYNC_SOURCE);
    g_assert_cmpint(res.policy, ==, DRBD_ASB_CONSENSUS);
    g_assert_cmpint(res.primaries, ==, 1);
    c.self_primary = false;
    c.peer_primary = true;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
    c.self_changes = 3;
    check_sb(&c, DRBD_SYNC_TARGET, RESOLVED);
    c.cfg.after_sb_0pri = DRBD_ASB_DISCONNECT;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
    c.cfg.after_sb_0pri = DRBD_ASB_DISCARD_LEAST_CHANGES;

    /* violently-as0p: 0pri, even against the primary */
    c.cfg.after_sb_1pri = DRBD_ASB_VIOLENTLY_AS0P;
    check_sb(&c, DRBD_SYNC_TARGET, RESOLVED);
    c.self_changes = 9;
    check_sb(&c, DRBD_SYNC_PRIMARY_TARGET, RESOLVED);
    c.cfg.after_sb_0pri = DRBD_ASB_DISCONNECT;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
    c.cfg.after_sb_0pri = DRBD_ASB_DISCARD_ZERO_CHANGES;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);

    /* discard-secondary always decides, whatever the changes */
    c.cfg.after_sb_1pri = DRBD_ASB_DISCARD_SECONDARY;
    c.cfg.after_sb_0pri = DRBD_ASB_DISCONNECT;
    check_sb(&c, DRBD_SYNC_TARGET, RESOLVED);
    c.self_primary = true;
    c.peer_primary = false;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    c.self_changes = 0;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
}

static void test_sb_2pri(void)
{
    SbCase c = {
        .self_primary = true, .peer_primary = true,
        .self_changes = 9, .peer_changes = 5,
        .cfg.after_sb_0pri = DRBD_ASB_DISCARD_LEAST_CHANGES,
    };
    DrbdHandshakeResult res;

    c.cfg.after_sb_2pri = DRBD_ASB_DISCONNECT;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);

    /*
     * violently-as0p: 0pri picks a loser, but a primary never becomes
     * sync target (rr-conflict=violently is not offered)
     */
    c.cfg.after_sb_2pri = DRBD_ASB_VIOLENTLY_AS0P;
    check_sb(&c, DRBD_SYNC_PRIMARY_TARGET, RESOLVED);
    g_assert_cmpint(run_sb(&c, &res), ==, DRBD_SYNC_PRIMARY_TARGET);
    g_assert_cmpint(res.policy, ==, DRBD_ASB_VIOLENTLY_AS0P);
    g_assert_cmpint(res.primaries, ==, 2);
    c.self_changes = 1;
    check_sb(&c, DRBD_SYNC_PRIMARY_TARGET, RESOLVED);
    c.cfg.after_sb_0pri = DRBD_ASB_DISCONNECT;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
}

/* A policy that is not valid for its option resolves nothing */
static void test_sb_invalid_policies(void)
{
    int pri, p, n = 0;

    for (pri = 0; pri < 3; pri++) {
        for (p = 0; p < DRBD_ASB__MAX; p++) {
            SbCase c = {
                .self_primary = pri >= 1, .peer_primary = pri >= 2,
                .self_changes = 9, .peer_changes = 5,
                /* what consensus or violently-as0p would apply */
                .cfg.after_sb_0pri = DRBD_ASB_DISCARD_LEAST_CHANGES,
            };
            DrbdAfterSbPolicy *slot = pri == 0 ? &c.cfg.after_sb_0pri :
                                      pri == 1 ? &c.cfg.after_sb_1pri :
                                                 &c.cfg.after_sb_2pri;
            DrbdHandshakeResult res;

            if (drbd_after_sb_policy_valid(pri, p)) {
                continue;
            }
            *slot = p;
            g_assert_cmpint(run_sb(&c, &res), ==, DRBD_SYNC_SPLIT_BRAIN);
            g_assert_cmpint(res.resolution, ==, DRBD_SB_UNRESOLVED);
            n++;
        }
    }
    /* 3 invalid for 0pri, 6 for 1pri, 8 for 2pri */
    g_assert_cmpint(n, ==, 3 + 6 + 8);
}

static void test_sb_full(void)
{
    SbCase c = {
        .full = true, .self_changes = 3, .peer_changes = 5,
        .cfg.after_sb_0pri = DRBD_ASB_DISCARD_LEAST_CHANGES,
    };

    /* the policies stay out of it (DRBD's always-asbp is not offered) */
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
    c.self_changes = 6;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);
}

static void test_sb_discard_my_data(void)
{
    SbCase c = { .self_discard = true, .self_changes = 2,
                 .peer_changes = 3 };

    check_sb(&c, DRBD_SYNC_TARGET, DRBD_SB_BY_DISCARD_MY_DATA);
    c.self_discard = false;
    c.peer_discard = true;
    check_sb(&c, DRBD_SYNC_SOURCE, DRBD_SB_BY_DISCARD_MY_DATA);
    c.self_discard = true;
    check_sb(&c, DRBD_SYNC_SPLIT_BRAIN, UNRESOLVED);

    /* no common bitmap: a full resync */
    c.full = true;
    c.self_discard = false;
    check_sb(&c, DRBD_SYNC_FULL_SOURCE, DRBD_SB_BY_DISCARD_MY_DATA);

    /* a policy that decides comes first */
    c.full = false;
    c.cfg.after_sb_0pri = DRBD_ASB_DISCARD_REMOTE;
    c.self_discard = true;
    c.peer_discard = false;
    check_sb(&c, DRBD_SYNC_SOURCE, RESOLVED);
    /* one that does not leaves it to the operator */
    c.cfg.after_sb_0pri = DRBD_ASB_DISCARD_ZERO_CHANGES;
    c.self_changes = c.peer_changes = 4;
    check_sb(&c, DRBD_SYNC_TARGET, DRBD_SB_BY_DISCARD_MY_DATA);

    /* a primary must be demoted first */
    c.self_primary = true;
    check_sb(&c, DRBD_SYNC_PRIMARY_TARGET, DRBD_SB_BY_DISCARD_MY_DATA);
}

/*
 * Policy names and options
 */

static void test_policy_names(void)
{
    static const char *const names[DRBD_ASB__MAX] = {
        "disconnect", "discard-younger-primary", "discard-older-primary",
        "discard-zero-changes", "discard-least-changes", "discard-local",
        "discard-remote", "discard-secondary", "consensus",
        "violently-as0p",
    };
    static const unsigned valid[DRBD_ASB__MAX] = {
        07, 01, 01, 01, 01, 01, 01, 02, 02, 06,
    };
    Error *err = NULL;
    DrbdAfterSbPolicy p;
    int i, pri;

    for (i = 0; i < DRBD_ASB__MAX; i++) {
        g_assert_cmpstr(drbd_after_sb_policy_str(i), ==, names[i]);
        for (pri = 0; pri < 3; pri++) {
            bool ok = valid[i] & (1u << pri);

            g_assert_cmpint(drbd_after_sb_policy_valid(pri, i), ==, ok);
            p = DRBD_ASB__MAX;
            if (ok) {
                g_assert_cmpint(drbd_after_sb_policy_parse(pri, names[i], &p,
                                                           &error_abort),
                                ==, 0);
                g_assert_cmpint(p, ==, i);
            } else {
                g_assert_cmpint(drbd_after_sb_policy_parse(pri, names[i], &p,
                                                           &err),
                                ==, -EINVAL);
                g_assert_cmpint(p, ==, DRBD_ASB__MAX);
                g_assert_nonnull(err);
                error_free(err);
                err = NULL;
            }
        }
        g_assert_false(drbd_after_sb_policy_valid(-1, i));
        g_assert_false(drbd_after_sb_policy_valid(3, i));
    }
    g_assert_cmpstr(drbd_after_sb_policy_str(DRBD_ASB__MAX), ==, "unknown");
    g_assert_cmpstr(drbd_after_sb_policy_str(-1), ==, "unknown");
    g_assert_false(drbd_after_sb_policy_valid(0, DRBD_ASB__MAX));
    g_assert_false(drbd_after_sb_policy_valid(0, -1));
}

static void test_policy_parse_errors(void)
{
    Error *err = NULL;
    DrbdAfterSbPolicy p = DRBD_ASB_CONSENSUS;

    g_assert_cmpint(drbd_after_sb_policy_parse(1, "discard-local", &p, &err),
                    ==, -EINVAL);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "after-sb-1pri: 'discard-local' is not a valid policy "
                    "here; use one of: disconnect, discard-secondary, "
                    "consensus, violently-as0p");
    error_free(err);
    err = NULL;

    g_assert_cmpint(drbd_after_sb_policy_parse(2, "Disconnect", &p, &err),
                    ==, -EINVAL);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "after-sb-2pri: 'Disconnect' is not a valid policy "
                    "here; use one of: disconnect, violently-as0p");
    error_free(err);
    err = NULL;

    g_assert_cmpint(drbd_after_sb_policy_parse(0, "", &p, &err), ==, -EINVAL);
    error_free(err);
    err = NULL;
    g_assert_cmpint(drbd_after_sb_policy_parse(0, NULL, &p, &err), ==,
                    -EINVAL);
    error_free(err);
    err = NULL;
    g_assert_cmpint(drbd_after_sb_policy_parse(0, "disconnect ", &p, &err),
                    ==, -EINVAL);
    error_free(err);
    err = NULL;

    g_assert_cmpint(drbd_after_sb_policy_parse(3, "disconnect", &p, &err),
                    ==, -EINVAL);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "after-sb-3pri: there is no such option (only "
                    "after-sb-0pri, -1pri and -2pri)");
    error_free(err);
    err = NULL;
    g_assert_cmpint(drbd_after_sb_policy_parse(-1, "disconnect", &p, &err),
                    ==, -EINVAL);
    error_free(err);

    /* untouched by every failure */
    g_assert_cmpint(p, ==, DRBD_ASB_CONSENSUS);
}

static void test_config_compatible(void)
{
    DrbdHandshakeConfig a = {
        .after_sb_0pri = DRBD_ASB_DISCARD_LOCAL,
        .after_sb_1pri = DRBD_ASB_CONSENSUS,
        .after_sb_2pri = DRBD_ASB_VIOLENTLY_AS0P,
    };
    DrbdHandshakeConfig b = a;
    Error *err = NULL;

    g_assert_true(drbd_after_sb_policies_compatible(DRBD_ASB_DISCARD_LOCAL,
                                                    DRBD_ASB_DISCARD_REMOTE));
    g_assert_true(drbd_after_sb_policies_compatible(DRBD_ASB_DISCARD_REMOTE,
                                                    DRBD_ASB_DISCARD_LOCAL));
    g_assert_false(drbd_after_sb_policies_compatible(DRBD_ASB_DISCARD_LOCAL,
                                                     DRBD_ASB_DISCARD_LOCAL));
    g_assert_false(drbd_after_sb_policies_compatible(DRBD_ASB_DISCARD_REMOTE,
                                                     DRBD_ASB_DISCONNECT));
    g_assert_true(drbd_after_sb_policies_compatible(DRBD_ASB_CONSENSUS,
                                                    DRBD_ASB_CONSENSUS));
    g_assert_false(drbd_after_sb_policies_compatible(DRBD_ASB_CONSENSUS,
                                                     DRBD_ASB_DISCONNECT));

    g_assert_cmpint(drbd_handshake_config_compatible(&a, &b, &err), ==,
                    -EINVAL);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "after-sb-0pri is 'discard-local' here but "
                    "'discard-local' on the peer; set it alike on both "
                    "nodes (or discard-local on one and discard-remote on "
                    "the other)");
    error_free(err);
    err = NULL;

    b.after_sb_0pri = DRBD_ASB_DISCARD_REMOTE;
    g_assert_cmpint(drbd_handshake_config_compatible(&a, &b, &error_abort),
                    ==, 0);

    b.after_sb_2pri = DRBD_ASB_DISCONNECT;
    g_assert_cmpint(drbd_handshake_config_compatible(&a, &b, &err), ==,
                    -EINVAL);
    g_assert_nonnull(strstr(error_get_pretty(err), "after-sb-2pri"));
    error_free(err);
    err = NULL;
    b.after_sb_2pri = a.after_sb_2pri;
    g_assert_cmpint(drbd_handshake_config_compatible(&a, &b, &error_abort),
                    ==, 0);
}

static void test_names(void)
{
    static const char *const decisions[DRBD_SYNC__MAX] = {
        "none", "source", "target", "full-source", "full-target",
        "split-brain", "unrelated", "inconsistent-source", "primary-target",
    };
    int i;

    for (i = 0; i < DRBD_SYNC__MAX; i++) {
        g_assert_cmpstr(drbd_sync_decision_str(i), ==, decisions[i]);
    }
    g_assert_cmpstr(drbd_sync_decision_str(DRBD_SYNC__MAX), ==, "unknown");
    g_assert_cmpstr(drbd_sync_decision_str(-1), ==, "unknown");

    g_assert_cmpstr(drbd_sb_resolution_str(DRBD_SB_NONE), ==, "none");
    g_assert_cmpstr(drbd_sb_resolution_str(DRBD_SB_UNRESOLVED), ==,
                    "unresolved");
    g_assert_cmpstr(drbd_sb_resolution_str(DRBD_SB_BY_POLICY), ==, "policy");
    g_assert_cmpstr(drbd_sb_resolution_str(DRBD_SB_BY_DISCARD_MY_DATA), ==,
                    "discard-my-data");
    g_assert_cmpstr(drbd_sb_resolution_str(DRBD_SB_BY_NO_CHANGES), ==,
                    "no-changes");
    g_assert_cmpstr(drbd_sb_resolution_str(DRBD_SB__MAX), ==, "unknown");

    g_assert_cmpstr(drbd_uuid_cmp_str(DRBD_UUID_CMP_UNRELATED), ==,
                    "unrelated");
    g_assert_cmpstr(drbd_uuid_cmp_str(DRBD_UUID_CMP_SPLIT_BRAIN_FULL), ==,
                    "split-brain-full");
    g_assert_cmpstr(drbd_uuid_cmp_str(DRBD_UUID_CMP_FULL_TARGET), ==,
                    "full-target");
    g_assert_cmpstr(drbd_uuid_cmp_str(DRBD_UUID_CMP_TARGET), ==, "target");
    g_assert_cmpstr(drbd_uuid_cmp_str(DRBD_UUID_CMP_EQUAL), ==, "equal");
    g_assert_cmpstr(drbd_uuid_cmp_str(DRBD_UUID_CMP_SOURCE), ==, "source");
    g_assert_cmpstr(drbd_uuid_cmp_str(DRBD_UUID_CMP_FULL_SOURCE), ==,
                    "full-source");
    g_assert_cmpstr(drbd_uuid_cmp_str(DRBD_UUID_CMP_SPLIT_BRAIN), ==,
                    "split-brain");
    g_assert_cmpstr(drbd_uuid_cmp_str(3), ==, "unknown");
}

/*
 * Life cycle
 */

/*
 * The end of a resync as the sync target @tgt records it, when it stayed
 * in its generation during the resync: @src_at_handshake is what the
 * source sent in the handshake, as the target's drbd_uuid_repair() left
 * it.  The source applies drbd_uuid_resync_finished_source() to its own.
 */
static void resync_finished_target(DrbdUuids *tgt,
                                   const DrbdUuids *src_at_handshake)
{
    g_assert_false(drbd_uuid_resync_finished_target(tgt, src_at_handshake,
                                                    0));
}

/* Resync from @src to @tgt as the handshake decided, all the way */
static void resync(DrbdUuids *src, DrbdUuids *tgt)
{
    DrbdUuids src_at_handshake = *src;

    drbd_uuid_resync_finished_source(src);
    resync_finished_target(tgt, &src_at_handshake);
    assert_same_generations(src, tgt);
}

static void test_life_fresh_device(void)
{
    DrbdUuids a, b;
    DrbdHandshakeSide sa, sb;
    DrbdHandshakeResult res;

    drbd_uuid_init(&a);
    assert_uuids(&a, JC, 0, 0, 0);
    drbd_uuid_init(&b);

    /* two new devices: nothing to sync, both still Inconsistent */
    sa = side(a);
    sb = side(b);
    sa.disk = sb.disk = DRBD_HS_DISK_INCONSISTENT;
    g_assert_cmpint(handshake(&sa, &sb, true, &default_cfg, &res), ==,
                    DRBD_SYNC_NONE);
    g_assert_cmpint(res.rule, ==, 10);

    /* forced primary: a generation of its own; "just created" not kept */
    g_assert_true(drbd_uuid_promote(&a, false, true, GX));
    assert_uuids(&a, GX | PRI, 0, 0, 0);
    sa = side(a);
    sa.primary = true;
    g_assert_cmpint(handshake(&sa, &sb, true, &default_cfg, &res), ==,
                    DRBD_SYNC_FULL_SOURCE);
    g_assert_cmpint(res.rule, ==, 30);

    /* the initial full sync: no bitmap UUID, nothing moves to history */
    resync(&a, &b);
    assert_uuids(&a, GX | PRI, 0, 0, 0);
    assert_uuids(&b, GX, 0, 0, 0);
    sa = side(a);
    sb = side(b);
    g_assert_cmpint(handshake(&sa, &sb, true, &default_cfg, &res), ==,
                    DRBD_SYNC_NONE);
    g_assert_cmpint(res.rule, ==, 40);

    /* both forced primary apart from scratch: unrelated, not split */
    drbd_uuid_init(&a);
    drbd_uuid_init(&b);
    drbd_uuid_promote(&a, false, true, GA);
    drbd_uuid_promote(&b, false, true, GB);
    sa = side(a);
    sb = side(b);
    g_assert_cmpint(handshake(&sa, &sb, true, &default_cfg, &res), ==,
                    DRBD_SYNC_UNRELATED);
    g_assert_false(res.views_disagree);
}

static void test_life_fresh_values(void)
{
    DrbdUuids u = U(GX, 0, 0, 0);

    /* the flag bit of a random value is dropped; 0 and 4 are avoided */
    drbd_uuid_new_current(&u, GY | PRI);
    assert_uuids(&u, GY, GX, 0, 0);
    drbd_uuid_new_current(&u, 0);
    g_assert_cmphex(u.current, ==, 1ULL << 63);
    drbd_uuid_new_current(&u, 1);
    g_assert_cmphex(u.current, ==, 1ULL << 63);
    drbd_uuid_new_current(&u, JC);
    g_assert_cmphex(u.current, ==, (1ULL << 63) | JC);
    drbd_uuid_new_current(&u, JC | PRI);
    g_assert_cmphex(u.current, ==, (1ULL << 63) | JC);
}

static void test_life_new_current(void)
{
    DrbdUuids u = U(GX | PRI, 0, H1, H2);

    /* the flag bit stays as it was; the old current is the bitmap UUID */
    drbd_uuid_new_current(&u, GY);
    assert_uuids(&u, GY | PRI, GX | PRI, H1, H2);
    /* a bitmap UUID already set is the older base: it stays */
    drbd_uuid_new_current(&u, GZ);
    assert_uuids(&u, GZ | PRI, GX | PRI, H1, H2);

    /* connected to an UpToDate peer: no new generation */
    u = U(GX, 0, H1, 0);
    g_assert_false(drbd_uuid_promote(&u, true, false, GY));
    assert_uuids(&u, GX | PRI, 0, H1, 0);
    drbd_uuid_demote(&u);
    assert_uuids(&u, GX, 0, H1, 0);
    /* unless forced */
    g_assert_true(drbd_uuid_promote(&u, true, true, GZ));
    assert_uuids(&u, GZ | PRI, GX, H1, 0);
    /* a bitmap UUID set already: a new generation all the same */
    u = U(GY, GX, H1, 0);
    g_assert_true(drbd_uuid_promote(&u, false, false, GZ));
    assert_uuids(&u, GZ | PRI, GX, H1, 0);

    /* joining a primary's new generation: the old one to the history */
    u = U(GX, 0, H1, H2);
    drbd_uuid_join(&u, GY | PRI);
    assert_uuids(&u, GY, 0, GX, H1);
    /* the same again changes nothing */
    drbd_uuid_join(&u, GY);
    assert_uuids(&u, GY, 0, GX, H1);
    /* "just created" is no generation to keep */
    u = U(DRBD_UUID_JUST_CREATED, 0, 0, 0);
    drbd_uuid_join(&u, GX);
    assert_uuids(&u, GX, 0, 0, 0);

    /* losing the peer's disk */
    u = U(GX | PRI, 0, H1, 0);
    g_assert_false(drbd_uuid_peer_disk_lost(&u, false, GY));
    assert_uuids(&u, GX | PRI, 0, H1, 0);
    g_assert_true(drbd_uuid_peer_disk_lost(&u, true, GY));
    assert_uuids(&u, GY | PRI, GX | PRI, H1, 0);
    g_assert_true(drbd_uuid_peer_disk_lost(&u, true, GZ));
    assert_uuids(&u, GZ | PRI, GX | PRI, H1, 0);
}

static void test_life_promote_disconnected(void)
{
    DrbdUuids a = U(GX, 0, H1, H2), b = U(GX, 0, H1, H2);
    DrbdHandshakeSide sa, sb;
    DrbdHandshakeResult res;

    /* connection lost while both secondary: no new generation */
    g_assert_false(drbd_uuid_peer_disk_lost(&a, false, GZ));
    g_assert_false(drbd_uuid_peer_disk_lost(&b, false, GZ));
    /* a is promoted alone */
    g_assert_true(drbd_uuid_promote(&a, false, false, GY));
    assert_uuids(&a, GY | PRI, GX, H1, H2);

    sa = side(a);
    sb = side(b);
    sa.primary = true;
    sa.changes = 10;
    g_assert_cmpint(handshake(&sa, &sb, false, &default_cfg, &res), ==,
                    DRBD_SYNC_SOURCE);
    g_assert_cmpint(res.rule, ==, 70);

    /* end of resync: the bitmap UUID rotates into the history */
    resync(&a, &b);
    assert_uuids(&a, GY | PRI, 0, GX, H1);
    assert_uuids(&b, GY, 0, GX, H1);

    sa = side(a);
    sb = side(b);
    sa.primary = true;
    g_assert_cmpint(handshake(&sa, &sb, false, &default_cfg, &res), ==,
                    DRBD_SYNC_NONE);
    g_assert_cmpint(res.rule, ==, 40);
}

static void test_life_resync_rotates_history(void)
{
    DrbdUuids src = U(GY | PRI, GX, H1, H2), tgt = U(GX, 0, H1, H2);
    DrbdUuids src_at_handshake = src;

    /* until its end, a resync changes no UUID: both still see rule 50 */
    check_cmp(tgt, src, DRBD_UUID_CMP_TARGET, 50);

    drbd_uuid_resync_finished_source(&src);
    assert_uuids(&src, GY | PRI, 0, GX, H1);
    resync_finished_target(&tgt, &src_at_handshake);
    assert_uuids(&tgt, GY, 0, GX, H1);

    /* the target keeps its own flag bit, not the source's */
    src = U(GY, GX | PRI, H1, H2);
    tgt = U(GX | PRI, 0, H1, H2);
    resync(&src, &tgt);
    assert_uuids(&src, GY, 0, GX | PRI, H1);
    assert_uuids(&tgt, GY | PRI, 0, GX | PRI, H1);

    /* without a bitmap UUID (full sync), the history stays as it is */
    src = U(GY, 0, H1, H2);
    tgt = U(GZ | PRI, 0, H3, 0);
    resync(&src, &tgt);
    assert_uuids(&src, GY, 0, H1, H2);
    assert_uuids(&tgt, GY | PRI, 0, H1, H2);

    /* nothing to rotate: nothing changes */
    drbd_uuid_resync_finished_source(&src);
    assert_uuids(&src, GY, 0, H1, H2);
}

static void test_life_interrupted_resync(void)
{
    DrbdUuids src, tgt, src_copy, tgt_copy, src_at_handshake;
    int rule;

    /* lost before its end: nothing changed, the next connect resumes */
    src = U(GY | PRI, GX, H1, 0);
    tgt = U(GX, 0, H1, 0);
    check_cmp(tgt, src, DRBD_UUID_CMP_TARGET, 50);

    /* the source records the end, the target does not */
    src_at_handshake = src;
    drbd_uuid_resync_finished_source(&src);
    assert_uuids(&src, GY | PRI, 0, GX, H1);
    src_copy = src;
    tgt_copy = tgt;
    g_assert_cmpint(drbd_uuid_compare(&tgt, &src_copy, false, false, false,
                                      &rule), ==, DRBD_UUID_CMP_TARGET);
    g_assert_cmpint(rule, ==, 51);
    g_assert_true(drbd_uuid_repair(rule, &tgt, &src_copy));
    g_assert_cmpint(drbd_uuid_compare(&src, &tgt_copy, false, false, true,
                                      &rule), ==, DRBD_UUID_CMP_SOURCE);
    g_assert_cmpint(rule, ==, 71);
    g_assert_true(drbd_uuid_repair(rule, &src, &tgt_copy));
    /* both agree on what the source's UUIDs are now */
    g_assert_cmpmem(&src, sizeof(src), &src_copy, sizeof(src_copy));
    assert_uuids(&src, GY | PRI, GX, H1, H1);
    /* and the resync that follows ends where the first would have */
    drbd_uuid_resync_finished_source(&src);
    resync_finished_target(&tgt, &src_copy);
    assert_uuids(&src, GY | PRI, 0, GX, H1);
    assert_uuids(&tgt, GY, 0, GX, H1);

    /* the target records the end, the source does not */
    src = src_at_handshake;
    tgt = U(GX, 0, H1, 0);
    resync_finished_target(&tgt, &src_at_handshake);
    g_assert_cmpint(drbd_uuid_compare(&src, &tgt, false, false, true,
                                      &rule), ==, DRBD_UUID_CMP_SOURCE);
    g_assert_cmpint(rule, ==, 34);
    tgt_copy = tgt;
    g_assert_true(drbd_uuid_repair(rule, &src, &tgt_copy));
    assert_same_generations(&src, &tgt);

    /*
     * The same, but the source, primary, writes on alone and the target
     * is promoted: a split brain, where DRBD, which keeps the current
     * UUID while a bitmap UUID is set, makes the source a target
     */
    src = src_at_handshake;
    tgt = U(GX, 0, H1, 0);
    resync_finished_target(&tgt, &src_at_handshake);
    g_assert_true(drbd_uuid_peer_disk_lost(&src, true, GA));
    assert_uuids(&src, GA | PRI, GX, H1, 0);
    g_assert_true(drbd_uuid_promote(&tgt, false, false, GB));
    assert_uuids(&tgt, GB | PRI, GY, GX, H1);
    check_cmp(src, tgt, DRBD_UUID_CMP_SPLIT_BRAIN_FULL, 100);
}

/*
 * Three nodes in GX: a primary, b and c secondaries.  c stops and a moves
 * to GY, which b joins.  c comes back and resyncs from b; a dies, and c
 * is promoted during the resync without it (GZ), writing through b.
 */
static void test_life_target_promoted_during_resync(void)
{
    DrbdUuids a = U(GY | PRI, GX, H1, 0), b = U(GY, 0, GX, H1);
    DrbdUuids c = U(GX, 0, H1, 0), b_at_handshake, cb, b_told, b_untold;
    int rule;

    check_cmp(c, b, DRBD_UUID_CMP_TARGET, 51);
    b_at_handshake = b;
    g_assert_true(drbd_uuid_repair(51, &c, &b_at_handshake));
    g_assert_true(drbd_uuid_promote(&c, false, false, GZ));
    assert_uuids(&c, GZ | PRI, GX, H1, 0);

    /* the resync ends on c: it keeps GZ, its bitmap for b counts from GY */
    cb = c;
    g_assert_true(drbd_uuid_resync_finished_target(&cb, &b_at_handshake,
                                                   GZ | PRI));
    assert_uuids(&cb, GZ | PRI, GY, GX, H1);

    /* b, told of GZ, joins it at its end: c is its source by bitmap */
    b_told = b;
    g_assert_true(drbd_uuid_repair(71, &b_told, &c));
    g_assert_true(drbd_uuid_resync_finished_source_joins(&b_told, GZ | PRI));
    assert_uuids(&b_told, GZ, 0, GY, GX);
    g_assert_cmpint(drbd_uuid_compare(&cb, &b_told, false, false, false,
                                      &rule), ==, DRBD_UUID_CMP_SOURCE);
    g_assert_cmpint(rule, ==, 34);

    /* b, not told, stays in GY: c is its source by bitmap all the same */
    b_untold = b;
    g_assert_true(drbd_uuid_repair(71, &b_untold, &c));
    g_assert_false(drbd_uuid_resync_finished_source_joins(&b_untold, 0));
    assert_uuids(&b_untold, GY, 0, GX, H1);
    check_cmp(cb, b_untold, DRBD_UUID_CMP_SOURCE, 70);

    /*
     * a comes back, crashed as primary in GY: c's bitmap for it counts
     * from GY (drbd_resync_finished_uuids() moves it there) and c is its
     * source, whatever a's crash says
     */
    cb.bitmap = GY;
    check_cmp(cb, a, DRBD_UUID_CMP_SOURCE, 70);
    g_assert_cmpint(drbd_uuid_compare(&cb, &a, false, true, false, &rule),
                    ==, DRBD_UUID_CMP_SOURCE);

    /* had c taken b's generation, a's crash would have made a the source */
    cb = c;
    resync_finished_target(&cb, &b_at_handshake);
    assert_uuids(&cb, GY | PRI, 0, GX, H1);
    g_assert_cmpint(drbd_uuid_compare(&cb, &a, false, true, false, &rule),
                    ==, DRBD_UUID_CMP_TARGET);
}

/*
 * A primary target whose generation is not its own: promoted while every
 * peer was up to date (no new generation, a stale current the source
 * knows), or a split brain's loser discarding its generation
 */
static void test_life_target_takes_source_generation(void)
{
    DrbdUuids b = U(GY, GX, H1, 0), c = U(GX, 0, H1, 0);
    DrbdUuids b_at_handshake = b, cb, bb;

    /* stale: c is in GX, which b holds */
    g_assert_false(drbd_uuid_promote(&c, true, false, GZ));
    cb = c;
    g_assert_false(drbd_uuid_resync_finished_target(&cb, &b_at_handshake,
                                                    c.current));
    assert_uuids(&cb, GY | PRI, 0, GX, H1);
    bb = b;
    g_assert_false(drbd_uuid_resync_finished_source_joins(&bb, c.current));
    assert_same_generations(&bb, &cb);

    /* a generation that is not the one c writes in now: the source's */
    c = U(GA, 0, H1, 0);
    cb = c;
    g_assert_false(drbd_uuid_resync_finished_target(&cb, &b_at_handshake,
                                                    GZ));
    assert_uuids(&cb, GY, 0, GX, H1);
    g_assert_false(drbd_uuid_resync_finished_target(&cb, &b_at_handshake,
                                                    JC));
}

/*
 * a, primary in GX, loses b (GY; c joins it), then c (GZ).  c, back,
 * resyncs from a: its history must still reach GX, b's generation, and
 * not hold GY twice (as a's bitmap UUID for c and a's history[0], the
 * flag bit aside)
 */
static void test_life_rotate_keeps_older_generation(void)
{
    DrbdUuids a_c = U(GZ | PRI, GY | PRI, GY, GX), c = U(GY, 0, GX, H1);
    DrbdUuids b = U(GX, 0, H1, 0), a_c_at_handshake;
    DrbdHandshakeSide sb, sc;
    DrbdHandshakeResult res;

    check_cmp(c, a_c, DRBD_UUID_CMP_TARGET, 50);
    a_c_at_handshake = a_c;
    drbd_uuid_resync_finished_source(&a_c);
    assert_uuids(&a_c, GZ | PRI, 0, GY, GX);
    resync_finished_target(&c, &a_c_at_handshake);
    assert_uuids(&c, GZ, 0, GY, GX);

    /* b, inconsistent, is c's full sync target: their data is related */
    check_cmp(c, b, DRBD_UUID_CMP_FULL_SOURCE, 80);
    sb = side(b);
    sc = side(c);
    sb.disk = DRBD_HS_DISK_INCONSISTENT;
    g_assert_cmpint(handshake(&sc, &sb, false, &default_cfg, &res), ==,
                    DRBD_SYNC_FULL_SOURCE);
}

/*
 * Protocol version 10: c, primary and the sync target of b, writes in
 * GZ; b joins GZ when told, and its UUIDs show that it holds c's
 * writes, which a (back in GX, the generation the two shared) lacks.
 * The resync's end does not make b join a second time.
 */
static void test_life_source_joins_target_generation(void)
{
    DrbdUuids a = U(GX | PRI, 0, H1, 0), b = U(GX, GY, H1, 0);

    g_assert_true(drbd_uuid_target_gen_new(&b, GZ | PRI));
    drbd_uuid_join(&b, GZ | PRI);
    assert_uuids(&b, GZ, GY, GX, H1);
    g_assert_false(drbd_uuid_target_gen_new(&b, GZ | PRI));
    g_assert_true(drbd_uuid_holds(&b, GZ | PRI));
    g_assert_false(drbd_uuid_holds(&a, GZ | PRI));

    /* A generation the source holds already (a stale one) is not new */
    g_assert_false(drbd_uuid_target_gen_new(&b, GX | PRI));
    /* Nor are those that name no data */
    g_assert_false(drbd_uuid_target_gen_new(&b, 0));
    g_assert_false(drbd_uuid_target_gen_new(&b, DRBD_UUID_JUST_CREATED));

    g_assert_false(drbd_uuid_resync_finished_source_joins(&b, GZ | PRI));
    assert_uuids(&b, GZ, 0, GY, GX);
}

static void test_life_split_brain(void)
{
    DrbdUuids a = U(GX, 0, H1, 0), b = U(GX, 0, H1, 0);
    DrbdHandshakeSide sa, sb;
    DrbdHandshakeConfig cfg = {
        .after_sb_0pri = DRBD_ASB_DISCARD_YOUNGER_PRIMARY,
        .after_sb_1pri = DRBD_ASB_VIOLENTLY_AS0P,
        .after_sb_2pri = DRBD_ASB_VIOLENTLY_AS0P,
    };
    DrbdHandshakeResult res;

    /* a is primary when the connection goes, b is promoted later */
    g_assert_false(drbd_uuid_promote(&a, true, false, GZ));
    g_assert_true(drbd_uuid_peer_disk_lost(&a, true, GA));
    g_assert_false(drbd_uuid_peer_disk_lost(&b, false, GZ));
    g_assert_true(drbd_uuid_promote(&b, false, false, GB));
    assert_uuids(&a, GA | PRI, GX | PRI, H1, 0);
    assert_uuids(&b, GB | PRI, GX, H1, 0);

    sa = side(a);
    sb = side(b);
    sa.primary = sb.primary = true;
    sa.changes = 100;
    sb.changes = 1;
    /* by default: split brain, disconnect */
    g_assert_cmpint(handshake(&sa, &sb, false, &default_cfg, &res), ==,
                    DRBD_SYNC_SPLIT_BRAIN);
    g_assert_cmpint(res.rule, ==, 90);
    g_assert_cmpint(res.resolution, ==, DRBD_SB_UNRESOLVED);
    /* the younger primary (b) would lose, but it is primary still */
    g_assert_cmpint(handshake(&sa, &sb, false, &cfg, &res), ==,
                    DRBD_SYNC_PRIMARY_TARGET);
    /* both demoted first: the younger primary (b) loses */
    sa.primary = sb.primary = false;
    g_assert_cmpint(handshake(&sa, &sb, false, &cfg, &res), ==,
                    DRBD_SYNC_SOURCE);
    cfg.after_sb_0pri = DRBD_ASB_DISCARD_OLDER_PRIMARY;
    g_assert_cmpint(handshake(&sa, &sb, false, &cfg, &res), ==,
                    DRBD_SYNC_TARGET);

    /* both promoted while apart: neither is older */
    a = U(GX, 0, H1, 0);
    b = U(GX, 0, H1, 0);
    drbd_uuid_promote(&a, false, false, GA);
    drbd_uuid_promote(&b, false, false, GB);
    drbd_uuid_demote(&a);
    drbd_uuid_demote(&b);
    sa = side(a);
    sb = side(b);
    /*
     * b promoted, demoted without a write: of two nodes, it takes a's
     * data; of more, it is a split brain as any
     */
    sa.changes = 5;
    g_assert_cmpint(handshake(&sa, &sb, false, &default_cfg, &res), ==,
                    DRBD_SYNC_SPLIT_BRAIN);
    g_assert_cmpint(handshake(&sa, &sb, false, &two_nodes_cfg, &res), ==,
                    DRBD_SYNC_SOURCE);
    g_assert_cmpint(res.rule, ==, 90);
    g_assert_cmpint(res.resolution, ==, DRBD_SB_BY_NO_CHANGES);
    g_assert_cmpint(handshake(&sb, &sa, true, &two_nodes_cfg, &res), ==,
                    DRBD_SYNC_TARGET);
    /* a still primary: the same */
    sa.primary = true;
    g_assert_cmpint(handshake(&sa, &sb, false, &two_nodes_cfg, &res), ==,
                    DRBD_SYNC_SOURCE);
    sa.primary = false;
    /* both wrote: a split brain that the operator resolves */
    sb.changes = 7;
    g_assert_cmpint(handshake(&sa, &sb, false, &default_cfg, &res), ==,
                    DRBD_SYNC_SPLIT_BRAIN);
    /* the operator throws b's changes away */
    sb.discard_my_data = true;
    g_assert_cmpint(handshake(&sa, &sb, false, &default_cfg, &res), ==,
                    DRBD_SYNC_SOURCE);
    g_assert_cmpint(res.resolution, ==, DRBD_SB_BY_DISCARD_MY_DATA);
    resync(&a, &b);
    assert_uuids(&b, GA, 0, GX, H1);
}

static void test_life_restart(void)
{
    DrbdUuids a = U(GX | PRI, 0, H1, 0), b = U(GX, 0, H1, 0);
    DrbdHandshakeSide sa = side(a), sb = side(b);
    DrbdHandshakeResult res;

    /* both restarted cleanly in the same generation */
    g_assert_cmpint(handshake(&sa, &sb, false, &default_cfg, &res), ==,
                    DRBD_SYNC_NONE);
    g_assert_cmpint(res.rule, ==, 40);
    /* a crashed as primary: what its activity log covers goes to b */
    sa.crashed_primary = true;
    g_assert_cmpint(handshake(&sa, &sb, false, &default_cfg, &res), ==,
                    DRBD_SYNC_SOURCE);
    /* both crashed as primaries (dual primary): the resolver yields */
    sb.crashed_primary = true;
    g_assert_cmpint(handshake(&sa, &sb, true, &default_cfg, &res), ==,
                    DRBD_SYNC_TARGET);
    g_assert_cmpint(handshake(&sa, &sb, false, &default_cfg, &res), ==,
                    DRBD_SYNC_SOURCE);
}

/*
 * Simulation: two nodes go through random events (writes, promotions,
 * crashes, disconnects, interrupted resyncs), keeping their UUIDs with
 * the life-cycle functions as the driver calls them (role.c, conn.c,
 * handshake.c, state.c).  Each block's content is a write number.
 * At every connect, both nodes' handshakes must mirror each other, and
 * the resync they agree on must make the data equal: no resync only if
 * the data are equal, a bitmap-based resync only if the union of the
 * bitmaps covers every block that differs.  And no acknowledged write
 * may be lost unless a split brain was resolved, by a policy or by the
 * operator: the sync target must not hold a write the source never had.
 * (With DRBD's rule for new current UUIDs, see drbd_uuid_promote(),
 * this last check fails.)
 */

#define SIM_BLOCKS  16
#define SIM_STEPS   400

typedef struct SimNode {
    DrbdUuids u;
    DrbdHandshakeDisk disk;
    bool up;
    bool primary;
    bool crashed_primary;
    bool discard_my_data;
    uint32_t oos;                   /* out-of-sync bitmap */
    uint32_t data[SIM_BLOCKS];
} SimNode;

typedef struct Sim {
    GRand *rand;
    SimNode n[2];
    bool connected;
    uint64_t next_uuid;
    uint32_t next_write;
    bool seen[2][SIM_STEPS + 1];    /* write n reached node i's disk */
    bool may_lose[SIM_STEPS + 1];   /* not acked, or discarded on purpose */
    DrbdHandshakeConfig cfg;
    unsigned decisions[DRBD_SYNC__MAX];
    unsigned rules[101];            /* how often each rule decided */
} Sim;

static uint64_t sim_fresh(Sim *s)
{
    s->next_uuid += 0x10000;
    return s->next_uuid | (g_rand_int(s->rand) & 1);
}

static uint32_t sim_diff(Sim *s)
{
    uint32_t diff = 0;
    int i;

    for (i = 0; i < SIM_BLOCKS; i++) {
        if (s->n[0].data[i] != s->n[1].data[i]) {
            diff |= 1u << i;
        }
    }
    return diff;
}

static void sim_disconnect(Sim *s)
{
    int i;

    if (!s->connected) {
        return;
    }
    s->connected = false;
    for (i = 0; i < 2; i++) {
        SimNode *n = &s->n[i];

        if (n->up) {
            drbd_uuid_peer_disk_lost(&n->u, n->primary, sim_fresh(s));
        }
    }
}

/* A guest write on node @i, acknowledged to the guest if @acked */
static void sim_write(Sim *s, int i, bool replicate, bool acked)
{
    SimNode *n = &s->n[i];
    int blk = g_rand_int_range(s->rand, 0, SIM_BLOCKS);
    uint32_t w = ++s->next_write;

    n->data[blk] = w;
    s->seen[i][w] = true;
    s->may_lose[w] = !acked;
    if (replicate) {
        s->n[!i].data[blk] = w;
        s->seen[!i][w] = true;
    } else {
        n->oos |= 1u << blk;
    }
}

/* The operator gives up the data of node @i */
static void sim_discard(Sim *s, int i)
{
    int b;

    for (b = 0; b < SIM_BLOCKS; b++) {
        s->may_lose[s->n[i].data[b]] = true;
    }
}

static void sim_crash(Sim *s, int i)
{
    SimNode *n = &s->n[i];

    sim_disconnect(s);
    n->up = false;
    n->crashed_primary |= n->primary;
    n->primary = false;
    drbd_uuid_demote(&n->u);
}

static DrbdHandshakeSide sim_side(const SimNode *n)
{
    return (DrbdHandshakeSide) {
        .uuids = n->u,
        .disk = n->disk,
        .primary = n->primary,
        .crashed_primary = n->crashed_primary,
        .changes = ctpop32(n->oos),
        .discard_my_data = n->discard_my_data,
    };
}

static void sim_connect(Sim *s)
{
    DrbdHandshakeSide side0 = sim_side(&s->n[0]), side1 = sim_side(&s->n[1]);
    DrbdHandshakeResult r0, r1;
    DrbdSyncDecision d;
    SimNode *src, *tgt;
    DrbdUuids src_at_handshake;
    uint32_t covered;
    int i, si, how;

    d = drbd_sync_handshake(&side0, &side1, true, &s->cfg, &r0);
    drbd_sync_handshake(&side1, &side0, false, &s->cfg, &r1);
    g_assert_cmpint(r1.decision, ==, mirror_decision(d));
    g_assert_cmpint(r1.resolution, ==, r0.resolution);
    g_assert_false(r0.views_disagree);
    s->decisions[d]++;
    s->rules[r0.rule]++;

    switch (d) {
    case DRBD_SYNC_UNRELATED:
    case DRBD_SYNC_INCONSISTENT_SOURCE:
        /*
         * The end of a resync moves the source's bitmap UUID into the
         * history.  If the target does not record that end, and it
         * happens again (rules 51 and 71 undo it for a bitmap-based
         * resync only), the last generation the two share can drop out
         * of the source's two history UUIDs, as in DRBD.  Only then,
         * with the target still Inconsistent: the operator wipes its
         * metadata, and the next connect is a full resync.
         */
        i = s->n[1].disk == DRBD_HS_DISK_INCONSISTENT ? 1 : 0;
        g_assert_cmpint(s->n[i].disk, ==, DRBD_HS_DISK_INCONSISTENT);
        sim_discard(s, i);
        drbd_uuid_init(&s->n[i].u);
        drbd_uuid_demote(&s->n[i].u);
        s->n[i].primary = false;
        s->n[i].disk = DRBD_HS_DISK_INCONSISTENT;
        return;
    case DRBD_SYNC_SPLIT_BRAIN:
        /* the operator picks the loser for the next attempt */
        s->n[g_rand_int_range(s->rand, 0, 2)].discard_my_data = true;
        return;
    case DRBD_SYNC_PRIMARY_TARGET:
        return;
    case DRBD_SYNC_NONE:
        g_assert_cmphex(sim_diff(s), ==, 0);
        break;
    default:
        break;
    }

    s->connected = true;
    for (i = 0; i < 2; i++) {
        s->n[i].crashed_primary = false;
        s->n[i].discard_my_data = false;
    }
    if (d == DRBD_SYNC_NONE) {
        s->n[0].oos = s->n[1].oos = 0;
        return;
    }

    /* the bitmaps are exchanged and merged; a full sync sets all bits */
    if (d == DRBD_SYNC_FULL_SOURCE || d == DRBD_SYNC_FULL_TARGET) {
        covered = (1u << SIM_BLOCKS) - 1;
    } else {
        covered = s->n[0].oos | s->n[1].oos;
    }
    g_assert_cmphex(sim_diff(s) & ~covered, ==, 0);
    s->n[0].oos = s->n[1].oos = covered;

    si = d == DRBD_SYNC_SOURCE || d == DRBD_SYNC_FULL_SOURCE ? 0 : 1;
    src = &s->n[si];
    tgt = &s->n[!si];

    /*
     * Unless a split brain was resolved (by a policy or the operator),
     * the target must not hold an acknowledged write that the source
     * never had: the resync would lose it silently
     */
    for (i = 0; i < SIM_BLOCKS; i++) {
        uint32_t w = tgt->data[i];

        if (w != src->data[i] && r0.resolution == DRBD_SB_NONE &&
            !s->seen[si][w] && !s->may_lose[w]) {
            g_test_message("write %u on block %d lost (rule %d)", w, i,
                           r0.rule);
            g_assert_not_reached();
        }
    }
    if (r0.resolution != DRBD_SB_NONE) {
        sim_discard(s, !si);
    }
    {
        DrbdUuids src_copy = src->u, tgt_copy = tgt->u;
        int src_rule = src == &s->n[0] ? r0.rule : r1.rule;
        int tgt_rule = src == &s->n[0] ? r1.rule : r0.rule;

        drbd_uuid_repair(src_rule, &src->u, &tgt_copy);
        drbd_uuid_repair(tgt_rule, &tgt->u, &src_copy);
        g_assert_cmpmem(&src->u, sizeof(DrbdUuids),
                        &src_copy, sizeof(DrbdUuids));
    }

    /*
     * The resync, as the driver does it: the target's disk is
     * Inconsistent from its start, and no UUID changes before its end
     */
    src_at_handshake = src->u;
    if (covered) {
        tgt->disk = DRBD_HS_DISK_INCONSISTENT;
    }

    /* the connection may go at any point of the resync */
    how = covered ? g_rand_int_range(s->rand, 0, 8) : 4;
    if (how == 0) {
        /* before any data */
        sim_disconnect(s);
        return;
    }
    if (how == 1) {
        /* with a part of the data (the bitmaps keep their bits) */
        for (i = 0; i < SIM_BLOCKS; i++) {
            if ((covered & (1u << i)) && g_rand_boolean(s->rand)) {
                tgt->data[i] = src->data[i];
                s->seen[!si][src->data[i]] = true;
            }
        }
        sim_disconnect(s);
        return;
    }
    memcpy(tgt->data, src->data, sizeof(tgt->data));
    for (i = 0; i < SIM_BLOCKS; i++) {
        s->seen[!si][src->data[i]] = true;
    }
    src->oos = tgt->oos = 0;
    if (how == 2) {
        /* only the source records the end */
        drbd_uuid_resync_finished_source(&src->u);
        sim_disconnect(s);
        return;
    }
    resync_finished_target(&tgt->u, &src_at_handshake);
    tgt->disk = DRBD_HS_DISK_UP_TO_DATE;
    if (how == 3) {
        /* only the target records the end */
        sim_disconnect(s);
        return;
    }
    drbd_uuid_resync_finished_source(&src->u);
    assert_same_generations(&src->u, &tgt->u);
    g_assert_cmphex(sim_diff(s), ==, 0);
}

static void sim_step(Sim *s)
{
    int i = g_rand_int_range(s->rand, 0, 2);
    SimNode *n = &s->n[i], *other = &s->n[!i];

    switch (g_rand_int_range(s->rand, 0, 10)) {
    case 0:
    case 1:
    case 2:
        /* without UpToDate data here, I/O goes to the peer or fails */
        if (n->up && n->primary && n->disk == DRBD_HS_DISK_UP_TO_DATE) {
            sim_write(s, i, s->connected, true);
        }
        break;
    case 3:
        /* promotion: only with good data, one primary while connected */
        if (n->up && !n->primary && n->disk == DRBD_HS_DISK_UP_TO_DATE &&
            !(s->connected && other->primary)) {
            drbd_uuid_promote(&n->u, s->connected, false, sim_fresh(s));
            n->primary = true;
        }
        break;
    case 4:
        if (n->primary) {
            drbd_uuid_demote(&n->u);
            n->primary = false;
        }
        break;
    case 5:
        sim_disconnect(s);
        break;
    case 6:
        if (!n->up) {
            break;
        }
        if (n->primary && s->connected &&
            n->disk == DRBD_HS_DISK_UP_TO_DATE && g_rand_boolean(s->rand)) {
            /* a write that reached only the local disk (activity log) */
            sim_write(s, i, false, false);
        }
        sim_crash(s, i);
        break;
    case 7:
        n->up = true;
        break;
    default:
        if (!s->connected && n->up && other->up) {
            sim_connect(s);
        }
        break;
    }
}

static void test_simulation(void)
{
    static const DrbdHandshakeConfig cfgs[] = {
        { 0 },
        {
            .after_sb_0pri = DRBD_ASB_DISCARD_LEAST_CHANGES,
            .after_sb_1pri = DRBD_ASB_DISCARD_SECONDARY,
        },
        {
            .after_sb_0pri = DRBD_ASB_DISCARD_YOUNGER_PRIMARY,
            .after_sb_1pri = DRBD_ASB_CONSENSUS,
        },
        {
            .after_sb_0pri = DRBD_ASB_DISCARD_ZERO_CHANGES,
            .after_sb_1pri = DRBD_ASB_VIOLENTLY_AS0P,
            .after_sb_2pri = DRBD_ASB_VIOLENTLY_AS0P,
        },
        {
            .after_sb_0pri = DRBD_ASB_DISCARD_OLDER_PRIMARY,
            .after_sb_2pri = DRBD_ASB_VIOLENTLY_AS0P,
        },
    };
    unsigned total[DRBD_SYNC__MAX] = { 0 };
    unsigned rules[101] = { 0 };
    int seed, step, i;

    for (seed = 0; seed < 5000; seed++) {
        Sim s = {
            .rand = g_rand_new_with_seed(seed),
            .next_uuid = 0x100000,
            .cfg = cfgs[seed % ARRAY_SIZE(cfgs)],
        };

        /* two nodes after their initial sync: all blocks hold write 0 */
        for (i = 0; i < 2; i++) {
            s.seen[i][0] = true;
            s.n[i].u = U(GX, 0, GS, 0);
            s.n[i].disk = DRBD_HS_DISK_UP_TO_DATE;
            s.n[i].up = true;
        }
        s.connected = true;

        for (step = 0; step < SIM_STEPS; step++) {
            sim_step(&s);
        }
        for (i = 0; i < DRBD_SYNC__MAX; i++) {
            total[i] += s.decisions[i];
        }
        for (i = 0; i < ARRAY_SIZE(rules); i++) {
            rules[i] += s.rules[i];
        }
        g_rand_free(s.rand);
    }

    for (i = 0; i < DRBD_SYNC__MAX; i++) {
        g_test_message("%s: %u", drbd_sync_decision_str(i), total[i]);
    }
    for (i = 0; i < ARRAY_SIZE(rules); i++) {
        if (rules[i]) {
            g_test_message("rule %d: %u", i, rules[i]);
        }
    }
    /* the walk reached every outcome that two such nodes can reach */
    g_assert_cmpuint(total[DRBD_SYNC_NONE], >, 0);
    g_assert_cmpuint(total[DRBD_SYNC_SOURCE] + total[DRBD_SYNC_TARGET], >, 0);
    g_assert_cmpuint(total[DRBD_SYNC_FULL_SOURCE] +
                     total[DRBD_SYNC_FULL_TARGET], >, 0);
    g_assert_cmpuint(total[DRBD_SYNC_SPLIT_BRAIN], >, 0);
    g_assert_cmpuint(total[DRBD_SYNC_PRIMARY_TARGET], >, 0);
    /* and the repairs of a resync whose end only one side recorded */
    g_assert_cmpuint(rules[34] + rules[35], >, 0);
    g_assert_cmpuint(rules[51] + rules[71], >, 0);
}

/* The generations heard of: newest last, no repeats, the oldest go */
static void test_gen_seen(void)
{
    DrbdGenSeen g = { 0 };
    unsigned i;

    drbd_gen_seen_push(&g, 0);
    drbd_gen_seen_push(&g, DRBD_UUID_JUST_CREATED);
    g_assert_cmpuint(g.n, ==, 0);
    drbd_gen_seen_push(&g, 0x100 | DRBD_UUID_PRIMARY_FLAG);
    drbd_gen_seen_push(&g, 0x100);
    g_assert_cmpuint(g.n, ==, 1);
    g_assert_cmphex(g.gen[0], ==, 0x100);
    for (i = 2; i <= DRBD_GEN_SEEN_MAX + 1; i++) {
        drbd_gen_seen_push(&g, i * 0x100);
    }
    g_assert_cmpuint(g.n, ==, DRBD_GEN_SEEN_MAX);
    g_assert_cmphex(g.gen[0], ==, 0x200);
    g_assert_cmphex(g.gen[DRBD_GEN_SEEN_MAX - 1], ==,
                    (DRBD_GEN_SEEN_MAX + 1) * 0x100);
    /* Heard of again: the newest */
    drbd_gen_seen_push(&g, 0x300);
    g_assert_cmpuint(g.n, ==, DRBD_GEN_SEEN_MAX);
    g_assert_cmphex(g.gen[DRBD_GEN_SEEN_MAX - 1], ==, 0x300);
    g_assert_cmphex(g.gen[0], ==, 0x200);
    g_assert_cmphex(g.gen[1], ==, 0x400);
}

static void test_known_older(void)
{
    DrbdUuids u = {
        .current = 0x300 | DRBD_UUID_PRIMARY_FLAG,
        .history = { 0x200, 0x100 },
    };
    uint64_t bitmaps[2] = { 0, 0x180 };
    DrbdGenSeen g = { 0 };

    /* A node with data: its history and bitmap UUIDs are older */
    g_assert_true(drbd_uuid_known_older(&u, bitmaps, 2, &g, 0x200));
    g_assert_true(drbd_uuid_known_older(&u, bitmaps, 2, &g,
                                        0x100 | DRBD_UUID_PRIMARY_FLAG));
    g_assert_true(drbd_uuid_known_older(&u, bitmaps, 2, &g, 0x180));
    g_assert_false(drbd_uuid_known_older(&u, bitmaps, 2, &g, 0x300));
    /* unknown: newer, or unrelated; no data: nothing to say */
    g_assert_false(drbd_uuid_known_older(&u, bitmaps, 2, &g, 0x999));
    g_assert_false(drbd_uuid_known_older(&u, bitmaps, 2, &g, 0));
    g_assert_false(drbd_uuid_known_older(&u, bitmaps, 2, &g,
                                         DRBD_UUID_JUST_CREATED));

    /* Heard of: all but the newest are older, whatever the UUIDs say */
    drbd_gen_seen_push(&g, 0x300);
    drbd_gen_seen_push(&g, 0x400);
    g_assert_true(drbd_uuid_known_older(&u, bitmaps, 2, &g, 0x300));
    g_assert_false(drbd_uuid_known_older(&u, bitmaps, 2, &g, 0x400));
    /* A node without data goes by what it heard alone */
    g_assert_true(drbd_uuid_known_older(NULL, NULL, 0, &g, 0x300));
    g_assert_false(drbd_uuid_known_older(NULL, NULL, 0, &g, 0x200));
    g_assert_false(drbd_uuid_known_older(NULL, NULL, 0, &g, 0x400));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/drbd-uuid/rule/both-just-created",
                    test_rule_both_just_created);
    g_test_add_func("/drbd-uuid/rule/one-just-created",
                    test_rule_one_just_created);
    g_test_add_func("/drbd-uuid/rule/equal-current", test_rule_equal_current);
    g_test_add_func("/drbd-uuid/rule/missed-resync-end",
                    test_rule_missed_resync_end);
    g_test_add_func("/drbd-uuid/rule/bitmap-uuid-one-side",
                    test_rule_bitmap_uuid_one_side);
    g_test_add_func("/drbd-uuid/rule/peer-bitmap-is-our-current",
                    test_rule_peer_bitmap_is_our_current);
    g_test_add_func("/drbd-uuid/rule/missed-resync-end-target",
                    test_rule_missed_resync_end_target);
    g_test_add_func("/drbd-uuid/rule/history", test_rule_history);
    g_test_add_func("/drbd-uuid/rule/split-brain", test_rule_split_brain);
    g_test_add_func("/drbd-uuid/rule/split-brain-full",
                    test_rule_split_brain_full);
    g_test_add_func("/drbd-uuid/rule/unrelated", test_rule_unrelated);
    g_test_add_func("/drbd-uuid/rule/pristine-zeroes",
                    test_rule_pristine_zeroes);
    g_test_add_func("/drbd-uuid/repair/other-rules", test_repair_other_rules);
    g_test_add_func("/drbd-uuid/handshake/plain", test_handshake_plain);
    g_test_add_func("/drbd-uuid/handshake/diskless", test_handshake_diskless);
    g_test_add_func("/drbd-uuid/handshake/disk-state",
                    test_handshake_disk_state);
    g_test_add_func("/drbd-uuid/handshake/refusals", test_handshake_refusals);
    g_test_add_func("/drbd-uuid/handshake/views-disagree",
                    test_handshake_views_disagree);
    g_test_add_func("/drbd-uuid/split-brain/default",
                    test_sb_default_never_resolves);
    g_test_add_func("/drbd-uuid/split-brain/idle-secondary",
                    test_sb_idle_secondary);
    g_test_add_func("/drbd-uuid/split-brain/0pri", test_sb_0pri);
    g_test_add_func("/drbd-uuid/split-brain/1pri", test_sb_1pri);
    g_test_add_func("/drbd-uuid/split-brain/2pri", test_sb_2pri);
    g_test_add_func("/drbd-uuid/split-brain/invalid-policies",
                    test_sb_invalid_policies);
    g_test_add_func("/drbd-uuid/split-brain/full", test_sb_full);
    g_test_add_func("/drbd-uuid/split-brain/discard-my-data",
                    test_sb_discard_my_data);
    g_test_add_func("/drbd-uuid/policy/names", test_policy_names);
    g_test_add_func("/drbd-uuid/policy/parse-errors",
                    test_policy_parse_errors);
    g_test_add_func("/drbd-uuid/policy/config-compatible",
                    test_config_compatible);
    g_test_add_func("/drbd-uuid/names", test_names);
    g_test_add_func("/drbd-uuid/life/fresh-device", test_life_fresh_device);
    g_test_add_func("/drbd-uuid/life/fresh-values", test_life_fresh_values);
    g_test_add_func("/drbd-uuid/life/new-current", test_life_new_current);
    g_test_add_func("/drbd-uuid/life/promote-disconnected",
                    test_life_promote_disconnected);
    g_test_add_func("/drbd-uuid/life/resync-rotates-history",
                    test_life_resync_rotates_history);
    g_test_add_func("/drbd-uuid/life/interrupted-resync",
                    test_life_interrupted_resync);
    g_test_add_func("/drbd-uuid/life/target-promoted-during-resync",
                    test_life_target_promoted_during_resync);
    g_test_add_func("/drbd-uuid/life/target-takes-source-generation",
                    test_life_target_takes_source_generation);
    g_test_add_func("/drbd-uuid/life/rotate-keeps-older-generation",
                    test_life_rotate_keeps_older_generation);
    g_test_add_func("/drbd-uuid/life/source-joins-target-generation",
                    test_life_source_joins_target_generation);
    g_test_add_func("/drbd-uuid/life/split-brain", test_life_split_brain);
    g_test_add_func("/drbd-uuid/life/restart", test_life_restart);
    g_test_add_func("/drbd-uuid/simulation", test_simulation);
    g_test_add_func("/drbd-uuid/gen-seen", test_gen_seen);
    g_test_add_func("/drbd-uuid/known-older", test_known_older);

    return g_test_run();
}
