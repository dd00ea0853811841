/*
 * DRBD-style replication: the on-disk metadata format
 *
 * See docs/interop/drbd-metadata.rst for the format.  Every integer is
 * big-endian but the bitmap's.  Decoders look at nothing beyond the
 * length they are given and fill in their output only when they succeed.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/cutils.h"
#include "qemu/bswap.h"
#include "qemu/crc32c.h"
#include "qapi/error.h"
#include "md-format.h"

/* Superblock */
#define SB_MAGIC                0
#define SB_VERSION              4
#define SB_CRC                  8
#define SB_PLACEMENT            12
#define SB_FLAGS                16
#define SB_DATA_SIZE            24
#define SB_BM_OFFSET            32
#define SB_AL_OFFSET            40
#define SB_BM_BLOCK_SIZE        48
#define SB_AL_EXTENTS           52
#define SB_AL_BLOCKS            56
#define SB_NODE_ID              60
#define SB_DEVICE_UUID          64
#define SB_UUID_CURRENT         72
#define SB_UUID_BITMAP          80
#define SB_UUID_HISTORY         88
#define SB_AL_TR_NUMBER         104
#define SB_RESERVED             112     /* version 1: reserved from here */
/* Version 2: the bitmap slots */
#define SB_MAX_PEERS            112
#define SB_SLOTS                120
#define SB_SLOT_SIZE            16
#define SB_SLOT_NODE_ID         0
#define SB_SLOT_BITMAP_UUID     8
/* Both versions: past the largest slot table */
#define SB_PARTIAL_UUID         616

QEMU_BUILD_BUG_ON(SB_SLOTS + DRBD_MD_MAX_PEERS * SB_SLOT_SIZE >
                  SB_PARTIAL_UUID);

/* Activity-log transaction */
#define TR_MAGIC                0
#define TR_CRC                  4
#define TR_NUMBER               8
#define TR_AL_EXTENTS           16
#define TR_N_UPDATES            20
#define TR_CONTEXT_SIZE         22
#define TR_CONTEXT_START        24
#define TR_RESERVED             28
#define TR_UPDATES              32
#define TR_UPDATE_SIZE          8
#define TR_UPDATE_SLOT          0
#define TR_UPDATE_EXTENT        4
#define TR_CONTEXT              (TR_UPDATES + \
                                 DRBD_AL_MAX_UPDATES * TR_UPDATE_SIZE)

#define BLOCK                   DRBD_MD_BLOCK_SIZE
#define AL_BYTES                (DRBD_MD_AL_BLOCKS * BLOCK)

QEMU_BUILD_BUG_ON(SB_RESERVED != SB_AL_TR_NUMBER + 8);
QEMU_BUILD_BUG_ON(SB_SLOTS + DRBD_MD_MAX_PEERS * SB_SLOT_SIZE >
                  DRBD_MD_BLOCK_SIZE);
QEMU_BUILD_BUG_ON(TR_CONTEXT != 544);
QEMU_BUILD_BUG_ON(TR_CONTEXT + DRBD_AL_MAX_CONTEXT * 4 != BLOCK);
QEMU_BUILD_BUG_ON(DRBD_AL_EXTENTS_MAX != 6216);
QEMU_BUILD_BUG_ON(DRBD_AL_MAX_CONTEXT > UINT16_MAX);
QEMU_BUILD_BUG_ON(DRBD_MD_BLOCK_SIZE % 8 != 0);
/* every extent number of the largest device is below EXTENT_NONE */
QEMU_BUILD_BUG_ON(DRBD_MD_MAX_DATA_SIZE / DRBD_AL_EXTENT_SIZE >=
                  DRBD_AL_EXTENT_NONE);

static const char *const flag_names[] = {
    "consistent",
    "primary-ind",
    "connected-ind",
    "full-sync",
    "was-up-to-date",
    "peer-outdated",
    "crashed-primary",
    "al-clean",
    NULL,                   /* DRBD's al-disabled */
    "primary-lost-quorum",
};

QEMU_BUILD_BUG_ON(DRBD_MDF_ALL >> ARRAY_SIZE(flag_names) ||
                  !(DRBD_MDF_ALL >> (ARRAY_SIZE(flag_names) - 1)));

/*
 * CRC-32C of a whole block with the 4 bytes at @crc_off taken as zero,
 * computed without copying the block
 */
static uint32_t block_crc(const uint8_t *buf, size_t crc_off)
{
    static const uint8_t zero[4];
    uint32_t crc;

    crc = crc32c(0xffffffff, buf, crc_off) ^ 0xffffffff;
    crc = crc32c(crc, zero, sizeof(zero)) ^ 0xffffffff;
    return crc32c(crc, buf + crc_off + 4, BLOCK - crc_off - 4);
}

/*
 * Layout
 */

uint64_t drbd_md_bm_bits(uint64_t data_size)
{
    return DIV_ROUND_UP(data_size, DRBD_MD_BM_BLOCK_SIZE);
}

uint64_t drbd_md_bm_bytes(uint64_t data_size)
{
    uint64_t words = DIV_ROUND_UP(drbd_md_bm_bits(data_size), 64);

    return ROUND_UP(words * 8, BLOCK);
}

uint64_t drbd_md_al_extent_count(uint64_t data_size)
{
    return DIV_ROUND_UP(data_size, DRBD_AL_EXTENT_SIZE);
}

