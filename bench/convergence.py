"""Convergence at the defaults (issue 21, items 3-4): every estimator, every C of its default grid.

For each estimator, dataset, ``C`` in ``type(est)._default_Cs`` and setting of
its ``_default_param_grid`` (the other parameters ``jaxrank.sweep`` tunes by
default: ``J`` and ``c`` of LatentSVM; shown next to ``C``), one fit with
the estimator's own defaults (``max_iter``, ``tol``, ...; nothing raised) and
prints: iterations (``n_iter_``), the final relative duality gap, the wall time
of ``fit``, whether it converged (``converged_``, ``all()`` over tasks), ``C``
times the largest squared row norm of ``X``, and the count of converged fits
per estimator (target: all of them).

Columns (also in ``bench/README.md``):

* ``C*R^2``: ``C * max_i ||x_i||^2`` of the ``X`` passed to ``fit`` (candidate
  rows for the latent models, sample rows for the graph models).
* ``iter``: ``n_iter_`` (latent models: solver iterations summed over the CCCP
  steps of the kept run; HOAP-SVM: of its last convex step; several tasks: the
  largest).
* ``gap``: ``(objective_ - dual_objective_) / objective_``, the certified
  relative duality gap (several tasks: the largest). Latent models (CCCP): the
  gap of the kept run's last convex step, from ``cccp_gaps_``; exact when that
  step produced ``coef_`` (its objective is ``dual_objective_`` plus its gap),
  else ``<=`` a bound: the step's gap over ``cccp_objectives_`` after it, which
  is at most the step's own objective (the convex bound is tight at the previous
  iterate and above the non-convex objective elsewhere). The notes give the
  worst step the same way (``converged_`` requires the last step and CCCP's own
  stop, not ``cccp_max_iter``; earlier steps may stop at ``max_iter``). HOAP-SVM: the
  last convex step's (``objective_``, ``dual_objective_`` and ``converged_`` are
  its), the worst step in the notes. LatentSSVM's gaps can be negative: its
  convex steps use approximate inference, so their objective is a lower bound.
  KernelRank has none (``n/a``).
* ``gap64``: APSVM, AUCSVM, BinarySVM: the primal objective re-evaluated in
  float64 at ``coef_`` (``primal64``: exact pair sums for the ROC area, the
  hinge sum for the binary SVM, jaxrank's exact AP oracle on the float32 scores
  with the product summed in float64 for AP) against the solver's
  ``dual_objective_``, relative: a check of the float32 certificate (issue 21,
  item 1). The summary lists converged fits whose ``gap64`` exceeds ``tol``.
* ``time``: wall seconds of ``fit``. The first fit of each (estimator, shape)
  includes XLA compilation.
* ``conv``: ``converged_`` (``all()`` over tasks); APSVMApprox: both stages
  (``converged_`` and ``binary_converged_``). KernelRank runs a fixed number
  of Adam steps and has no convergence test: ``n/a``, not counted.
* ``warn``: ConvergenceWarnings raised by the fit (caught and counted, not
  printed); ``tied``: the fit warned that every training sample gets the same
  score (e.g. ``coef_ = 0``; issue 21 item 5); ``w~0`` (APSVM, AUCSVM,
  BinarySVM): ``coef_ = 0`` is certified within ``tol`` of the optimum,
  ``F(0) - dual_objective_ <= tol F(0)`` with ``F(0)`` the float64 objective
  of a fit that scores every sample the same (BinarySVM at its best
  intercept): the optimum of such a fit does not determine a ranking (its
  scores, untied or not, rank by where the solver stopped).

Data (``--data-dir``, default ``../shared/data`` next to the repository):

* ``breast_cancer``: scikit-learn's copy, 569 x 30, standardised.
* ``keel:<name>``: the six bundled KEEL sets (``jaxrank.datasets.DEMO_DATASETS``),
  standardised.
* ``w8a``: ``w8a/w8a`` (49,749 x 300 sparse binary), full size, as is.
* ``reuters``: ``reuters_moneyfx/reuters.trn.bz2`` (7,770 x 8,315 sparse
  tf-idf), full size, as is.
* ``mil:<set>`` / ``animals:<set>``: MIL bags (``mil/*.csv``,
  ``mil_animals/*.mat``; loaded as in ``bench/latent.py``), instances
  standardised, for LatentAPSVM, LatentSVM, LatentSSVM. Default: musk1 and
  animals:fox (time: the three latent models take about 16 min on fox on 2
  loaded cores); every set: ``--datasets mil,animals``.
* ``cora``: Cora as in ``bench/high_order.py`` (tf-idf, 64 SVD components,
  standardised; the training half of its stratified 50/50 split, seed 0, with
  the citations among those papers); tasks ``--cora-tasks`` (default the
  largest class, Neural_Networks, the case measured in the HOAP-SVM
  docstring) in one multi-task fit, for HOBSVM and HOAPSVM.

Subsampled (deterministic: ``train_test_split(train_size=N, stratify=y,
random_state=0)``), stated in the table: KernelRank on w8a (5,000 rows) and
reuters (3,000 rows) (``SUBSAMPLE``; its smoothed AUC sums over all |P| x |N|
pairs at each of its 200 Adam steps); everything else is full size.

Estimators with a ``random_state`` (latent models, KernelRank) get
``random_state=0`` (reproducible initialisations); no other parameter is set.

Item 4, ``--svmperf PATH`` (a separate mode): builds SVM-perf from ``PATH`` (the
``svm_perf.tar.gz`` of its authors, or its unpacked directory) with ``make`` in a
temporary directory (deleted afterwards; nothing of it is written to the
repository), and on its ``example1/train.dat`` (Reuters "corporate acquisitions",
2,000 x 9,947, 1,000 positive; found inside ``PATH`` or next to it, or
``--svmperf-example DIR``) runs ``svm_perf_learn -l 11 -w 3`` (average precision)
and ``-l 10 -w 3`` (ROC area) at the SVM-perf ``-c`` equivalent to jaxrank's
``APSVM(C)`` / ``AUCSVM(C)``, with its default ``-e 0.1`` and with ``-e`` set
for a relative gap of ``1e-4``, next to jaxrank's fits (default ``tol=1e-4``,
and ``tol`` = the relative gap SVM-perf reached at ``-e 0.1``). Conversion
(read off ``svm_struct_api.c``, V3.00): SVM-perf measures both losses in
percent and does not normalise ``Psi``:

* ``-l 10``: labels ``+50/|P|``, ``-50/|N|``, so its ``Psi`` is ``50`` times
  jaxrank's (``1/(|P||N|)`` pair sums) and its loss ``100`` times:
  ``w_perf = 2 w``, ``c_perf = C / 25``, objective ``4`` times jaxrank's.
* ``-l 11`` (``AVGPREC``; implemented but not listed in ``-?``; needs ``-w 3``,
  the default ``-w 9`` optimises only the error rate): labels ``|N|``,
  ``-|P|``, so its ``Psi`` is ``|P||N|`` times jaxrank's:
  ``w_perf = (100 / (|P||N|)) w``, ``c_perf = 100 C / (|P||N|)^2``, objective
  ``(100 / (|P||N|))^2`` times jaxrank's. (``100 C`` holds only for a ``Psi``
  normalised like jaxrank's, as in SVM-map.)

The bench checks the conversion: it reads SVM-perf's weights from its model
file, maps them back, and evaluates jaxrank's objective at them (exact
inference in float64 pair sums for the ROC area, jaxrank's exact AP oracle for
AP): the objectives agree to the solvers' precision and the weight vectors
are parallel.

    python bench/convergence.py --quick              # breast cancer + ecoli1, flat models
    python bench/convergence.py                      # everything (20-30 min target, 2 cores)
    python bench/convergence.py --estimators APSVM,AUCSVM --datasets w8a,reuters
    python bench/convergence.py --out                # also bench/results/convergence.md/.json
    python bench/convergence.py --svmperf /tmp/svm_perf/svm_perf.tar.gz --out
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from _svmperf import build_svm_perf, read_model

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
DEFAULT_OUT = ROOT / "bench" / "results" / "convergence.md"

BAG_ESTIMATORS = ("LatentAPSVM", "LatentSVM", "LatentSSVM")
GRAPH_ESTIMATORS = ("HOBSVM", "HOAPSVM")
KEEL_SETS = ("ecoli1", "led7digit_0_2_4_5_6_7_8_9_vs_1", "vehicle0", "vowel0", "yeast3",
             "winequality_red_4")  # jaxrank.datasets.DEMO_DATASETS (checked at run time)
MIL_ALL = ("mil:musk1", "mil:musk2", "mil:elephant", "mil:protein", "mil:corel_dogs",
           "mil:birds_brown_creeper", "mil:ucsb_breast_cancer", "animals:fox",
           "animals:tiger", "animals:elephant")
MIL_DEFAULT = ("mil:musk1", "animals:fox")
QUICK_SETS = ("breast_cancer", "keel:ecoli1")
# (estimator, dataset) -> rows kept (stratified, random_state=0): KernelRank's
# pair sums are O(|P| |N|) per Adam step.
SUBSAMPLE = {("KernelRank", "w8a"): 5000, ("KernelRank", "reuters"): 3000}
CORA_TASKS = ("Neural_Networks",)


def log(msg=""):
    print(msg, flush=True)


# ---------------------------------------------------------------------------
# Machine.
# ---------------------------------------------------------------------------


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_state():
    """``(commit, dirty paths under jaxrank/)``: the solver is measured as checked out."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, timeout=20).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "jaxrank"], cwd=ROOT,
                               capture_output=True, text=True, timeout=20).stdout.split("\n")
        return head, [d[3:] for d in dirty if d.strip()]
    except (OSError, subprocess.SubprocessError):
        return "unknown", []


