"""Group-sequential looks: a noisy row judged after each replicate, on intervals valid at every look.

A replicate loop (seeds, launches, cases) judges its rows after each unit from the first look on, and
stops as soon as they are decided or its budget is spent. Looking again and again at an ordinary 95 %
interval would make a wrong verdict far likelier than 5 %, so each look uses a *repeated confidence
interval* (Jennison & Turnbull 1989): the row's own interval at the nominal level of a group-sequential
boundary. With Lan & DeMets' error spending (O'Brien–Fleming-type, as gsDesign's ``sfLDOF``: each side
spends α/2 as ``2 − 2Φ(z_{α/4}/√t)`` at information fraction ``t`` = units so far ÷ budget), the
intervals of all looks cover the true value together with probability ≥ 1 − α, however many looks
there are and wherever the loop stops: a row that stops at its first deciding look keeps its error rate.
O'Brien–Fleming spending keeps almost all of α for the last looks, so a row run to its budget loses
little against one fixed-n interval, while a clear effect stops after a few units.

The boundary-crossing probabilities are integrated with ``gsdesign`` (the Python port of gsDesign's
numerical integration, Jennison & Turnbull ch. 19); the spending function and the boundary search on
top of it — a few lines gsdesign does not ship — are here.
"""

from __future__ import annotations

import functools
import math

GRID = 18  # gsDesign's grid parameter r (6r − 1 points before Simpson's midpoints)
MOST_LOOKS = 20  # looks spread evenly over a larger budget: each look costs a little of the last one's power


def looks(least: int, budget: int, most: int = MOST_LOOKS) -> tuple[int, ...]:
    """The numbers of units at which a row is judged: every unit from ``least`` to ``budget``, or ``most``
    looks spread evenly between them when the budget is larger."""
    least = max(1, int(least))
    budget = max(least, int(budget))
    if budget - least + 1 <= most:
        return tuple(range(least, budget + 1))
    step = (budget - least) / (most - 1)
    return tuple(sorted({least + round(i * step) for i in range(most)}))


def spent(alpha: float, t: float) -> float:
    """Two-sided α spent by information fraction ``t``: O'Brien–Fleming-type spending of α/2 per side."""
    from scipy.stats import norm

    if t >= 1:
        return alpha
    side = alpha / 2
    return float(2 * 2 * norm.sf(norm.ppf(1 - side / 2) / math.sqrt(t)))


def _crossing(c: float, grid: tuple, info: float, prev_info: float) -> float:
    """P(|Z| at the next look > c, and no earlier crossing), from the continuation densities ``grid``."""
    import numpy as np
    from scipy.stats import norm

    z, _w, h = grid
    rt, rt_prev, rt_delta = math.sqrt(info), math.sqrt(prev_info), math.sqrt(info - prev_info)
    upper = norm.sf((c * rt - z * rt_prev) / rt_delta)
    lower = norm.cdf((-c * rt - z * rt_prev) / rt_delta)
    return float(np.sum(h * (upper + lower)))


def _excess(c: float, grid: tuple, info: float, prev_info: float, target: float) -> float:
    return _crossing(c, grid, info, prev_info) - target


@functools.lru_cache(maxsize=512)
def boundaries(alpha: float, at: tuple[int, ...], budget: int) -> tuple[float, ...]:
    """The two-sided z boundaries of looks at ``at`` units of ``budget`` under the null, each found so that
    the chance of crossing there (and not before) is the α the spending function releases there."""
    from gsdesign import h1, hupdate
    from scipy.optimize import brentq
    from scipy.stats import norm

    out: list[float] = []
    grid: tuple | None = None
    prev_info, prev_spent = 0.0, 0.0
    for n in at:
        info = float(n)
        s = spent(alpha, min(1.0, n / budget))
        if grid is None:
            c = float(norm.ppf(1 - s / 2)) if s > 0 else math.inf
        else:
            target = s - prev_spent
            if target <= 0 or _crossing(40.0, grid, info, prev_info) >= target:
                c = 40.0
            else:
                args = (grid, info, prev_info, target)
                c = float(brentq(_excess, 1e-6, 40.0, args=args, xtol=1e-10))
        out.append(c)
        bound = min(c, 40.0)
        grid = (
            h1(GRID, 0.0, info, -bound, bound)
            if grid is None
            else hupdate(GRID, 0.0, info, -bound, bound, 0.0, prev_info, grid)
        )
        prev_info, prev_spent = info, s
    return tuple(out)


@functools.lru_cache(maxsize=512)
def nominal_levels(alpha: float, at: tuple[int, ...], budget: int) -> tuple[float, ...]:
    """The confidence level of each look's repeated confidence interval (1 − 2·(1 − Φ(boundary)))."""
    from scipy.stats import norm

    return tuple(float(1 - 2 * norm.sf(c)) for c in boundaries(alpha, at, budget))
