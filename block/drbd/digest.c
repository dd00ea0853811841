/*
 * DRBD-style replication: digests of data
 *
 * The digests that data-integrity-alg puts on replicated writes, that
 * online verify (verify-alg) and checksum-based resync (csums-alg)
 * compute per 4 KiB block, and the comparison of a range of our data
 * with the digests the peer sent for it, in the order of the writes the
 * peer sent before (the one thing here that does I/O).
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "crypto/hash.h"
#include "qapi/error.h"
#include "qemu/crc32c.h"
#include "trace.h"

#include "drbd-int.h"

#ifdef HOST_X86_64
#include <immintrin.h>

/*
 * Bytes of each of the three streams a long buffer is cut into: the
 * crc32 instruction takes three cycles to give its result but starts a
 * new one every cycle, so three independent streams run three times as
 * fast as one, and are joined by shifting a stream's CRC over the
 * length of the next ones.  Three streams of 1360 bytes cover all but
 * 16 bytes of a 4 KiB block, the unit of verify and csums digests.
 */
#define DRBD_CRC32C_STREAM  1360

/*
 * The CRC register moved over DRBD_CRC32C_STREAM zero bytes, a linear
 * map: the images of each byte value at each of the four byte positions
 */
static uint32_t drbd_crc32c_shift_table[4][256];

/*
 * Where the CPU multiplies without carries on 512 bits (VPCLMULQDQ with
 * AVX-512), a CRC goes faster still by folding: 64 bytes of data, as a
 * polynomial, times x^(8 * d) modulo the CRC's polynomial give 64 bytes
 * that have the same CRC at d bytes further on; so 256 bytes at a time
 * fold into four 64-byte accumulators, which fold into one 16-byte
 * remainder, whose CRC (by the crc32 instruction) is the data's.  With
 * 256 bits (VPCLMULQDQ with AVX2), eight 32-byte accumulators.  For a
 * distance of d bytes, each 16-byte lane takes its first 8 bytes times
 * x^(8d + 31) and its last 8 times x^(8d - 33), in the bit-reflected
 * order of CRC-32C (drbd_crc32c_xpow()).
 */
#define DRBD_CRC32C_FOLD_BLOCK  256
enum { DRBD_FOLD_16, DRBD_FOLD_32, DRBD_FOLD_48, DRBD_FOLD_64,
       DRBD_FOLD_256, DRBD_FOLD__MAX };
static const unsigned drbd_crc32c_fold_dist[DRBD_FOLD__MAX] = {
    16, 32, 48, 64, 256,
};
/* [i][0] for the first 8 bytes of a lane, [i][1] for the last 8 */
static uint64_t drbd_crc32c_fold_k[DRBD_FOLD__MAX][2];

/* x^@n modulo CRC-32C's polynomial, bit-reflected as its register */
static uint32_t drbd_crc32c_xpow(unsigned n)
{
    uint32_t c = 0x80000000;        /* x^0 */

    while (n--) {
        c = (c & 1) ? (c >> 1) ^ 0x82f63b78 : c >> 1;
    }
    return c;
}

static inline __m128i __attribute__((target("sse2")))
drbd_crc32c_k128(int i)
{
    return _mm_set_epi64x(drbd_crc32c_fold_k[i][1],
                          drbd_crc32c_fold_k[i][0]);
}

#define DRBD_FOLD512(a, k, next) \
    _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00), \
                              _mm512_clmulepi64_epi128(a, k, 0x11), \
                              next, 0x96)
#define DRBD_FOLD128(a, k, next) \
    _mm_ternarylogic_epi64(_mm_clmulepi64_si128(a, k, 0x00), \
                           _mm_clmulepi64_si128(a, k, 0x11), next, 0x96)

/*
 * The CRC register @crc moved over @len bytes at @p, a multiple of
 * DRBD_CRC32C_FOLD_BLOCK, by folding
 */
