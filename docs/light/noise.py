#!/usr/bin/env python3
"""omr-light-v1's clue noise, exactly: the distribution of one coefficient of
v = e*u + e2 - (e1 + delta)*s, and the range r, false negatives and false positives it gives.

Every secret and error is centred binomial with eta = 1 (-1, 0, 1 with 1/4, 1/2, 1/4). A product
of two of them is -1, 0, 1 with 1/8, 3/4, 1/8. One coefficient of e*u sums n = 1024 such products,
(e1 + delta)*s sums n products of s with e1 and n with the rounding delta of a' (0 or +-1, variance
1/2, which times s has the same three-point law), and e2 adds one binomial. So v is the sum of 3n
three-point variables and one binomial: the convolution below is exact (up to float rounding).

    python3 docs/light/noise.py            # the table for omr-light-v1 (n = 1024, t = 2^24, l = 2)
"""
import math

N, LOG_T, ELL = 1024, 24, 2


def convolve(a, b):
    out = [0.0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x == 0.0:
            continue
        for j, y in enumerate(b):
            out[i + j] += x * y
    return out


def trim(a, eps=1e-300):
    lo = 0
    while lo < len(a) // 2 and a[lo] < eps:
        lo += 1
    return a[lo:len(a) - lo]


def power(base, n):
    result, p = [1.0], base[:]
    while n:
        if n & 1:
            result = trim(convolve(result, p))
        n >>= 1
        if n:
            p = trim(convolve(p, p))
    return result


def main():
    dist = convolve(power([1 / 8, 3 / 4, 1 / 8], 3 * N), [1 / 4, 1 / 2, 1 / 4])
    c = len(dist) // 2
    var = sum(p * (i - c) ** 2 for i, p in enumerate(dist))
    print(f"variance {var:.2f} (predicted {3 * N / 4 + 0.5}), standard deviation {math.sqrt(var):.2f}")
    tail = [0.0] * (len(dist) + 1)
    for i in range(len(dist) - 1, -1, -1):
        tail[i] = tail[i + 1] + dist[i]
    print("r    P(|v| > r)   false negative (l coefficients)   false positive ((2r+1)/t)^l")
    for r in (180, 190, 195, 200, 205, 210, 220, 230):
        p = 2 * tail[c + r + 1]
        fp = ELL * math.log2((2 * r + 1) / 2 ** LOG_T)
        print(f"{r}  2^{math.log2(p):.2f}      2^{math.log2(ELL * p):.2f}                          2^{fp:.2f}")


if __name__ == "__main__":
    main()