def machine_lines():
    sys.path.insert(0, str(ROOT / "bench"))
    from _machine import device_line

    head, dirty = git_state()
    return [f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs, {platform.machine()}); "
            f"load average at start {os.getloadavg()[0]:.1f}",
            device_line(),
            f"jaxrank at {head}" + (f" + uncommitted changes in {', '.join(dirty)}" if dirty
                                    else "")]


# ---------------------------------------------------------------------------
# Data.
# ---------------------------------------------------------------------------


class Data:
    """One dataset: ``kind`` in ``flat``/``bags``/``graph``; arrays in ``X``, ``y``, ``extra``."""

    def __init__(self, name, kind, X, y, extra=None, about=""):
        self.name, self.kind, self.X, self.y = name, kind, X, y
        self.extra = extra or {}
        self.about = about

    @property
    def shape(self):
        return self.X.shape


def _standardise(X):
    from sklearn.preprocessing import StandardScaler

    return StandardScaler().fit_transform(np.asarray(X, np.float64)).astype(np.float32)


def _csr32(X):
    X = X.tocsr().astype(np.float32)
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    return X


def load_dataset(name, data_dir, cora_tasks):
    """The dataset ``name`` (see the module docstring); ``FileNotFoundError`` if absent."""
    from sklearn.datasets import load_svmlight_file

    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        X, y = load_breast_cancer(return_X_y=True)
        return Data(name, "flat", _standardise(X), y, about="scikit-learn, standardised")
    if name.startswith("keel:"):
        from jaxrank import datasets

        X, y = datasets.load_keel(name[5:], return_X_y=True)
        return Data(name, "flat", _standardise(X), y, about="bundled KEEL, standardised")
    if name == "w8a":
        X, y = load_svmlight_file(str(data_dir / "w8a" / "w8a"))
        return Data(name, "flat", _csr32(X), y, about="LIBSVM w8a, sparse binary, as is")
    if name == "reuters":
        X, y = load_svmlight_file(str(data_dir / "reuters_moneyfx" / "reuters.trn.bz2"))
        return Data(name, "flat", _csr32(X), y,
                    about="Reuters money-fx train file, sparse tf-idf, as is")
    if name.startswith(("mil:", "animals:")):
        X, bags, y = load_mil(name, data_dir)
        return Data(name, "bags", _standardise(X), y, {"bags": bags},
                    about=f"{len(y)} bags, {int(np.sum(y == y.max()))} positive; instances "
                          "standardised")
    if name == "cora":
        return load_cora(data_dir, cora_tasks)
    raise ValueError(f"unknown dataset {name!r}")


def load_mil(name, data_dir):
    """``(X [n, d], bags [n], y [B])`` of a MIL set, as ``bench/latent.py`` loads it."""
    kind, set_name = name.split(":", 1)
    if kind == "animals":
        from scipy.io import loadmat

        mat = loadmat(data_dir / "mil_animals" / f"{set_name}.mat")
        X = np.asarray(mat["Data"], np.float64)
        bags = np.asarray(mat["bags"]).reshape(-1).astype(np.int64)
        y = np.asarray(mat["labels"]).reshape(-1).astype(int)
        return X, bags, y
    a = np.loadtxt(data_dir / "mil" / f"{set_name}.csv", delimiter=",")
    bags = a[:, 1].astype(np.int64)
    _, first = np.unique(bags, return_index=True)
    return a[:, 2:], bags, a[first, 0].astype(int)


