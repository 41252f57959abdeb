//! The public matrix A and the three products of the scheme, all modulo 2^32:
//! the hint D·A (server, once per database), answers D·q (server, per fetch) and queries A·s
//! (client, per fetch).
//!
//! A (R × n) is never stored whole: row c is ChaCha20 with the database's seed on stream c, so any
//! row block can be made on any thread. D is the database, column-major (column c is bytes
//! [c·W, (c+1)·W)), holding raw bytes b; the scheme computes with the centred values b - 128
//! (smaller noise), which the kernels get from the raw products by one correction per row.
//!
//! The loops are written for the compiler's vectoriser (wrapping `u32` multiply-adds over
//! contiguous slices, unrolled by four columns so each accumulator is loaded once per four
//! products) and run through pulp's runtime dispatch (the crate tfhe-rs's FFT uses),
//! so one portable binary vectorises them for AVX2 or AVX-512 where the CPU has it, several
//! times faster than the x86-64 baseline. There is no hand-written SIMD and no `unsafe`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

/// The seed A is expanded from.
pub type Seed = [u8; 32];

/// Rows of A expanded together by the hint's product.
const A_BLOCK: usize = 64;
/// Database rows per parallel task in the hint's product.
const HINT_ROWS_PER_TASK: usize = 16;
/// Database rows per parallel task when answering (16 queries × 1,024 × 4 B = 64 KiB of
/// accumulators, in L2).
const ANSWER_ROWS_PER_TASK: usize = 1024;
/// Rows of A per parallel task when making queries.
const QUERY_ROWS_PER_TASK: usize = 256;

/// Implements pulp's `WithSimd` for a kernel struct by calling its `run`: pulp's dispatch calls
/// it inside a function compiled for the widest vector extension the CPU has (AVX-512, AVX2 or
/// none), into which `run` and the `#[inline(always)]` loops it calls are inlined, and so
/// vectorised for it. (A closure is not reliably inlined there; a method marked
/// `#[inline(always)]` is.)
macro_rules! dispatched {
    ($kernel:ident -> $out:ty) => {
        impl pulp::WithSimd for $kernel<'_> {
            type Output = $out;
            #[inline(always)]
            fn with_simd<S: pulp::Simd>(self, _: S) -> $out {
                self.run()
            }
        }
    };
}

/// The vector extension the kernels run with on this CPU: "AVX-512", "AVX2" or "none".
pub fn vector_extension() -> &'static str {
    struct Probe;
    impl pulp::WithSimd for Probe {
        type Output = &'static str;
        fn with_simd<S: pulp::Simd>(self, _: S) -> &'static str {
            let name = std::any::type_name::<S>();
            if name.ends_with("V4") {
                "AVX-512"
            } else if name.ends_with("V3") {
                "AVX2"
            } else {
                "none"
            }
        }
    }
    pulp::Arch::new().dispatch(Probe)
}

/// Writes rows `first..` of A (n = `row.len()` columns) into consecutive slices of `out`.
pub fn expand_rows(seed: &Seed, n: usize, first: usize, out: &mut [u32]) {
    for (k, row) in out.chunks_exact_mut(n).enumerate() {
        let mut rng = ChaCha20Rng::from_seed(*seed);
        rng.set_stream((first + k) as u64);
        rng.fill(row);
    }
}

/// acc += Σ_k d[k]·a[k], over four rows at once.
#[inline(always)]
fn axpy4(acc: &mut [u32], d: [u32; 4], a: [&[u32]; 4]) {
    let len = acc.len();
    let (a0, a1, a2, a3) = (&a[0][..len], &a[1][..len], &a[2][..len], &a[3][..len]);
    for i in 0..len {
        let sum = a0[i]
            .wrapping_mul(d[0])
            .wrapping_add(a1[i].wrapping_mul(d[1]))
            .wrapping_add(a2[i].wrapping_mul(d[2]))
            .wrapping_add(a3[i].wrapping_mul(d[3]));
        acc[i] = acc[i].wrapping_add(sum);
    }
}

#[inline(always)]
fn axpy(acc: &mut [u32], d: u32, a: &[u32]) {
    for (x, &y) in acc.iter_mut().zip(a) {
        *x = x.wrapping_add(y.wrapping_mul(d));
    }
}

/// acc += Σ_k col[k]·q[k] for four byte columns (one query's four coefficients).
#[inline(always)]
fn byte_axpy4(acc: &mut [u32], q: [u32; 4], col: [&[u8]; 4]) {
    let len = acc.len();
    let (c0, c1, c2, c3) = (
        &col[0][..len],
        &col[1][..len],
        &col[2][..len],
        &col[3][..len],
    );
    for i in 0..len {
        let sum = u32::from(c0[i])
            .wrapping_mul(q[0])
            .wrapping_add(u32::from(c1[i]).wrapping_mul(q[1]))
            .wrapping_add(u32::from(c2[i]).wrapping_mul(q[2]))
            .wrapping_add(u32::from(c3[i]).wrapping_mul(q[3]));
        acc[i] = acc[i].wrapping_add(sum);
    }
}