static int check_data_size(const char *what, uint64_t data_size,
                           Error **errp)
{
    if (data_size == 0) {
        error_setg(errp, "%s: data size must not be zero", what);
        return -EINVAL;
    }
    if (data_size % DRBD_MD_DATA_ALIGN) {
        error_setg(errp, "%s: data size %" PRIu64 " is not a multiple "
                   "of %d", what, data_size, DRBD_MD_DATA_ALIGN);
        return -EINVAL;
    }
    if (data_size > DRBD_MD_MAX_DATA_SIZE) {
        error_setg(errp, "%s: data size %" PRIu64 " is above the limit "
                   "of %" PRIu64 " bytes", what, data_size,
                   (uint64_t)DRBD_MD_MAX_DATA_SIZE);
        return -EINVAL;
    }
    return 0;
}

int drbd_al_extents_valid(uint32_t n, Error **errp)
{
    if (n < DRBD_AL_EXTENTS_MIN || n > DRBD_AL_EXTENTS_MAX) {
        error_setg(errp, "al-extents must be between %d and %d, not %"
                   PRIu32, DRBD_AL_EXTENTS_MIN, DRBD_AL_EXTENTS_MAX, n);
        return -EINVAL;
    }
    return 0;
}

int drbd_md_max_peers_valid(uint32_t n, Error **errp)
{
    if (n < 1 || n > DRBD_MD_MAX_PEERS) {
        error_setg(errp, "max-peers must be between 1 and %d, not %" PRIu32,
                   DRBD_MD_MAX_PEERS, n);
        return -EINVAL;
    }
    return 0;
}

static int layout_args_valid(uint64_t data_size, uint32_t al_extents,
                             uint32_t max_peers, Error **errp)
{
    if (check_data_size("drbd metadata", data_size, errp) < 0) {
        return -EINVAL;
    }
    if (drbd_md_max_peers_valid(max_peers, errp) < 0) {
        return -EINVAL;
    }
    return drbd_al_extents_valid(al_extents, errp);
}

/*
 * Internal: data | bitmap slots | activity log | superblock, the data at
 * 0 so that the image stays a usable raw disk, the superblock last so
 * that it is found from the length of the image
 */
int drbd_md_layout_internal(uint64_t data_size, uint32_t al_extents,
                            uint32_t max_peers, DrbdMdLayout *out,
                            Error **errp)
{
    DrbdMdLayout l = {
        .placement = DRBD_MD_INTERNAL,
        .data_size = data_size,
        .max_peers = max_peers,
        .al_blocks = DRBD_MD_AL_BLOCKS,
        .al_extents = al_extents,
    };

    if (layout_args_valid(data_size, al_extents, max_peers, errp) < 0) {
        return -EINVAL;
    }
    l.bm_offset = ROUND_UP(data_size, BLOCK);
    l.bm_bytes = drbd_md_bm_bytes(data_size);
    l.al_offset = l.bm_offset + max_peers * l.bm_bytes;
    l.sb_offset = l.al_offset + AL_BYTES;
    l.image_size = l.sb_offset + BLOCK;

    *out = l;
    return 0;
}

/* External: superblock | activity log | bitmap slots, in the meta image */
int drbd_md_layout_external(uint64_t data_size, uint32_t al_extents,
                            uint32_t max_peers, DrbdMdLayout *out,
                            Error **errp)
{
    DrbdMdLayout l = {
        .placement = DRBD_MD_EXTERNAL,
        .data_size = data_size,
        .sb_offset = 0,
        .max_peers = max_peers,
        .al_offset = BLOCK,
        .al_blocks = DRBD_MD_AL_BLOCKS,
        .al_extents = al_extents,
    };

    if (layout_args_valid(data_size, al_extents, max_peers, errp) < 0) {
        return -EINVAL;
    }
    l.bm_offset = l.al_offset + AL_BYTES;
    l.bm_bytes = drbd_md_bm_bytes(data_size);
    l.image_size = l.bm_offset + max_peers * l.bm_bytes;

    *out = l;
    return 0;
}

/*
 * More slots in metadata that exists: the bitmap region grows at its end
 * and whatever follows it moves to where no byte of the old metadata
 * is, so that the old superblock stays valid until the new one is
 * written (internal: the activity log and superblock go past the old end
 * of the image; external: the image grows at its end).
 */
int drbd_md_layout_grow(const DrbdSuperblock *sb, uint64_t image_len,
                        uint32_t max_peers, DrbdMdLayout *out, Error **errp)
{
    DrbdMdLayout l;
    uint64_t bm_end;

    if (drbd_md_layout_check(sb, image_len, &l, errp) < 0 ||
        drbd_md_max_peers_valid(max_peers, errp) < 0) {
        return -EINVAL;
    }
    if (max_peers <= sb->max_peers) {
        error_setg(errp, "drbd metadata: it has %" PRIu32 " bitmap slots "
                   "already; slots can be added, not removed",
                   sb->max_peers);
        return -EINVAL;
    }
    l.max_peers = max_peers;
    bm_end = l.bm_offset + max_peers * l.bm_bytes;
    if (l.placement == DRBD_MD_INTERNAL) {
        l.al_offset = MAX(bm_end, image_len);
        l.sb_offset = l.al_offset + AL_BYTES;
        l.image_size = l.sb_offset + BLOCK;
    } else {
        l.image_size = MAX(bm_end, image_len);
    }
    *out = l;
    return 0;
}