static uint32_t
__attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))
drbd_crc32c_fold(uint32_t crc, const uint8_t *p, size_t len)
{
    /* The maskz forms: GCC 12's plain ones warn of an undefined value */
    __m512i k256 = _mm512_maskz_broadcast_i32x4(0xffff, drbd_crc32c_k128(
                                                DRBD_FOLD_256));
    __m512i k64 = _mm512_maskz_broadcast_i32x4(0xffff, drbd_crc32c_k128(
                                               DRBD_FOLD_64));
    __m512i a0 = _mm512_loadu_si512(p);
    __m512i a1 = _mm512_loadu_si512(p + 64);
    __m512i a2 = _mm512_loadu_si512(p + 128);
    __m512i a3 = _mm512_loadu_si512(p + 192);
    __m128i l0, l1, l2, l3, r;
    uint64_t c;

    assert(len >= DRBD_CRC32C_FOLD_BLOCK &&
           len % DRBD_CRC32C_FOLD_BLOCK == 0);
    /* The register's start value goes into the first bytes */
    a0 = _mm512_xor_si512(a0, _mm512_maskz_set1_epi32(1, crc));
    for (p += DRBD_CRC32C_FOLD_BLOCK, len -= DRBD_CRC32C_FOLD_BLOCK; len;
         p += DRBD_CRC32C_FOLD_BLOCK, len -= DRBD_CRC32C_FOLD_BLOCK) {
        a0 = DRBD_FOLD512(a0, k256, _mm512_loadu_si512(p));
        a1 = DRBD_FOLD512(a1, k256, _mm512_loadu_si512(p + 64));
        a2 = DRBD_FOLD512(a2, k256, _mm512_loadu_si512(p + 128));
        a3 = DRBD_FOLD512(a3, k256, _mm512_loadu_si512(p + 192));
    }
    a1 = DRBD_FOLD512(a0, k64, a1);
    a2 = DRBD_FOLD512(a1, k64, a2);
    a3 = DRBD_FOLD512(a2, k64, a3);
    l0 = _mm512_maskz_extracti32x4_epi32(0xf, a3, 0);
    l1 = _mm512_maskz_extracti32x4_epi32(0xf, a3, 1);
    l2 = _mm512_maskz_extracti32x4_epi32(0xf, a3, 2);
    l3 = _mm512_maskz_extracti32x4_epi32(0xf, a3, 3);
    r = DRBD_FOLD128(l0, drbd_crc32c_k128(DRBD_FOLD_48), l3);
    r = DRBD_FOLD128(l1, drbd_crc32c_k128(DRBD_FOLD_32), r);
    r = DRBD_FOLD128(l2, drbd_crc32c_k128(DRBD_FOLD_16), r);
    c = _mm_crc32_u64(0, _mm_cvtsi128_si64(r));
    return _mm_crc32_u64(c, _mm_extract_epi64(r, 1));
}

#define DRBD_FOLD256(a, k, next) \
    _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00), \
                                      _mm256_clmulepi64_epi128(a, k, 0x11)), \
                     next)
#define DRBD_FOLD128_SSE(a, k, next) \
    _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), \
                                _mm_clmulepi64_si128(a, k, 0x11)), next)

/*
 * drbd_crc32c_fold() where VPCLMULQDQ multiplies 256 bits at a time (with
 * AVX2, without AVX-512): the same 256 bytes at a time, in eight 32-byte
 * accumulators
 */
static uint32_t __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2")))
drbd_crc32c_fold256(uint32_t crc, const uint8_t *p, size_t len)
{
    __m256i k256 = _mm256_broadcastsi128_si256(drbd_crc32c_k128(
                                               DRBD_FOLD_256));
    __m256i k32 = _mm256_broadcastsi128_si256(drbd_crc32c_k128(
                                              DRBD_FOLD_32));
    __m256i a[8];
    __m128i r;
    uint64_t c;
    int i;

    assert(len >= DRBD_CRC32C_FOLD_BLOCK &&
           len % DRBD_CRC32C_FOLD_BLOCK == 0);
    for (i = 0; i < 8; i++) {
        a[i] = _mm256_loadu_si256((const __m256i *)(p + 32 * i));
    }
    /* The register's start value goes into the first bytes */
    a[0] = _mm256_xor_si256(a[0], _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0,
                                                   (int)crc));
    for (p += DRBD_CRC32C_FOLD_BLOCK, len -= DRBD_CRC32C_FOLD_BLOCK; len;
         p += DRBD_CRC32C_FOLD_BLOCK, len -= DRBD_CRC32C_FOLD_BLOCK) {
        for (i = 0; i < 8; i++) {
            a[i] = DRBD_FOLD256(a[i], k256, _mm256_loadu_si256(
                                (const __m256i *)(p + 32 * i)));
        }
    }
    for (i = 1; i < 8; i++) {
        a[i] = DRBD_FOLD256(a[i - 1], k32, a[i]);
    }
    r = DRBD_FOLD128_SSE(_mm256_castsi256_si128(a[7]),
                         drbd_crc32c_k128(DRBD_FOLD_16),
                         _mm256_extracti128_si256(a[7], 1));
    c = _mm_crc32_u64(0, _mm_cvtsi128_si64(r));
    return _mm_crc32_u64(c, _mm_extract_epi64(r, 1));
}