#[inline(always)]
fn byte_axpy(acc: &mut [u32], q: u32, col: &[u8]) {
    for (x, &b) in acc.iter_mut().zip(col) {
        *x = x.wrapping_add(u32::from(b).wrapping_mul(q));
    }
}

/// Wrapping dot product.
#[inline(always)]
pub fn dot(a: &[u32], b: &[u32]) -> u32 {
    a.iter()
        .zip(b)
        .fold(0u32, |s, (&x, &y)| s.wrapping_add(x.wrapping_mul(y)))
}

/// Rows `first_row..` of H (`h`) += D·A over one block of A's rows (`a`) and the matching
/// database columns (`columns`, each `rows` long).
struct HintRows<'a> {
    h: &'a mut [u32],
    first_row: usize,
    a: &'a [u32],
    columns: &'a [u8],
    rows: usize,
    n: usize,
}
dispatched!(HintRows -> ());

impl HintRows<'_> {
    #[inline(always)]
    fn run(self) {
        let (n, rows) = (self.n, self.rows);
        let block = self.a.len() / n;
        let a = |k: usize| &self.a[k * n..(k + 1) * n];
        let d = |k: usize, w: usize| u32::from(self.columns[k * rows + w]);
        for (i, h_row) in self.h.chunks_exact_mut(n).enumerate() {
            let w = self.first_row + i;
            let mut k = 0;
            while k + 4 <= block {
                axpy4(
                    h_row,
                    [0, 1, 2, 3].map(|j| d(k + j, w)),
                    [0, 1, 2, 3].map(|j| a(k + j)),
                );
                k += 4;
            }
            for k in k..block {
                axpy(h_row, d(k, w), a(k));
            }
        }
    }
}

/// H = (D - 128)·A, W × n row-major, for a database of `columns` columns of `rows` bytes.
pub fn hint_product(db: &[u8], rows: usize, columns: usize, n: usize, seed: &Seed) -> Vec<u32> {
    assert_eq!(db.len(), rows * columns);
    let mut h = vec![0u32; rows * n];
    let mut column_sum = vec![0u32; n];
    let mut a = vec![0u32; A_BLOCK * n];
    for c0 in (0..columns).step_by(A_BLOCK) {
        let block = A_BLOCK.min(columns - c0);
        let a = &mut a[..block * n];
        a.par_chunks_mut(n)
            .enumerate()
            .for_each(|(k, row)| expand_rows(seed, n, c0 + k, row));
        for row in a.chunks_exact(n) {
            axpy(&mut column_sum, 1, row);
        }
        let a = &*a;
        h.par_chunks_mut(n * HINT_ROWS_PER_TASK)
            .enumerate()
            .for_each(|(task, h)| {
                let first_row = task * HINT_ROWS_PER_TASK;
                let columns = &db[c0 * rows..(c0 + block) * rows];
                pulp::Arch::new().dispatch(HintRows {
                    h,
                    first_row,
                    a,
                    columns,
                    rows,
                    n,
                });
            });
    }
    // Centre: (D - 128)·A = D·A - 128·(Σ_c A[c]) in every row.
    let correction: Vec<u32> = column_sum.iter().map(|s| s.wrapping_mul(128)).collect();
    h.par_chunks_mut(n).for_each(|row| {
        for (x, c) in row.iter_mut().zip(&correction) {
            *x = x.wrapping_sub(*c);
        }
    });
    h
}

/// D·q_j over database rows `w0..w0 + ANSWER_ROWS_PER_TASK` and columns `c0..c1`, for every
/// query: partial accumulators, query by query.
struct AnswerTile<'a> {
    db: &'a [u8],
    rows: usize,
    columns: usize,
    queries: &'a [u32],
    count: usize,
    w0: usize,
    c0: usize,
    c1: usize,
}
dispatched!(AnswerTile -> Vec<u32>);

