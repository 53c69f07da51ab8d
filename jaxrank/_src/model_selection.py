"""Cross-validation of C by masks: many fits in one compiled call."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from sklearn.model_selection import StratifiedKFold


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


def cv_grid(
    X, positive, val_masks, Cs, tol, *, loss, kp, method="select", pos_weight=1.0,
    max_iter=1000, fit_intercept=False, batch_size=None, devices=None,
):
    """Fit every (fold, C) pair of one task in one jitted call.

    :func:`jaxrank.model_selection.sweep_kernel` with a single task.

    Args:
        X: ``[n, d]`` array or BCOO.
        positive: ``[n]`` bool labels.
        val_masks: ``[F, n]`` bool validation masks (train = complement).
        Cs: ``[G]`` float grid.
        tol: relative duality gap.
        loss, kp, method, pos_weight, max_iter, fit_intercept: static, as in
            :func:`jaxrank.solvers.fit_linear`; ``kp`` bounds the positives of
            every training fold.
        batch_size: fits per device, ``None`` chooses (as :func:`jaxrank.sweep`).
        devices: tuple of devices to shard the fits over (``None``: default device).

    Returns:
        ``(val_ap [F, G], objective [F, G], num_steps [F, G], converged [F, G])``.

    Raises:
        ValueError: ``loss`` is not ``"ap"`` or ``"zero_one"``, ``batch_size < 1``.
        TypeError: ``batch_size`` is not ``None`` or an int.
    """
    from jaxrank._src.estimators import choose_batch_size
    from jaxrank._src.sweep import sweep_kernel

    n_dev = 1 if devices is None else len(devices)
    batch_size = choose_batch_size(
        batch_size, val_masks.shape[0] * len(Cs), X.shape[1] + int(fit_intercept), n_dev
    )
    models = {"ap": "apsvm", "zero_one": "svm"}
    if loss not in models:
        raise ValueError(f"loss must be 'ap' or 'zero_one'; got {loss!r}.")
    out = sweep_kernel(
        X, jnp.asarray(positive)[None], jnp.asarray(val_masks)[None], jnp.asarray(Cs),
        jnp.asarray(tol, jnp.float32), jnp.float32(0.5), jnp.float32(jnp.nan),
        model=models[loss], kp=kp, method=method, pos_weight=float(pos_weight),
        max_iter=max_iter, fit_intercept=fit_intercept, batch_size=batch_size,
        devices=devices,
    )
    ap, obj, _, steps, conv = (a[0].T for a in out)
    return ap, obj, steps, conv


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
