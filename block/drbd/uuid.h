/*
 * DRBD-style replication: generation UUIDs, the connect-time sync
 * decision and the split-brain recovery policies
 *
 * Pure code: no I/O, no QEMU globals.  Random values come from the
 * caller, so that every outcome here is deterministic and testable.
 *
 * Generation UUIDs
 * ================
 *
 * Every node keeps four 64-bit generation UUIDs with its metadata:
 *
 *   current     names the data generation on this disk; a new one is
 *               made when the data starts to change without the peer
 *               (a primary whose peer's disk is gone)
 *   bitmap      while not 0: the current UUID at the moment the peer
 *               stopped receiving our writes; the out-of-sync bitmap
 *               holds every block changed since that generation
 *   history[0]  the two bitmap UUIDs before that, newest first: older
 *   history[1]  generations this disk has been in sync with
 *
 * 0 means "no generation".  A freshly created device has current =
 * DRBD_UUID_JUST_CREATED and all else 0.  The lowest bit of a current
 * UUID is not part of its value: it is set while the node is primary
 * (DRBD_UUID_PRIMARY_FLAG), so that a bitmap UUID made from it tells
 * whether the node was already primary when it lost its peer.  Every
 * comparison below masks that bit off.
 *
 * The decision table (drbd_uuid_compare)
 * ======================================
 *
 * "self" is this node, "peer" the other; "=" compares without the flag
 * bit.  The rules are tried in this order; the first that matches
 * decides, and its number is reported (the numbers are DRBD's, so that
 * traces read the same):
 *
 *   10  both currents are "just created": nothing was ever written on
 *       either side.  EQUAL, no resync.
 *   20  our current is "just created" (or 0), the peer's is not: the
 *       peer has data, we have none.  FULL_TARGET.
 *   30  the mirror image of 20.  FULL_SOURCE.
 *
 *   Equal currents: both disks hold the same generation.
 *   34  our bitmap UUID is set, the peer's is 0, and our bitmap and
 *       history[0] are the peer's history[0] and history[1]: we were
 *       sync source and did not record the end of the resync that the
 *       peer did record.  We are SOURCE (what is left in our bitmap);
 *       drbd_uuid_repair() moves our bitmap UUID to the history.
 *   35  the mirror image of 34: the peer missed the end of a resync in
 *       which we were target.  TARGET; drbd_uuid_repair() fixes our
 *       copy of the peer's UUIDs.
 *   36  our bitmap UUID is set, the peer's is 0, without the history
 *       pattern of 34.  In DRBD: the peer did not record the sync UUID
 *       of a resync we started.  This driver makes no sync UUID, and its
 *       own life cycle is not known to lead here (the simulation of it
 *       in the unit tests never does); the rule stays, as DRBD has it,
 *       for metadata made otherwise.  SOURCE.
 *   37  the mirror image of 36.  TARGET.
 *   40  otherwise: both stopped in the same generation.  Who was
 *       primary when it crashed (it may have written blocks, noted in
 *       its activity log, that the peer lacks) becomes SOURCE; if
 *       neither, EQUAL; if both, the node that does not resolve
 *       conflicts is SOURCE and the one that does is TARGET.
 *
 *   Different currents:
 *   50  our current is the peer's bitmap UUID: the peer changed data
 *       since it lost us, we did not.  TARGET, bitmap based.
 *   51  our current is the peer's history[0] and our history[0] is its
 *       history[1]: as 50, but the peer has moved its bitmap UUID to the
 *       history since.  It does that at the end of a resync to us: this
 *       one ended, and we did not record it (in DRBD also at the start of
 *       a resync whose sync UUID never reached us).  TARGET;
 *       drbd_uuid_repair() undoes that move in our copy of the peer's
 *       UUIDs.
 *   60  our current is in the peer's history: the peer moved on more
 *       than one generation since we shared data.  FULL_TARGET.
 *   70  the mirror image of 50: the peer's current is our bitmap UUID.
 *       SOURCE.
 *   71  the mirror image of 51: we recorded the end of a resync to the
 *       peer, the peer did not.  SOURCE; drbd_uuid_repair() undoes the
 *       move of our bitmap UUID to the history.
 *   80  the mirror image of 60: the peer's current is in our history.
 *       FULL_SOURCE.
 *   90  both bitmap UUIDs are equal (and a real generation): both
 *       sides changed data since they last shared it.  SPLIT_BRAIN: a
 *       bitmap-based resync (of the union of both bitmaps) repairs it
 *       once somebody says which side's changes to throw away.
 *  100  an older generation (bitmap or history UUID) is the same on
 *       both sides: the nodes shared data once, but neither bitmap
 *       covers all that differs since.  SPLIT_BRAIN_FULL: only a full
 *       resync repairs it.
 *  110  our current is "zeroed" with no bitmap UUID and no history:
 *       a fresh image of zeroes, never written (the first write starts a
 *       generation), meets a peer whose data are no generation of ours,
 *       as a new node that joins a resource in use.  We have nothing to
 *       lose: FULL_TARGET.
 *  111  the mirror image of 110.  FULL_SOURCE.
 *  100  (no rule matched) UNRELATED: the disks never held the same
 *       data, or the generation they shared is in neither's history
 *       any more (it holds two: a sync source that records the end of
 *       resyncs its target does not, repeatedly, can push it out).
 *       Connecting them would destroy one of them: refuse.
 *
 * Rules 34, 35, 51 and 71 repair the effects of a resync whose end only
 * one of the two nodes recorded (a connection or a node lost as it
 * ended); in DRBD, 36, 37, 51 and 71 also repair those of a resync whose
 * start only the source recorded.  Unlike DRBD, rules 90 and 100 do
 * not match on 0 or on "just created": those name no generation, so two
 * devices that were each forced primary from scratch are UNRELATED, not
 * a split brain that a bitmap-based resync would wrongly "repair".  And
 * rule 100 looks at the bitmap UUIDs as well as the history (DRBD: the
 * history only): after interrupted resyncs, the one generation two
 * nodes still share can be the bitmap UUID of one and a history UUID of
 * the other, and they are not unrelated.
 *
 * The handshake (drbd_sync_handshake)
 * ===================================
 *
 * takes the table's answer and applies, in this order:
 *
 * 1. Both views: the table is evaluated from both ends; if the answers
 *    are not mirror images of each other (only metadata that no life
 *    cycle produces can do that), the result is UNRELATED, so that the
 *    two nodes, each deciding alone, never both become sync target or
 *    both source.
 * 2. Disk states: if exactly one disk is Inconsistent and the other is
 *    better, the better one is SOURCE whatever the UUIDs said; the
 *    resync is full if the table asked for a full one or said
 *    SPLIT_BRAIN_FULL.
 * 3. Split-brain policies: on SPLIT_BRAIN the after-sb option for the
 *    number of primaries (0, 1 or 2) picks the side that loses its
 *    changes, or leaves the split brain unresolved.  (Not on
 *    SPLIT_BRAIN_FULL: DRBD's always-asbp, which would apply them there,
 *    is not offered.)
 * 4. discard-my-data: if still unresolved and exactly one side has the
 *    operator's discard-my-data flag, that side is target.  (DRBD does
 *    a bitmap-based resync here even for rule 100; we do a full one.)
 * 5. Still unresolved, on SPLIT_BRAIN (not _FULL): a side that is not
 *    primary (nor crashed as one) and has no changes is target: it
 *    loses no write.  That is the node that was promoted apart from its
 *    peer (its promotion started a generation) and demoted again
 *    without a write, as the refusal of two primaries advises; if both
 *    are such, the node that resolves conflicts.  DRBD's
 *    discard-zero-changes, but for a secondary only and whatever the
 *    policies: a primary with no changes would be a PRIMARY_TARGET.
 * 6. Still unresolved: SPLIT_BRAIN, the caller disconnects.
 * 7. Refusals: a sync source whose disk is Inconsistent (no good data
 *    to send), and a primary with Consistent or better data that would
 *    become sync target (its users would see data change under them;
 *    DRBD's rr-conflict=violently, which allows it, is not offered).
 *
 * The defaults (a zeroed DrbdHandshakeConfig) never resolve a split
 * brain in which each side has changes (or a primary has none): every
 * after-sb option is disconnect.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef BLOCK_DRBD_UUID_H
#define BLOCK_DRBD_UUID_H

#include "qapi/error.h"

/* The current UUID of a device that has never held data */
#define DRBD_UUID_JUST_CREATED  4ULL