int drbd_md_layout_resize(const DrbdSuperblock *sb, uint64_t image_len,
                          uint64_t data_size, DrbdMdLayout *out,
                          Error **errp)
{
    DrbdMdLayout old, l;
    uint64_t md_start;

    if (drbd_md_layout_check(sb, image_len, &old, errp) < 0 ||
        layout_args_valid(data_size, sb->al_extents, sb->max_peers,
                          errp) < 0) {
        return -EINVAL;
    }
    l = old;
    l.data_size = data_size;
    l.bm_bytes = drbd_md_bm_bytes(data_size);
    if (old.placement == DRBD_MD_EXTERNAL) {
        l.bm_offset = ROUND_UP(image_len, BLOCK);
        l.image_size = l.bm_offset + l.max_peers * l.bm_bytes;
    } else if (data_size >= old.data_size) {
        l.bm_offset = ROUND_UP(MAX(data_size, image_len + BLOCK), BLOCK);
        l.al_offset = l.bm_offset + l.max_peers * l.bm_bytes;
        l.sb_offset = l.al_offset + AL_BYTES;
        l.image_size = l.sb_offset + BLOCK;
    } else {
        if (drbd_md_layout_internal(data_size, sb->al_extents, sb->max_peers,
                                    &l, errp) < 0) {
            return -EINVAL;
        }
        md_start = MIN(old.bm_offset, old.al_offset);
        if (l.image_size > md_start) {
            error_setg(errp, "drbd metadata: the data can shrink by %" PRIu64
                       " bytes at least (the metadata's size), not by %"
                       PRIu64, l.image_size - l.bm_offset,
                       old.data_size - data_size);
            return -EINVAL;
        }
    }
    *out = l;
    return 0;
}

int drbd_md_sb_offset(DrbdMdPlacement placement, uint64_t image_len,
                      uint64_t *offset, Error **errp)
{
    const char *what = placement == DRBD_MD_INTERNAL ? "image" :
                       "metadata image";

    if (placement != DRBD_MD_INTERNAL && placement != DRBD_MD_EXTERNAL) {
        error_setg(errp, "drbd metadata: unknown placement %d", placement);
        return -EINVAL;
    }
    if (image_len < BLOCK) {
        error_setg(errp, "drbd metadata: %s of %" PRIu64 " bytes is too "
                   "small to hold metadata", what, image_len);
        return -EINVAL;
    }
    if (image_len % BLOCK) {
        error_setg(errp, "drbd metadata: %s length %" PRIu64 " is not a "
                   "multiple of %d (was the image resized?)", what,
                   image_len, BLOCK);
        return -EINVAL;
    }
    *offset = placement == DRBD_MD_INTERNAL ? image_len - BLOCK : 0;
    return 0;
}

typedef struct Region {
    const char *name;
    uint64_t offset;
    uint64_t bytes;
} Region;

static int check_region(const Region *r, uint64_t image_len, Error **errp)
{
    if (r->offset % BLOCK) {
        error_setg(errp, "drbd metadata: %s offset %" PRIu64 " is not a "
                   "multiple of %d", r->name, r->offset, BLOCK);
        return -EINVAL;
    }
    if (r->offset > image_len || r->bytes > image_len - r->offset) {
        error_setg(errp, "drbd metadata: %s at offset %" PRIu64 " (%"
                   PRIu64 " bytes) reaches beyond the end of the image (%"
                   PRIu64 " bytes)", r->name, r->offset, r->bytes,
                   image_len);
        return -EINVAL;
    }
    return 0;
}

/* Both regions are known to lie inside the image: no overflow */
static int check_no_overlap(const Region *a, const Region *b, Error **errp)
{
    if (a->offset + a->bytes <= b->offset ||
        b->offset + b->bytes <= a->offset) {
        return 0;
    }
    error_setg(errp, "drbd metadata: %s at offset %" PRIu64 " (%" PRIu64
               " bytes) overlaps the %s at offset %" PRIu64 " (%" PRIu64
               " bytes)", a->name, a->offset, a->bytes, b->name, b->offset,
               b->bytes);
    return -EINVAL;
}

int drbd_md_layout_check(const DrbdSuperblock *sb, uint64_t image_len,
                         DrbdMdLayout *out, Error **errp)
{
    Region r[3];
    uint64_t sb_offset;
    size_t i, j;

    if (drbd_md_sb_offset(sb->placement, image_len, &sb_offset, errp) < 0) {
        return -EINVAL;
    }
    if (check_data_size("drbd metadata", sb->data_size, errp) < 0 ||
        drbd_al_extents_valid(sb->al_extents, errp) < 0) {
        return -EINVAL;
    }
    if (sb->al_blocks != DRBD_MD_AL_BLOCKS) {
        error_setg(errp, "drbd metadata: %" PRIu32 " activity-log blocks "
                   "are not supported (only %d)", sb->al_blocks,
                   DRBD_MD_AL_BLOCKS);
        return -EINVAL;
    }

    r[0] = (Region) { "superblock", sb_offset, BLOCK };
    r[1] = (Region) { "activity log", sb->al_offset, AL_BYTES };
    r[2] = (Region) { "bitmap", sb->bm_offset,
                      sb->max_peers * drbd_md_bm_bytes(sb->data_size) };

    for (i = 0; i < ARRAY_SIZE(r); i++) {
        if (check_region(&r[i], image_len, errp) < 0) {
            return -EINVAL;
        }
    }
    for (i = 0; i < ARRAY_SIZE(r); i++) {
        for (j = i + 1; j < ARRAY_SIZE(r); j++) {
            if (check_no_overlap(&r[i], &r[j], errp) < 0) {
                return -EINVAL;
            }
        }
    }
    if (sb->placement == DRBD_MD_INTERNAL) {
        for (i = 0; i < ARRAY_SIZE(r); i++) {
            if (sb->data_size > r[i].offset) {
                error_setg(errp, "drbd metadata: data (%" PRIu64 " bytes) "
                           "overlaps the %s at offset %" PRIu64,
                           sb->data_size, r[i].name, r[i].offset);
                return -EINVAL;
            }
        }
    }

    if (out) {
        *out = (DrbdMdLayout) {
            .placement = sb->placement,
            .data_size = sb->data_size,
            .image_size = image_len,
            .sb_offset = sb_offset,
            .bm_offset = sb->bm_offset,
            .bm_bytes = r[2].bytes / sb->max_peers,
            .max_peers = sb->max_peers,
            .al_offset = sb->al_offset,
            .al_blocks = sb->al_blocks,
            .al_extents = sb->al_extents,
        };
    }
    return 0;
}

