/*
 * DRBD-style replication: the on-disk metadata format
 *
 * The superblock, where the metadata sits in the image (the layout), and
 * the activity-log transactions with their recovery.  Pure code: no I/O,
 * no QEMU globals.  Every decoder checks what it is given and fails with
 * an Error rather than reading or writing out of range, so that it can be
 * fed whatever a damaged or foreign image holds.  The format is
 * documented byte by byte in docs/interop/drbd-metadata.rst.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef BLOCK_DRBD_MD_FORMAT_H
#define BLOCK_DRBD_MD_FORMAT_H

#include "qapi/error.h"
#include "qemu/units.h"

/* The superblock and every activity-log transaction are one such block */
#define DRBD_MD_BLOCK_SIZE          4096

#define DRBD_MD_MAGIC               0x4452424d  /* "DRBM" */
/* Metadata for one peer; with bitmap slots for more (max_peers > 1) */
#define DRBD_MD_VERSION             1
#define DRBD_MD_VERSION_SLOTS       2

/*
 * Bitmap slots, one per peer a node can have (DRBD's max-peers): at most
 * 31, as node ids are 0 to 31 and a node is not its own peer
 */
#define DRBD_MD_MAX_PEERS           31
/* The node id of a slot that tracks no peer yet */
#define DRBD_MD_SLOT_FREE           UINT32_MAX

/* One bit of the out-of-sync bitmap covers this many bytes of data */
#define DRBD_MD_BM_BLOCK_SIZE       4096

/* Blocks in the activity-log ring (32 KiB, as DRBD's default) */
#define DRBD_MD_AL_BLOCKS           8

/*
 * The largest data size: 4 PiB.  It keeps every activity-log extent
 * number below 2^30 (far from DRBD_AL_EXTENT_NONE) and every offset of
 * the layout far below INT64_MAX.
 */
#define DRBD_MD_MAX_DATA_SIZE       (4ULL * PiB)

/* data_size is a multiple of this */
#define DRBD_MD_DATA_ALIGN          512

/*
 * The current UUID of freshly created metadata.  The UUID module
 * (the handshake) defines the same value as DRBD_UUID_JUST_CREATED;
 * it is repeated here so that this file stands alone.
 */
#define DRBD_MD_UUID_JUST_CREATED   4

/* Where the metadata lives */
typedef enum DrbdMdPlacement {
    /* at the end of the data image, after the data */
    DRBD_MD_INTERNAL = 0,
    /* in an image of its own, the data image holds only data */
    DRBD_MD_EXTERNAL = 1,
} DrbdMdPlacement;

/*
 * Bits of DrbdSuperblock.flags, with the values of DRBD's MDF_* flags;
 * docs/interop/drbd-metadata.rst says what sets and clears each
 */
#define DRBD_MDF_CONSISTENT         (UINT64_C(1) << 0)
#define DRBD_MDF_PRIMARY_IND        (UINT64_C(1) << 1)
#define DRBD_MDF_CONNECTED_IND      (UINT64_C(1) << 2)
#define DRBD_MDF_FULL_SYNC          (UINT64_C(1) << 3)
#define DRBD_MDF_WAS_UP_TO_DATE     (UINT64_C(1) << 4)
#define DRBD_MDF_PEER_OUTDATED      (UINT64_C(1) << 5)
#define DRBD_MDF_CRASHED_PRIMARY    (UINT64_C(1) << 6)
#define DRBD_MDF_AL_CLEAN           (UINT64_C(1) << 7)
/* DRBD's bit 8, MDF_AL_DISABLED, is not used here (and not accepted) */
#define DRBD_MDF_PRIMARY_LOST_QUORUM (UINT64_C(1) << 9)
#define DRBD_MDF_ALL                (UINT64_C(0xff) | \
                                     DRBD_MDF_PRIMARY_LOST_QUORUM)

/*
 * A bitmap slot: the peer whose missing blocks it records.  Slot 0's
 * bitmap UUID is DrbdSuperblock.uuid_bitmap (its @bitmap_uuid is 0).
 */
typedef struct DrbdMdSlot {
    uint32_t node_id;           /* 0..31, or DRBD_MD_SLOT_FREE */
    uint64_t bitmap_uuid;
} DrbdMdSlot;

