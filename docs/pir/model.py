#!/usr/bin/env python3
"""Size/correctness model behind docs/pir/STUDY.md (LWE-hint PIR family: SimplePIR/FrodoPIR).

Layout: matrix D over Z_p with W rows and R columns; a query selects one column (length-R query,
length-W answer); the hint is W x n. A record of E = ceil(bits/log p) elements spans k = E/W columns
(one query each) or, if W >= E, W//E records share a column. Sizes in bytes; b_h/b_a are the bits
kept of each hint/answer entry (rounding to the top bits). Correctness: sub-Gaussian tail bound,
  q/(2p) - 2^(r_a-1) >= t,  noise parameter = sigma_e^2*R*(p/2)^2 + sigma_s^2*n*4^(r_h-1).
"""
import math
MiB = 2**20

def design(nrec, rec_bits, n, sig_e, sig_s, logp, W, bh, ba, bq=32, qbits=32):
    E = math.ceil(rec_bits / logp)
    if W >= E:
        k, R = 1, math.ceil(nrec / (W // E))
    else:
        k = math.ceil(E / W); R = nrec * k
    q, p = 2.0**qbits, 2.0**logp
    rh, ra = qbits - bh, qbits - ba
    var = sig_e**2 * R * (p / 2)**2 + (sig_s**2 * n * 4.0**(rh - 1) if rh > 0 else 0)
    t = q / (2 * p) - (2.0**(ra - 1) if ra > 0 else 0)
    fail = 1 + (-t * t / (2 * var)) / math.log(2)          # log2, per element
    hint, up, down = n * W * bh / 8, k * R * bq / 8, k * W * ba / 8
    return dict(k=k, W=W, R=R, hint=hint, up=up, down=down, total=hint + up + down,
                fail_elem=fail, fail_rec=fail + math.log2(min(k * W, E)), macs_online=k * W * R,
                macs_pre=W * R * n)

def show(label, d):
    print(f"{label:48s} k={d['k']:2d} W={d['W']:5d} R={d['R']:7d} hint={d['hint']/MiB:7.2f} "
          f"up={d['up']/MiB:6.2f} down={d['down']/1024:7.1f}KiB total={d['total']/MiB:7.2f}MiB "
          f"fail/rec=2^{d['fail_rec']:.0f} online={d['macs_online']:.2e} pre={d['macs_pre']:.2e}")

OMR = (4096, 65536 * 8)
FRODO = (2**20, 8192)
# FrodoPIR parameters (n=1774, ternary s,e; q=2^32), record = one row, no rounding
show("FrodoPIR as published, OMR shape (rho=2^11)", design(*OMR, 1774, 1.0, 0.82, 11, 47663, 32, 32))
show("FrodoPIR chunked k=23 (rho=2^10)", design(*OMR, 1774, 1.0, 0.82, 10, 2280, 32, 32))
show("FrodoPIR as published, own shape (check 6313KB)", design(*FRODO, 1774, 1.0, 0.82, 9, 911, 32, 32))
# SimplePIR parameters (n=1024, sigma=6.4, uniform secret: no hint rounding)
show("SimplePIR E x 4096 (record = column)", design(*OMR, 1024, 6.4, 6.4, 10, 52429, 32, 32))
show("SimplePIR chunked k=19 (p=2^9), best unrounded", design(*OMR, 1024, 6.4, 6.4, 9, 3067, 32, 32))
# omr-pir: YPIR first-layer LWE (n=1024, q=2^32, std 11 for secret and error), rounding
show("omr-pir chosen (p=2^8, k=16, b_h=20, b_a=16)", design(*OMR, 1024, 11, 11, 8, 4096, 20, 16))
show("omr-pir fallback sigma=20 (b_h=21)", design(*OMR, 1024, 20, 20, 8, 4096, 21, 16))
show("omr-pir fallback sigma=32 (p=2^7, k=18, b_h=21)", design(*OMR, 1024, 32, 32, 7, 4162, 21, 11))
show("omr-pir design on FrodoPIR shape (p=2^7)", design(*FRODO, 1024, 11, 11, 7, 1171, 20, 16))