/*
 * Superblock
 */

void drbd_md_sb_init(DrbdSuperblock *sb, const DrbdMdLayout *layout,
                     uint32_t node_id, uint64_t device_uuid)
{
    uint32_t i;

    *sb = (DrbdSuperblock) {
        .version = layout->max_peers > 1 ? DRBD_MD_VERSION_SLOTS :
                   DRBD_MD_VERSION,
        .placement = layout->placement,
        .flags = DRBD_MDF_AL_CLEAN,
        .data_size = layout->data_size,
        .bm_offset = layout->bm_offset,
        .al_offset = layout->al_offset,
        .bm_block_size = DRBD_MD_BM_BLOCK_SIZE,
        .al_extents = layout->al_extents,
        .al_blocks = layout->al_blocks,
        .node_id = node_id,
        .device_uuid = device_uuid,
        .uuid_current = DRBD_MD_UUID_JUST_CREATED,
        .max_peers = layout->max_peers,
    };
    for (i = 0; i < DRBD_MD_MAX_PEERS; i++) {
        sb->slots[i].node_id = DRBD_MD_SLOT_FREE;
    }
}

void drbd_md_sb_relayout(DrbdSuperblock *sb, const DrbdMdLayout *layout)
{
    uint32_t i;

    assert(layout->max_peers >= sb->max_peers &&
           layout->max_peers <= DRBD_MD_MAX_PEERS);
    for (i = sb->max_peers; i < layout->max_peers; i++) {
        sb->slots[i] = (DrbdMdSlot) { .node_id = DRBD_MD_SLOT_FREE };
    }
    sb->version = layout->max_peers > 1 ? DRBD_MD_VERSION_SLOTS :
                  DRBD_MD_VERSION;
    sb->max_peers = layout->max_peers;
    sb->bm_offset = layout->bm_offset;
    sb->al_offset = layout->al_offset;
}

void drbd_md_sb_encode(const DrbdSuperblock *sb, uint8_t *buf)
{
    uint32_t i;

    assert(sb->version == (sb->max_peers > 1 ? DRBD_MD_VERSION_SLOTS :
                                               DRBD_MD_VERSION));
    assert(sb->max_peers >= 1 && sb->max_peers <= DRBD_MD_MAX_PEERS);
    assert(sb->placement == DRBD_MD_INTERNAL ||
           sb->placement == DRBD_MD_EXTERNAL);
    assert(!(sb->flags & ~DRBD_MDF_ALL));
    assert(sb->bm_block_size == DRBD_MD_BM_BLOCK_SIZE);
    assert(sb->al_blocks == DRBD_MD_AL_BLOCKS);

    memset(buf, 0, BLOCK);
    stl_be_p(buf + SB_MAGIC, DRBD_MD_MAGIC);
    stl_be_p(buf + SB_VERSION, sb->version);
    stl_be_p(buf + SB_PLACEMENT, sb->placement);
    stq_be_p(buf + SB_FLAGS, sb->flags);
    stq_be_p(buf + SB_DATA_SIZE, sb->data_size);
    stq_be_p(buf + SB_BM_OFFSET, sb->bm_offset);
    stq_be_p(buf + SB_AL_OFFSET, sb->al_offset);
    stl_be_p(buf + SB_BM_BLOCK_SIZE, sb->bm_block_size);
    stl_be_p(buf + SB_AL_EXTENTS, sb->al_extents);
    stl_be_p(buf + SB_AL_BLOCKS, sb->al_blocks);
    stl_be_p(buf + SB_NODE_ID, sb->node_id);
    stq_be_p(buf + SB_DEVICE_UUID, sb->device_uuid);
    stq_be_p(buf + SB_UUID_CURRENT, sb->uuid_current);
    stq_be_p(buf + SB_UUID_BITMAP, sb->uuid_bitmap);
    stq_be_p(buf + SB_UUID_HISTORY, sb->uuid_history[0]);
    stq_be_p(buf + SB_UUID_HISTORY + 8, sb->uuid_history[1]);
    stq_be_p(buf + SB_AL_TR_NUMBER, sb->al_tr_number);
    if (sb->version == DRBD_MD_VERSION_SLOTS) {
        stl_be_p(buf + SB_MAX_PEERS, sb->max_peers);
        for (i = 0; i < sb->max_peers; i++) {
            uint8_t *slot = buf + SB_SLOTS + i * SB_SLOT_SIZE;

            stl_be_p(slot + SB_SLOT_NODE_ID, sb->slots[i].node_id);
            /* Slot 0's is uuid_bitmap */
            stq_be_p(slot + SB_SLOT_BITMAP_UUID,
                     i ? sb->slots[i].bitmap_uuid : 0);
        }
    }
    stq_be_p(buf + SB_PARTIAL_UUID, sb->partial_uuid);
    stl_be_p(buf + SB_CRC, block_crc(buf, SB_CRC));
}

