/*
 * DRBD-style replication: generation UUIDs, the connect-time sync
 * decision and the split-brain recovery policies
 *
 * See uuid.h for the decision table and the order of the handshake's
 * steps.  Pure code: no I/O, no QEMU globals.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "uuid.h"

/* A UUID without its flag bit: what comparisons look at */
static uint64_t uuid_val(uint64_t uuid)
{
    return uuid & ~DRBD_UUID_PRIMARY_FLAG;
}

/* Whether @uuid names a generation of data (0 and "just created" do not) */
static bool uuid_names_data(uint64_t uuid)
{
    uint64_t v = uuid_val(uuid);

    return v != 0 && v != DRBD_UUID_JUST_CREATED;
}

/* A fresh image of zeroes that no write has changed (rules 110, 111) */
static bool uuid_pristine_zeroes(const DrbdUuids *u)
{
    return uuid_val(u->current) == DRBD_UUID_ZEROED &&
           !uuid_val(u->bitmap) && !uuid_val(u->history[0]) &&
           !uuid_val(u->history[1]);
}

/*
 * Equal currents.  A bitmap UUID on one side only means a resync between
 * the two was interrupted at its start or its end; else the roles at the
 * time of the crash decide.
 */
static DrbdUuidCmp compare_same_generation(const DrbdUuids *self,
                                           const DrbdUuids *peer,
                                           bool self_crashed_primary,
                                           bool peer_crashed_primary,
                                           bool self_resolves_conflicts,
                                           int *rule)
{
    uint64_t self_bm = uuid_val(self->bitmap);
    uint64_t peer_bm = uuid_val(peer->bitmap);

    if (self_bm != 0 && peer_bm == 0) {
        bool peer_finished =
            self_bm == uuid_val(peer->history[0]) &&
            uuid_val(self->history[0]) == uuid_val(peer->history[1]);

        *rule = peer_finished ? 34 : 36;
        return DRBD_UUID_CMP_SOURCE;
    }
    if (self_bm == 0 && peer_bm != 0) {
        bool self_finished =
            peer_bm == uuid_val(self->history[0]) &&
            uuid_val(peer->history[0]) == uuid_val(self->history[1]);

        *rule = self_finished ? 35 : 37;
        return DRBD_UUID_CMP_TARGET;
    }

    *rule = 40;
    if (self_crashed_primary && peer_crashed_primary) {
        return self_resolves_conflicts ? DRBD_UUID_CMP_TARGET
                                       : DRBD_UUID_CMP_SOURCE;
    }
    if (self_crashed_primary) {
        return DRBD_UUID_CMP_SOURCE;
    }
    if (peer_crashed_primary) {
        return DRBD_UUID_CMP_TARGET;
    }
    return DRBD_UUID_CMP_EQUAL;
}