/*
 * The current UUID of a freshly created image: its data are all zeroes,
 * the same generation as any other fresh image of its size, so that two
 * new images start in sync without a full resync.  (DRBD's "just
 * created" UUID, 4, names no data and asks for a full resync instead.)
 */
#define DRBD_UUID_ZEROED        0x5a45524f45440000ULL   /* "ZEROED" */

/* Lowest bit of a UUID: set in the current UUID while primary */
#define DRBD_UUID_PRIMARY_FLAG  1ULL

#define DRBD_UUID_HISTORY       2

typedef struct DrbdUuids {
    uint64_t current;
    uint64_t bitmap;
    uint64_t history[DRBD_UUID_HISTORY];   /* newest first */
} DrbdUuids;

/*
 * What the UUIDs alone say, from this node's point of view.  The values
 * are DRBD's, so that the magnitude means something: 1 bitmap-based
 * resync, 2 full resync, positive we are source, negative target.
 */
typedef enum DrbdUuidCmp {
    DRBD_UUID_CMP_UNRELATED         = -1000,
    DRBD_UUID_CMP_SPLIT_BRAIN_FULL  = -100,     /* rule 100 */
    DRBD_UUID_CMP_FULL_TARGET       = -2,
    DRBD_UUID_CMP_TARGET            = -1,
    DRBD_UUID_CMP_EQUAL             = 0,
    DRBD_UUID_CMP_SOURCE            = 1,
    DRBD_UUID_CMP_FULL_SOURCE       = 2,
    DRBD_UUID_CMP_SPLIT_BRAIN       = 100,      /* rule 90 */
} DrbdUuidCmp;