typedef struct DrbdSuperblock {
    /* DRBD_MD_VERSION with one slot, DRBD_MD_VERSION_SLOTS with more */
    uint32_t version;
    uint32_t placement;         /* DrbdMdPlacement */
    uint64_t flags;             /* DRBD_MDF_* */
    uint64_t data_size;         /* bytes of replicated data */
    uint64_t bm_offset;         /* byte offset of the bitmap */
    uint64_t al_offset;         /* byte offset of the activity-log ring */
    uint32_t bm_block_size;     /* DRBD_MD_BM_BLOCK_SIZE */
    uint32_t al_extents;        /* slots of the activity log */
    uint32_t al_blocks;         /* DRBD_MD_AL_BLOCKS */
    uint32_t node_id;
    uint64_t device_uuid;       /* identifies the replicated device */
    uint64_t uuid_current;      /* generation UUIDs */
    uint64_t uuid_bitmap;
    uint64_t uuid_history[2];
    uint64_t al_tr_number;      /* a hint: recovery trusts the ring */
    uint32_t max_peers;         /* bitmap slots, 1 to DRBD_MD_MAX_PEERS */
    DrbdMdSlot slots[DRBD_MD_MAX_PEERS];    /* the first @max_peers */
    /*
     * Of inconsistent data (a resync target's): the generation whose
     * writes it holds in part, or 0.  Meaningless on consistent data.
     */
    uint64_t partial_uuid;
} DrbdSuperblock;

/* Where slot @slot's bitmap UUID is kept: slot 0's in uuid_bitmap */
static inline uint64_t *drbd_md_slot_uuid_ptr(DrbdSuperblock *sb,
                                              unsigned slot)
{
    return slot ? &sb->slots[slot].bitmap_uuid : &sb->uuid_bitmap;
}

static inline uint64_t drbd_md_slot_uuid(const DrbdSuperblock *sb,
                                         unsigned slot)
{
    return slot ? sb->slots[slot].bitmap_uuid : sb->uuid_bitmap;
}

/*
 * Where everything is in the image (internal placement) or in the meta
 * image (external placement); all offsets and lengths in bytes
 */
typedef struct DrbdMdLayout {
    DrbdMdPlacement placement;
    uint64_t data_size;
    uint64_t image_size;        /* the whole image / the meta image */
    uint64_t sb_offset;
    uint64_t bm_offset;
    uint64_t bm_bytes;          /* of one slot: slot i at bm_offset + i * */
    uint32_t max_peers;         /* bitmap slots */
    uint64_t al_offset;
    uint32_t al_blocks;
    uint32_t al_extents;
} DrbdMdLayout;

/*
 * Layout
 */

/* Bits of the out-of-sync bitmap for @data_size bytes (1 per 4 KiB) */
uint64_t drbd_md_bm_bits(uint64_t data_size);

/*
 * Bytes of the on-disk bitmap for @data_size bytes: whole 64-bit words,
 * rounded up to DRBD_MD_BLOCK_SIZE
 */
uint64_t drbd_md_bm_bytes(uint64_t data_size);

/* Is @n a valid number of bitmap slots (max-peers)? */
int drbd_md_max_peers_valid(uint32_t n, Error **errp);

/*
 * Compute the layout of internal metadata for @data_size bytes of data
 * with @al_extents activity-log slots and @max_peers bitmap slots:
 * @out->image_size is the length the image needs.  Fails on a data size
 * that is zero, not a multiple of 512 or above DRBD_MD_MAX_DATA_SIZE, and
 * on an invalid @al_extents or @max_peers.
 */
int drbd_md_layout_internal(uint64_t data_size, uint32_t al_extents,
                            uint32_t max_peers, DrbdMdLayout *out,
                            Error **errp);

/* The same for external metadata: @out->image_size is the meta image's */
int drbd_md_layout_external(uint64_t data_size, uint32_t al_extents,
                            uint32_t max_peers, DrbdMdLayout *out,
                            Error **errp);