static uint64_t __attribute__((target("sse4.2")))
drbd_crc32c_zeroes(uint64_t c, size_t len)
{
    for (; len >= 8; len -= 8) {
        c = _mm_crc32_u64(c, 0);
    }
    return c;
}

/*
 * What the CPU has, DRBD_CRC32C_*: the first call fills the tables of
 * what it has
 */
static int drbd_crc32c_hw(void)
{
    static gsize state;     /* 0: not yet known, else DRBD_CRC32C_* */

    if (g_once_init_enter(&state)) {
        gsize hw = DRBD_CRC32C_SOFT;

        if (__builtin_cpu_supports("sse4.2")) {
            for (int b = 0; b < 4; b++) {
                for (int v = 0; v < 256; v++) {
                    drbd_crc32c_shift_table[b][v] =
                        drbd_crc32c_zeroes((uint32_t)v << (8 * b),
                                           DRBD_CRC32C_STREAM);
                }
            }
            hw = DRBD_CRC32C_SSE42;
        }
        if (hw == DRBD_CRC32C_SSE42 && __builtin_cpu_supports("avx2") &&
            __builtin_cpu_supports("vpclmulqdq") &&
            __builtin_cpu_supports("pclmul")) {
            for (int i = 0; i < DRBD_FOLD__MAX; i++) {
                unsigned bits = 8 * drbd_crc32c_fold_dist[i];

                drbd_crc32c_fold_k[i][0] = drbd_crc32c_xpow(bits + 31);
                drbd_crc32c_fold_k[i][1] = drbd_crc32c_xpow(bits - 33);
            }
            hw = DRBD_CRC32C_FOLD256;
            if (__builtin_cpu_supports("avx512f") &&
                __builtin_cpu_supports("avx512vl")) {
                hw = DRBD_CRC32C_FOLDING;
            }
        }
        g_once_init_leave(&state, hw);
    }
    return state;
}

/* The register @c moved over DRBD_CRC32C_STREAM zero bytes */
static inline uint64_t drbd_crc32c_shift(uint64_t c)
{
    return drbd_crc32c_shift_table[0][c & 0xff] ^
           drbd_crc32c_shift_table[1][(c >> 8) & 0xff] ^
           drbd_crc32c_shift_table[2][(c >> 16) & 0xff] ^
           drbd_crc32c_shift_table[3][(c >> 24) & 0xff];
}

/* CRC-32C with SSE4.2's crc32 instruction: QEMU's crc32c(), faster */
static uint32_t __attribute__((target("sse4.2")))
drbd_crc32c_sse42(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c = crc;

    for (; len && ((uintptr_t)p & 7); len--) {
        c = _mm_crc32_u8(c, *p++);
    }
    /*
     * The register is linear in its start value and the data: the CRC
     * of A|B from c is that of A from c moved over |B| zero bytes, xor
     * that of B from zero
     */
    for (; len >= 3 * DRBD_CRC32C_STREAM; len -= 3 * DRBD_CRC32C_STREAM,
                                          p += 3 * DRBD_CRC32C_STREAM) {
        const uint8_t *p1 = p + DRBD_CRC32C_STREAM;
        const uint8_t *p2 = p + 2 * DRBD_CRC32C_STREAM;
        uint64_t c1 = 0, c2 = 0;

        for (size_t i = 0; i < DRBD_CRC32C_STREAM; i += 8) {
            c = _mm_crc32_u64(c, ldq_le_p(p + i));
            c1 = _mm_crc32_u64(c1, ldq_le_p(p1 + i));
            c2 = _mm_crc32_u64(c2, ldq_le_p(p2 + i));
        }
        c = drbd_crc32c_shift(drbd_crc32c_shift(c) ^ c1) ^ c2;
    }
    for (; len >= 8; len -= 8, p += 8) {
        c = _mm_crc32_u64(c, ldq_le_p(p));
    }
    for (; len; len--) {
        c = _mm_crc32_u8(c, *p++);
    }
    return c;
}
#endif

