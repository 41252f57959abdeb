// The light pass (omr-light-v1) on an NVIDIA GPU, compiled at run time by NVRTC.
//
// For each key and NTT position x < D, for k < 2:
//   out[key][k][x] = sum_{j < n} E[j + 1 - k][x] * c_j[x]  mod Q,   Q = 2^62 - 2^16 + 1,
// where E is the batch's n + 1 shared plaintext rows and c_j the key's n rows, both in the CPU
// kernel's layout (blocks of 32 positions: block b holds, row after row, that row's 32 lanes).
// One thread per position and KEYS keys; consecutive threads read consecutive words of a row.
// Products are summed in 128 bits (hi, lo) and reduced every STEP of them: 16 products of
// residues below Q plus a reduced sum stay below 2^128. Outputs are canonical (below Q), so
// they equal the CPU kernel's whatever the reduction schedule.

typedef unsigned long long u64;

#define LANES 32
#define STEP 16
// Keys per thread: the host compiles with -DKEYS=<its choice> (device.rs, KEYS_PER_THREAD).
#ifndef KEYS
#define KEYS 2
#endif
#define Q 0x3FFFFFFFFFFF0001ULL

__device__ __forceinline__ void mac(u64 &hi, u64 &lo, u64 a, u64 b) {
    u64 p = a * b;
    lo += p;
    hi += __umul64hi(a, b) + (lo < p ? 1ULL : 0ULL);
}

// (hi * 2^64 + lo) mod Q, using 2^64 = 2^18 - 4 and 2^62 = 2^16 - 1 (mod Q).
__device__ __forceinline__ u64 reduce(u64 hi, u64 lo) {
    const u64 K = (1ULL << 18) - 4;
    u64 tlo = hi * K;
    u64 thi = __umul64hi(hi, K);
    u64 ylo = tlo + lo;
    u64 yhi = thi + (ylo < tlo ? 1ULL : 0ULL);  // y < 2^83: yhi < 2^19
    u64 t = yhi * K;                            // < 2^37
    u64 z = ylo + t;
    if (z < t) z += K;                          // wrapped: z < 2^37, so no second wrap
    z = (z >> 62) * 0xFFFFULL + (z & 0x3FFFFFFFFFFFFFFFULL);  // < 2^62 + 3 * 2^16
    if (z >= Q) z -= Q;
    if (z >= Q) z -= Q;
    return z;
}

extern "C" __global__ void light_pass(
    const u64 *__restrict__ plain,
    const u64 *const *__restrict__ keys,
    u64 *__restrict__ out,
    unsigned n,
    unsigned d,
    unsigned nkeys)
{
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned k0 = blockIdx.y * KEYS;
    if (x >= d || k0 >= nkeys) return;
    unsigned here = nkeys - k0 < KEYS ? nkeys - k0 : KEYS;
    size_t block = x / LANES, lane = x % LANES;
    const u64 *p = plain + block * (size_t)(n + 1) * LANES + lane;
    const u64 *c[KEYS];
    u64 h0[KEYS], l0[KEYS], h1[KEYS], l1[KEYS];
#pragma unroll
    for (int i = 0; i < KEYS; i++) {
        // A missing second key reads the first again (its sums are not written).
        c[i] = keys[k0 + (i < here ? i : 0)] + block * (size_t)n * LANES + lane;
        h0[i] = l0[i] = h1[i] = l1[i] = 0;
    }
    u64 e1 = p[0];
    for (unsigned j0 = 0; j0 < n; j0 += STEP) {
#pragma unroll
        for (int s = 0; s < STEP; s++) {
            size_t j = j0 + s;
            u64 e0 = p[(j + 1) * LANES];
#pragma unroll
            for (int i = 0; i < KEYS; i++) {
                u64 cv = c[i][j * LANES];
                mac(h0[i], l0[i], e0, cv);
                mac(h1[i], l1[i], e1, cv);
            }
            e1 = e0;
        }
#pragma unroll
        for (int i = 0; i < KEYS; i++) {
            l0[i] = reduce(h0[i], l0[i]);
            l1[i] = reduce(h1[i], l1[i]);
            h0[i] = h1[i] = 0;
        }
    }
    for (unsigned i = 0; i < here; i++) {
        u64 *o = out + (size_t)(k0 + i) * 2 * d;
        o[x] = l0[i];
        o[d + x] = l1[i];
    }
}

__device__ __forceinline__ u64 mulmod(u64 a, u64 b) {
    return reduce(__umul64hi(a, b), a * b);
}

__device__ __forceinline__ u64 addmod(u64 a, u64 b) {
    u64 s = a + b;
    return s >= Q ? s - Q : s;
}

__device__ __forceinline__ u64 submod(u64 a, u64 b) {
    return a >= b ? a - b : a + (Q - b);
}

// One block per row of sums (2 per key; row r is output k = r % 2 of key r / 2): the row's
// inverse negacyclic NTT in shared memory (Gentleman-Sande butterflies, from tfhe-ntt's
// bit-reversed order to coefficients; twiddles holds psi^-br(k)), times d^-1; then, for each of
// the batch's first `count` coefficients c[i], the digest's value
//   round((scaled_b[k][i] - c[i] mod Q) * scale) mod 2^log_to
// (omr-light's modulus switch: the f64 product rounded half away from zero, as Rust's
// f64::round), written as 32 bits to out, rows of `count`. The host mirror is
// InverseTables::inverse and crate::mirror_switch.
extern "C" __global__ void light_inverse(
    const u64 *__restrict__ sums,
    const u64 *__restrict__ twiddles,
    unsigned *__restrict__ out,
    unsigned d,
    unsigned count,
    u64 d_inv,
    const u64 *__restrict__ scaled_b,
    double scale,
    unsigned log_to)
{
    extern __shared__ u64 a[];
    const u64 *row = sums + (size_t)blockIdx.x * d;
    for (unsigned i = threadIdx.x; i < d; i += blockDim.x) a[i] = row[i];
    __syncthreads();
    unsigned t = 1;
    for (unsigned m = d; m > 1; m >>= 1) {
        unsigned h = m >> 1;
        for (unsigned b = threadIdx.x; b < d / 2; b += blockDim.x) {
            unsigned i = b / t, j = b % t;
            unsigned j1 = 2 * i * t + j;
            u64 u = a[j1], v = a[j1 + t];
            a[j1] = addmod(u, v);
            a[j1 + t] = mulmod(submod(u, v), twiddles[h + i]);
        }
        t <<= 1;
        __syncthreads();
    }
    const u64 *b = scaled_b + (size_t)(blockIdx.x % 2) * d;
    const u64 mask = (1ULL << log_to) - 1;
    unsigned *o = out + (size_t)blockIdx.x * count;
    for (unsigned i = threadIdx.x; i < count; i += blockDim.x) {
        u64 x = submod(b[i], mulmod(a[i], d_inv));
        double v = __dmul_rn(__ull2double_rn(x), scale);
        o[i] = (unsigned)(((u64)round(v)) & mask);
    }
}
