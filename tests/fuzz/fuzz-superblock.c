/*
 * Fuzz target: the superblock parser (block/drbd/md-format.c)
 *
 * Input:
 *
 *   1 byte     bit 0: seal the block (store its right checksum) so that
 *              the decoder looks past the checksum at the fields
 *   8 bytes    the length of the image the block was read from
 *              (big-endian), for the layout check
 *   then       the block: up to 4096 bytes, zero-padded
 *
 * The rest of the input, as it is, is decoded first (the length check).
 * Checked: a superblock that decodes has every field in its range (its
 * bitmap slots too: at most 31, each for another node, none twice),
 * encodes back to the same bytes (but for the checksum and the reserved
 * bytes, which the decoder ignores) and the same fields; one whose layout
 * passes has every region inside the image, aligned and apart; and the
 * layouts that drbd_md_layout_internal() and _external() compute for
 * its size pass the same check.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "../../block/drbd/md-format.h"
#include "fuzz.h"

#define BLOCK           DRBD_MD_BLOCK_SIZE
#define SB_CRC          8
#define SB_RESERVED     112
#define SB_MAX_PEERS    112
#define SB_SLOTS        120
#define SB_SLOT_SIZE    16
#define AL_BYTES        (DRBD_MD_AL_BLOCKS * BLOCK)

static bool sb_equal(const DrbdSuperblock *a, const DrbdSuperblock *b)
{
    return a->version == b->version && a->placement == b->placement &&
           a->flags == b->flags && a->data_size == b->data_size &&
           a->bm_offset == b->bm_offset && a->al_offset == b->al_offset &&
           a->bm_block_size == b->bm_block_size &&
           a->al_extents == b->al_extents && a->al_blocks == b->al_blocks &&
           a->node_id == b->node_id && a->device_uuid == b->device_uuid &&
           a->uuid_current == b->uuid_current &&
           a->uuid_bitmap == b->uuid_bitmap &&
           a->uuid_history[0] == b->uuid_history[0] &&
           a->uuid_history[1] == b->uuid_history[1] &&
           a->al_tr_number == b->al_tr_number &&
           a->max_peers == b->max_peers &&
           !memcmp(a->slots, b->slots, a->max_peers * sizeof(a->slots[0]));
}

static bool apart(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return a + alen <= b || b + blen <= a;
}

/* What drbd_md_layout_check() promises of a layout it passed */
static void check_layout(const DrbdMdLayout *l, const DrbdSuperblock *sb,
                         uint64_t image_len)
{
    uint64_t bm_bytes = drbd_md_bm_bytes(l->data_size);
    uint64_t bm_total = sb->max_peers * bm_bytes;

    assert(l->placement == sb->placement);
    assert(l->data_size == sb->data_size);
    assert(l->image_size == image_len);
    assert(l->bm_bytes == bm_bytes);
    assert(l->bm_bytes * 8 >= drbd_md_bm_bits(l->data_size));
    assert(image_len % BLOCK == 0 && image_len >= BLOCK);
    assert(l->sb_offset == (l->placement == DRBD_MD_INTERNAL ?
                            image_len - BLOCK : 0));
    assert(l->al_offset % BLOCK == 0 && l->bm_offset % BLOCK == 0);
    assert(l->al_offset <= image_len &&
           AL_BYTES <= image_len - l->al_offset);
    assert(l->max_peers == sb->max_peers);
    assert(l->bm_offset <= image_len &&
           bm_total <= image_len - l->bm_offset);
    assert(apart(l->sb_offset, BLOCK, l->al_offset, AL_BYTES));
    assert(apart(l->sb_offset, BLOCK, l->bm_offset, bm_total));
    assert(apart(l->al_offset, AL_BYTES, l->bm_offset, bm_total));
    if (l->placement == DRBD_MD_INTERNAL) {
        assert(l->data_size <= l->sb_offset);
        assert(l->data_size <= l->al_offset);
        assert(l->data_size <= l->bm_offset);
    }
}

/* A fresh superblock for a computed layout passes its own checks */
static void check_fresh(const DrbdMdLayout *l)
{
    uint8_t *blk = g_malloc(BLOCK);
    DrbdSuperblock sb, back;
    DrbdMdLayout checked;

    drbd_md_sb_init(&sb, l, 1, 0x1234);
    drbd_md_sb_encode(&sb, blk);
    if (drbd_md_sb_decode(blk, BLOCK, &back, &error_abort) < 0 ||
        drbd_md_layout_check(&back, l->image_size, &checked,
                             &error_abort) < 0) {
        abort();
    }
    assert(sb_equal(&sb, &back));
    check_layout(&checked, &back, l->image_size);
    assert(checked.sb_offset == l->sb_offset);
    g_free(blk);
}