def load_cora(data_dir, tasks):
    """Cora as ``bench/high_order.py`` builds it: the training half and its citation graph."""
    import scipy.sparse as sp
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfTransformer
    from sklearn.model_selection import train_test_split

    z = np.load(data_dir / "cora" / "cora.npz", allow_pickle=False)
    X = sp.csr_matrix((z["attr_data"], z["attr_indices"], z["attr_indptr"]),
                      shape=z["attr_shape"])
    A = sp.csr_matrix((z["adj_data"], z["adj_indices"], z["adj_indptr"]),
                      shape=z["adj_shape"]).tocoo()
    edges = np.stack([A.row, A.col], axis=1).astype(np.int64)
    Z = TruncatedSVD(64, random_state=0).fit_transform(TfidfTransformer().fit_transform(X))
    Z = _standardise(Z)
    labels = z["labels"].astype(int)
    names = [str(c) for c in z["class_names"]]
    n = Z.shape[0]
    tr, _ = train_test_split(np.arange(n), test_size=0.5, stratify=labels, random_state=0)
    keep = np.zeros(n, bool)
    keep[tr] = True
    idx = -np.ones(n, np.int64)
    idx[tr] = np.arange(tr.size)
    e = idx[edges[keep[edges[:, 0]] & keep[edges[:, 1]]]]
    unknown = [t for t in tasks if t not in names]
    if unknown:
        raise ValueError(f"--cora-tasks: unknown class(es) {unknown}; Cora has {names}")
    Y = np.stack([(labels[tr] == names.index(t)).astype(int) for t in tasks], axis=1)
    y = Y[:, 0] if Y.shape[1] == 1 else Y
    return Data("cora", "graph", Z[tr], y, {"edges": e, "tasks": list(tasks)},
                about=f"training half ({tr.size} papers, {len(e)} directed citation links), "
                      f"task(s) {', '.join(tasks)}")


def subsample(data, n):
    """First ``n`` rows of a stratified shuffle (deterministic) of a flat dataset."""
    from sklearn.model_selection import train_test_split

    if n >= data.shape[0]:
        return data, ""
    keep, _ = train_test_split(np.arange(data.shape[0]), train_size=n, stratify=data.y,
                               random_state=0)
    keep = np.sort(keep)
    note = f"subsampled to {n} of {data.shape[0]} rows (stratified, random_state=0)"
    return Data(data.name, data.kind, data.X[keep], data.y[keep], about=data.about), note


# ---------------------------------------------------------------------------
# Fits.
# ---------------------------------------------------------------------------


def max_sq_row_norm(X):
    import scipy.sparse as sp

    if sp.issparse(X):
        X = X.tocsr()
        return float(np.max(np.asarray(X.multiply(X).sum(axis=1), np.float64)))
    X = np.asarray(X, np.float64)
    return float(np.max(np.einsum("ij,ij->i", X, X)))


def make_estimator(cls, C, setting=None):
    import inspect

    params = inspect.signature(cls.__init__).parameters
    kw = {} if C is None else {"C": C}
    if "random_state" in params:
        kw["random_state"] = 0
    return cls(**kw, **(setting or {}))


def fixed_params(cls, pairs):
    """``--param NAME=VALUE`` pairs that ``cls`` takes, as a dict (numbers as float)."""
    import inspect

    names = inspect.signature(cls.__init__).parameters
    out = {}
    for pair in pairs or ():
        key, value = pair
        if key in names:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