DrbdUuidCmp drbd_uuid_compare(const DrbdUuids *self, const DrbdUuids *peer,
                              bool self_crashed_primary,
                              bool peer_crashed_primary,
                              bool self_resolves_conflicts, int *rule)
{
    uint64_t self_cur = uuid_val(self->current);
    uint64_t peer_cur = uuid_val(peer->current);
    uint64_t self_bm = uuid_val(self->bitmap);
    uint64_t peer_bm = uuid_val(peer->bitmap);
    /* the generations each side had before its current one */
    const uint64_t self_old[] = {
        self->bitmap, self->history[0], self->history[1],
    };
    const uint64_t peer_old[] = {
        peer->bitmap, peer->history[0], peer->history[1],
    };
    int i, j;

    *rule = 10;
    if (self_cur == DRBD_UUID_JUST_CREATED &&
        peer_cur == DRBD_UUID_JUST_CREATED) {
        return DRBD_UUID_CMP_EQUAL;
    }
    *rule = 20;
    if ((self_cur == DRBD_UUID_JUST_CREATED || self_cur == 0) &&
        peer_cur != DRBD_UUID_JUST_CREATED) {
        return DRBD_UUID_CMP_FULL_TARGET;
    }
    *rule = 30;
    if (self_cur != DRBD_UUID_JUST_CREATED &&
        (peer_cur == DRBD_UUID_JUST_CREATED || peer_cur == 0)) {
        return DRBD_UUID_CMP_FULL_SOURCE;
    }

    if (self_cur == peer_cur) {
        return compare_same_generation(self, peer, self_crashed_primary,
                                       peer_crashed_primary,
                                       self_resolves_conflicts, rule);
    }

    *rule = 50;
    if (self_cur == peer_bm) {
        return DRBD_UUID_CMP_TARGET;
    }
    *rule = 51;
    if (self_cur == uuid_val(peer->history[0]) &&
        uuid_val(self->history[0]) == uuid_val(peer->history[1])) {
        return DRBD_UUID_CMP_TARGET;
    }
    *rule = 60;
    for (i = 0; i < DRBD_UUID_HISTORY; i++) {
        if (self_cur == uuid_val(peer->history[i])) {
            return DRBD_UUID_CMP_FULL_TARGET;
        }
    }

    *rule = 70;
    if (self_bm == peer_cur) {
        return DRBD_UUID_CMP_SOURCE;
    }
    *rule = 71;
    if (uuid_val(self->history[0]) == peer_cur &&
        uuid_val(self->history[1]) == uuid_val(peer->history[0])) {
        return DRBD_UUID_CMP_SOURCE;
    }
    *rule = 80;
    for (i = 0; i < DRBD_UUID_HISTORY; i++) {
        if (uuid_val(self->history[i]) == peer_cur) {
            return DRBD_UUID_CMP_FULL_SOURCE;
        }
    }

    *rule = 90;
    if (self_bm == peer_bm && uuid_names_data(self_bm)) {
        return DRBD_UUID_CMP_SPLIT_BRAIN;
    }

    *rule = 100;
    for (i = 0; i < ARRAY_SIZE(self_old); i++) {
        if (!uuid_names_data(self_old[i])) {
            continue;
        }
        for (j = 0; j < ARRAY_SIZE(peer_old); j++) {
            if (uuid_val(self_old[i]) == uuid_val(peer_old[j])) {
                return DRBD_UUID_CMP_SPLIT_BRAIN_FULL;
            }
        }
    }
    *rule = 110;
    if (uuid_pristine_zeroes(self)) {
        return DRBD_UUID_CMP_FULL_TARGET;
    }
    *rule = 111;
    if (uuid_pristine_zeroes(peer)) {
        return DRBD_UUID_CMP_FULL_SOURCE;
    }
    *rule = 100;
    return DRBD_UUID_CMP_UNRELATED;
}

/*
 * The bitmap UUID goes to the history, unless the history starts with
 * that generation already (a primary that lost a peer keeps its old
 * current as that peer's bitmap UUID and as its own history[0], the
 * flag bit aside): twice, it would push an older generation out of the
 * short history, and a node still in that one would look unrelated.
 * Returns whether there was one.
 */
static bool uuid_rotate_bitmap(DrbdUuids *u)
{
    if (uuid_val(u->bitmap) == 0) {
        return false;
    }
    if (uuid_val(u->bitmap) != uuid_val(u->history[0])) {
        u->history[1] = u->history[0];
        u->history[0] = u->bitmap;
    }
    u->bitmap = 0;
    return true;
}

/*
 * Undo uuid_rotate_bitmap() (but for history[1], which is gone) on a sync
 * source that recorded the end of a resync its target did not (rule 71),
 * or in the target's copy of that source's UUIDs (rule 51)
 */
static bool uuid_unrotate_bitmap(DrbdUuids *u)
{
    u->bitmap = u->history[0];
    u->history[0] = u->history[1];
    return true;
}

bool drbd_uuid_repair(int rule, DrbdUuids *self, DrbdUuids *peer)
{
    switch (rule) {
    case 34:
        return uuid_rotate_bitmap(self);
    case 35:
        return uuid_rotate_bitmap(peer);
    case 51:
        return uuid_unrotate_bitmap(peer);
    case 71:
        return uuid_unrotate_bitmap(self);
    default:
        return false;
    }
}