impl AnswerTile<'_> {
    #[inline(always)]
    fn run(self) -> Vec<u32> {
        let (rows, columns, w0) = (self.rows, self.columns, self.w0);
        let len = ANSWER_ROWS_PER_TASK.min(rows - w0);
        let mut acc = vec![0u32; self.count * len];
        let column = |c: usize| &self.db[c * rows + w0..c * rows + w0 + len];
        let query = |j: usize| &self.queries[j * columns..(j + 1) * columns];
        let mut c = self.c0;
        while c + 4 <= self.c1 {
            let cols = [0, 1, 2, 3].map(|k| column(c + k));
            for (j, acc) in acc.chunks_exact_mut(len).enumerate() {
                let q = query(j);
                byte_axpy4(acc, [q[c], q[c + 1], q[c + 2], q[c + 3]], cols);
            }
            c += 4;
        }
        for c in c..self.c1 {
            for (j, acc) in acc.chunks_exact_mut(len).enumerate() {
                byte_axpy(acc, query(j)[c], column(c));
            }
        }
        acc
    }
}

/// a_j = (D - 128)·q_j for `count` queries laid end to end in `queries` (each `columns` long):
/// `count` × `rows` elements, query by query.
pub fn answer_product(
    db: &[u8],
    rows: usize,
    columns: usize,
    queries: &[u32],
    count: usize,
) -> Vec<u32> {
    assert_eq!(db.len(), rows * columns);
    assert_eq!(queries.len(), count * columns);
    let query = |j: usize| &queries[j * columns..(j + 1) * columns];
    // Tasks: row tiles, and when there are fewer tiles than twice the threads (a database of
    // short columns), column ranges too, whose partial sums are added below.
    let row_tiles: Vec<usize> = (0..rows).step_by(ANSWER_ROWS_PER_TASK).collect();
    let splits = (2 * rayon::current_num_threads())
        .div_ceil(row_tiles.len())
        .clamp(1, columns.div_ceil(256));
    let span = columns.div_ceil(splits).next_multiple_of(4);
    let tasks: Vec<(usize, usize)> = row_tiles
        .iter()
        .flat_map(|&w0| (0..columns).step_by(span).map(move |c0| (w0, c0)))
        .collect();
    let tiles: Vec<(usize, Vec<u32>)> = tasks
        .into_par_iter()
        .map(|(w0, c0)| {
            let c1 = (c0 + span).min(columns);
            let tile = AnswerTile {
                db,
                rows,
                columns,
                queries,
                count,
                w0,
                c0,
                c1,
            };
            (w0, pulp::Arch::new().dispatch(tile))
        })
        .collect();
    let mut out = vec![0u32; count * rows];
    for j in 0..count {
        let correction = query(j)
            .iter()
            .fold(0u32, |s, &x| s.wrapping_add(x))
            .wrapping_mul(128);
        for (w0, acc) in &tiles {
            let len = acc.len() / count;
            let dst = &mut out[j * rows + w0..j * rows + w0 + len];
            for (x, &y) in dst.iter_mut().zip(&acc[j * len..(j + 1) * len]) {
                *x = x.wrapping_add(y);
            }
        }
        for x in &mut out[j * rows..(j + 1) * rows] {
            *x = x.wrapping_sub(correction);
        }
    }
    out
}

/// A[c]·s_j for rows c0..c0 + len of A and every secret, secret by secret.
struct QueryRows<'a> {
    seed: &'a Seed,
    n: usize,
    c0: usize,
    len: usize,
    secrets: &'a [u32],
}
dispatched!(QueryRows -> Vec<u32>);

impl QueryRows<'_> {
    #[inline(always)]
    fn run(self) -> Vec<u32> {
        let (n, len) = (self.n, self.len);
        let mut row = vec![0u32; n];
        let mut out = vec![0u32; self.secrets.len() / n * len];
        for k in 0..len {
            expand_rows(self.seed, n, self.c0 + k, &mut row);
            for (j, s) in self.secrets.chunks_exact(n).enumerate() {
                out[j * len + k] = dot(&row, s);
            }
        }
        out
    }
}

/// A·s_j for `count` secrets laid end to end in `secrets` (each n long): `count` × `columns`
/// elements, secret by secret.
pub fn query_product(seed: &Seed, n: usize, columns: usize, secrets: &[u32]) -> Vec<u32> {
    let count = secrets.len() / n;
    let blocks: Vec<(usize, Vec<u32>)> = (0..columns)
        .step_by(QUERY_ROWS_PER_TASK)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|c0| {
            let len = QUERY_ROWS_PER_TASK.min(columns - c0);
            (
                c0,
                pulp::Arch::new().dispatch(QueryRows {
                    seed,
                    n,
                    c0,
                    len,
                    secrets,
                }),
            )
        })
        .collect();
    let mut out = vec![0u32; count * columns];
    for (c0, block) in blocks {
        let len = block.len() / count;
        for j in 0..count {
            out[j * columns + c0..j * columns + c0 + len]
                .copy_from_slice(&block[j * len..(j + 1) * len]);
        }
    }
    out
}

#[cfg(test)]
mod tests;