/*
 * As QEMU's iov_crc32c() (whose value the wire carries), with the
 * hardware's CRC-32C where the CPU has one: the table-driven crc32c()
 * digests a few hundred MiB/s, slower than the link a resync or verify
 * could use
 */
uint32_t drbd_crc32c_iov_upto(const struct iovec *iov, size_t niov, int max)
{
    uint32_t crc = 0xffffffff;
#ifdef HOST_X86_64
    int hw = MIN(drbd_crc32c_hw(), max);
#endif

    /* crc32c() inverts what it returns; the instruction does not */
    for (; niov; niov--, iov++) {
#ifdef HOST_X86_64
        const uint8_t *p = iov->iov_base;
        size_t len = iov->iov_len;

        if (hw >= DRBD_CRC32C_FOLD256 && len >= DRBD_CRC32C_FOLD_BLOCK) {
            size_t n = len - len % DRBD_CRC32C_FOLD_BLOCK;

            crc = hw == DRBD_CRC32C_FOLDING ? drbd_crc32c_fold(crc, p, n) :
                  drbd_crc32c_fold256(crc, p, n);
            p += n;
            len -= n;
        }
        if (hw >= DRBD_CRC32C_SSE42) {
            crc = drbd_crc32c_sse42(crc, p, len);
            continue;
        }
#endif
        crc = crc32c(crc, iov->iov_base, iov->iov_len) ^ 0xffffffff;
    }
    return crc ^ 0xffffffff;
}

uint32_t drbd_crc32c_iov(const struct iovec *iov, size_t niov)
{
    return drbd_crc32c_iov_upto(iov, niov, DRBD_CRC32C_FOLDING);
}

/* The hash behind each DRBD_DIGEST_* but crc32c, QEMU's own */
static const struct {
    uint32_t digest;
    QCryptoHashAlgo alg;
} drbd_hash_algs[] = {
    { DRBD_DIGEST_MD5,          QCRYPTO_HASH_ALGO_MD5 },
    { DRBD_DIGEST_SHA1,         QCRYPTO_HASH_ALGO_SHA1 },
    { DRBD_DIGEST_SHA224,       QCRYPTO_HASH_ALGO_SHA224 },
    { DRBD_DIGEST_SHA256,       QCRYPTO_HASH_ALGO_SHA256 },
    { DRBD_DIGEST_SHA384,       QCRYPTO_HASH_ALGO_SHA384 },
    { DRBD_DIGEST_SHA512,       QCRYPTO_HASH_ALGO_SHA512 },
    { DRBD_DIGEST_RIPEMD160,    QCRYPTO_HASH_ALGO_RIPEMD160 },
};

bool drbd_digest_hash_alg(uint32_t digest, QCryptoHashAlgo *alg)
{
    for (size_t i = 0; i < ARRAY_SIZE(drbd_hash_algs); i++) {
        if (drbd_hash_algs[i].digest == digest) {
            *alg = drbd_hash_algs[i].alg;
            return true;
        }
    }
    return false;
}

bool drbd_digest_of_hash(QCryptoHashAlgo alg, uint32_t *digest)
{
    for (size_t i = 0; i < ARRAY_SIZE(drbd_hash_algs); i++) {
        if (drbd_hash_algs[i].alg == alg) {
            *digest = drbd_hash_algs[i].digest;
            return true;
        }
    }
    return false;
}