/* The bitmap slots of version 2; version 1 has one, free */
static int sb_decode_slots(const uint8_t *buf, DrbdSuperblock *sb,
                           Error **errp)
{
    uint32_t i, j;

    memset(sb->slots, 0, sizeof(sb->slots));
    for (i = 0; i < DRBD_MD_MAX_PEERS; i++) {
        sb->slots[i].node_id = DRBD_MD_SLOT_FREE;
    }
    if (sb->version == DRBD_MD_VERSION) {
        sb->max_peers = 1;
        return 0;
    }
    sb->max_peers = ldl_be_p(buf + SB_MAX_PEERS);
    if (sb->max_peers < 2 || sb->max_peers > DRBD_MD_MAX_PEERS) {
        error_setg(errp, "drbd metadata: max_peers %" PRIu32 " is out of "
                   "range (2 to %d in version %d)", sb->max_peers,
                   DRBD_MD_MAX_PEERS, DRBD_MD_VERSION_SLOTS);
        return -EINVAL;
    }
    for (i = 0; i < sb->max_peers; i++) {
        const uint8_t *slot = buf + SB_SLOTS + i * SB_SLOT_SIZE;
        uint32_t id = ldl_be_p(slot + SB_SLOT_NODE_ID);

        if (id != DRBD_MD_SLOT_FREE && (id > 31 || id == sb->node_id)) {
            error_setg(errp, "drbd metadata: bitmap slot %" PRIu32 " is "
                       "for node id %" PRIu32 ", which cannot be a peer "
                       "of node %" PRIu32, i, id, sb->node_id);
            return -EINVAL;
        }
        for (j = 0; j < i; j++) {
            if (id != DRBD_MD_SLOT_FREE && sb->slots[j].node_id == id) {
                error_setg(errp, "drbd metadata: bitmap slots %" PRIu32
                           " and %" PRIu32 " are both for node id %"
                           PRIu32, j, i, id);
                return -EINVAL;
            }
        }
        sb->slots[i].node_id = id;
        sb->slots[i].bitmap_uuid = i ? ldq_be_p(slot + SB_SLOT_BITMAP_UUID) :
                                   0;
    }
    return 0;
}

int drbd_md_sb_decode(const uint8_t *buf, size_t len, DrbdSuperblock *out,
                      Error **errp)
{
    DrbdSuperblock sb;
    uint32_t magic, crc, expected_crc;

    if (len != BLOCK) {
        error_setg(errp, "drbd metadata: superblock is %zu bytes "
                   "(expected %d)", len, BLOCK);
        return -EINVAL;
    }

    /*
     * Magic and version first: a later version may move the checksum,
     * and it deserves "unsupported version" rather than "damaged".
     */
    magic = ldl_be_p(buf + SB_MAGIC);
    if (magic != DRBD_MD_MAGIC) {
        error_setg(errp, "not drbd metadata (no magic: is this a drbd "
                   "image?)");
        return -EINVAL;
    }
    sb.version = ldl_be_p(buf + SB_VERSION);
    if (sb.version != DRBD_MD_VERSION &&
        sb.version != DRBD_MD_VERSION_SLOTS) {
        error_setg(errp, "drbd metadata version %" PRIu32 " is not "
                   "supported (this QEMU supports versions %d and %d)",
                   sb.version, DRBD_MD_VERSION, DRBD_MD_VERSION_SLOTS);
        return -EINVAL;
    }
    crc = ldl_be_p(buf + SB_CRC);
    expected_crc = block_crc(buf, SB_CRC);
    if (crc != expected_crc) {
        error_setg(errp, "drbd metadata: checksum mismatch: metadata "
                   "damaged (stored 0x%08" PRIx32 ", computed 0x%08" PRIx32
                   ")", crc, expected_crc);
        return -EINVAL;
    }

    sb.placement = ldl_be_p(buf + SB_PLACEMENT);
    sb.flags = ldq_be_p(buf + SB_FLAGS);
    sb.data_size = ldq_be_p(buf + SB_DATA_SIZE);
    sb.bm_offset = ldq_be_p(buf + SB_BM_OFFSET);
    sb.al_offset = ldq_be_p(buf + SB_AL_OFFSET);
    sb.bm_block_size = ldl_be_p(buf + SB_BM_BLOCK_SIZE);
    sb.al_extents = ldl_be_p(buf + SB_AL_EXTENTS);
    sb.al_blocks = ldl_be_p(buf + SB_AL_BLOCKS);
    sb.node_id = ldl_be_p(buf + SB_NODE_ID);
    sb.device_uuid = ldq_be_p(buf + SB_DEVICE_UUID);
    sb.uuid_current = ldq_be_p(buf + SB_UUID_CURRENT);
    sb.uuid_bitmap = ldq_be_p(buf + SB_UUID_BITMAP);
    sb.uuid_history[0] = ldq_be_p(buf + SB_UUID_HISTORY);
    sb.uuid_history[1] = ldq_be_p(buf + SB_UUID_HISTORY + 8);
    sb.al_tr_number = ldq_be_p(buf + SB_AL_TR_NUMBER);
    /* Zero where a writer before this field left it reserved */
    sb.partial_uuid = ldq_be_p(buf + SB_PARTIAL_UUID);
    /* Reserved bytes are ignored: a later minor change may use them */
    if (sb_decode_slots(buf, &sb, errp) < 0) {
        return -EINVAL;
    }

    if (sb.placement != DRBD_MD_INTERNAL &&
        sb.placement != DRBD_MD_EXTERNAL) {
        error_setg(errp, "drbd metadata: unknown placement %" PRIu32
                   " (expected 0 for internal or 1 for external)",
                   sb.placement);
        return -EINVAL;
    }
    if (sb.flags & ~DRBD_MDF_ALL) {
        error_setg(errp, "drbd metadata: unknown flags 0x%" PRIx64,
                   sb.flags & ~DRBD_MDF_ALL);
        return -EINVAL;
    }
    if (check_data_size("drbd metadata", sb.data_size, errp) < 0) {
        return -EINVAL;
    }
    if (sb.bm_block_size != DRBD_MD_BM_BLOCK_SIZE) {
        error_setg(errp, "drbd metadata: bitmap block size %" PRIu32
                   " is not supported (only %d)", sb.bm_block_size,
                   DRBD_MD_BM_BLOCK_SIZE);
        return -EINVAL;
    }
    if (sb.al_blocks != DRBD_MD_AL_BLOCKS) {
        error_setg(errp, "drbd metadata: %" PRIu32 " activity-log blocks "
                   "are not supported (only %d)", sb.al_blocks,
                   DRBD_MD_AL_BLOCKS);
        return -EINVAL;
    }
    if (sb.al_extents < DRBD_AL_EXTENTS_MIN ||
        sb.al_extents > DRBD_AL_EXTENTS_MAX) {
        error_setg(errp, "drbd metadata: al_extents %" PRIu32 " is out of "
                   "range (%d to %d)", sb.al_extents, DRBD_AL_EXTENTS_MIN,
                   DRBD_AL_EXTENTS_MAX);
        return -EINVAL;
    }

    *out = sb;
    return 0;
}

