#!/usr/bin/python3
"""Fits Q(t) = erfcx(z) / t, t = 1 / (1 + z/2), the polynomial of backend/cpu/activation.cpp's
f32 GELU: erfc(z) = exp(-z^2) t Q(t) for z >= 0. Range: z in [0, 9.35] (t in [0.1762, 1]),
beyond which exp(-z^2) is below the smallest normal float. Relative minimax by Lawson's
iteration on Chebyshev nodes against mpmath at 40 digits; coefficients rounded to f32 one at a
time from the constant term, the rest refitted after each (so the rounding of the early,
large ones is absorbed by the later ones). Prints the coefficients and the worst relative
error of the polynomial evaluated in f32 by Estrin's scheme, as the kernel evaluates it.
Needs python3-numpy and python3-mpmath (Debian); not run by CI."""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
Z_MAX = 9.35
T_MIN = 1 / (1 + Z_MAX / 2)
DEGREE = 8


def q_exact(t):
    t = mp.mpf(t)
    z = 2 * (1 / t - 1)
    return mp.erfc(z) * mp.exp(z * z) / t


def nodes(m):
    x = np.cos(np.pi * (np.arange(m) + 0.5) / m)
    return np.concatenate([T_MIN + (1 - T_MIN) * (x + 1) / 2, [T_MIN, 1.0]])


def refit(ts, qs, fixed):
    v = np.vander(ts, DEGREE + 1, increasing=True)
    nf = len(fixed)
    rhs = qs - (v[:, :nf] @ np.array(fixed) if nf else 0.0)
    w = np.ones(len(ts))
    for _ in range(80):  # Lawson: reweight by the error toward equal ripple
        s = np.sqrt(w) / qs
        c, *_ = np.linalg.lstsq(v[:, nf:] * s[:, None], rhs * s, rcond=None)
        err = (v[:, nf:] @ c - rhs) / qs
        w = w * (np.abs(err) + 1e-30)
        w /= w.sum()
    return list(fixed) + list(c)


def estrin_f32(c, t):
    f = np.float32
    c = [f(x) for x in c]
    t = t.astype(f)
    t2 = t * t
    t4 = t2 * t2
    t8 = t4 * t4
    lin = [c[i] + c[i + 1] * t for i in range(0, 8, 2)]  # fmadd: one rounding (close enough)
    p03 = lin[0] + lin[1] * t2
    p47 = lin[2] + lin[3] * t2
    return c[8] * t8 + (p47 * t4 + p03)


def main():
    ts = nodes(4000)
    qs = np.array([float(q_exact(t)) for t in ts])
    fixed = []
    for i in range(DEGREE + 1):
        fixed.append(float(np.float32(refit(ts, qs, fixed)[i])))
    dense = np.linspace(T_MIN, 1.0, 20001)
    qd = np.array([float(q_exact(t)) for t in dense])
    err = np.abs(estrin_f32(fixed, dense).astype(np.float64) / qd - 1).max()
    print("Q coefficients, t^0 first:")
    print(", ".join("%.9ef" % c for c in fixed))
    print("worst relative error in f32 (Estrin), %d points on [%.4f, 1]: %.3g" % (len(dense), T_MIN, err))


if __name__ == "__main__":
    main()