/* The QAPI's digest algorithms as the wire names them */
static const uint32_t drbd_digest_of_qapi[DRBD_DIGEST_ALG__MAX] = {
    [DRBD_DIGEST_ALG_CRC32C]    = DRBD_DIGEST_CRC32C,
    [DRBD_DIGEST_ALG_MD5]       = DRBD_DIGEST_MD5,
    [DRBD_DIGEST_ALG_SHA1]      = DRBD_DIGEST_SHA1,
    [DRBD_DIGEST_ALG_SHA224]    = DRBD_DIGEST_SHA224,
    [DRBD_DIGEST_ALG_SHA256]    = DRBD_DIGEST_SHA256,
    [DRBD_DIGEST_ALG_SHA384]    = DRBD_DIGEST_SHA384,
    [DRBD_DIGEST_ALG_SHA512]    = DRBD_DIGEST_SHA512,
    [DRBD_DIGEST_ALG_RIPEMD160] = DRBD_DIGEST_RIPEMD160,
};

uint32_t drbd_digest_of_alg(DrbdDigestAlg alg)
{
    assert(alg < DRBD_DIGEST_ALG__MAX);
    return drbd_digest_of_qapi[alg];
}

/* Bytes of a DRBD_DIGEST_* digest, 0 for none or one we cannot compute */
size_t drbd_digest_size(uint32_t digest)
{
    QCryptoHashAlgo alg;

    if (digest == DRBD_DIGEST_CRC32C) {
        return 4;
    }
    if (!drbd_digest_hash_alg(digest, &alg) || !qcrypto_hash_supports(alg)) {
        return 0;
    }
    return qcrypto_hash_digest_len(alg);
}

/*
 * The @digest of the data in @iov into @out (drbd_digest_size() bytes);
 * crc32c is CRC-32C as iSCSI's, big-endian
 */
int drbd_digest_iov(uint32_t digest, const struct iovec *iov, size_t niov,
                    uint8_t *out, Error **errp)
{
    size_t len = drbd_digest_size(digest);
    QCryptoHashAlgo alg;

    if (!len) {
        error_setg(errp, "cannot compute a %s digest",
                   drbd_digest_name(digest));
        return -EINVAL;
    }
    if (digest == DRBD_DIGEST_CRC32C) {
        stl_be_p(out, drbd_crc32c_iov(iov, niov));
        return len;
    }
    drbd_digest_hash_alg(digest, &alg);
    if (qcrypto_hash_bytesv(alg, iov, niov, &out, &len, errp) < 0) {
        return -EIO;
    }
    return len;
}

int drbd_block_digests(uint32_t digest, const uint8_t *buf, uint32_t bytes,
                       uint8_t *out, Error **errp)
{
    size_t dsize = drbd_digest_size(digest);
    uint32_t i;

    for (i = 0; i < drbd_ov_blocks(bytes); i++) {
        struct iovec iov = {
            .iov_base = (uint8_t *)buf + i * DRBD_OV_BLOCK,
            .iov_len = MIN(DRBD_OV_BLOCK, bytes - i * DRBD_OV_BLOCK),
        };

        if (drbd_digest_iov(digest, &iov, 1, out + i * dsize, errp) < 0) {
            return -EIO;
        }
    }
    return 0;
}

uint64_t drbd_block_digests_differ(const uint8_t *mine,
                                   const uint8_t *theirs, uint32_t bytes,
                                   size_t dsize)
{
    uint64_t mask = 0;
    uint32_t i;

    for (i = 0; i < drbd_ov_blocks(bytes); i++) {
        if (memcmp(mine + i * dsize, theirs + i * dsize, dsize)) {
            mask |= 1ULL << i;
        }
    }
    return mask;
}

int drbd_digest_attach(uint32_t alg, DrbdDataPacket *p,
                       const struct iovec *iov, size_t niov, uint8_t *buf,
                       Error **errp)
{
    int len;

    if (alg == DRBD_DIGEST_NONE) {
        return 0;
    }
    len = drbd_digest_iov(alg, iov, niov, buf, errp);
    if (len < 0) {
        return len;
    }
    p->digest = buf;
    p->digest_len = len;
    return 0;
}