DRBD_FUZZ_TARGET(superblock)
{
    FuzzInput in = { data, size };
    const uint8_t *flags = fuzz_take(&in, 1);
    const uint8_t *lenp = fuzz_take(&in, 8);
    g_autofree uint8_t *raw = NULL;
    g_autofree uint8_t *blk = NULL;
    g_autofree uint8_t *again = NULL;
    g_autofree char *flag_names = NULL;
    DrbdSuperblock sb, back;
    DrbdMdLayout layout;
    Error *err = NULL;
    uint64_t image_len;
    size_t raw_len;
    uint32_t i, j;

    if (!lenp) {
        return 0;
    }
    image_len = ldq_be_p(lenp);

    /* The rest as it is: any length but a block's is refused */
    raw_len = in.len;
    if (!fuzz_take_copy(&in, raw_len, &raw)) {
        abort();
    }
    if (drbd_md_sb_decode(raw, raw_len, &sb, &err) < 0) {
        assert(err && *error_get_pretty(err));
        error_free(err);
        err = NULL;
    } else {
        assert(raw_len == BLOCK);
    }

    blk = g_malloc0(BLOCK);
    if (raw_len) {
        memcpy(blk, raw, MIN(raw_len, BLOCK));
    }
    if (*flags & 1) {
        fuzz_seal_block(blk, SB_CRC);
    }
    if (drbd_md_sb_decode(blk, BLOCK, &sb, &err) < 0) {
        assert(err && *error_get_pretty(err));
        error_free(err);
        return 0;
    }

    assert(sb.version == (sb.max_peers > 1 ? DRBD_MD_VERSION_SLOTS :
                                            DRBD_MD_VERSION));
    assert(drbd_md_max_peers_valid(sb.max_peers, NULL) == 0);
    for (i = 0; i < sb.max_peers; i++) {
        uint32_t id = sb.slots[i].node_id;

        assert(id == DRBD_MD_SLOT_FREE || (id <= 31 && id != sb.node_id));
        for (j = 0; j < i; j++) {
            assert(id == DRBD_MD_SLOT_FREE || sb.slots[j].node_id != id);
        }
    }
    assert(sb.placement == DRBD_MD_INTERNAL ||
           sb.placement == DRBD_MD_EXTERNAL);
    assert(!(sb.flags & ~DRBD_MDF_ALL));
    assert(sb.data_size && sb.data_size % DRBD_MD_DATA_ALIGN == 0 &&
           sb.data_size <= DRBD_MD_MAX_DATA_SIZE);
    assert(sb.bm_block_size == DRBD_MD_BM_BLOCK_SIZE);
    assert(sb.al_blocks == DRBD_MD_AL_BLOCKS);
    assert(drbd_al_extents_valid(sb.al_extents, NULL) == 0);
    flag_names = drbd_md_flags_str(sb.flags);

    /* Encoded again: the same fields, and the same bytes but the ignored */
    again = g_malloc(BLOCK);
    drbd_md_sb_encode(&sb, again);
    assert(memcmp(again, blk, SB_CRC) == 0);
    assert(memcmp(again + SB_CRC + 4, blk + SB_CRC + 4,
                  SB_RESERVED - SB_CRC - 4) == 0);
    if (sb.version == DRBD_MD_VERSION_SLOTS) {
        /* max_peers, and each slot's node id and (but slot 0) UUID */
        assert(memcmp(again + SB_MAX_PEERS, blk + SB_MAX_PEERS, 4) == 0);
        for (i = 0; i < sb.max_peers; i++) {
            const size_t slot = SB_SLOTS + i * SB_SLOT_SIZE;

            assert(memcmp(again + slot, blk + slot, 4) == 0);
            assert(!i || memcmp(again + slot + 8, blk + slot + 8, 8) == 0);
        }
    }
    if (drbd_md_sb_decode(again, BLOCK, &back, &error_abort) < 0) {
        abort();
    }
    assert(sb_equal(&sb, &back));

    if (drbd_md_layout_check(&sb, image_len, &layout, &err) < 0) {
        assert(err && *error_get_pretty(err));
        error_free(err);
        err = NULL;
    } else {
        check_layout(&layout, &sb, image_len);
    }

    /* The layouts made for this size pass the check of what is read */
    if (drbd_md_layout_internal(sb.data_size, sb.al_extents, sb.max_peers,
                                &layout, &error_abort) < 0) {
        abort();
    }
    check_fresh(&layout);
    if (drbd_md_layout_external(sb.data_size, sb.al_extents, sb.max_peers,
                                &layout, &error_abort) < 0) {
        abort();
    }
    check_fresh(&layout);
    return 0;
}
