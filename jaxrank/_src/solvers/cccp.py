"""CCCP (Yuille & Rangarajan 2003), the outer loop of the latent and high-order models."""

from __future__ import annotations

# CCCP (the latent models, HOAPSVM) applies its stopping rule only after a convex
# step that reached ``tol``: that step certifies the point returned. A step that
# stopped at ``max_iter`` where the rule would stop is continued instead, warm-started
# at its best iterate, at most this many times per run.
CCCP_RESOLVES = 1


def defer_uncertified_stop(stop, converged, resolves):
    """CCCP's stop, deferred after a convex step that did not reach ``tol``.

    Args:
        stop: ``[K]`` bool, runs whose stopping rule fired at this step.
        converged: ``[K]`` bool, whether this step of each run reached ``tol``.
        resolves: ``[K]`` int64, the deferrals each run has had; updated in place.

    Returns:
        ``[K]`` bool: the runs that stop. A run whose rule fired after an
        unconverged step continues instead while it has had fewer than
        ``CCCP_RESOLVES`` deferrals (see the comment above).
    """
    again = stop & ~converged & (resolves < CCCP_RESOLVES)
    resolves += again
    return stop & ~again