def _param(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return key, value


def default_settings(cls):
    """The settings (dicts) of ``cls._default_param_grid``: ``[{}]`` without one."""
    import itertools

    grid = dict(getattr(cls, "_default_param_grid", {}) or {})
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def _fit_call(est, data):
    if data.kind == "bags":
        return lambda: est.fit(data.X, data.y, bags=data.extra["bags"])
    if data.kind == "graph":
        return lambda: est.fit(data.X, data.y, edges=data.extra["edges"])
    return lambda: est.fit(data.X, data.y)


def _rel(num, den):
    num, den = np.asarray(num, np.float64), np.asarray(den, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / np.maximum(np.abs(den), 1e-30)


def fit_record(cls, data, C, note, setting=None):
    """Fit ``cls(C, **setting)`` on ``data``; the row of the table (dict)."""
    from sklearn.exceptions import ConvergenceWarning

    est = make_estimator(cls, C, setting)
    fit = _fit_call(est, data)
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        try:
            fit()
        except Exception as e:  # recorded in the table; the run goes on
            error = f"{type(e).__name__}: {e}"
        seconds = time.perf_counter() - t0
    conv_w = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    tied_w = [str(w.message) for w in caught
              if not issubclass(w.category, ConvergenceWarning) and "same score" in str(w.message)]
    row = {"estimator": cls.__name__, "dataset": data.name, "n": int(data.shape[0]),
           "d": int(data.shape[1]), "C": C, "setting": dict(setting or {}),
           "C_R2": None if C is None else
           float(C) * max_sq_row_norm(data.X), "time": seconds,
           "conv_warnings": len(conv_w), "tied": bool(tied_w), "near_zero": False,
           "warning_text": conv_w[0][:400] if conv_w else None, "note": note, "error": error,
           "tol": float(getattr(est, "tol", np.nan)),
           "iter": None, "gap": None, "converged": None, "extra": "", "gap64": None}
    if error is not None:
        return row
    row.update(fit_metrics(est))
    if type(est).__name__ in GAP64_ESTIMATORS and not np.ndim(est.objective_):
        F0 = primal_at_zero(est, data)
        row["objective_at_zero"] = F0
        # w = 0 is within tol of the optimum F*: F(0) - F* <= F(0) - D <= tol F(0).
        row["near_zero"] = bool(F0 - float(est.dual_objective_) <= float(est.tol) * abs(F0))
        F64 = primal64(est, data)
        row["objective64"] = F64
        row["gap64"] = float(_rel(F64 - float(est.dual_objective_), F64))
    return row


GAP64_ESTIMATORS = ("APSVM", "AUCSVM", "BinarySVM")


def primal64(est, data):
    """The primal objective at ``coef_`` (and ``intercept_``) re-evaluated in float64.

    BinarySVM: ``1/2 ||[w, b]||^2 + C sum_i c_i max(0, 1 - y_i (w x_i + b))``; AUCSVM:
    ``1/2 ||w||^2 + C / (|P||N|) sum_pn max(0, 1 - 2 (s_p - s_n))`` (pair sums, exact);
    APSVM: ``1/2 ||w||^2 + C (Delta(R) - w (Psi* - Psi(R)))`` at the ranking ``R`` that
    jaxrank's exact AP oracle returns for the float32 scores, the product summed in
    float64 (a lower bound on the float64 hinge if rounding changed the argmax).
    """
    name = type(est).__name__
    w = np.asarray(est.coef_[0], np.float64)
    X = data.X.astype(np.float64)
    s = np.asarray(X @ w, np.float64).reshape(-1)
    pos = np.asarray(data.y) == est.classes_[1]
    C = float(est.C)
    if name == "BinarySVM":
        b = float(est.intercept_[0]) if est.fit_intercept else 0.0
        yy = np.where(pos, 1.0, -1.0)
        c = np.where(pos, _pos_weight(est, pos), 1.0)
        return 0.5 * (w @ w + b * b) + C * float(np.sum(c * np.maximum(0.0, 1.0 - yy * (s + b))))
    if name == "AUCSVM":
        sp_, sn = s[pos], s[~pos]
        tot = 0.0
        for i in range(0, sp_.size, 64):
            tot += float(np.maximum(0.0, 1.0 - 2.0 * (sp_[i:i + 64, None] - sn[None, :])).sum())
        return 0.5 * (w @ w) + C * tot / (sp_.size * sn.size)
    from jaxrank.inference import ap_most_violated

    r = ap_most_violated(s.astype(np.float32), pos)
    xi = float(r.loss) - float(np.asarray(r.coef, np.float64) @ s)
    return 0.5 * (w @ w) + C * xi


def _pos_weight(est, pos):
    """BinarySVM's weight of the positives (``"balanced"``: ``n_neg / n_pos``)."""
    if est.pos_weight == "balanced":
        return float(np.sum(~pos)) / max(float(np.sum(pos)), 1.0)
    return float(est.pos_weight)


def primal_at_zero(est, data):
    """The objective of :func:`primal64` at ``coef_ = 0`` (float64): the value of a
    fit that scores every sample the same. BinarySVM: at its best intercept
    ``b = clip(C (sum_pos c_i - n_neg), -1, 1)`` (the exact minimiser of
    ``1/2 b^2 + C sum_i c_i max(0, 1 - y_i b)``); AUCSVM: ``C`` (every pair's
    hinge is 1); APSVM: ``C`` times the loss of the most violated ranking of
    tied scores."""
    name = type(est).__name__
    pos = np.asarray(data.y) == est.classes_[1]
    C = float(est.C)
    if name == "BinarySVM":
        cp = _pos_weight(est, pos) * float(np.sum(pos))
        n_neg = float(np.sum(~pos))
        b = float(np.clip(C * (cp - n_neg), -1.0, 1.0)) if est.fit_intercept else 0.0
        return 0.5 * b * b + C * (cp * max(0.0, 1.0 - b) + n_neg * max(0.0, 1.0 + b))
    if name == "AUCSVM":
        return C
    from jaxrank.inference import ap_most_violated

    r = ap_most_violated(np.zeros(pos.size, np.float32), pos)
    return C * float(r.loss)


def fit_metrics(est):
    """``iter``, ``gap``, ``converged`` and a note from the fitted attributes of ``est``."""
    name = type(est).__name__
    out = {"iter": int(np.max(np.atleast_1d(est.n_iter_)))}
    extra = []
    if name == "KernelRank":
        h = np.asarray(est.objective_history_, np.float64)
        k = max(1, h.size // 10)
        change = float(abs(h[-1] - h[-k - 1]) / max(abs(h[-1]), 1e-30)) if h.size > k else np.nan
        out.update(gap=None, converged=None)
        extra.append(f"fixed {est.n_iter_} Adam steps; smoothed AUC U {h[0]:.4f} -> "
                     f"{est.objective_:.4f}, relative change over the last {k} steps "
                     f"{change:.1e}")
        out["extra"] = "; ".join(extra)
        return out
    conv = np.atleast_1d(np.asarray(est.converged_, bool))
    gap = _rel(np.atleast_1d(est.objective_) - np.atleast_1d(est.dual_objective_),
               np.atleast_1d(est.objective_))
    out["tasks_converged"] = [int(conv.sum()), int(conv.size)]
    if name in BAG_ESTIMATORS:
        # Step k's own objective P_k is not stored; the objective after the step,
        # F_k = cccp_objectives_[k], is at most P_k, so g_k / F_k bounds its relative
        # gap from above. The kept step (the one that produced coef_, lowest F) has
        # P = dual_objective_ + g exactly.
        g = np.asarray(est.cccp_gaps_, np.float64)
        F = np.asarray(est.cccp_objectives_, np.float64)
        steps = _rel(g, F)
        kept = int(np.argmin(F))
        exact = float(_rel(g[kept], float(est.dual_objective_) + g[kept]))
        last_is_kept = kept == g.size - 1
        out["gap"] = exact if last_is_kept else float(steps[-1])
        out["gap_is_bound"] = not last_is_kept
        out["step_gaps"] = steps.tolist()
        extra.append(f"{est.n_cccp_iter_} CCCP steps; gap of the last step"
                     + ("" if last_is_kept else f" (bound; kept step {kept + 1}: {exact:.1e})")
                     + (f"; worst step <= {float(np.nanmax(steps)):.1e}" if g.size > 1 else ""))
        if np.any(g < 0):
            extra.append("negative gap: the convex step's objective uses approximate "
                         "inference (a lower bound)")
    elif name == "HOAPSVM":
        Fh = np.atleast_2d(est.cccp_objectives_)
        G = np.atleast_2d(est.cccp_gaps_)
        steps = _rel(G, Fh[:, 1:1 + G.shape[1]])
        out["gap"] = float(np.max(gap))  # the last convex step's, exact (its converged_)
        out["step_gaps"] = steps.tolist()
        extra.append(f"{int(np.max(np.atleast_1d(est.n_cccp_iter_)))} CCCP steps; gap, iter "
                     f"and conv of the last step; worst step <= {float(np.nanmax(steps)):.1e}")
    else:
        out["gap"] = float(np.max(gap))
    if name == "APSVMApprox":
        b_conv = np.atleast_1d(np.asarray(est.binary_converged_, bool))
        extra.append(f"stage 1: {int(np.max(np.atleast_1d(est.binary_n_iter_)))} it, "
                     f"{'converged' if b_conv.all() else 'NOT converged'}")
        conv = conv & b_conv
    if conv.size > 1:
        extra.append(f"{int(conv.sum())}/{conv.size} tasks converged")
    out["converged"] = bool(conv.all())
    out["extra"] = "; ".join(extra)
    return out


# ---------------------------------------------------------------------------
# Plan, run, report.
# ---------------------------------------------------------------------------


def estimator_classes(names):
    import jaxrank

    by_name = {}
    for key in jaxrank.ESTIMATORS:
        cls = jaxrank.ESTIMATORS[key]
        by_name[cls.__name__.lower()] = cls
        by_name[key.lower()] = cls
    if names is None:
        return [jaxrank.ESTIMATORS[k] for k in jaxrank.ESTIMATORS]
    out = []
    for n in names:
        if n.lower() not in by_name:
            raise SystemExit(f"--estimators: unknown {n!r}; known: "
                             f"{sorted({c.__name__ for c in by_name.values()})}")
        if by_name[n.lower()] not in out:
            out.append(by_name[n.lower()])
    return out


def all_datasets():
    return ["breast_cancer", *(f"keel:{k}" for k in KEEL_SETS), "w8a", "reuters", *MIL_ALL,
            "cora"]


def select_datasets(tokens, quick):
    """Dataset names from ``--datasets`` tokens (a full name, its part after ``:``, or a
    prefix such as ``keel``, ``mil``, ``animals``) or the default list."""
    names = all_datasets()
    if tokens is None:
        if quick:
            return list(QUICK_SETS)
        return [n for n in names if not n.startswith(("mil:", "animals:")) or n in MIL_DEFAULT]
    out = []
    for t in tokens:
        hit = [n for n in names if t == n or n.split(":", 1)[-1] == t or n.startswith(t + ":")]
        if not hit:
            raise SystemExit(f"--datasets: unknown {t!r}; known: {names}")
        out += [h for h in hit if h not in out]
    return out


def kind_of(dataset):
    if dataset.startswith(("mil:", "animals:")):
        return "bags"
    return "graph" if dataset == "cora" else "flat"


def estimator_kind(cls):
    n = cls.__name__
    return "bags" if n in BAG_ESTIMATORS else "graph" if n in GRAPH_ESTIMATORS else "flat"


def default_Cs(cls):
    Cs = getattr(cls, "_default_Cs", None)
    return [None] if Cs is None else [float(c) for c in Cs]


def fmt_C(C, setting=None):
    text = "-" if C is None else f"{C:g}"
    if setting:
        text += " (" + ", ".join(f"{k}={v}" for k, v in setting.items()) + ")"
    return text


def fmt_gap(g, bound=False):
    return "n/a" if g is None else ("<=" if bound else "") + f"{g:.1e}"


def fmt_conv(c):
    return "n/a" if c is None else ("yes" if c else "NO")


def progress_line(i, total, r):
    err = f"  ERROR {r['error'][:120]}" if r["error"] else ""
    return (f"[{i}/{total}] {r['estimator']:<12} {r['dataset']:<28} C={fmt_C(r['C'], r.get('setting')):<7} "
            f"it={r['iter'] if r['iter'] is not None else '-':>5} "
            f"gap={fmt_gap(r['gap'], r.get('gap_is_bound')):>9} "
            f"conv={fmt_conv(r['converged']):<3} {r['time']:7.1f} s  warn={r['conv_warnings']}"
            + (f"  gap64={r['gap64']:.1e}" if r.get("gap64") is not None else "")
            + f"{'  TIED' if r['tied'] else ''}{'  w~0' if r.get('near_zero') else ''}{err}")


def summarise(rows):
    out = {}
    for r in rows:
        s = out.setdefault(r["estimator"], {"fits": 0, "with_test": 0, "converged": 0,
                                            "unconverged": [], "conv_warnings": 0, "tied": 0,
                                            "near_zero": [], "errors": 0, "seconds": 0.0,
                                            "gap64_above_tol": []})
        s["fits"] += 1
        s["seconds"] += r["time"]
        s["conv_warnings"] += r["conv_warnings"]
        s["tied"] += int(r["tied"])
        if r.get("near_zero"):
            s["near_zero"].append(f"{r['dataset']}@{fmt_C(r['C'], r.get('setting'))}")
        if r["error"]:
            s["errors"] += 1
        elif r["converged"] is not None:
            s["with_test"] += 1
            if r["converged"]:
                s["converged"] += 1
                if r.get("gap64") is not None and r["gap64"] > r["tol"]:
                    s["gap64_above_tol"].append(
                        f"{r['dataset']}@{fmt_C(r['C'], r.get('setting'))}")
            else:
                s["unconverged"].append(f"{r['dataset']}@{fmt_C(r['C'], r.get('setting'))}")
    return out


def summary_lines(summary):
    lines = ["| estimator | converged / fits | not converged (dataset@C) | converged, but gap64 > "
             "tol | ConvergenceWarnings | tied fits | coef_ within tol of 0 (dataset@C) | errors "
             "| fit time (s) |",
             "|---|---|---|---|---:|---:|---|---:|---:|"]
    for name, s in summary.items():
        conv = (f"{s['converged']} / {s['with_test']}" if s["with_test"] or not s["fits"]
                else f"n/a ({s['fits']} fits, no convergence test)")
        if s["with_test"] and s["converged"] == s["with_test"] and not s["errors"]:
            conv += " (all)"
        lines.append(f"| {name} | {conv} | {', '.join(s['unconverged']) or '-'} | "
                     f"{', '.join(s['gap64_above_tol']) or '-'} | "
                     f"{s['conv_warnings']} | {s['tied']} | {', '.join(s['near_zero']) or '-'} | "
                     f"{s['errors']} | {s['seconds']:.0f} |")
    return lines


def table_lines(rows):
    lines = ["| estimator | dataset | n x d | C | C*R^2 | iter | gap | gap64 | time (s) | conv "
             "| warn | notes |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    for r in rows:
        notes = [x for x in (r["note"], r["extra"], "TIED scores" if r["tied"] else "",
                             "coef_ within tol of 0" if r.get("near_zero") else "",
                             r["error"] or "") if x]
        cr2 = "-" if r["C_R2"] is None else f"{r['C_R2']:.3g}"
        lines.append(f"| {r['estimator']} | {r['dataset']} | {r['n']} x {r['d']} | "
                     f"{fmt_C(r['C'], r.get('setting'))} | {cr2} | {r['iter'] if r['iter'] is not None else '-'} "
                     f"| {fmt_gap(r['gap'], r.get('gap_is_bound'))} | "
                     f"{'-' if r.get('gap64') is None else format(r['gap64'], '.1e')} | "
                     f"{r['time']:.2f} | {fmt_conv(r['converged'])} | "
                     f"{r['conv_warnings']} | {'; '.join(notes).replace('|', '/')} |")
    return lines


def out_paths(out):
    md = Path(out)
    if md.suffix != ".md":
        md = md.with_suffix(".md")
    return md, md.with_suffix(".json")


def refuse_overwrite(paths, force):
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        raise SystemExit(f"refusing to overwrite {', '.join(existing)} (pass --force, or "
                         "another --out path)")


def run_convergence(args):
    import jaxrank

    if tuple(jaxrank.datasets.DEMO_DATASETS) != KEEL_SETS:
        log(f"note: jaxrank.datasets.DEMO_DATASETS is {jaxrank.datasets.DEMO_DATASETS}; using it")
    keel = [f"keel:{k}" for k in jaxrank.datasets.DEMO_DATASETS]
    classes = estimator_classes(args.estimators)
    datasets = select_datasets(args.datasets, args.quick)
    datasets = [d for d in datasets if not d.startswith("keel:") or d in keel]
    data_dir = Path(args.data_dir)
    plan = []
    for cls in classes:
        kind = estimator_kind(cls)
        for ds in datasets:
            if kind_of(ds) == kind:
                fixed = fixed_params(cls, args.param)
                plan += [(cls, ds, C, {**p, **fixed}) for p in default_settings(cls)
                         for C in default_Cs(cls)]
    taken = {k for cls in classes for k in fixed_params(cls, args.param)}
    unused = {k for k, _ in args.param} - taken
    if unused:
        raise SystemExit(f"--param {', '.join(sorted(unused))}: no estimator in --estimators "
                         "takes it")
    if not plan:
        raise SystemExit("nothing to run: no estimator in --estimators takes a dataset in "
                         "--datasets (flat: breast_cancer, keel, w8a, reuters; latent: mil, "
                         "animals; HOBSVM/HOAPSVM: cora)")
    log(f"{len(plan)} fits: {len(classes)} estimator(s) x {len(datasets)} dataset(s) x their "
        "default C grids (and default sweep settings of other parameters)")
    cache, rows, skipped = {}, [], []
    t_all = time.perf_counter()
    for i, (cls, ds, C, setting) in enumerate(plan, 1):
        if ds not in cache:
            try:
                t0 = time.perf_counter()
                cache[ds] = load_dataset(ds, data_dir, args.cora_tasks)
                log(f"loaded {ds}: {cache[ds].shape[0]} x {cache[ds].shape[1]} "
                    f"({cache[ds].about}; {time.perf_counter() - t0:.1f} s)")
            except (FileNotFoundError, OSError) as e:
                cache[ds] = None
                log(f"skipped {ds}: {e}")
                skipped.append(ds)
        if cache[ds] is None:
            continue
        data, note = cache[ds], ""
        if (cls.__name__, ds) in SUBSAMPLE:
            data, note = subsample(data, SUBSAMPLE[(cls.__name__, ds)])
        r = fit_record(cls, data, C, note, setting)
        rows.append(r)
        log(progress_line(i, len(plan), r))
    total = time.perf_counter() - t_all
    summary = summarise(rows)
    log()
    log("\n".join(table_lines(rows)))
    log()
    log("\n".join(summary_lines(summary)))
    log(f"\ntotal {total:.0f} s; load average at end {os.getloadavg()[0]:.1f}")
    return rows, summary, skipped, total


def write_convergence(args, header, rows, summary, skipped, total):
    md, js = out_paths(args.out)
    refuse_overwrite([md, js], args.force)
    md.parent.mkdir(parents=True, exist_ok=True)
    cmd = "python bench/convergence.py " + " ".join(sys.argv[1:])
    text = ["# Convergence at the defaults (issue 21)", "",
            *[f"- {h}" for h in header],
            f"- Command: `{cmd}`; total {total:.0f} s; load average at end "
            f"{os.getloadavg()[0]:.1f}",
            "- One fit per (estimator, dataset, C of `_default_Cs`, setting of "
            "`_default_param_grid`) with the estimator's defaults; columns and data are described in `bench/README.md` (section "
            "\"Convergence at the defaults\") and the script's docstring.", ""]
    if skipped:
        text += [f"Skipped (data not found under `--data-dir`): {', '.join(skipped)}.", ""]
    text += ["## Summary", "", *summary_lines(summary), "", "## Every fit", "",
             *table_lines(rows), ""]
    md.write_text("\n".join(text))
    js.write_text(json.dumps({"header": header, "command": cmd, "total_seconds": total,
                              "skipped": skipped, "summary": summary, "rows": rows},
                             indent=1, default=float))
    log(f"wrote {md} and {js}")


# ---------------------------------------------------------------------------
# Item 4: SVM-perf.
# ---------------------------------------------------------------------------


def build_svmperf(src, workdir):
    """Unpack/copy SVM-perf into ``workdir`` and ``make`` it; ``(svm_perf_learn, build folder)``."""
    build, _ = build_svm_perf(src, workdir, flag="--svmperf")
    return build / "svm_perf_learn", build


def find_example(src, build, given):
    cands = [Path(given)] if given else [build / "example1", Path(src) / "example1",
                                         Path(src).parent / "example1"]
    for c in cands:
        if (c / "train.dat").exists():
            return c
    raise SystemExit("SVM-perf's example1/train.dat not found (looked in "
                     f"{', '.join(map(str, cands))}); pass --svmperf-example DIR")


PERF_KEYS = {"iterations": r"Number of iterations:\s*(\d+)",
             "cpu_seconds": r"Runtime in cpu-seconds:\s*([0-9.eE+-]+)",
             "gap": r"Upper bound on duality gap:\s*([0-9.eE+-]+)",
             "dval": r"Dual objective value: dval=\s*([0-9.eE+-]+)",
             "pval": r"Primal objective value: pval=\s*([0-9.eE+-]+)",
             "argmax_calls": r"Number of calls to 'find_most_violated_constraint':\s*(\d+)"}


def run_svmperf(learn, args_list, train, model, timeout):
    t0 = time.perf_counter()
    try:
        r = subprocess.run([str(learn), *args_list, str(train), str(model)],
                           capture_output=True, text=True, timeout=timeout)
        out, rc = r.stdout + r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return {"timeout": True, "wall": time.perf_counter() - t0, "rc": None,
                "tail": out[-500:]}
    res = {"timeout": False, "wall": time.perf_counter() - t0, "rc": rc, "tail": out[-800:]}
    for k, pat in PERF_KEYS.items():
        m = re.findall(pat, out)
        res[k] = float(m[-1]) if m else None
    return res


def read_svmlight_model(path, d):
    """Weights ``[d]`` of a linear SVM-light model file (sum of alpha * support vector)."""
    return read_model(path, d)[0]


def svmperf_mode(args, header):
    import jaxrank
    from sklearn.datasets import load_svmlight_file
    from sklearn.exceptions import ConvergenceWarning

    from jaxrank.inference import ap_most_violated

    md = js = None
    if args.out:
        md, js = out_paths(Path(args.out).with_name(Path(args.out).stem + "_svmperf.md"))
        refuse_overwrite([md, js], args.force)
    work = Path(tempfile.mkdtemp(prefix="jaxrank_svmperf_"))
    try:
        t0 = time.perf_counter()
        learn, build = build_svmperf(args.svmperf, work)
        log(f"built SVM-perf from {args.svmperf} in {work} ({time.perf_counter() - t0:.0f} s; "
            "deleted at the end)")
        ex = find_example(args.svmperf, build, args.svmperf_example)
        X, y = load_svmlight_file(str(ex / "train.dat"))
        X = _csr32(X)
        pos = y > 0
        P, N = int(pos.sum()), int((~pos).sum())
        d = X.shape[1]
        log(f"example1: {ex / 'train.dat'}: {X.shape[0]} x {d}, {P} positive / {N} negative")
        X64 = X.astype(np.float64)

        def xi_auc(v):  # (1/PN) sum_pn max(0, 1 - 2 (s_p - s_n)) in float64 (exact)
            s = X64 @ v
            sp_, sn = np.sort(s[pos]), np.sort(s[~pos])
            tot = 0.0
            for chunk in np.array_split(sp_, max(1, P // 256)):
                tot += np.maximum(0.0, 1.0 - 2.0 * (chunk[:, None] - sn[None, :])).sum()
            return tot / (P * N)

        def xi_ap(v):  # max_R Delta - v (Psi* - Psi(R)) by jaxrank's exact AP oracle
            s = np.asarray(X64 @ v, np.float32)
            r = ap_most_violated(s, pos)
            return float(r.loss) - float(np.asarray(r.coef, np.float64) @ (X64 @ v))

        losses = {"AP": dict(cls=jaxrank.APSVM, flag=["-l", "11"], Cs=args.svmperf_ap_Cs,
                             a=100.0 / (P * N), xi=xi_ap,
                             conv=f"c_perf = 100 C / (|P||N|)^2 = C * {100.0 / (P * N) ** 2:.3g}"
                                  f", w_perf = (100/(|P||N|)) w, objective_perf = "
                                  f"(100/(|P||N|))^2 objective"),
                  "ROC": dict(cls=jaxrank.AUCSVM, flag=["-l", "10"], Cs=args.svmperf_roc_Cs,
                              a=2.0, xi=xi_auc,
                              conv="c_perf = C / 25, w_perf = 2 w, objective_perf = 4 "
                                   "objective")}
        rows = []
        for loss, L in losses.items():
            log(f"\n{loss}: {L['conv']}")
            for C in L["Cs"]:
                a = L["a"]
                # jaxrank objective F(v) = 1/2 |v|^2 + C xi(v); SVM-perf's is a^2 F(w/a) with
                # c_perf = C a^2 / 100 (its loss is 100 times jaxrank's).
                c_perf = C * a ** 2 / 100.0

                def F(v, C=C, L=L):
                    return 0.5 * float(v @ v) + C * L["xi"](v)

                fits = {}
                for tag, kw in (("tol=1e-4 (default), first fit", {}),
                                ("tol=1e-4 (default), warm", {}),
                                ("reference tol=1e-6, max_iter=20000",
                                 {"tol": 1e-6, "max_iter": 20000})):
                    est = L["cls"](C=C, **kw)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", ConvergenceWarning)
                        t1 = time.perf_counter()
                        est.fit(X, y)
                        fits[tag] = (est, time.perf_counter() - t1)
                ref = fits["reference tol=1e-6, max_iter=20000"][0]
                v_ref = ref.coef_[0].astype(np.float64)
                lower = max(float(ref.dual_objective_),
                            float(fits["tol=1e-4 (default), warm"][0].dual_objective_))
                best = F(v_ref)
                perf = {}
                for tag, eps in (("-e 0.1 (default)", 0.1),
                                 ("-e for gap 1e-4", 100.0 * 1e-4 * best / C)):
                    model = work / f"model_{loss}_{C:g}_{eps:g}.txt"
                    argv = [*L["flag"], "-w", "3", "-c", f"{c_perf:.10g}", "-e", f"{eps:.6g}",
                            "--b", "0"]
                    res = run_svmperf(learn, argv, ex / "train.dat", model, args.svmperf_timeout)
                    res["argv"] = " ".join(argv)
                    if not res["timeout"] and res["rc"] == 0 and model.exists():
                        w = read_svmlight_model(model, d)
                        v = w / a
                        Fv = F(v)
                        best = min(best, Fv)
                        res.update(F=Fv, cos=float(v @ v_ref / max(np.linalg.norm(v)
                                                                  * np.linalg.norm(v_ref), 1e-300)),
                                   norm_ratio=float(np.linalg.norm(v) / max(np.linalg.norm(v_ref),
                                                                            1e-300)))
                    perf[tag] = res
                for tag, res in perf.items():
                    if "F" in res:
                        res["rel_gap"] = (res["F"] - lower) / abs(res["F"])
                        if res.get("pval") and res.get("gap") is not None and res["pval"] > 0:
                            res["own_rel_gap"] = res["gap"] / res["pval"]
                # jaxrank to the precision SVM-perf reached at its default -e.
                g_perf = perf["-e 0.1 (default)"].get("rel_gap")
                if g_perf is not None and g_perf > 0:
                    est = L["cls"](C=C, tol=float(g_perf))
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", ConvergenceWarning)
                        t1 = time.perf_counter()
                        est.fit(X, y)
                        fits["tol = gap of SVM-perf -e 0.1 (compiled)"] = (
                            est, time.perf_counter() - t1)
                for tag, res in perf.items():
                    rows.append(perf_row(loss, C, c_perf, "SVM-perf " + tag, res))
                for tag, (est, sec) in fits.items():
                    v = est.coef_[0].astype(np.float64)
                    Fv = F(v)
                    rows.append({"loss": loss, "C": C, "c_perf": c_perf, "solver": "jaxrank " + tag,
                                 "iterations": int(est.n_iter_), "seconds": sec,
                                 "cpu_seconds": None, "F": Fv,
                                 "rel_gap": (Fv - lower) / abs(Fv),
                                 "own_rel_gap": float(_rel(est.objective_ - est.dual_objective_,
                                                           est.objective_)),
                                 "converged": bool(est.converged_), "argv": str(est.get_params(
                                     deep=False).get("tol")), "cos": None, "norm_ratio": None})
                for r in rows[-(len(perf) + len(fits)):]:
                    log(perf_line(r))
        text = svmperf_report(header, losses, rows, P, N, ex)
        log("\n" + text)
        if md:
            md.parent.mkdir(parents=True, exist_ok=True)
            md.write_text(text)
            js.write_text(json.dumps({"header": header, "P": P, "N": N, "rows": rows},
                                     indent=1, default=float))
            log(f"wrote {md} and {js}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def perf_row(loss, C, c_perf, solver, res):
    return {"loss": loss, "C": C, "c_perf": c_perf, "solver": solver,
            "iterations": None if res.get("iterations") is None else int(res["iterations"]),
            "seconds": res["wall"], "cpu_seconds": res.get("cpu_seconds"), "F": res.get("F"),
            "rel_gap": res.get("rel_gap"), "own_rel_gap": res.get("own_rel_gap"),
            "converged": None, "argv": res.get("argv"), "cos": res.get("cos"),
            "norm_ratio": res.get("norm_ratio"), "timeout": res.get("timeout"),
            "rc": res.get("rc"), "tail": None if res.get("F") is not None else res.get("tail")}


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def perf_line(r):
    return (f"  {r['loss']} C={r['C']:g} (c_perf={r['c_perf']:.4g}) {r['solver']:<42} "
            f"it={_f(r['iterations'], 'd'):>5} wall={r['seconds']:7.2f} s "
            f"cpu={_f(r['cpu_seconds'], '.2f'):>6} F={_f(r['F'], '.6g'):>10} "
            f"gap={_f(r['rel_gap'], '.1e'):>8} own={_f(r['own_rel_gap'], '.1e'):>8}"
            + (f" cos={r['cos']:.6f} |v|/|v_ref|={r['norm_ratio']:.4f}" if r.get("cos") else "")
            + (" TIMEOUT" if r.get("timeout") else "")
            + (f" rc={r['rc']}" if r.get("rc") not in (None, 0) else ""))


def svmperf_report(header, losses, rows, P, N, ex):
    lines = ["# jaxrank vs SVM-perf on SVM-perf's example1 (issue 21, item 4)", "",
             *[f"- {h}" for h in header],
             f"- Data: `{ex.name}/train.dat`, {P} positive / {N} negative; command: "
             f"`python bench/convergence.py {' '.join(sys.argv[1:])}`",
             "- C conversion (SVM-perf 3.00's `svm_struct_api.c`: losses in percent, `Psi` "
             "not normalised):"]
    lines += [f"  - {k} (`{' '.join(L['flag'])} -w 3`, jaxrank `{L['cls'].__name__}`): "
              f"{L['conv']}" for k, L in losses.items()]
    lines += ["- `F`: jaxrank's objective (jaxrank's units) at each solver's weights (SVM-perf's "
              "read from its model file and mapped back); `gap`: `(F - L) / F` with `L` the "
              "best certified dual bound of jaxrank's fits at that C (reference fit at "
              "`tol=1e-6`), i.e. a certified bound on each solution's relative suboptimality; "
              "`own`: the solver's own bound (SVM-perf: printed gap / pval, shown where "
              "its `%.5f` print resolves it; jaxrank: `(objective_ - dual_objective_) / "
              "objective_`); `cos`, `|v|/|v_ref|`: SVM-perf's mapped weights against the "
              "reference fit's (1 and 1 when the conversion is right).",
              "- Times: wall seconds (SVM-perf: the process, reading the file included; `cpu`: "
              "its own optimisation time); jaxrank's first fit includes compilation, `warm` "
              "is the same fit again.", "",
              "| loss | C (jaxrank) | -c (SVM-perf) | solver, setting | iterations | wall s | "
              "cpu s | F | gap | own | cos | \\|v\\|/\\|v_ref\\| |",
              "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['loss']} | {r['C']:g} | {r['c_perf']:.4g} | {r['solver']}"
            f"{' `' + r['argv'] + '`' if r['solver'].startswith('SVM-perf') else ''}"
            f"{' TIMEOUT' if r.get('timeout') else ''} | {_f(r['iterations'], 'd')} | "
            f"{r['seconds']:.2f} | {_f(r['cpu_seconds'], '.2f')} | {_f(r['F'], '.6g')} | "
            f"{_f(r['rel_gap'], '.1e')} | {_f(r['own_rel_gap'], '.1e')} | "
            f"{_f(r['cos'], '.6f')} | {_f(r['norm_ratio'], '.4f')} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------


def _floats(s):
    return [float(x) for x in s.split(",") if x.strip()]


def _names(s):
    return [x.strip() for x in s.split(",") if x.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Columns, data and conversions: see the module "
                                        "docstring and bench/README.md.")
    ap.add_argument("--estimators", type=_names, default=None,
                    help="comma list of class or registry names (default: every registered "
                         "estimator)")
    ap.add_argument("--datasets", type=_names, default=None,
                    help="comma list: breast_cancer, keel (all six) or keel:<name>/<name>, "
                         "w8a, reuters, mil / animals (all) or mil:<set>/<set>, cora "
                         "(default: all but the MIL sets outside " + ",".join(MIL_DEFAULT) + ")")
    ap.add_argument("--param", type=_param, action="append", default=[], metavar="NAME=VALUE",
                    help="fix a parameter of every estimator that has it (repeatable), e.g. "
                         "pos_weight=balanced; shown in the C column")
    ap.add_argument("--quick", action="store_true",
                    help="only " + " and ".join(QUICK_SETS) + " (a smoke run of the flat "
                         "estimators; --datasets overrides)")
    ap.add_argument("--data-dir", default=str(DEFAULT_DATA),
                    help="the shared data folder (default ../shared/data next to the repo)")
    ap.add_argument("--cora-tasks", type=_names, default=list(CORA_TASKS),
                    help="Cora classes fitted as the tasks of one multi-task fit (default "
                         + ",".join(CORA_TASKS) + ")")
    ap.add_argument("--out", nargs="?", const=str(DEFAULT_OUT), default=None,
                    help="write a markdown table and JSON (default path "
                         "bench/results/convergence.md/.json; --svmperf: "
                         "convergence_svmperf.md/.json)")
    ap.add_argument("--force", action="store_true", help="overwrite existing --out files")
    ap.add_argument("--svmperf", metavar="PATH", default=None,
                    help="item 4 instead: build SVM-perf from PATH (svm_perf.tar.gz or its "
                         "directory) in a temporary folder and compare on its example1")
    ap.add_argument("--svmperf-example", metavar="DIR", default=None,
                    help="folder with SVM-perf's example1 train.dat (default: inside PATH or "
                         "next to it)")
    ap.add_argument("--svmperf-ap-Cs", type=_floats, default=[10.0, 100.0],
                    help="jaxrank APSVM C values for the AP comparison (default 10,100)")
    ap.add_argument("--svmperf-roc-Cs", type=_floats, default=[1.0, 100.0, 10000.0],
                    help="jaxrank AUCSVM C values for the ROC-area comparison "
                         "(default 1,100,10000)")
    ap.add_argument("--svmperf-timeout", type=float, default=600.0,
                    help="seconds per svm_perf_learn run (default 600)")
    args = ap.parse_args(argv)

    if args.out and not args.svmperf:
        refuse_overwrite(out_paths(args.out), args.force)
    header = machine_lines()
    for h in header:
        log(h)
    if args.svmperf:
        svmperf_mode(args, header)
        return
    rows, summary, skipped, total = run_convergence(args)
    if args.out:
        write_convergence(args, header, rows, summary, skipped, total)


if __name__ == "__main__":
    main()
