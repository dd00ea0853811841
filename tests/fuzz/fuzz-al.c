/*
 * Fuzz target: the activity-log transaction parser and the recovery of
 * the hot set from the ring (block/drbd/md-format.c)
 *
 * Input:
 *
 *   1 byte     bit i: seal block i of the ring (store its right
 *              checksum) so that the decoders look past the checksum
 *   2 bytes    al_extents, the slots of the device (big-endian)
 *   1 byte     the blocks of the ring: 2 + (value % 7)
 *   then       the ring: up to 8 blocks of 4096 bytes, zero-padded (a
 *              zero block is one never written)
 *
 * The rest of the input, as it is, is decoded first as one transaction
 * (the length check).  Checked: a transaction that decodes has its
 * fields in range and encodes back to the same block; a recovery that
 * succeeds names each extent in one slot at most, reports the newest
 * transaction of the ring, or nothing for a ring without one.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "../../block/drbd/md-format.h"
#include "fuzz.h"

#define BLOCK       DRBD_MD_BLOCK_SIZE
#define RING_BLOCKS DRBD_MD_AL_BLOCKS
#define TR_CRC      4

/* Decode one block; on success check it and return its number */
static bool check_block(const uint8_t *blk, uint64_t *tr_number,
                        uint32_t *al_extents)
{
    g_autofree DrbdAlTransaction *tr = g_new(DrbdAlTransaction, 1);
    g_autofree uint8_t *again = g_malloc(BLOCK);
    Error *err = NULL;
    size_t i;

    if (drbd_al_tr_decode(blk, BLOCK, tr, &err) < 0) {
        assert(err && *error_get_pretty(err));
        error_free(err);
        return false;
    }
    assert(tr->al_extents >= DRBD_AL_EXTENTS_MIN &&
           tr->al_extents <= DRBD_AL_EXTENTS_MAX);
    assert(tr->n_updates <= DRBD_AL_MAX_UPDATES);
    assert(tr->context_size <= DRBD_AL_MAX_CONTEXT &&
           tr->context_size <= tr->al_extents);
    assert(tr->context_start < tr->al_extents);
    for (i = 0; i < tr->n_updates; i++) {
        assert(tr->updates[i].slot < tr->al_extents);
    }

    drbd_al_tr_encode(tr, again);
    assert(memcmp(again, blk, BLOCK) == 0);
    *tr_number = tr->tr_number;
    *al_extents = tr->al_extents;
    return true;
}

static void check_context(uint32_t al_extents, uint32_t al_blocks)
{
    uint32_t start, size;
    uint64_t tr;

    if (al_extents < 1 ||
        al_extents > (uint64_t)(al_blocks - 1) * DRBD_AL_MAX_CONTEXT) {
        return;
    }
    for (tr = 0; tr < al_blocks; tr++) {
        drbd_al_next_context(tr, al_extents, al_blocks, &start, &size);
        assert(start < al_extents);
        assert(size >= 1 && size <= DRBD_AL_MAX_CONTEXT);
        /* al_blocks - 1 transactions carry every slot */
        assert((uint64_t)size * (al_blocks - 1) >= al_extents);
    }
}

DRBD_FUZZ_TARGET(al)
{
    FuzzInput in = { data, size };
    const uint8_t *head = fuzz_take(&in, 4);
    g_autofree uint8_t *raw = NULL;
    g_autofree uint8_t *ring = NULL;
    g_autofree uint32_t *slots = NULL;
    g_autofree DrbdAlTransaction *tr = g_new(DrbdAlTransaction, 1);
    g_autoptr(GHashTable) seen = g_hash_table_new(NULL, NULL);
    uint32_t al_extents, al_blocks, i;
    uint64_t newest = 0, last_tr;
    bool any = false, found;
    Error *err = NULL;
    size_t raw_len;

    if (!head) {
        return 0;
    }
    al_extents = lduw_be_p(head + 1);
    al_blocks = 2 + head[3] % (RING_BLOCKS - 1);

    /* The rest as it is: any length but a block's is refused */
    raw_len = in.len;
    if (!fuzz_take_copy(&in, raw_len, &raw)) {
        abort();
    }
    if (drbd_al_tr_decode(raw, raw_len, tr, &err) < 0) {
        assert(err);
        error_free(err);
        err = NULL;
    } else {
        assert(raw_len == BLOCK);
    }

    ring = g_malloc0(RING_BLOCKS * BLOCK);
    if (raw_len) {
        memcpy(ring, raw, MIN(raw_len, RING_BLOCKS * BLOCK));
    }
    for (i = 0; i < RING_BLOCKS; i++) {
        uint8_t *blk = ring + i * BLOCK;
        uint32_t extents;
        uint64_t number;

        if (head[0] & (1u << i)) {
            fuzz_seal_block(blk, TR_CRC);
        }
        /* What the recovery will find in the blocks it looks at */
        if (check_block(blk, &number, &extents) && i < al_blocks) {
            newest = any ? MAX(newest, number) : number;
            any = true;
        }
    }

    check_context(al_extents, al_blocks);
    slots = g_new(uint32_t, MAX(al_extents, 1));
    if (drbd_al_recover(ring, al_blocks * BLOCK, al_extents, al_blocks,
                        slots, &last_tr, &found, &err) < 0) {
        assert(err && *error_get_pretty(err));
        error_free(err);
        return 0;
    }
    assert(!err);
    assert(found == any);
    assert(last_tr == (any ? newest : 0));
    for (i = 0; i < al_extents; i++) {
        if (slots[i] == DRBD_AL_EXTENT_NONE) {
            continue;
        }
        assert(found);
        /* one slot per extent */
        assert(g_hash_table_add(seen, GUINT_TO_POINTER(slots[i])));
    }
    return 0;
}