char *drbd_md_flags_str(uint64_t flags)
{
    GString *s = g_string_new("");
    size_t i;

    for (i = 0; i < ARRAY_SIZE(flag_names); i++) {
        if (flags & DRBD_MDF_ALL & (UINT64_C(1) << i)) {
            g_string_append_printf(s, "%s%s", s->len ? "," : "",
                                   flag_names[i]);
        }
    }
    if (flags & ~DRBD_MDF_ALL) {
        g_string_append_printf(s, "%s0x%" PRIx64, s->len ? "," : "",
                               flags & ~DRBD_MDF_ALL);
    }
    return g_string_free(s, false);
}

/*
 * Activity log
 */

void drbd_al_next_context(uint64_t tr_number, uint32_t al_extents,
                          uint32_t al_blocks, uint32_t *start,
                          uint32_t *size)
{
    uint32_t n;

    assert(al_blocks >= 2);
    assert(al_extents >= 1 &&
           al_extents <= (al_blocks - 1) * DRBD_AL_MAX_CONTEXT);

    /*
     * The window moves on by its own size with each transaction, so that
     * al_blocks - 1 consecutive ones cover (al_blocks - 1) * n >=
     * al_extents consecutive slots: all of them.  The product stays
     * below 2^23.
     */
    n = DIV_ROUND_UP(al_extents, al_blocks - 1);
    *start = (tr_number % al_extents) * n % al_extents;
    *size = n;
}

void drbd_al_tr_encode(const DrbdAlTransaction *tr, uint8_t *buf)
{
    size_t i;

    assert(tr->al_extents >= 1 && tr->al_extents <= DRBD_AL_EXTENTS_MAX);
    assert(tr->n_updates <= DRBD_AL_MAX_UPDATES);
    assert(tr->context_size <= DRBD_AL_MAX_CONTEXT);
    assert(tr->context_size <= tr->al_extents);
    assert(tr->context_start < tr->al_extents);

    memset(buf, 0, BLOCK);
    stl_be_p(buf + TR_MAGIC, DRBD_AL_MAGIC);
    stq_be_p(buf + TR_NUMBER, tr->tr_number);
    stl_be_p(buf + TR_AL_EXTENTS, tr->al_extents);
    stw_be_p(buf + TR_N_UPDATES, tr->n_updates);
    stw_be_p(buf + TR_CONTEXT_SIZE, tr->context_size);
    stl_be_p(buf + TR_CONTEXT_START, tr->context_start);
    for (i = 0; i < tr->n_updates; i++) {
        uint8_t *u = buf + TR_UPDATES + i * TR_UPDATE_SIZE;

        assert(tr->updates[i].slot < tr->al_extents);
        stl_be_p(u + TR_UPDATE_SLOT, tr->updates[i].slot);
        stl_be_p(u + TR_UPDATE_EXTENT, tr->updates[i].extent);
    }
    for (i = 0; i < tr->context_size; i++) {
        stl_be_p(buf + TR_CONTEXT + i * 4, tr->context[i]);
    }
    stl_be_p(buf + TR_CRC, block_crc(buf, TR_CRC));
}

/*
 * Is there a transaction in @buf at all?  Without magic or with a bad
 * checksum, the block was never written or its write was torn.
 */
static int al_tr_check_block(const uint8_t *buf, Error **errp)
{
    uint32_t magic = ldl_be_p(buf + TR_MAGIC);
    uint32_t crc, expected_crc;

    if (magic != DRBD_AL_MAGIC) {
        error_setg(errp, "activity-log transaction: bad magic 0x%08" PRIx32
                   " (expected 0x%08x)", magic, DRBD_AL_MAGIC);
        return -EINVAL;
    }
    crc = ldl_be_p(buf + TR_CRC);
    expected_crc = block_crc(buf, TR_CRC);
    if (crc != expected_crc) {
        error_setg(errp, "activity-log transaction: checksum mismatch "
                   "(stored 0x%08" PRIx32 ", computed 0x%08" PRIx32 ")",
                   crc, expected_crc);
        return -EINVAL;
    }
    return 0;
}

