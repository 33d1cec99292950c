"""High-precision helpers shared by the bounds' reference oracles (mpmath)."""

import mpmath as mp


def bracketed_root(g, lo, hi):
    """Root of the increasing g in [lo, hi]: mpmath's Anderson-Bjorck method, and plain
    bisection to 1e-30 relative if that stalls."""
    try:
        return mp.findroot(g, (lo, hi), solver="anderson")
    except ValueError:
        pass
    while hi - lo > mp.mpf(10) ** -30 * max(1, abs(lo), abs(hi)):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if g(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def _mpf(v):
    return v if isinstance(v, mp.mpf) else mp.mpf(float(v))


class MixtureOracle:
    """P = N(X, s^2) vs Q = N(0, s^2) in mpmath, straight from Appendix A.1 of arXiv:2410.06186:
    the privacy loss f, its inverse, both hockey-stick divergences and Newton on delta(eps)."""

    def __init__(self, support, probs, scale, *, newton_tol=1e-25):
        self.x = [_mpf(v) for v in support]
        self.p = [_mpf(v) for v in probs]
        self.s = _mpf(scale)
        self.p0 = mp.fsum(p for x, p in zip(self.x, self.p, strict=True) if x == 0)
        self.newton_tol = mp.mpf(newton_tol)

    def f(self, y):
        """Privacy loss log P(y) / Q(y)."""
        terms = (
            p * mp.exp((2 * x * y - x * x) / (2 * self.s**2))
            for x, p in zip(self.x, self.p, strict=True)
        )
        return mp.log(mp.fsum(terms))

    def finv(self, e):
        lo, hi = mp.mpf(-1), mp.mpf(1)
        while self.f(lo) > e:
            lo *= 2
        while self.f(hi) < e:
            hi *= 2
        return bracketed_root(lambda y: self.f(y) - e, lo, hi)

    def parts(self, e):
        """(delta_+, d delta_+/d eps, delta_-, d delta_-/d eps) at eps = e."""
        e = mp.mpf(e)
        y = self.finv(e)
        p_tail = mp.fsum(p * mp.ncdf((x - y) / self.s) for x, p in zip(self.x, self.p, strict=True))
        q_tail = mp.exp(e) * mp.ncdf(-y / self.s)
        d_plus = p_tail - q_tail
        if self.p0 > 0 and e >= -mp.log(self.p0):
            return d_plus, -q_tail, mp.mpf(0), mp.mpf(0)  # P >= p0 Q: H(Q, P) = 0
        y = self.finv(-e)
        p_head = mp.exp(e) * mp.fsum(
            p * mp.ncdf((y - x) / self.s) for x, p in zip(self.x, self.p, strict=True)
        )
        return d_plus, -q_tail, mp.ncdf(y / self.s) - p_head, -p_head

    def delta(self, e):
        d_plus, _, d_minus, _ = self.parts(e)
        return max(d_plus, d_minus)

    def epsilon(self, delta, start):
        """Newton's method on delta(eps) = delta (derivative -e^eps Q(S), exact)."""
        e, delta = mp.mpf(start), mp.mpf(delta)
        for _ in range(30):
            d_plus, g_plus, d_minus, g_minus = self.parts(e)
            d, g = (d_plus, g_plus) if d_plus >= d_minus else (d_minus, g_minus)
            step = -(d - delta) / g
            e += step
            if abs(step) < self.newton_tol:
                return e
        raise RuntimeError("oracle Newton iteration did not converge")