/* The outcome of the connect-time handshake, from this node's view */
typedef enum DrbdSyncDecision {
    DRBD_SYNC_NONE,             /* in sync: connected, no resync */
    DRBD_SYNC_SOURCE,           /* bitmap-based resync, we are source */
    DRBD_SYNC_TARGET,           /* bitmap-based resync, we are target */
    DRBD_SYNC_FULL_SOURCE,      /* full resync, we are source */
    DRBD_SYNC_FULL_TARGET,      /* full resync, we are target */
    DRBD_SYNC_SPLIT_BRAIN,      /* unresolved split brain: disconnect */
    DRBD_SYNC_UNRELATED,        /* no common data: disconnect */
    DRBD_SYNC_INCONSISTENT_SOURCE, /* the source would have no good data */
    DRBD_SYNC_PRIMARY_TARGET,   /* a primary would become target */
    DRBD_SYNC__MAX,
} DrbdSyncDecision;

/* Whether decision @d makes this node the sync target, by bitmap or in full */
static inline bool drbd_sync_is_target(DrbdSyncDecision d)
{
    return d == DRBD_SYNC_TARGET || d == DRBD_SYNC_FULL_TARGET;
}

/* Whether decision @d makes this node the sync source */
static inline bool drbd_sync_is_source(DrbdSyncDecision d)
{
    return d == DRBD_SYNC_SOURCE || d == DRBD_SYNC_FULL_SOURCE;
}

/*
 * The after-sb-0pri, after-sb-1pri and after-sb-2pri options (DRBD's
 * names; call-pri-lost-after-sb is not implemented).  0 is disconnect,
 * so that a zeroed configuration resolves nothing.  "Changes" are the
 * bits set in a node's out-of-sync bitmap; a tie of discard-zero-changes
 * (both 0) or discard-least-changes goes against the node that resolves
 * conflicts.  discard-younger-primary and discard-older-primary fall
 * back on discard-zero-changes, then discard-least-changes, when both
 * or neither node was primary at the split.
 */
typedef enum DrbdAfterSbPolicy {
    DRBD_ASB_DISCONNECT,                /* 0, 1, 2: leave unresolved */
    DRBD_ASB_DISCARD_YOUNGER_PRIMARY,   /* 0: the later primary loses */
    DRBD_ASB_DISCARD_OLDER_PRIMARY,     /* 0: the earlier primary loses */
    DRBD_ASB_DISCARD_ZERO_CHANGES,      /* 0: a side with no changes */
    DRBD_ASB_DISCARD_LEAST_CHANGES,     /* 0: the side with fewer */
    DRBD_ASB_DISCARD_LOCAL,             /* 0: this node loses */
    DRBD_ASB_DISCARD_REMOTE,            /* 0: the peer loses */
    DRBD_ASB_DISCARD_SECONDARY,         /* 1: the secondary loses */
    DRBD_ASB_CONSENSUS,                 /* 1: 0pri, if the secondary loses */
    DRBD_ASB_VIOLENTLY_AS0P,            /* 1, 2: 0pri, even if a primary */
    DRBD_ASB__MAX,
} DrbdAfterSbPolicy;

