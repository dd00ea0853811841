/*
 * Fuzz targets for the decoders of untrusted bytes in block/drbd
 *
 * Each target is one function run over one input.  Built for libFuzzer
 * (scripts/fuzz.sh defines DRBD_FUZZ_LIBFUZZER) it is the fuzzer's
 * LLVMFuzzerTestOneInput; built into the unit test test-drbd-fuzz, which
 * runs every target over its seed corpus in tests/fuzz/corpus/, it has a
 * name of its own, so that all targets live in one program.
 *
 * A target returns 0.  A broken invariant aborts (assert), which both
 * libFuzzer and the unit test report as a failure.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef TESTS_FUZZ_FUZZ_H
#define TESTS_FUZZ_FUZZ_H

#include "qapi/error.h"
#include "qemu/bswap.h"
#include "qemu/crc32c.h"

#ifdef DRBD_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
#define DRBD_FUZZ_TARGET(name) \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
#else
#define DRBD_FUZZ_TARGET(name) \
    int drbd_fuzz_##name(const uint8_t *data, size_t size)
#endif

int drbd_fuzz_wire(const uint8_t *data, size_t size);
int drbd_fuzz_rle(const uint8_t *data, size_t size);
int drbd_fuzz_superblock(const uint8_t *data, size_t size);
int drbd_fuzz_al(const uint8_t *data, size_t size);
int drbd_fuzz_gate(const uint8_t *data, size_t size);

/* The unconsumed part of an input */
typedef struct FuzzInput {
    const uint8_t *p;
    size_t len;
} FuzzInput;

/*
 * Take the next @n bytes: a pointer to them, or NULL (taking nothing)
 * when fewer are left
 */
static inline const uint8_t *fuzz_take(FuzzInput *in, size_t n)
{
    const uint8_t *p = in->p;

    if (in->len < n) {
        return NULL;
    }
    in->p += n;
    in->len -= n;
    return p;
}

/* The next byte, or 0 once the input is used up */
static inline uint8_t fuzz_u8(FuzzInput *in)
{
    const uint8_t *p = fuzz_take(in, 1);

    return p ? *p : 0;
}

/*
 * Copy the next @n bytes to *@copy, a buffer of exactly that size, so
 * that AddressSanitizer catches a decoder that reads past what it was
 * given (no buffer at all, NULL, for 0 bytes).  False, taking nothing,
 * when fewer are left.  The caller frees *@copy.
 */
static inline bool fuzz_take_copy(FuzzInput *in, size_t n, uint8_t **copy)
{
    const uint8_t *p = fuzz_take(in, n);

    if (!p) {
        return false;
    }
    *copy = n ? g_memdup2(p, n) : NULL;
    return true;
}

/*
 * A refusal that ends an input: with DRBD_FUZZ_VERBOSE set in the
 * environment, say why (to see how far an input gets)
 */
static inline void fuzz_refused(const Error *err)
{
    static int verbose = -1;

    if (verbose < 0) {
        verbose = getenv("DRBD_FUZZ_VERBOSE") != NULL;
    }
    if (verbose) {
        fprintf(stderr, "refused: %s\n", error_get_pretty(err));
    }
}

/*
 * The length of a DRBD_DIGEST_* digest, as secure.c's drbd_digest_size()
 * gives it where every algorithm is available (which the targets, built
 * without the crypto code, cannot ask): 0 for none and for numbers past
 * the table
 */
static inline uint32_t fuzz_digest_size(unsigned digest)
{
    /* none, md5, sha1, sha224, sha256, sha384, sha512, ripemd160, crc32c */
    static const uint8_t sizes[] = { 0, 16, 20, 28, 32, 48, 64, 20, 4 };

    return digest < ARRAY_SIZE(sizes) ? sizes[digest] : 0;
}

/*
 * Store in the 4096-byte metadata block @blk the checksum that
 * docs/interop/drbd-metadata.rst defines: CRC-32C of the whole block with
 * the 4-byte field at @crc_off taken as zero, big-endian.  A target seals
 * what it mutated so that the decoders look past the checksum.
 */
static inline void fuzz_seal_block(uint8_t *blk, size_t crc_off)
{
    stl_be_p(blk + crc_off, 0);
    stl_be_p(blk + crc_off, crc32c(0xffffffff, blk, 4096));
}

#endif /* TESTS_FUZZ_FUZZ_H */
