/*
 * DRBD-style replication: run-length encoding of the out-of-sync bitmap
 *
 * Pure code: no I/O, no QEMU globals.  On connect the two nodes exchange
 * their out-of-sync bitmaps (one bit per 4 KiB block, an HBitmap of
 * granularity 0) in chunks of bounded size; the receiver ORs each chunk
 * into its own bitmap.  The decoder checks every byte it is given, as
 * they come from the network.
 *
 * Chunk format
 * ============
 *
 * One chunk is the payload of one packet.  Integers of the fixed part
 * are big-endian:
 *
 *   offset  size  field
 *   0       8     start   the first bit this chunk describes
 *   8       8     nbits   the number of bits this chunk describes, > 0
 *   16      1     first   the value (0 or 1) of the first run
 *   17      7     pad     zero
 *   24      ...   runs    run lengths, each an unsigned LEB128 varint
 *
 * The runs alternate in value, starting with @first: the first run is
 * @first bits, the second !@first bits, and so on.  Their lengths sum to
 * exactly @nbits, and the chunk ends with the last run (no trailing
 * bytes).  [start, start + nbits) must lie within the receiver's bitmap.
 *
 * A run length is an unsigned LEB128 varint: the value in groups of 7
 * bits, least significant group first, one group per byte in the low 7
 * bits; the high bit (0x80) is set on every byte but the last.  It is 1
 * to 10 bytes long and has no overlong form: the last byte of a varint
 * of more than one byte is never 0x00, and the 10th byte (bit 63) is
 * 0x00 or 0x01.  A run length is >= 1.  For example 1 is 01, 127 is 7f,
 * 128 is 80 01, 200 is c8 01, 16384 is 80 80 01.
 *
 * A chunk is at most max_len bytes, where max_len (>= 64) is the
 * sender's choice.  The sender covers [0, total bits) with a sequence of
 * chunks in order, without gaps or overlap: each chunk starts where the
 * previous one ended.  A chunk ends on a run boundary, or where it is
 * full; then the run that did not fit is split, and the next chunk
 * continues it (its @first is the value of that run).
 *
 * Example: a bitmap of 200 bits with bits 0-2, 10 and 150-199 set is,
 * in one chunk of 30 bytes:
 *
 *   00 00 00 00 00 00 00 00   start 0
 *   00 00 00 00 00 00 00 c8   nbits 200
 *   01 00 00 00 00 00 00 00   first 1, pad
 *   03 07 01 8b 01 32         runs 3 (set), 7, 1 (set), 139, 50 (set)
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef BLOCK_DRBD_RLE_H
#define BLOCK_DRBD_RLE_H

#include "qapi/error.h"
#include "qemu/hbitmap.h"

/* The fixed part of a chunk, before the runs */
#define DRBD_RLE_HEADER_SIZE    24

/* The smallest chunk a sender may ask for: the fixed part and 40 bytes */
#define DRBD_RLE_MIN_CHUNK      64

/* The longest varint: 64 bits in groups of 7 */
#define DRBD_RLE_VARINT_MAX     10

/**
 * drbd_rle_encode:
 * @hb: The bitmap to encode; its granularity must be 0.
 * @size: Number of bits in @hb (the size it was allocated with).
 * @pos: In: the first bit to encode, <= @size.  Out: the bit after the
 * last one the chunk describes, where the next chunk starts.
 * @buf: Where to write the chunk.
 * @max_len: Size of @buf, >= DRBD_RLE_MIN_CHUNK.
 *
 * Encode the next chunk of @hb, starting at bit *@pos, into @buf.  Runs
 * are found with hbitmap_next_dirty() and hbitmap_next_zero(), so a
 * sparse bitmap encodes in time proportional to its runs (and the set
 * ones' words), not its size.  The chunk ends on a run boundary or where
 * @buf is full; in that case the run is split and the next call
 * continues it.
 *
 * Returns the number of bytes written (DRBD_RLE_HEADER_SIZE + 1 to
 * @max_len) and advances *@pos; returns 0, writing nothing, when *@pos
 * == @size.
 */
size_t drbd_rle_encode(const HBitmap *hb, uint64_t size, uint64_t *pos,
                       uint8_t *buf, size_t max_len);

/**
 * drbd_rle_encoded_size:
 * @hb: The bitmap to measure; its granularity must be 0.
 * @size: Number of bits in @hb.
 * @max_len: The chunk size the encoding would use, >= DRBD_RLE_MIN_CHUNK.
 * @nchunks: If not NULL, set to the number of chunks.
 *
 * Return the total number of bytes of the chunks that drbd_rle_encode()
 * would produce for the whole of @hb with chunks of at most @max_len
 * bytes (for statistics; it costs as much as encoding, without the
 * writing).  Compare with DIV_ROUND_UP(@size, 8) for a compression ratio.
 */
uint64_t drbd_rle_encoded_size(const HBitmap *hb, uint64_t size,
                               size_t max_len, uint64_t *nchunks);

/**
 * drbd_rle_decode:
 * @buf: One chunk as received.
 * @len: Number of bytes in @buf.
 * @expected_start: The bit the chunk must start at: 0 for the first
 * chunk, then the previous call's *@next.
 * @hb: The bitmap to OR the chunk's set runs into; its granularity must
 * be 0.
 * @size: Number of bits in @hb (the device's bit count).
 * @next: On success, set to start + nbits of the chunk: the next chunk's
 * @expected_start.  The sequence is complete when it equals @size.
 *
 * Decode one chunk and set the bits of its runs of ones in @hb (bits
 * that are already set stay set; nothing is cleared).  The whole chunk is
 * validated before @hb is touched.  A chunk that is shorter than its
 * fixed part, has a non-zero pad or a @first other than 0 or 1, does not
 * start at @expected_start, describes no bits or bits beyond @size, or
 * whose runs are 0, overlong, truncated, beyond 64 bits, do not sum to
 * exactly nbits or are followed by more bytes, fails.
 *
 * Returns 0 on success; on failure -EINVAL with @errp set, and @hb and
 * *@next unchanged.
 */
int drbd_rle_decode(const uint8_t *buf, size_t len, uint64_t expected_start,
                    HBitmap *hb, uint64_t size, uint64_t *next,
                    Error **errp);

#endif /* BLOCK_DRBD_RLE_H */