/* How a split brain ended, in a DrbdHandshakeResult */
typedef enum DrbdSbResolution {
    DRBD_SB_NONE,               /* there was no split brain */
    DRBD_SB_UNRESOLVED,         /* decision is DRBD_SYNC_SPLIT_BRAIN */
    DRBD_SB_BY_POLICY,          /* an after-sb policy picked the loser */
    DRBD_SB_BY_DISCARD_MY_DATA, /* the operator's flag picked it */
    DRBD_SB_BY_NO_CHANGES,      /* a secondary without changes lost */
    DRBD_SB__MAX,
} DrbdSbResolution;

/*
 * Disk states as the handshake needs them, in increasing order of
 * goodness.  From DrbdDiskState (qapi/drbd.json): attaching and failed
 * are DISKLESS, dunknown is not a state of one's own disk.
 */
typedef enum DrbdHandshakeDisk {
    DRBD_HS_DISK_DISKLESS,
    DRBD_HS_DISK_INCONSISTENT,
    DRBD_HS_DISK_OUTDATED,
    DRBD_HS_DISK_CONSISTENT,
    DRBD_HS_DISK_UP_TO_DATE,
} DrbdHandshakeDisk;

/* What the handshake knows of one node (sent by the peer for its side) */
typedef struct DrbdHandshakeSide {
    DrbdUuids uuids;
    DrbdHandshakeDisk disk;
    bool primary;               /* its role now */
    bool crashed_primary;       /* it stopped while primary, not demoted */
    uint64_t changes;           /* bits set in its out-of-sync bitmap */
    bool discard_my_data;       /* the operator's "connect, discard mine" */
} DrbdHandshakeSide;

/* This node's resync options; zeroed, it resolves no split brain */
typedef struct DrbdHandshakeConfig {
    DrbdAfterSbPolicy after_sb_0pri;
    DrbdAfterSbPolicy after_sb_1pri;
    DrbdAfterSbPolicy after_sb_2pri;
    /*
     * A resource of two nodes: a split brain that nothing else resolves
     * makes a secondary without changes since the split (no bit in its
     * bitmap) the sync target.  Not with more nodes: a secondary's bitmap
     * toward one peer does not count the writes it took from another.
     */
    bool idle_secondary_loses;
} DrbdHandshakeConfig;

typedef struct DrbdHandshakeResult {
    DrbdSyncDecision decision;
    DrbdUuidCmp uuid_cmp;       /* what the UUIDs alone said */
    int rule;                   /* the rule of the table that said it */
    bool views_disagree;        /* step 1 forced UNRELATED */
    bool by_disk_state;         /* step 2 overrode the UUIDs */
    DrbdSbResolution resolution;
    int primaries;              /* split brain: which after-sb option */
    DrbdAfterSbPolicy policy;   /* its value, if consulted */
} DrbdHandshakeResult;

/*
 * Compare @self's UUIDs with the @peer's by the table above and return
 * its answer, with the number of the rule that gave it in @rule.
 * @self_crashed_primary and @peer_crashed_primary say which node
 * stopped while primary (rule 40); @self_resolves_conflicts
 * is true on exactly one of the two nodes (the one with the lower node
 * id) and breaks the tie of rule 40 when both crashed as primary: that
 * node becomes target.  The UUIDs are not changed: see
 * drbd_uuid_repair().
 */
DrbdUuidCmp drbd_uuid_compare(const DrbdUuids *self, const DrbdUuids *peer,
                              bool self_crashed_primary,
                              bool peer_crashed_primary,
                              bool self_resolves_conflicts, int *rule);

/*
 * Apply the correction that rule @rule of drbd_uuid_compare() calls for
 * (34 and 71 change @self, 35 and 51 change @peer, the copy of the peer's
 * UUIDs that this node keeps); call it before the resync starts, so that
 * the resync ends with the UUIDs that the one whose end was not recorded
 * on both nodes would have left.  Returns whether anything changed.
 */
bool drbd_uuid_repair(int rule, DrbdUuids *self, DrbdUuids *peer);

/*
 * Decide, at connect time, what happens between this node @self and the
 * @peer (see "The handshake" above), with this node's @cfg and
 * @self_resolves_conflicts as for drbd_uuid_compare().  With a side
 * that has no disk there is nothing to compare: the result is
 * DRBD_SYNC_NONE by rule 0.  Fills @res and returns res->decision.
 * The two nodes, each with its own view and compatible configurations
 * (drbd_handshake_config_compatible()), reach mirrored decisions.
 * Nothing is changed: when a resync follows, call drbd_uuid_repair()
 * with res->rule first.
 */