/* The fields of a block that passed al_tr_check_block() */
static int al_tr_decode_fields(const uint8_t *buf, DrbdAlTransaction *out,
                               Error **errp)
{
    g_autofree DrbdAlTransaction *tr = g_new0(DrbdAlTransaction, 1);
    uint32_t reserved;
    size_t i;

    tr->tr_number = ldq_be_p(buf + TR_NUMBER);
    tr->al_extents = ldl_be_p(buf + TR_AL_EXTENTS);
    tr->n_updates = lduw_be_p(buf + TR_N_UPDATES);
    tr->context_size = lduw_be_p(buf + TR_CONTEXT_SIZE);
    tr->context_start = ldl_be_p(buf + TR_CONTEXT_START);
    reserved = ldl_be_p(buf + TR_RESERVED);

    if (tr->al_extents < DRBD_AL_EXTENTS_MIN ||
        tr->al_extents > DRBD_AL_EXTENTS_MAX) {
        error_setg(errp, "activity-log transaction %" PRIu64 ": al_extents "
                   "%" PRIu32 " is out of range (%d to %d)", tr->tr_number,
                   tr->al_extents, DRBD_AL_EXTENTS_MIN, DRBD_AL_EXTENTS_MAX);
        return -EINVAL;
    }
    if (tr->n_updates > DRBD_AL_MAX_UPDATES) {
        error_setg(errp, "activity-log transaction %" PRIu64 ": %u updates "
                   "is more than the limit of %d", tr->tr_number,
                   tr->n_updates, DRBD_AL_MAX_UPDATES);
        return -EINVAL;
    }
    if (tr->context_size > DRBD_AL_MAX_CONTEXT ||
        tr->context_size > tr->al_extents) {
        error_setg(errp, "activity-log transaction %" PRIu64 ": context of "
                   "%u slots is more than the limit of %u", tr->tr_number,
                   tr->context_size,
                   MIN(tr->al_extents, DRBD_AL_MAX_CONTEXT));
        return -EINVAL;
    }
    if (tr->context_start >= tr->al_extents) {
        error_setg(errp, "activity-log transaction %" PRIu64 ": context "
                   "starts at slot %" PRIu32 ", beyond the last slot %"
                   PRIu32, tr->tr_number, tr->context_start,
                   tr->al_extents - 1);
        return -EINVAL;
    }
    if (reserved) {
        error_setg(errp, "activity-log transaction %" PRIu64 ": reserved "
                   "field is 0x%08" PRIx32 ", not zero", tr->tr_number,
                   reserved);
        return -EINVAL;
    }
    for (i = 0; i < tr->n_updates; i++) {
        const uint8_t *u = buf + TR_UPDATES + i * TR_UPDATE_SIZE;

        tr->updates[i].slot = ldl_be_p(u + TR_UPDATE_SLOT);
        tr->updates[i].extent = ldl_be_p(u + TR_UPDATE_EXTENT);
        if (tr->updates[i].slot >= tr->al_extents) {
            error_setg(errp, "activity-log transaction %" PRIu64 ": update "
                       "%zu is of slot %" PRIu32 ", beyond the last slot %"
                       PRIu32, tr->tr_number, i, tr->updates[i].slot,
                       tr->al_extents - 1);
            return -EINVAL;
        }
    }
    if (!buffer_is_zero(buf + TR_UPDATES + tr->n_updates * TR_UPDATE_SIZE,
                  (DRBD_AL_MAX_UPDATES - tr->n_updates) * TR_UPDATE_SIZE)) {
        error_setg(errp, "activity-log transaction %" PRIu64 ": unused "
                   "updates are not zero", tr->tr_number);
        return -EINVAL;
    }
    for (i = 0; i < tr->context_size; i++) {
        tr->context[i] = ldl_be_p(buf + TR_CONTEXT + i * 4);
    }
    if (!buffer_is_zero(buf + TR_CONTEXT + tr->context_size * 4,
                  (DRBD_AL_MAX_CONTEXT - tr->context_size) * 4)) {
        error_setg(errp, "activity-log transaction %" PRIu64 ": unused "
                   "context is not zero", tr->tr_number);
        return -EINVAL;
    }

    *out = *tr;
    return 0;
}

int drbd_al_tr_decode(const uint8_t *buf, size_t len,
                      DrbdAlTransaction *out, Error **errp)
{
    if (len != BLOCK) {
        error_setg(errp, "activity-log transaction is %zu bytes "
                   "(expected %d)", len, BLOCK);
        return -EINVAL;
    }
    if (al_tr_check_block(buf, errp) < 0) {
        return -EINVAL;
    }
    return al_tr_decode_fields(buf, out, errp);
}

typedef struct AlBlock {
    uint32_t index;             /* in the ring */
    DrbdAlTransaction *tr;
} AlBlock;