/*
 * Split-brain recovery.  Each function answers from this node's view:
 * -1 this node loses its changes (sync target), 1 the peer does, 0 the
 * policy does not decide.
 */
typedef struct SbView {
    const DrbdHandshakeSide *self;
    const DrbdHandshakeSide *peer;
    bool self_resolves_conflicts;
} SbView;

/* Where nothing else decides, the node that resolves conflicts loses */
static int sb_tie_break(const SbView *v)
{
    return v->self_resolves_conflicts ? -1 : 1;
}

/*
 * The flag bit of a bitmap UUID is set if the node was already primary
 * when it lost its peer (the older primary), clear if it was promoted
 * afterwards (the younger one).
 */
static int sb_by_primary_age(const SbView *v, bool discard_younger)
{
    bool self_older = v->self->uuids.bitmap & DRBD_UUID_PRIMARY_FLAG;
    bool peer_older = v->peer->uuids.bitmap & DRBD_UUID_PRIMARY_FLAG;

    if (self_older == peer_older) {
        return 0;
    }
    if (discard_younger) {
        return self_older ? 1 : -1;
    }
    return self_older ? -1 : 1;
}

static int sb_by_zero_changes(const SbView *v)
{
    if (v->self->changes == 0 && v->peer->changes == 0) {
        return sb_tie_break(v);
    }
    if (v->peer->changes == 0) {
        return 1;
    }
    if (v->self->changes == 0) {
        return -1;
    }
    return 0;
}

/*
 * A side that is not primary and changed nothing since the split (no
 * bit in its bitmap: a node promoted apart from its peer, which started
 * a generation, and demoted again without a write) loses nothing by
 * taking the other's changes
 */
static int sb_by_idle_secondary(const SbView *v)
{
    bool self_idle = !v->self->primary && !v->self->crashed_primary &&
                     v->self->changes == 0;
    bool peer_idle = !v->peer->primary && !v->peer->crashed_primary &&
                     v->peer->changes == 0;

    if (self_idle && peer_idle) {
        return sb_tie_break(v);
    }
    if (self_idle) {
        return -1;
    }
    return peer_idle ? 1 : 0;
}

static int sb_by_least_changes(const SbView *v)
{
    if (v->self->changes < v->peer->changes) {
        return -1;
    }
    if (v->self->changes > v->peer->changes) {
        return 1;
    }
    return sb_tie_break(v);
}

static int sb_recover_0pri(DrbdAfterSbPolicy policy, const SbView *v)
{
    int r;

    switch (policy) {
    case DRBD_ASB_DISCARD_YOUNGER_PRIMARY:
    case DRBD_ASB_DISCARD_OLDER_PRIMARY:
        /* neither or both were primary: fall back on the changes */
        r = sb_by_primary_age(v,
                              policy == DRBD_ASB_DISCARD_YOUNGER_PRIMARY);
        if (r == 0) {
            r = sb_by_zero_changes(v);
        }
        if (r == 0) {
            r = sb_by_least_changes(v);
        }
        return r;
    case DRBD_ASB_DISCARD_ZERO_CHANGES:
        return sb_by_zero_changes(v);
    case DRBD_ASB_DISCARD_LEAST_CHANGES:
        return sb_by_least_changes(v);
    case DRBD_ASB_DISCARD_LOCAL:
        return -1;
    case DRBD_ASB_DISCARD_REMOTE:
        return 1;
    default:
        /* disconnect, and every value that is no 0pri policy */
        return 0;
    }
}

static int sb_recover_1pri(const DrbdHandshakeConfig *cfg, const SbView *v)
{
    int r;

    switch (cfg->after_sb_1pri) {
    case DRBD_ASB_CONSENSUS:
        /* the 0pri answer, if it is to discard the secondary's changes */
        r = sb_recover_0pri(cfg->after_sb_0pri, v);
        if ((r < 0 && !v->self->primary) || (r > 0 && v->self->primary)) {
            return r;
        }
        return 0;
    case DRBD_ASB_VIOLENTLY_AS0P:
        return sb_recover_0pri(cfg->after_sb_0pri, v);
    case DRBD_ASB_DISCARD_SECONDARY:
        return v->self->primary ? 1 : -1;
    default:
        return 0;
    }
}