DrbdSyncDecision drbd_sync_handshake(const DrbdHandshakeSide *self,
                                     const DrbdHandshakeSide *peer,
                                     bool self_resolves_conflicts,
                                     const DrbdHandshakeConfig *cfg,
                                     DrbdHandshakeResult *res);

/*
 * Whether @policy may be used for after-sb-@which_pri (0, 1 or 2), as
 * DRBD documents:
 *   0pri: disconnect, discard-younger-primary, discard-older-primary,
 *         discard-zero-changes, discard-least-changes, discard-local,
 *         discard-remote
 *   1pri: disconnect, consensus, violently-as0p, discard-secondary
 *   2pri: disconnect, violently-as0p
 * The handshake treats a policy that is not valid for its option as
 * disconnect.
 */
bool drbd_after_sb_policy_valid(int which_pri, DrbdAfterSbPolicy policy);

/*
 * Whether this node's @self and the peer's @peer policy for the same
 * option agree: equal, or discard-local on one side and discard-remote
 * on the other.
 */
bool drbd_after_sb_policies_compatible(DrbdAfterSbPolicy self,
                                       DrbdAfterSbPolicy peer);

/*
 * Check, when the nodes exchange their options, that the handshake on
 * both will reach mirrored decisions: the three after-sb options
 * compatible.  Fails with
 * -EINVAL and @errp set, naming the option that differs.
 */
int drbd_handshake_config_compatible(const DrbdHandshakeConfig *self,
                                     const DrbdHandshakeConfig *peer,
                                     Error **errp);

/* Names for traces, QMP and options; "unknown" for a bad value */
const char *drbd_uuid_cmp_str(DrbdUuidCmp c);
const char *drbd_sync_decision_str(DrbdSyncDecision d);
const char *drbd_sb_resolution_str(DrbdSbResolution r);
const char *drbd_after_sb_policy_str(DrbdAfterSbPolicy p);

/*
 * Parse the value @str of option after-sb-@which_pri (0, 1 or 2) into
 * @policy.  An unknown name, or one not valid for that option, fails
 * with -EINVAL, @errp listing the valid names, and @policy unchanged.
 */
int drbd_after_sb_policy_parse(int which_pri, const char *str,
                               DrbdAfterSbPolicy *policy, Error **errp);

/*
 * Life cycle of the UUIDs.  Each function is one event of DRBD's life
 * cycle; @fresh is a random value from the caller.  The flag bit of
 * @fresh is ignored, and a @fresh that would be 0 or "just created"
 * without it gets its top bit set.
 */

/* A device just created: current "just created", all else 0 */
void drbd_uuid_init(DrbdUuids *u);

/*
 * Start a new data generation: current becomes @fresh (flag bit as the
 * old current had it).  If the bitmap UUID is 0, the old current becomes
 * the bitmap UUID, the generation the peer still has; if it is set, it
 * stays, since the bitmap already counts from that older generation.
 * "Just created" is not kept as a bitmap UUID: it names no data.
 */
void drbd_uuid_new_current(DrbdUuids *u, uint64_t fresh);

/*
 * Promotion to primary.  If the peer's disk will not get our writes
 * (@peer_disk_up_to_date false: disconnected, or its disk is not
 * UpToDate), or if @force (promotion of data that is not UpToDate),
 * start a new generation first.  Then set the flag bit.  Returns whether
 * a new generation started.
 *
 * Unlike DRBD, a new generation starts even if a bitmap UUID is set
 * already (the bitmap UUID stays).  DRBD skips it then, which loses
 * writes silently in one case: a sync source that missed the end of the
 * resync (rule 34) and writes alone, while the target, primary, moves
 * on; at the next connect the source looks unchanged (rule 50 in its
 * view, 70 in the target's) and becomes target.  With a new generation
 * that case is a split brain (rule 100).
 */
bool drbd_uuid_promote(DrbdUuids *u, bool peer_disk_up_to_date, bool force,
                       uint64_t fresh);

/* Demotion to secondary: clear the flag bit */
void drbd_uuid_demote(DrbdUuids *u);

/*
 * The peer's disk stops receiving our writes (connection lost, or the
 * peer's disk failed) while writes go on here (@writes_continue: this
 * node or the peer is primary, and our disk is UpToDate): start a new
 * generation (whatever the bitmap UUID, as drbd_uuid_promote()).
 * Returns whether it did.
 */