/*
 * The layout of the metadata @sb, read from an image (internal) or meta
 * image (external) of @image_len bytes, with @max_peers bitmap slots
 * instead of sb->max_peers (fewer fail): the new slots follow the old
 * ones, and nothing new lies where the old metadata's activity log and
 * superblock are, so that the old superblock is valid until the new one
 * is written.  @out->image_size is the new length.
 */
int drbd_md_layout_grow(const DrbdSuperblock *sb, uint64_t image_len,
                        uint32_t max_peers, DrbdMdLayout *out, Error **errp);

/*
 * The layout of the metadata @sb (read from an image or meta image of
 * @image_len bytes) for @data_size bytes of data instead of
 * sb->data_size, such that the old superblock stays valid until the new
 * one is written:
 *  - internal, growing: the new metadata goes past the old end of the
 *    image, with at least one block between, never written, after the
 *    old superblock (drbd_md_find_moved() finds that superblock at the
 *    end of the data an interrupted resize leaves); @out->image_size is
 *    the new length;
 *  - internal, shrinking: the new metadata ends where the image will be
 *    cut, below the old metadata (fails if the data does not shrink by
 *    the metadata's size at least);
 *  - external: the new bitmap slots follow the old meta image's end;
 *    the superblock stays first.
 */
int drbd_md_layout_resize(const DrbdSuperblock *sb, uint64_t image_len,
                          uint64_t data_size, DrbdMdLayout *out,
                          Error **errp);

/*
 * Where to look for the superblock of metadata with @placement in an
 * image (internal) or meta image (external) of @image_len bytes: the
 * last block, or the first.  Fails if the image cannot hold metadata
 * (too short, or a length that is not a multiple of DRBD_MD_BLOCK_SIZE:
 * an internal image that was resized has lost its superblock).
 */
int drbd_md_sb_offset(DrbdMdPlacement placement, uint64_t image_len,
                      uint64_t *offset, Error **errp);

/*
 * Check the offsets of a decoded superblock against the length of the
 * image (internal) or meta image (external) it was read from: every
 * region aligned, inside the image, not overlapping another, the bitmap
 * big enough for data_size, and (internal) the data below the metadata.
 * On success, fill @out (if not NULL) with the layout.
 */
int drbd_md_layout_check(const DrbdSuperblock *sb, uint64_t image_len,
                         DrbdMdLayout *out, Error **errp);

/*
 * Superblock
 */

/*
 * A fresh superblock for @layout: version 1 (2 with more than one bitmap
 * slot), every slot free, no UUID but current =
 * DRBD_MD_UUID_JUST_CREATED, flags AL_CLEAN only (not CONSISTENT: the
 * first connection does a full sync, as with DRBD's create-md).
 */
void drbd_md_sb_init(DrbdSuperblock *sb, const DrbdMdLayout *layout,
                     uint32_t node_id, uint64_t device_uuid);

/*
 * Make @sb describe @layout, from drbd_md_layout_grow() for @sb: its
 * version, offsets and slot count; the new slots free
 */
void drbd_md_sb_relayout(DrbdSuperblock *sb, const DrbdMdLayout *layout);

/*
 * Encode @sb into the DRBD_MD_BLOCK_SIZE bytes of @buf, reserved bytes
 * zero, checksum computed.  @sb must be valid (asserted).
 */
void drbd_md_sb_encode(const DrbdSuperblock *sb, uint8_t *buf);

/*
 * Decode the superblock in the @len bytes of @buf (which must be
 * DRBD_MD_BLOCK_SIZE).  Fails with -EINVAL and a message naming what is
 * wrong: no magic (not drbd metadata), unsupported version, checksum
 * mismatch, or a field out of its range (a slot table with this node's
 * id, an id above 31, or one id twice).  Offsets are not checked
 * against the image: drbd_md_layout_check() does that.  Version 1 reads
 * as one free slot.
 */
int drbd_md_sb_decode(const uint8_t *buf, size_t len, DrbdSuperblock *out,
                      Error **errp);

/*
 * @flags as a comma-separated list of names ("consistent,al-clean"),
 * unknown bits as hexadecimal; "" for none.  The caller frees it.
 */
char *drbd_md_flags_str(uint64_t flags);

/*
 * Activity log
 */

#define DRBD_AL_MAGIC               0x4452414c  /* "DRAL" */

