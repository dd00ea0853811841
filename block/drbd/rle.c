/*
 * DRBD-style replication: run-length encoding of the out-of-sync bitmap
 *
 * See rle.h (and docs/interop/drbd-protocol.rst) for the chunk format.
 * The decoder reads nothing beyond the length it is given and touches the
 * bitmap only after the whole chunk has been found valid.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/hbitmap.h"
#include "qapi/error.h"
#include "rle.h"

/* Offsets of the fields of a chunk's fixed part */
#define CHUNK_START     0
#define CHUNK_NBITS     8
#define CHUNK_FIRST     16
#define CHUNK_PAD       17
#define CHUNK_RUNS      24

QEMU_BUILD_BUG_ON(CHUNK_RUNS != DRBD_RLE_HEADER_SIZE);
/* A chunk that is empty but for its header has room for a full varint */
QEMU_BUILD_BUG_ON(DRBD_RLE_MIN_CHUNK - CHUNK_RUNS < DRBD_RLE_VARINT_MAX);

/*
 * Varints
 */

static size_t varint_len(uint64_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Write @v at @buf, unless @buf is NULL; return its length either way */
static size_t put_varint(uint8_t *buf, uint64_t v)
{
    size_t n = 0;

    do {
        uint8_t byte = v & 0x7f;

        v >>= 7;
        if (v) {
            byte |= 0x80;
        }
        if (buf) {
            buf[n] = byte;
        }
        n++;
    } while (v);
    return n;
}

/*
 * Read the varint at @buf[*@off], of the @len bytes of @buf, into *@value
 * and advance *@off past it.  Fails on a varint that is cut off by the
 * end of @buf, longer than DRBD_RLE_VARINT_MAX bytes, beyond 64 bits or
 * overlong.
 */
static int get_varint(const uint8_t *buf, size_t len, size_t *off,
                      uint64_t *value, Error **errp)
{
    size_t at = *off;
    uint64_t v = 0;
    size_t n;

    for (n = 0; ; n++) {
        uint8_t byte;

        if (n == DRBD_RLE_VARINT_MAX) {
            error_setg(errp, "bitmap chunk: run length at byte %zu is "
                       "longer than %d bytes", at, DRBD_RLE_VARINT_MAX);
            return -EINVAL;
        }
        if (n >= len - at) {
            error_setg(errp, "bitmap chunk: run length at byte %zu is "
                       "truncated", at);
            return -EINVAL;
        }
        byte = buf[at + n];
        if (n == DRBD_RLE_VARINT_MAX - 1 && (byte & 0x7f) > 1) {
            error_setg(errp, "bitmap chunk: run length at byte %zu does "
                       "not fit in 64 bits", at);
            return -EINVAL;
        }
        v |= (uint64_t)(byte & 0x7f) << (7 * n);
        if (!(byte & 0x80)) {
            if (byte == 0 && n > 0) {
                error_setg(errp, "bitmap chunk: run length at byte %zu has "
                           "an overlong encoding", at);
                return -EINVAL;
            }
            break;
        }
    }

    *off = at + n + 1;
    *value = v;
    return 0;
}

/*
 * Encoding
 */

/* The length of the run of bits equal to @value that starts at @pos */
static uint64_t run_length(const HBitmap *hb, uint64_t size, uint64_t pos,
                           bool value)
{
    int64_t end;

    assert(pos < size);
    if (value) {
        end = hbitmap_next_zero(hb, pos, size - pos);
    } else {
        end = hbitmap_next_dirty(hb, pos, size - pos);
    }
    return end < 0 ? size - pos : end - pos;
}

/*
 * drbd_rle_encode(), except that @buf may be NULL to only count the bytes
 * that the chunk takes
 */
static size_t encode_chunk(const HBitmap *hb, uint64_t size, uint64_t *pos,
                           uint8_t *buf, size_t max_len)
{
    uint64_t start = *pos;
    uint64_t p = start;
    size_t off = CHUNK_RUNS;
    bool first;
    bool value;

    assert(hbitmap_granularity(hb) == 0);
    assert(max_len >= DRBD_RLE_MIN_CHUNK);
    assert(start <= size);

    if (start == size) {
        return 0;
    }

    first = value = hbitmap_get(hb, start);
    while (p < size && off < max_len) {
        uint64_t run = run_length(hb, size, p, value);
        size_t room = max_len - off;

        if (varint_len(run) > room) {
            /*
             * Split the run: take the most that @room bytes can say (room
             * is at most DRBD_RLE_VARINT_MAX - 1 here, so this is less than
             * @run); the next chunk starts with the rest.
             */
            run = (UINT64_C(1) << (7 * room)) - 1;
        }
        off += put_varint(buf ? buf + off : NULL, run);
        p += run;
        value = !value;
    }

    if (buf) {
        stq_be_p(buf + CHUNK_START, start);
        stq_be_p(buf + CHUNK_NBITS, p - start);
        buf[CHUNK_FIRST] = first;
        memset(buf + CHUNK_PAD, 0, CHUNK_RUNS - CHUNK_PAD);
    }
    *pos = p;
    return off;
}

size_t drbd_rle_encode(const HBitmap *hb, uint64_t size, uint64_t *pos,
                       uint8_t *buf, size_t max_len)
{
    assert(buf);
    return encode_chunk(hb, size, pos, buf, max_len);
}

uint64_t drbd_rle_encoded_size(const HBitmap *hb, uint64_t size,
                               size_t max_len, uint64_t *nchunks)
{
    uint64_t pos = 0;
    uint64_t total = 0;
    uint64_t chunks = 0;
    size_t n;

    while ((n = encode_chunk(hb, size, &pos, NULL, max_len)) != 0) {
        total += n;
        chunks++;
    }
    if (nchunks) {
        *nchunks = chunks;
    }
    return total;
}

/*
 * Decoding
 */

/*
 * Check the chunk in @buf; when @hb is not NULL, also set the bits of its
 * runs of ones in @hb (do that only with a chunk that was found valid).
 */
static int walk_chunk(const uint8_t *buf, size_t len, uint64_t expected_start,
                      HBitmap *hb, uint64_t size, uint64_t *next,
                      Error **errp)
{
    uint64_t start, nbits, done;
    bool value;
    size_t off;
    size_t i;

    if (len < CHUNK_RUNS) {
        error_setg(errp, "bitmap chunk: %zu bytes is shorter than its "
                   "%d-byte header", len, CHUNK_RUNS);
        return -EINVAL;
    }

    start = ldq_be_p(buf + CHUNK_START);
    nbits = ldq_be_p(buf + CHUNK_NBITS);

    for (i = CHUNK_PAD; i < CHUNK_RUNS; i++) {
        if (buf[i]) {
            error_setg(errp, "bitmap chunk: padding byte %zu is 0x%02x, "
                       "not zero", i, buf[i]);
            return -EINVAL;
        }
    }
    if (buf[CHUNK_FIRST] > 1) {
        error_setg(errp, "bitmap chunk: first run value is %u, not 0 or 1",
                   buf[CHUNK_FIRST]);
        return -EINVAL;
    }
    if (start != expected_start) {
        error_setg(errp, "bitmap chunk: starts at bit %" PRIu64
                   ", expected bit %" PRIu64, start, expected_start);
        return -EINVAL;
    }
    if (nbits == 0) {
        error_setg(errp, "bitmap chunk: describes no bits");
        return -EINVAL;
    }
    if (nbits > UINT64_MAX - start) {
        error_setg(errp, "bitmap chunk: %" PRIu64 " bits from bit %" PRIu64
                   " overflow", nbits, start);
        return -EINVAL;
    }
    if (start + nbits > size) {
        error_setg(errp, "bitmap chunk: %" PRIu64 " bits from bit %" PRIu64
                   " reach beyond the bitmap's %" PRIu64 " bits",
                   nbits, start, size);
        return -EINVAL;
    }

    value = buf[CHUNK_FIRST];
    done = 0;
    off = CHUNK_RUNS;
    while (off < len) {
        size_t at = off;
        uint64_t run;

        if (done == nbits) {
            error_setg(errp, "bitmap chunk: trailing data after the last "
                       "run (%zu bytes)", len - off);
            return -EINVAL;
        }
        if (get_varint(buf, len, &off, &run, errp) < 0) {
            return -EINVAL;
        }
        if (run == 0) {
            error_setg(errp, "bitmap chunk: run length at byte %zu is zero",
                       at);
            return -EINVAL;
        }
        if (run > nbits - done) {
            error_setg(errp, "bitmap chunk: runs sum to more than its %"
                       PRIu64 " bits", nbits);
            return -EINVAL;
        }
        if (hb && value) {
            hbitmap_set(hb, start + done, run);
        }
        done += run;
        value = !value;
    }
    if (done != nbits) {
        error_setg(errp, "bitmap chunk: runs sum to %" PRIu64 " of its %"
                   PRIu64 " bits", done, nbits);
        return -EINVAL;
    }

    *next = start + nbits;
    return 0;
}

int drbd_rle_decode(const uint8_t *buf, size_t len, uint64_t expected_start,
                    HBitmap *hb, uint64_t size, uint64_t *next,
                    Error **errp)
{
    uint64_t end;
    int ret;

    assert(hbitmap_granularity(hb) == 0);

    ret = walk_chunk(buf, len, expected_start, NULL, size, &end, errp);
    if (ret < 0) {
        return ret;
    }
    walk_chunk(buf, len, expected_start, hb, size, &end, &error_abort);
    *next = end;
    return 0;
}