/*
 * A primary peer started the data generation @current, which this node
 * (in sync with it, receiving its writes) joins: the old current UUID
 * moves to the history, so that a node still in the old generation is
 * known to be behind.  The primary flag of @current is the sender's, not
 * ours.  Nothing changes if @current is ours already.
 */
void drbd_uuid_join(DrbdUuids *u, uint64_t current);

bool drbd_uuid_peer_disk_lost(DrbdUuids *u, bool writes_continue,
                              uint64_t fresh);

/*
 * The data generations a node has heard of, newest last: those that
 * primaries announced (NEW_UUID, a handshake with a primary) and those
 * it started as primary.  A diskless node, which keeps no UUIDs of its
 * own, answers from these whether a node that asks to be promoted is
 * behind.
 */
#define DRBD_GEN_SEEN_MAX   4
typedef struct DrbdGenSeen {
    uint64_t gen[DRBD_GEN_SEEN_MAX];    /* oldest first */
    unsigned n;
} DrbdGenSeen;

/* @uuid is the newest generation heard of (nothing if it names no data) */
void drbd_gen_seen_push(DrbdGenSeen *g, uint64_t uuid);

/*
 * Whether a node whose current UUID is @uuid is known to lack data that
 * a newer generation holds: @uuid (its primary flag aside) is not the
 * newest of @g, and is a generation that this node knows to be older -
 * in the history or a bitmap UUID of @u (@u: NULL for a node without
 * data) and not @u's current, or heard of before the newest of @g.  A
 * generation unknown here (newer, or unrelated: a handshake tells) is
 * not.
 */
bool drbd_uuid_known_older(const DrbdUuids *u, const uint64_t *bitmaps,
                           unsigned nr_bitmaps, const DrbdGenSeen *g,
                           uint64_t uuid);

/*
 * End of a successful resync.  A resync changes no UUID before its end:
 * unlike DRBD, the sync source makes no sync UUID when it starts.  At the
 * end, on the source, the bitmap UUID moves to history[0] (history[0] to
 * history[1]) and becomes 0.  The target takes over the source's
 * generation: it applies this function to the UUIDs that the source sent
 * in the handshake that started the resync (as drbd_uuid_repair() left
 * its copy of them), and keeps its own flag bit.  Both nodes then have the
 * same UUIDs, but for that bit.
 */
void drbd_uuid_resync_finished_source(DrbdUuids *u);

/* Whether @uuid (its flag bit aside) names data, and @u holds it */
bool drbd_uuid_holds(const DrbdUuids *u, uint64_t uuid);

/*
 * End of a successful resync on its target, whose UUIDs are @u: it takes
 * over the source's generation as drbd_uuid_resync_finished_source()
 * describes, from @source (our copy of the source's UUIDs).
 * Unless the target wrote, as primary, in a generation of its own during
 * the resync: @target_gen, which it was in at the handshake (as primary)
 * or started since (promoted without all its peers, or a peer lost), and
 * which the source knew nothing of (a generation @source holds, such as
 * a stale one that the target's promotion kept, is the source's).  Its
 * writes since went to the source as well: so the target keeps its
 * current UUID if it is still @target_gen, the source's current becomes
 * its bitmap UUID (the generation its writes count from, as if it had
 * been in sync) and the rest is the source's.  The source joins
 * @target_gen when told of it (drbd_uuid_target_gen_new(): from version
 * 10 at once, before at its end of the resync,
 * drbd_uuid_resync_finished_source_joins()); if it was not, the bitmap
 * UUID makes the target its source by bitmap at their next handshake.
 * Returns whether the target kept its own generation.
 */
bool drbd_uuid_resync_finished_target(DrbdUuids *u, const DrbdUuids *source,
                                      uint64_t target_gen);

/*
 * Whether a sync source with UUIDs @u joins @target_gen, the generation
 * its primary target writes in: it names data that @u does not hold (a
 * stale generation that the target's promotion kept is the source's
 * already).  From version 10 the source joins it as soon as it learns
 * of it, since the target's writes in it reach the source, whose data
 * then is that generation's; before, at the resync's end.
 */
bool drbd_uuid_target_gen_new(const DrbdUuids *u, uint64_t target_gen);

/*
 * End of a successful resync on its source, @u: as
 * drbd_uuid_resync_finished_source(), and then it joins @target_gen, the
 * generation its target wrote in as primary during the resync (0 if
 * none), if @u does not hold it already.  Returns whether it joined.
 */
bool drbd_uuid_resync_finished_source_joins(DrbdUuids *u,
                                            uint64_t target_gen);

#endif /* BLOCK_DRBD_UUID_H */