static int sb_recover_2pri(const DrbdHandshakeConfig *cfg, const SbView *v)
{
    if (cfg->after_sb_2pri == DRBD_ASB_VIOLENTLY_AS0P) {
        return sb_recover_0pri(cfg->after_sb_0pri, v);
    }
    return 0;
}

/* Whether the peer's answer @theirs is the mirror image of our @ours */
static bool uuid_cmp_mirrors(DrbdUuidCmp ours, DrbdUuidCmp theirs)
{
    switch (ours) {
    case DRBD_UUID_CMP_UNRELATED:
    case DRBD_UUID_CMP_SPLIT_BRAIN:
    case DRBD_UUID_CMP_SPLIT_BRAIN_FULL:
        return theirs == ours;
    default:
        return (int)theirs == -(int)ours;
    }
}

static DrbdSyncDecision decision_of(int hg)
{
    switch (hg) {
    case 0:
        return DRBD_SYNC_NONE;
    case 1:
        return DRBD_SYNC_SOURCE;
    case -1:
        return DRBD_SYNC_TARGET;
    case 2:
        return DRBD_SYNC_FULL_SOURCE;
    case -2:
        return DRBD_SYNC_FULL_TARGET;
    default:
        g_assert_not_reached();
    }
}

/*
 * Steps 3 to 5 of the handshake on a split brain (@hg is +-100).
 * Returns the resolved +-1 or +-2, or 0 if unresolved.
 */
static int resolve_split_brain(int hg, const SbView *v,
                               const DrbdHandshakeConfig *cfg,
                               DrbdHandshakeResult *res)
{
    bool full = hg == DRBD_UUID_CMP_SPLIT_BRAIN_FULL;
    int r = 0;

    res->resolution = DRBD_SB_UNRESOLVED;
    res->primaries = v->self->primary + v->peer->primary;

    if (hg == DRBD_UUID_CMP_SPLIT_BRAIN) {
        switch (res->primaries) {
        case 0:
            res->policy = cfg->after_sb_0pri;
            r = sb_recover_0pri(cfg->after_sb_0pri, v);
            break;
        case 1:
            res->policy = cfg->after_sb_1pri;
            r = sb_recover_1pri(cfg, v);
            break;
        default:
            res->policy = cfg->after_sb_2pri;
            r = sb_recover_2pri(cfg, v);
            break;
        }
        if (r) {
            res->resolution = DRBD_SB_BY_POLICY;
        }
    }

    if (r == 0) {
        if (v->self->discard_my_data && !v->peer->discard_my_data) {
            r = -1;
        } else if (!v->self->discard_my_data && v->peer->discard_my_data) {
            r = 1;
        }
        if (r) {
            res->resolution = DRBD_SB_BY_DISCARD_MY_DATA;
        }
    }

    if (r == 0 && !full && cfg->idle_secondary_loses) {
        /* Whatever the policies: it loses no write */
        r = sb_by_idle_secondary(v);
        if (r) {
            res->resolution = DRBD_SB_BY_NO_CHANGES;
        }
    }

    return full ? 2 * r : r;
}

static DrbdSyncDecision handshake_done(DrbdHandshakeResult *res,
                                       DrbdSyncDecision d)
{
    res->decision = d;
    return d;
}

