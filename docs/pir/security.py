#!/usr/bin/env python3
"""Lattice-attack estimates for omr-pir's LWE (docs/PARAMETERS.md, "PIR for attachments").

The primal attack by unique-SVP (the 2016 estimate of Alkim, Ducas, Poppelmann and Schwabe) and
the dual attack (short dual vector, distinguishing advantage 4*exp(-2*pi^2*tau^2), repeated as
often as the advantage asks beyond the 2^(0.2075*beta) vectors one sieve yields), each minimised
over the number of samples m. Costs are core-SVP (0.292*beta classical, 0.265*beta quantum) and
the lattice estimator's BKZ 2.0 model (0.292*beta + 16.4 + log2(8*d)). The Rust test
`omr_pir::security` recomputes the primal figure. Run: python3 docs/pir/security.py
"""
from math import e, exp, log2, pi, sqrt


def delta(beta):
    return ((pi * beta) ** (1 / beta) * beta / (2 * pi * e)) ** (1 / (2 * (beta - 1)))


def primal(n, log_q, sigma, max_m=4000):
    for beta in range(40, 2000):
        ld = log2(delta(beta))
        for m in range(64, max_m + 1, 8):
            d = m + n + 1
            if log2(sigma * sqrt(beta)) <= (2 * beta - d - 1) * ld + log_q * m / d:
                return beta, m, d
    raise ValueError("no block size below 2000")


def dual(n, log_q, sigma, max_m=4000):
    best = (float("inf"), 0, 0)
    for beta in range(40, 1200):
        ld = log2(delta(beta))
        for m in range(64, max_m + 1, 16):
            d = m + n
            log_len = d * ld + log_q * n / d  # log2 of the short dual vector's length
            tau = 2 ** (log_len - log_q) * sigma
            eps = 4 * exp(-2 * pi * pi * tau * tau)
            if eps <= 0:
                continue
            cost = 0.292 * beta + max(0.0, -2 * log2(eps) - 0.2075 * beta)
            if cost < best[0]:
                best = (cost, beta, m)
    return best


if __name__ == "__main__":
    print("| n | log2 q | sigma | primal beta (m) | core-SVP classical / quantum | BKZ 2.0 model | dual (core-SVP, beta) |")
    print("|---|---|---|---|---|---|---|")
    for label, sigma in [("pir-v1", 11.0), ("SimplePIR", 6.4), ("fallback", 20.0), ("fallback", 32.0)]:
        beta, m, d = primal(1024, 32, sigma)
        cost, dbeta, _ = dual(1024, 32, sigma)
        print(
            f"| 1024 | 32 | {sigma} ({label}) | {beta} ({m}) | {0.292 * beta:.1f} / {0.265 * beta:.1f} "
            f"| {0.292 * beta + 16.4 + log2(8 * d):.1f} | {cost:.1f} ({dbeta}) |"
        )
