"""The result of :func:`jaxrank.sweep`, and its progress output."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass
class SweepResult:
    """Result of :func:`sweep`. Arrays are NumPy; axes are (task, grid, fold).

    The grid axis runs over the ``C`` values, once per setting of the other
    parameters of ``param_grid`` (setting-major); without such parameters
    it is the ``C`` grid itself.

    Attributes:
        model: registry name of the estimator (``"apsvm"``, ``"svm"``, ...).
        Cs: ``[G]`` float64: the ``C`` of each grid column.
        val_score: ``[T, G, F]`` validation score of each fit: the
            estimator's own measure (its ``score``; :attr:`scoring` names it):
            AP (MAP over queries with ``groups``, AP over bags for the latent
            models), or F1, PRBEP, Prec@k, Rec@k for SVM-perf's losses.
        objective: ``[T, G, F]`` training objective at the returned weights.
        dual: ``[T, G, F]`` certified lower bound on the optimum.
        num_steps: ``[T, G, F]`` int, calls of loss-augmented inference.
        converged: ``[T, G, F]`` bool, relative duality gap ``<= tol``.
        val_masks: ``[T, F, n]`` bool validation masks.
        best_index: ``[T]`` int, argmax over the grid of the mean validation
            score (first on ties).
        best_C: ``[T]`` float, the chosen ``C`` per task (NaN for an
            estimator without ``C``, e.g. KernelRank).
        best_estimators: ``T`` fitted estimators (the model class with
            ``best_C[t]`` and ``best_params[t]``, refit on all samples); empty
            if ``refit=False``.
        cv_time: seconds of the batched CV calls (includes compilation).
        refit_time: seconds of the batched refit (includes compilation).
        task_names: ``T`` names (column indices unless given).
        extensions: grid extensions made by ``Cs="auto"`` (each added values
            beyond an edge where the best ``C`` sat).
        weights: ``[T, G, F, dim]`` weights of every fit with
            ``return_weights=True`` (``dim = d``, ``+ 1`` with an intercept,
            last), else ``None``.
        params: ``G`` dicts, the ``param_grid`` setting of each grid column
            (empty dicts when only ``C`` is tuned).
        best_params: ``T`` dicts, the chosen setting per task.
        scoring: the name of the validation measure (``"average_precision"``,
            ``"f1"``, ``"prbep"``, ``"precision_at_k"``, ``"recall_at_k"``).
    """

    model: str
    Cs: np.ndarray
    val_score: np.ndarray
    objective: np.ndarray
    dual: np.ndarray
    num_steps: np.ndarray
    converged: np.ndarray
    val_masks: np.ndarray
    best_index: np.ndarray
    best_C: np.ndarray
    best_estimators: list
    cv_time: float
    refit_time: float
    task_names: list
    extensions: int = 0
    weights: np.ndarray | None = None
    params: list = dataclasses.field(default_factory=list)
    best_params: list = dataclasses.field(default_factory=list)
    scoring: str = "average_precision"

    @property
    def mean_val_score(self):
        """``[T, G]`` mean validation score over folds."""
        return self.val_score.mean(axis=-1)

    @property
    def val_ap(self):
        """:attr:`val_score` (its name from when every model was scored by AP)."""
        return self.val_score

    @property
    def mean_val_ap(self):
        """:attr:`mean_val_score` (its name from when every model was scored by AP)."""
        return self.mean_val_score

    @property
    def n_fits(self):
        """Number of CV fits ``T * G * F``."""
        return int(self.val_score.size)

    def rows(self):
        """One dict per (task, C, fold) fit, for CSV output (no ``C`` for an
        estimator without one)."""
        out = []
        T, G, F = self.val_score.shape
        has_C = not np.all(np.isnan(self.Cs))
        for t in range(T):
            for g in range(G):
                for f in range(F):
                    out.append({
                        "task": self.task_names[t],
                        **({"C": float(self.Cs[g])} if has_C else {}),
                        **(self.params[g] if self.params else {}), "fold": f,
                        "val_score": float(self.val_score[t, g, f]),
                        "objective": float(self.objective[t, g, f]),
                        "dual": float(self.dual[t, g, f]),
                        "iterations": int(self.num_steps[t, g, f]),
                        "converged": bool(self.converged[t, g, f]),
                    })
        return out


def _say(verbose, msg):
    if verbose:
        print(msg, flush=True)


class _Progress:
    """Host side of ``progress``: a tqdm bar over fits, or a user callable."""

    def __init__(self, progress, total, desc):
        self.bar, self.fn = None, None
        if callable(progress):
            self.fn = progress
        elif progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="fit", leave=False)

    def __call__(self, n):
        if self.bar is not None:
            self.bar.update(n)
        if self.fn is not None:
            self.fn(n)

    def close(self):
        if self.bar is not None:
            self.bar.close()