DrbdSyncDecision drbd_sync_handshake(const DrbdHandshakeSide *self,
                                     const DrbdHandshakeSide *peer,
                                     bool self_resolves_conflicts,
                                     const DrbdHandshakeConfig *cfg,
                                     DrbdHandshakeResult *res)
{
    SbView v = {
        .self = self,
        .peer = peer,
        .self_resolves_conflicts = self_resolves_conflicts,
    };
    DrbdUuidCmp theirs;
    int their_rule;
    int hg;

    *res = (DrbdHandshakeResult) {
        .decision = DRBD_SYNC_NONE,
        .uuid_cmp = DRBD_UUID_CMP_EQUAL,
        .resolution = DRBD_SB_NONE,
        .policy = DRBD_ASB_DISCONNECT,
    };

    if (self->disk == DRBD_HS_DISK_DISKLESS ||
        peer->disk == DRBD_HS_DISK_DISKLESS) {
        return handshake_done(res, DRBD_SYNC_NONE);
    }

    /* 1. both views */
    res->uuid_cmp = drbd_uuid_compare(&self->uuids, &peer->uuids,
                                      self->crashed_primary,
                                      peer->crashed_primary,
                                      self_resolves_conflicts, &res->rule);
    theirs = drbd_uuid_compare(&peer->uuids, &self->uuids,
                               peer->crashed_primary, self->crashed_primary,
                               !self_resolves_conflicts, &their_rule);
    if (!uuid_cmp_mirrors(res->uuid_cmp, theirs)) {
        res->views_disagree = true;
        return handshake_done(res, DRBD_SYNC_UNRELATED);
    }
    if (res->uuid_cmp == DRBD_UUID_CMP_UNRELATED) {
        return handshake_done(res, DRBD_SYNC_UNRELATED);
    }
    hg = res->uuid_cmp;

    /* 2. disk states */
    if ((self->disk == DRBD_HS_DISK_INCONSISTENT &&
         peer->disk > DRBD_HS_DISK_INCONSISTENT) ||
        (peer->disk == DRBD_HS_DISK_INCONSISTENT &&
         self->disk > DRBD_HS_DISK_INCONSISTENT)) {
        bool full = hg == DRBD_UUID_CMP_SPLIT_BRAIN_FULL ||
                    hg == DRBD_UUID_CMP_FULL_SOURCE ||
                    hg == DRBD_UUID_CMP_FULL_TARGET;

        hg = self->disk > DRBD_HS_DISK_INCONSISTENT ? 1 : -1;
        if (full) {
            hg *= 2;
        }
        res->by_disk_state = true;
    }

    /*
     * Neither has data of its own: no split brain to resolve (there are
     * no changes on either side to keep), and neither can be the source.
     * Not a reason to stop connecting: one of them, resynced from a third
     * node meanwhile, is the other's source then.
     */
    if ((hg == DRBD_UUID_CMP_SPLIT_BRAIN ||
         hg == DRBD_UUID_CMP_SPLIT_BRAIN_FULL) &&
        self->disk == DRBD_HS_DISK_INCONSISTENT &&
        peer->disk == DRBD_HS_DISK_INCONSISTENT) {
        return handshake_done(res, DRBD_SYNC_INCONSISTENT_SOURCE);
    }

    /* 3. to 5. split brain */
    if (hg == DRBD_UUID_CMP_SPLIT_BRAIN ||
        hg == DRBD_UUID_CMP_SPLIT_BRAIN_FULL) {
        hg = resolve_split_brain(hg, &v, cfg, res);
        if (hg == 0) {
            return handshake_done(res, DRBD_SYNC_SPLIT_BRAIN);
        }
    }

    /* 6. refusals, checked for both ends */
    if ((hg > 0 && self->disk <= DRBD_HS_DISK_INCONSISTENT) ||
        (hg < 0 && peer->disk <= DRBD_HS_DISK_INCONSISTENT)) {
        return handshake_done(res, DRBD_SYNC_INCONSISTENT_SOURCE);
    }
    if ((hg < 0 && self->primary && self->disk >= DRBD_HS_DISK_CONSISTENT) ||
        (hg > 0 && peer->primary && peer->disk >= DRBD_HS_DISK_CONSISTENT)) {
        return handshake_done(res, DRBD_SYNC_PRIMARY_TARGET);
    }

    return handshake_done(res, decision_of(hg));
}

