/* CRC-32 (zlib's polynomial) of long buffers by carry-less multiplication (issue 18).
 *
 * How it works: the body CRC of every record (RocketMQ's BODYCRC, java.util.zip.CRC32, which
 * the JVM computes with the same instructions) was a slice-by-8 table loop, ~16 % of a 1 KiB
 * put. On x86-64 CPUs with PCLMULQDQ, crc_fold() folds the buffer 64 bytes at a time into
 * four 128-bit lanes (each lane multiplied by x^(512+-32) mod P, the published reflected
 * constants of the folding method), then the four lanes into one, 16 bytes at a time; what
 * is left is a 16-byte value with the same CRC remainder as the bytes it replaced, which the
 * caller finishes with its table loop (no Barrett reduction to get wrong). The CPU is asked
 * once at run time; elsewhere (other CPUs, other compilers) crc_fold is never called. Checked
 * against zlib.crc32 for every length 0..1100 and random data by the tests (`crc32`).
 */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CRC_HAVE_FOLD 1

/* 1: the CPU has PCLMULQDQ and SSE4.1; 0: not; -1: not asked yet */
static int CRC_FOLD_OK = -1;

static int crc_fold_ok(void) {
    if (CRC_FOLD_OK < 0) {
        __builtin_cpu_init();
        CRC_FOLD_OK = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    return CRC_FOLD_OK;
}

/* one lane x folded over `k` (lo: the constant for x's low half, hi: for its high half) */
__attribute__((target("pclmul,sse4.1"))) static inline __m128i crc_fold1(__m128i x, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* Fold p[0:n) (n >= 64) with running (inverted) state c into out[16]; returns the bytes
 * consumed (a multiple of 16, n - consumed < 16). The CRC state over the consumed bytes is
 * the table loop from state 0 over out[0:16). */
__attribute__((target("pclmul,sse4.1"))) static Py_ssize_t
crc_fold(const unsigned char *p, Py_ssize_t n, uint32_t c, unsigned char out[16]) {
    const __m128i k4 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL); /* hi, lo: 4 lanes */
    const __m128i k1 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL); /* hi, lo: 1 lane */
    const unsigned char *start = p;
    __m128i x0 = _mm_loadu_si128((const __m128i *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)c));
    p += 64;
    n -= 64;
    while (n >= 64) {
        x0 = _mm_xor_si128(crc_fold1(x0, k4), _mm_loadu_si128((const __m128i *)p));
        x1 = _mm_xor_si128(crc_fold1(x1, k4), _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = _mm_xor_si128(crc_fold1(x2, k4), _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = _mm_xor_si128(crc_fold1(x3, k4), _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    x0 = _mm_xor_si128(crc_fold1(x0, k1), x1);
    x0 = _mm_xor_si128(crc_fold1(x0, k1), x2);
    x0 = _mm_xor_si128(crc_fold1(x0, k1), x3);
    while (n >= 16) {
        x0 = _mm_xor_si128(crc_fold1(x0, k1), _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    _mm_storeu_si128((__m128i *)out, x0);
    return (Py_ssize_t)(p - start);
}
#else
#define CRC_HAVE_FOLD 0
#endif
