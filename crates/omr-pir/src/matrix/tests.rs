//! The products checked against their definitions, one element at a time.

use super::*;

/// The products by their definitions, one element at a time.
fn a_row(seed: &Seed, n: usize, c: usize) -> Vec<u32> {
    let mut row = vec![0; n];
    expand_rows(seed, n, c, &mut row);
    row
}

fn db(rows: usize, columns: usize) -> Vec<u8> {
    (0..rows * columns).map(|i| (i * 37 % 251) as u8).collect()
}

#[test]
fn rows_of_a_are_deterministic_and_distinct() {
    let seed = [3u8; 32];
    assert_eq!(a_row(&seed, 16, 5), a_row(&seed, 16, 5));
    assert_ne!(a_row(&seed, 16, 5), a_row(&seed, 16, 6));
    assert_ne!(a_row(&seed, 16, 5), a_row(&[4u8; 32], 16, 5));
    let mut two = vec![0; 32];
    expand_rows(&seed, 16, 5, &mut two);
    assert_eq!(&two[16..], &a_row(&seed, 16, 6)[..]);
}

#[test]
fn hint_product_is_centred_d_times_a() {
    // Odd sizes: a partial block of A and a partial task of rows.
    let (rows, columns, n) = (37, 70, 24);
    let seed = [9u8; 32];
    let d = db(rows, columns);
    let h = hint_product(&d, rows, columns, n, &seed);
    let a: Vec<Vec<u32>> = (0..columns).map(|c| a_row(&seed, n, c)).collect();
    for w in 0..rows {
        for k in 0..n {
            let want = (0..columns).fold(0u32, |s, c| {
                let centred = i32::from(d[c * rows + w]) - 128;
                s.wrapping_add((centred as u32).wrapping_mul(a[c][k]))
            });
            assert_eq!(h[w * n + k], want, "row {w} column {k}");
        }
    }
}

#[test]
fn answer_product_is_centred_d_times_q() {
    // Two row tiles; then short columns, which split the columns across tasks too.
    for (rows, columns, count) in [(1500, 23, 3), (37, 2001, 2)] {
        let d = db(rows, columns);
        let q: Vec<u32> = (0..count * columns)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761))
            .collect();
        let a = answer_product(&d, rows, columns, &q, count);
        for j in 0..count {
            for w in 0..rows {
                let want = (0..columns).fold(0u32, |s, c| {
                    let centred = i32::from(d[c * rows + w]) - 128;
                    s.wrapping_add((centred as u32).wrapping_mul(q[j * columns + c]))
                });
                assert_eq!(
                    a[j * rows + w],
                    want,
                    "query {j} row {w} of {rows} x {columns}"
                );
            }
        }
    }
}

#[test]
fn query_product_is_a_times_s() {
    let (n, columns) = (32, 600);
    let seed = [1u8; 32];
    let s: Vec<u32> = (0..2 * n).map(|i| (i as u32).wrapping_sub(20)).collect();
    let q = query_product(&seed, n, columns, &s);
    for j in 0..2 {
        for c in 0..columns {
            let want = dot(&a_row(&seed, n, c), &s[j * n..(j + 1) * n]);
            assert_eq!(q[j * columns + c], want);
        }
    }
}