/* Names, and which option accepts which policy (bit n: after-sb-npri) */
static const struct {
    const char *name;
    unsigned slots;
} asb_info[DRBD_ASB__MAX] = {
    [DRBD_ASB_DISCONNECT]              = { "disconnect", 07 },
    [DRBD_ASB_DISCARD_YOUNGER_PRIMARY] = { "discard-younger-primary", 01 },
    [DRBD_ASB_DISCARD_OLDER_PRIMARY]   = { "discard-older-primary", 01 },
    [DRBD_ASB_DISCARD_ZERO_CHANGES]    = { "discard-zero-changes", 01 },
    [DRBD_ASB_DISCARD_LEAST_CHANGES]   = { "discard-least-changes", 01 },
    [DRBD_ASB_DISCARD_LOCAL]           = { "discard-local", 01 },
    [DRBD_ASB_DISCARD_REMOTE]          = { "discard-remote", 01 },
    [DRBD_ASB_DISCARD_SECONDARY]       = { "discard-secondary", 02 },
    [DRBD_ASB_CONSENSUS]               = { "consensus", 02 },
    [DRBD_ASB_VIOLENTLY_AS0P]          = { "violently-as0p", 06 },
};

bool drbd_after_sb_policy_valid(int which_pri, DrbdAfterSbPolicy policy)
{
    if (which_pri < 0 || which_pri > 2 ||
        (unsigned)policy >= DRBD_ASB__MAX) {
        return false;
    }
    return asb_info[policy].slots & (1u << which_pri);
}

bool drbd_after_sb_policies_compatible(DrbdAfterSbPolicy self,
                                       DrbdAfterSbPolicy peer)
{
    if (self == DRBD_ASB_DISCARD_LOCAL) {
        return peer == DRBD_ASB_DISCARD_REMOTE;
    }
    if (self == DRBD_ASB_DISCARD_REMOTE) {
        return peer == DRBD_ASB_DISCARD_LOCAL;
    }
    return self == peer;
}

int drbd_handshake_config_compatible(const DrbdHandshakeConfig *self,
                                     const DrbdHandshakeConfig *peer,
                                     Error **errp)
{
    const DrbdAfterSbPolicy ours[3] = {
        self->after_sb_0pri, self->after_sb_1pri, self->after_sb_2pri,
    };
    const DrbdAfterSbPolicy theirs[3] = {
        peer->after_sb_0pri, peer->after_sb_1pri, peer->after_sb_2pri,
    };
    int i;

    for (i = 0; i < 3; i++) {
        if (!drbd_after_sb_policies_compatible(ours[i], theirs[i])) {
            error_setg(errp, "after-sb-%dpri is '%s' here but '%s' on the "
                       "peer; set it alike on both nodes (or "
                       "discard-local on one and discard-remote on the "
                       "other)", i, drbd_after_sb_policy_str(ours[i]),
                       drbd_after_sb_policy_str(theirs[i]));
            return -EINVAL;
        }
    }
    return 0;
}

const char *drbd_uuid_cmp_str(DrbdUuidCmp c)
{
    switch (c) {
    case DRBD_UUID_CMP_UNRELATED:
        return "unrelated";
    case DRBD_UUID_CMP_SPLIT_BRAIN_FULL:
        return "split-brain-full";
    case DRBD_UUID_CMP_FULL_TARGET:
        return "full-target";
    case DRBD_UUID_CMP_TARGET:
        return "target";
    case DRBD_UUID_CMP_EQUAL:
        return "equal";
    case DRBD_UUID_CMP_SOURCE:
        return "source";
    case DRBD_UUID_CMP_FULL_SOURCE:
        return "full-source";
    case DRBD_UUID_CMP_SPLIT_BRAIN:
        return "split-brain";
    default:
        return "unknown";
    }
}