static gint al_block_cmp(gconstpointer a, gconstpointer b)
{
    const AlBlock *x = a, *y = b;

    if (x->tr->tr_number != y->tr->tr_number) {
        return x->tr->tr_number < y->tr->tr_number ? -1 : 1;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

static void al_set_slot(uint32_t *slots, uint64_t *written, uint64_t *seq,
                        uint32_t slot, uint32_t extent)
{
    slots[slot] = extent;
    written[slot] = ++*seq;
}

/*
 * A context that was written before the writer restarted with an emptier
 * hot set may still name an extent that a newer transaction put in
 * another slot.  The set is what matters: keep the extent in the slot
 * written last, empty the other.
 */
static void al_remove_duplicates(uint32_t *slots, const uint64_t *written,
                                 uint32_t al_extents)
{
    g_autoptr(GHashTable) where = g_hash_table_new(NULL, NULL);
    uint32_t s;

    for (s = 0; s < al_extents; s++) {
        gpointer key = GUINT_TO_POINTER(slots[s]);
        gpointer other;

        if (slots[s] == DRBD_AL_EXTENT_NONE) {
            continue;
        }
        if (g_hash_table_lookup_extended(where, key, NULL, &other)) {
            uint32_t t = GPOINTER_TO_UINT(other);

            if (written[t] > written[s]) {
                slots[s] = DRBD_AL_EXTENT_NONE;
                continue;
            }
            slots[t] = DRBD_AL_EXTENT_NONE;
        }
        g_hash_table_insert(where, key, GUINT_TO_POINTER(s));
    }
}

int drbd_al_recover(const uint8_t *ring, size_t ring_len,
                    uint32_t al_extents, uint32_t al_blocks,
                    uint32_t *slots, uint64_t *last_tr, bool *found,
                    Error **errp)
{
    g_autofree AlBlock *blocks = NULL;
    g_autofree uint32_t *state = NULL;
    g_autofree uint64_t *written = NULL;
    uint32_t n = 0, i, j, index;
    uint64_t seq = 0;
    int ret = -EINVAL;

    if (al_blocks < 2 || al_blocks > UINT32_MAX / BLOCK) {
        error_setg(errp, "activity log: %" PRIu32 " blocks is not a valid "
                   "ring", al_blocks);
        return -EINVAL;
    }
    if (ring_len != (size_t)al_blocks * BLOCK) {
        error_setg(errp, "activity log: ring is %zu bytes (expected %"
                   PRIu32 " blocks of %d)", ring_len, al_blocks, BLOCK);
        return -EINVAL;
    }
    if (al_extents < 1 ||
        al_extents > (uint64_t)(al_blocks - 1) * DRBD_AL_MAX_CONTEXT) {
        error_setg(errp, "activity log: %" PRIu32 " slots do not fit a "
                   "ring of %" PRIu32 " blocks", al_extents, al_blocks);
        return -EINVAL;
    }

    blocks = g_new0(AlBlock, al_blocks);
    for (index = 0; index < al_blocks; index++) {
        const uint8_t *buf = ring + (size_t)index * BLOCK;
        DrbdAlTransaction *tr;

        /* Never written (a fresh ring is all zeros) or torn: skip it */
        if (al_tr_check_block(buf, NULL) < 0) {
            continue;
        }
        tr = g_new(DrbdAlTransaction, 1);
        blocks[n++] = (AlBlock) { index, tr };
        if (al_tr_decode_fields(buf, tr, errp) < 0) {
            error_prepend(errp, "activity log block %" PRIu32 ": ", index);
            goto out;
        }
        if (tr->al_extents != al_extents) {
            error_setg(errp, "activity log block %" PRIu32 ": transaction %"
                       PRIu64 " is for %" PRIu32 " slots, not %" PRIu32
                       " (foreign or damaged metadata)", index,
                       tr->tr_number, tr->al_extents, al_extents);
            goto out;
        }
    }

    qsort(blocks, n, sizeof(blocks[0]), al_block_cmp);
    for (i = 1; i < n; i++) {
        if (blocks[i].tr->tr_number == blocks[i - 1].tr->tr_number) {
            error_setg(errp, "activity log: transaction %" PRIu64 " is in "
                       "blocks %" PRIu32 " and %" PRIu32, blocks[i].tr->
                       tr_number, blocks[i - 1].index, blocks[i].index);
            goto out;
        }
    }
    for (i = 0; i < n; i++) {
        if (blocks[i].tr->tr_number % al_blocks != blocks[i].index) {
            error_setg(errp, "activity log block %" PRIu32 " holds "
                       "transaction %" PRIu64 ", which belongs in block %"
                       PRIu64, blocks[i].index, blocks[i].tr->tr_number,
                       blocks[i].tr->tr_number % al_blocks);
            goto out;
        }
    }
    /*
     * The writer numbers its transactions without a gap, and only the
     * newest can be torn by a crash.  One missing in between was lost to
     * damage, and its updates with it.
     */
    if (n && blocks[n - 1].tr->tr_number - blocks[0].tr->tr_number != n - 1) {
        i = 1;
        while (blocks[i].tr->tr_number == blocks[i - 1].tr->tr_number + 1) {
            i++;
        }
        error_setg(errp, "activity log: transaction %" PRIu64 " is missing "
                   "or damaged (found transactions %" PRIu64 " to %" PRIu64
                   "): the hot extents cannot be recovered",
                   blocks[i - 1].tr->tr_number + 1, blocks[0].tr->tr_number,
                   blocks[n - 1].tr->tr_number);
        goto out;
    }

    state = g_new(uint32_t, al_extents);
    written = g_new0(uint64_t, al_extents);
    for (i = 0; i < al_extents; i++) {
        state[i] = DRBD_AL_EXTENT_NONE;
    }
    for (i = 0; i < n; i++) {
        const DrbdAlTransaction *tr = blocks[i].tr;

        for (j = 0; j < tr->context_size; j++) {
            al_set_slot(state, written, &seq,
                        (tr->context_start + j) % al_extents,
                        tr->context[j]);
        }
        for (j = 0; j < tr->n_updates; j++) {
            al_set_slot(state, written, &seq, tr->updates[j].slot,
                        tr->updates[j].extent);
        }
    }
    al_remove_duplicates(state, written, al_extents);

    memcpy(slots, state, al_extents * sizeof(slots[0]));
    *last_tr = n ? blocks[n - 1].tr->tr_number : 0;
    *found = n > 0;
    ret = 0;

out:
    for (i = 0; i < n; i++) {
        g_free(blocks[i].tr);
    }
    return ret;
}
