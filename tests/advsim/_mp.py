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