static const char *const sync_decision_names[DRBD_SYNC__MAX] = {
    [DRBD_SYNC_NONE]                = "none",
    [DRBD_SYNC_SOURCE]              = "source",
    [DRBD_SYNC_TARGET]              = "target",
    [DRBD_SYNC_FULL_SOURCE]         = "full-source",
    [DRBD_SYNC_FULL_TARGET]         = "full-target",
    [DRBD_SYNC_SPLIT_BRAIN]         = "split-brain",
    [DRBD_SYNC_UNRELATED]           = "unrelated",
    [DRBD_SYNC_INCONSISTENT_SOURCE] = "inconsistent-source",
    [DRBD_SYNC_PRIMARY_TARGET]      = "primary-target",
};

const char *drbd_sync_decision_str(DrbdSyncDecision d)
{
    if ((unsigned)d >= DRBD_SYNC__MAX) {
        return "unknown";
    }
    return sync_decision_names[d];
}

static const char *const sb_resolution_names[DRBD_SB__MAX] = {
    [DRBD_SB_NONE]                  = "none",
    [DRBD_SB_UNRESOLVED]            = "unresolved",
    [DRBD_SB_BY_POLICY]             = "policy",
    [DRBD_SB_BY_DISCARD_MY_DATA]    = "discard-my-data",
    [DRBD_SB_BY_NO_CHANGES]         = "no-changes",
};

const char *drbd_sb_resolution_str(DrbdSbResolution r)
{
    if ((unsigned)r >= DRBD_SB__MAX) {
        return "unknown";
    }
    return sb_resolution_names[r];
}

const char *drbd_after_sb_policy_str(DrbdAfterSbPolicy p)
{
    if ((unsigned)p >= DRBD_ASB__MAX) {
        return "unknown";
    }
    return asb_info[p].name;
}

int drbd_after_sb_policy_parse(int which_pri, const char *str,
                               DrbdAfterSbPolicy *policy, Error **errp)
{
    g_autoptr(GString) valid = NULL;
    int p;

    if (which_pri < 0 || which_pri > 2) {
        error_setg(errp, "after-sb-%dpri: there is no such option "
                   "(only after-sb-0pri, -1pri and -2pri)", which_pri);
        return -EINVAL;
    }

    for (p = 0; p < DRBD_ASB__MAX; p++) {
        if (str && !strcmp(str, asb_info[p].name) &&
            drbd_after_sb_policy_valid(which_pri, p)) {
            *policy = p;
            return 0;
        }
    }

    valid = g_string_new("");
    for (p = 0; p < DRBD_ASB__MAX; p++) {
        if (drbd_after_sb_policy_valid(which_pri, p)) {
            g_string_append_printf(valid, "%s%s", valid->len ? ", " : "",
                                   asb_info[p].name);
        }
    }
    error_setg(errp, "after-sb-%dpri: '%s' is not a valid policy here; "
               "use one of: %s", which_pri, str ? str : "", valid->str);
    return -EINVAL;
}

/*
 * Life cycle
 */

/* @fresh as a UUID: no flag bit, and never 0 or "just created" */
static uint64_t uuid_from_random(uint64_t fresh)
{
    uint64_t v = uuid_val(fresh);

    if (!uuid_names_data(v)) {
        v |= 1ULL << 63;
    }
    return v;
}

void drbd_uuid_init(DrbdUuids *u)
{
    *u = (DrbdUuids) { .current = DRBD_UUID_JUST_CREATED };
}

void drbd_uuid_new_current(DrbdUuids *u, uint64_t fresh)
{
    uint64_t flag = u->current & DRBD_UUID_PRIMARY_FLAG;

    if (uuid_val(u->bitmap) == 0 && uuid_names_data(u->current)) {
        u->bitmap = u->current;
    }
    u->current = uuid_from_random(fresh) | flag;
}

bool drbd_uuid_promote(DrbdUuids *u, bool peer_disk_up_to_date, bool force,
                       uint64_t fresh)
{
    bool new_generation = force || !peer_disk_up_to_date;

    if (new_generation) {
        drbd_uuid_new_current(u, fresh);
    }
    u->current |= DRBD_UUID_PRIMARY_FLAG;
    return new_generation;
}