int drbd_check_integrity(uint32_t alg, uint16_t cmd, const DrbdDataPacket *p,
                         Error **errp)
{
    uint8_t digest[DRBD_WIRE_DIGEST_MAX];
    struct iovec iov = { (void *)p->data, p->bytes };
    int len;

    if (alg == DRBD_DIGEST_NONE) {
        if (p->digest_len) {
            error_setg(errp, "%s packet carries a digest, but "
                       "data-integrity-alg is not set",
                       drbd_cmd_name(cmd));
            return -EINVAL;
        }
        return 0;
    }
    if (p->digest_len != drbd_digest_size(alg)) {
        error_setg(errp, "%s packet carries a digest of %" PRIu32 " bytes, "
                   "data-integrity-alg %s has %zu", drbd_cmd_name(cmd),
                   p->digest_len, drbd_digest_name(alg),
                   drbd_digest_size(alg));
        return -EINVAL;
    }
    len = drbd_digest_iov(alg, &iov, 1, digest, errp);
    if (len < 0) {
        return len;
    }
    if (memcmp(digest, p->digest, len) != 0) {
        error_setg(errp, "%s at offset %" PRIu64 " (%" PRIu32 " bytes) does "
                   "not match its %s digest", drbd_cmd_name(cmd), p->offset,
                   p->bytes, drbd_digest_name(alg));
        return -EBADMSG;
    }
    return 0;
}

int coroutine_fn drbd_read_digests(BDRVDrbdState *s, uint32_t alg,
                                   uint64_t offset, uint32_t bytes,
                                   uint8_t *digests, Error **errp)
{
    uint8_t *buf = drbd_chunk_buf_get(s);
    int ret;

    ret = drbd_co_read_local(s, offset, bytes, buf);
    if (ret == -ECANCELED) {
        error_setg(errp, "the node is closing");
    } else if (ret < 0) {
        error_setg_errno(errp, -ret, "reading %" PRIu32 " bytes at %"
                         PRIu64 " failed", bytes, offset);
    } else {
        ret = drbd_block_digests(alg, buf, bytes, digests, errp);
    }
    drbd_chunk_buf_put(s, buf);
    return ret;
}

/* A comparison on its way: its range is in peer->apply_reqs */
typedef struct DrbdCompare {
    DrbdPeer *peer;
    uint32_t alg;
    DrbdOvPacket p;             /* digests point into @digests */
    uint8_t *digests;           /* the peer's */
    BlockReq req;
    DrbdCompareDone *done;
    void *opaque;
} DrbdCompare;

static void coroutine_fn drbd_compare_co(void *opaque)
{
    DrbdCompare *c = opaque;
    DrbdPeer *peer = c->peer;
    size_t dsize = drbd_digest_size(c->alg);
    g_autofree uint8_t *mine = g_malloc(drbd_ov_blocks(c->p.bytes) * dsize);
    uint64_t mismatch = 0;
    Error *err = NULL;
    int ret;

    ret = drbd_read_digests(peer->s, c->alg, c->p.offset, c->p.bytes, mine,
                            &err);
    if (ret == 0) {
        mismatch = drbd_block_digests_differ(mine, c->digests, c->p.bytes,
                                             dsize);
    }
    /* The writes after it may go */
    reqlist_remove_req(&c->req);
    c->done(peer, &c->p, ret, mismatch, err, c->opaque);
    g_free(c->digests);
    g_free(c);
    drbd_peer_put(peer);
}

void coroutine_fn drbd_compare_in_order(DrbdPeer *peer, uint32_t alg,
                                        const DrbdOvPacket *p,
                                        DrbdCompareDone *done, void *opaque)
{
    DrbdCompare *c = g_new0(DrbdCompare, 1);

    assert(p->digest_size == drbd_digest_size(alg));
    c->peer = peer;
    c->alg = alg;
    c->p = *p;
    c->digests = g_memdup2(p->digests,
                           (size_t)drbd_ov_blocks(p->bytes) * p->digest_size);
    c->p.digests = c->digests;
    c->done = done;
    c->opaque = opaque;
    /* After the writes received before it; the ones after it wait */
    reqlist_wait_all(&peer->apply_reqs, p->offset, p->bytes, NULL);
    reqlist_init_req(&peer->apply_reqs, &c->req, p->offset, p->bytes);
    drbd_peer_spawn_here(peer, drbd_compare_co, c);
}