/* An activity-log extent covers this many bytes of data */
#define DRBD_AL_EXTENT_SIZE         (4 * MiB)

/* The extent number of an empty slot */
#define DRBD_AL_EXTENT_NONE         UINT32_MAX

#define DRBD_AL_MAX_UPDATES         64
#define DRBD_AL_MAX_CONTEXT         888
#define DRBD_AL_EXTENTS_DEFAULT     1237
#define DRBD_AL_EXTENTS_MIN         7
/* Every DRBD_MD_AL_BLOCKS - 1 transactions carry all slots as context */
#define DRBD_AL_EXTENTS_MAX \
    ((DRBD_MD_AL_BLOCKS - 1) * DRBD_AL_MAX_CONTEXT)

typedef struct DrbdAlUpdate {
    uint32_t slot;
    uint32_t extent;            /* DRBD_AL_EXTENT_NONE empties the slot */
} DrbdAlUpdate;

/*
 * One transaction: @n_updates slot changes, plus as context the
 * contents of @context_size slots from @context_start on (modulo
 * @al_extents) once the updates are applied
 */
typedef struct DrbdAlTransaction {
    uint64_t tr_number;
    uint32_t al_extents;
    uint16_t n_updates;
    uint16_t context_size;
    uint32_t context_start;
    DrbdAlUpdate updates[DRBD_AL_MAX_UPDATES];
    uint32_t context[DRBD_AL_MAX_CONTEXT];
} DrbdAlTransaction;

/* Is @n a valid number of activity-log slots (al-extents)? */
int drbd_al_extents_valid(uint32_t n, Error **errp);

/*
 * Extents of @data_size bytes: extent numbers of the device are
 * 0 .. drbd_md_al_extent_count(data_size) - 1
 */
uint64_t drbd_md_al_extent_count(uint64_t data_size);

/*
 * The context window of transaction @tr_number: the writer puts slots
 * *start .. *start + *size - 1 (modulo @al_extents) in it.  Derived
 * from the transaction number, so that the rotation carries on across
 * restarts: any @al_blocks - 1 consecutive transactions carry every slot.
 */
void drbd_al_next_context(uint64_t tr_number, uint32_t al_extents,
                          uint32_t al_blocks, uint32_t *start,
                          uint32_t *size);

/*
 * Encode @tr into the DRBD_MD_BLOCK_SIZE bytes of @buf, unused updates
 * and context zero, checksum computed.  @tr must be valid (asserted).
 */
void drbd_al_tr_encode(const DrbdAlTransaction *tr, uint8_t *buf);

/*
 * Decode the transaction in the @len bytes of @buf (which must be
 * DRBD_MD_BLOCK_SIZE).  Fails with -EINVAL and a message on a wrong
 * magic or checksum and on any field out of range.
 */
int drbd_al_tr_decode(const uint8_t *buf, size_t len,
                      DrbdAlTransaction *out, Error **errp);

/*
 * Recover the hot set from the activity-log ring @ring of @ring_len
 * bytes (@al_blocks blocks) of a device with @al_extents slots.
 *
 * Blocks without magic or with a bad checksum are skipped: a torn last
 * write is expected after a crash, and a fresh ring is all zeros.  The
 * valid transactions are applied in order of their numbers, each its
 * context first and then its updates.  On success, @slots (@al_extents
 * entries) holds the hot set after the newest transaction, each extent
 * in one slot at most, DRBD_AL_EXTENT_NONE in empty slots; *@last_tr is
 * the newest transaction's number and *@found is true.  With no valid
 * block, *@found is false, *@last_tr is 0 and every slot is empty.
 *
 * Fails with -EINVAL (outputs untouched) when a valid block cannot be
 * ours (another al_extents, a field out of range, a block out of its
 * place in the ring, a transaction number twice), and when a
 * transaction between the oldest and the newest is missing or damaged:
 * its updates are lost, so the hot set cannot be trusted and the caller
 * must resync the whole device.
 */
int drbd_al_recover(const uint8_t *ring, size_t ring_len,
                    uint32_t al_extents, uint32_t al_blocks,
                    uint32_t *slots, uint64_t *last_tr, bool *found,
                    Error **errp);

#endif /* BLOCK_DRBD_MD_FORMAT_H */