void drbd_uuid_join(DrbdUuids *u, uint64_t current)
{
    uint64_t old = uuid_val(u->current);

    if (uuid_val(current) == old) {
        return;
    }
    if (uuid_names_data(old)) {
        u->history[1] = u->history[0];
        u->history[0] = old;
    }
    u->current = uuid_val(current) | (u->current & DRBD_UUID_PRIMARY_FLAG);
}

void drbd_gen_seen_push(DrbdGenSeen *g, uint64_t uuid)
{
    uint64_t v = uuid_val(uuid);
    unsigned i;

    if (!uuid_names_data(v) || (g->n && g->gen[g->n - 1] == v)) {
        return;
    }
    /* Heard of again: it moves to the newest place */
    for (i = 0; i < g->n && g->gen[i] != v; i++) {
        /* look on */
    }
    if (i == g->n && g->n == DRBD_GEN_SEEN_MAX) {
        i = 0;
    }
    if (i < g->n) {
        memmove(&g->gen[i], &g->gen[i + 1], (g->n - i - 1) * sizeof(v));
        g->n--;
    }
    g->gen[g->n++] = v;
}

bool drbd_uuid_known_older(const DrbdUuids *u, const uint64_t *bitmaps,
                           unsigned nr_bitmaps, const DrbdGenSeen *g,
                           uint64_t uuid)
{
    uint64_t v = uuid_val(uuid);
    bool older = false;
    unsigned i;

    if (!uuid_names_data(v) || (g->n && g->gen[g->n - 1] == v)) {
        return false;
    }
    if (u && uuid_val(u->current) != v) {
        older = uuid_val(u->history[0]) == v ||
                uuid_val(u->history[1]) == v;
        for (i = 0; i < nr_bitmaps; i++) {
            older |= uuid_val(bitmaps[i]) == v;
        }
    }
    for (i = 0; i + 1 < g->n; i++) {
        older |= g->gen[i] == v;
    }
    return older;
}

void drbd_uuid_demote(DrbdUuids *u)
{
    u->current &= ~DRBD_UUID_PRIMARY_FLAG;
}

bool drbd_uuid_peer_disk_lost(DrbdUuids *u, bool writes_continue,
                              uint64_t fresh)
{
    if (!writes_continue) {
        return false;
    }
    drbd_uuid_new_current(u, fresh);
    return true;
}

void drbd_uuid_resync_finished_source(DrbdUuids *u)
{
    uuid_rotate_bitmap(u);
}

bool drbd_uuid_holds(const DrbdUuids *u, uint64_t uuid)
{
    uint64_t v = uuid_val(uuid);

    return uuid_names_data(v) &&
           (uuid_val(u->current) == v || uuid_val(u->bitmap) == v ||
            uuid_val(u->history[0]) == v || uuid_val(u->history[1]) == v);
}

bool drbd_uuid_resync_finished_target(DrbdUuids *u, const DrbdUuids *source,
                                      uint64_t target_gen)
{
    uint64_t own = u->current;
    bool keep = uuid_names_data(target_gen) &&
                uuid_val(own) == uuid_val(target_gen) &&
                !drbd_uuid_holds(source, target_gen);

    *u = *source;
    drbd_uuid_resync_finished_source(u);
    if (keep) {
        u->bitmap = uuid_names_data(u->current) ? uuid_val(u->current) : 0;
        u->current = own;
    } else {
        u->current = uuid_val(u->current) | (own & DRBD_UUID_PRIMARY_FLAG);
    }
    return keep;
}

bool drbd_uuid_target_gen_new(const DrbdUuids *u, uint64_t target_gen)
{
    return uuid_names_data(target_gen) && !drbd_uuid_holds(u, target_gen);
}

bool drbd_uuid_resync_finished_source_joins(DrbdUuids *u,
                                            uint64_t target_gen)
{
    bool join = drbd_uuid_target_gen_new(u, target_gen);

    drbd_uuid_resync_finished_source(u);
    if (join) {
        drbd_uuid_join(u, target_gen);
    }
    return join;
}
