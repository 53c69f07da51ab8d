"""Cross-validation of C by masks: many fits in one compiled call."""

from __future__ import annotations

import functools

import jax
import numpy as np
from sklearn.model_selection import StratifiedKFold

from jaxrank._src.estimators import fit_linear
from jaxrank._src.metrics import _ap_kernel


def stratified_fold_masks(positive, n_folds, *, random_state=0):
    """Boolean ``[n_folds, n]`` validation masks of stratified folds.

    Uses ``sklearn.model_selection.StratifiedKFold`` (shuffled).

    Raises:
        ValueError: ``n_folds < 2`` or a class with fewer than ``n_folds``
            samples (a fold would have no positive).
    """
    positive = np.asarray(positive, bool)
    if not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
        raise ValueError(f"cv must be an int >= 2; got {n_folds!r}.")
    n_min = int(min(positive.sum(), (~positive).sum()))
    if n_min < n_folds:
        raise ValueError(
            f"cv={n_folds} folds need at least {n_folds} samples of each class; "
            f"the smaller class has {n_min}."
        )
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=random_state)
    masks = np.zeros((n_folds, positive.shape[0]), bool)
    for f, (_, val) in enumerate(skf.split(np.zeros(positive.shape[0]), positive)):
        masks[f, val] = True
    return masks


@functools.partial(
    jax.jit,
    static_argnames=("loss", "kp", "method", "pos_weight", "max_iter", "fit_intercept"),
)
def cv_grid(
    X, positive, val_masks, Cs, tol, *, loss, kp, method="select", pos_weight=1.0,
    max_iter=1000, fit_intercept=False,
):
    """Fit every (fold, C) pair in one jitted, vmapped call.

    Args:
        X: ``[n, d]`` array or BCOO.
        positive: ``[n]`` bool labels.
        val_masks: ``[F, n]`` bool validation masks (train = complement).
        Cs: ``[G]`` float grid.
        tol: relative duality gap.
        loss, kp, method, pos_weight, max_iter, fit_intercept: static, as in
            :func:`jaxrank.solvers.fit_linear`; ``kp`` bounds the positives of
            every training fold.

    Returns:
        ``(val_ap [F, G], objective [F, G], num_steps [F, G], converged [F, G])``.
    """

    def one(val, C):
        res = fit_linear(
            X, positive, ~val, C, tol, loss=loss, kp=kp, method=method,
            pos_weight=pos_weight, max_iter=max_iter, fit_intercept=fit_intercept,
        )
        w = res.w
        s = X @ w[:-1] + w[-1] if fit_intercept else X @ w
        ap = _ap_kernel(s, positive, val)
        return ap, res.objective, res.num_steps, res.converged

    over_C = jax.vmap(one, in_axes=(None, 0))
    return jax.vmap(over_C, in_axes=(0, None))(val_masks, Cs)


def ap_scorer(estimator, X, y):
    """Average precision of ``estimator.decision_function(X)`` (a scikit-learn scorer).

    Usable as ``GridSearchCV(APSVM(), {"C": [...]}, scoring=ap_scorer, cv=...)``
    or ``cross_val_score(..., scoring=ap_scorer)``. Computes the same AP as
    the validation AP of :func:`jaxrank.sweep` (ties handled as one
    threshold per block of tied scores, see :func:`jaxrank.metrics.average_precision`).

    Args:
        estimator: a fitted estimator with ``decision_function``.
        X: ``[n, d]`` validation features.
        y: ``[n]`` binary labels (both classes present).

    Returns:
        float AP in ``[0, 1]``; higher is better.

    Raises:
        ValueError: single-class or non-binary ``y``.
    """
    from jaxrank._src.metrics import average_precision
    from jaxrank._src.validation import binary_labels

    scores = np.asarray(estimator.decision_function(X), np.float32)
    return float(average_precision(scores, binary_labels(np.asarray(y), "y")))
