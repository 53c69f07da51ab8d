"""Inference at the sort floor: integer sort keys and the CPU host path.

Every sort of the AP and ROC-area oracles sorts integer keys of the scores;
on CPU the integer stages run as NumPy host kernels (``jax.pure_callback``),
elsewhere as XLA. The two paths must return bitwise identical results: here
the XLA path is forced with the public switch ``jaxrank.inference.sort_path("xla")`` and
compared with the host path (``sort_path("host")``), under ``jit`` and
``vmap``, on inputs with ties, and through a whole ``APSVM`` / ``AUCSVM`` fit.
"""

import functools
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference

import jaxrank
from jaxrank._src.oracles import auc as aucsvm
from jaxrank._src.oracles import ap as inf
from jaxrank._src.oracles import sorting as srt
from jaxrank._src import native
from jaxrank._src.metrics import _sort_key
from jaxrank.inference import ap_oracle, auc_oracle


def _specials(rng, n, dtype):
    """Random floats with ties, both zeros, both infinities, subnormals, NaNs."""
    info = np.finfo(dtype)
    pool = np.array([0.0, -0.0, np.inf, -np.inf, info.tiny, -info.tiny, info.tiny / 4,
                     -info.tiny / 4, info.smallest_subnormal, -info.smallest_subnormal,
                     info.max, -info.max, 1.0, -1.0], dtype)
    with np.errstate(over="ignore"):
        x = (rng.standard_normal(n) * rng.choice([1e-30, 1.0, 1e30], n)).astype(dtype)
    pick = rng.random(n) < 0.3
    x[pick] = rng.choice(pool, int(pick.sum()))
    x[rng.random(n) < 0.2] = x[0]  # ties
    nan = rng.random(n) < 0.05
    x[nan] = np.where(rng.random(int(nan.sum())) < 0.5, np.nan, -np.nan)
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sort_key_orders_like_numpy_stable_sort(dtype):
    rng = np.random.default_rng(0)
    for n in (1, 7, 1000):
        x = _specials(rng, n, dtype)
        key = np.asarray(_sort_key(jnp.asarray(x)))
        assert key.dtype == np.int32
        # NumPy's stable sort: -0.0 == +0.0, NaNs (any sign) last, ties in index order.
        np.testing.assert_array_equal(np.argsort(key, kind="stable"),
                                      np.argsort(x, kind="stable"))
        same = (x[:, None] == x[None, :]) | (np.isnan(x)[:, None] & np.isnan(x)[None, :])
        np.testing.assert_array_equal(key[:, None] == key[None, :], same)
        # Below the sentinel of masked entries.
        assert key.max() < np.iinfo(np.int32).max


def test_sort_key_float64_is_int64_and_order_preserving(x64):
    rng = np.random.default_rng(1)
    x = _specials(rng, 1000, np.float64)
    key = np.asarray(_sort_key(jnp.asarray(x)))
    assert key.dtype == np.int64
    np.testing.assert_array_equal(np.argsort(key, kind="stable"), np.argsort(x, kind="stable"))


def test_descending_keys_put_masked_entries_last():
    rng = np.random.default_rng(2)
    x = _specials(rng, 500, np.float32)
    valid = rng.random(500) < 0.8
    dk = np.asarray(srt._desc_keys(jnp.asarray(x), jnp.asarray(valid)))
    # Descending scores, NaN after every number, masked entries last.
    num = valid & ~np.isnan(x)
    expect = np.lexsort((np.arange(500), np.where(num, -x, 0), valid & np.isnan(x), ~valid))
    np.testing.assert_array_equal(np.argsort(dk, kind="stable"), expect)
    back = np.asarray(srt._desc_scores(jnp.asarray(np.sort(dk)), jnp.float32))
    ref = -np.sort(np.where(valid, -x, np.nan))  # sorted scores, masked (NaN) last
    ok = valid.sum()
    np.testing.assert_array_equal(back[:ok][~np.isnan(ref[:ok])], ref[:ok][~np.isnan(ref[:ok])])
    assert np.all(back[ok:] == 0)


@pytest.mark.parametrize("n", [0, 1, 255, 256, 5000])
def test_host_and_xla_argsort_are_numpy_stable_argsort(n):
    rng = np.random.default_rng(n)
    k = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    k[rng.random(n) < 0.3] = np.int32(-5)  # ties
    if n > 4:
        k[:4] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0, -1]
    ref = np.argsort(k, kind="stable")
    np.testing.assert_array_equal(srt._np_argsort(k), ref)
    sk, perm = srt._stable_sort_xla(jnp.asarray(k))
    np.testing.assert_array_equal(np.asarray(perm), ref)
    np.testing.assert_array_equal(np.asarray(sk), k[ref])


def test_host_kth_smallest_is_exact():
    rng = np.random.default_rng(5)
    for n in (10, 9000, 50000):
        for k in (1, 7, 999, n // 20, n // 3, n):
            if not 1 <= k <= n:
                continue
            d = rng.integers(-40, 40, n).astype(np.int32)  # ties
            d[: n // 2] = np.sort(d[: n // 2])[::-1]  # a biased strided sample
            assert srt._np_kth_smallest(d, k) == np.sort(d)[k - 1]


# ---------------------------------------------------------------------------
# Host path vs XLA path, bitwise.
# ---------------------------------------------------------------------------

# (n, n_pos, shift of the positives) with many ties. select's buckets at
# n = 40000 are 1250, 10000, 40000; the shifts reach each one, and 60 the case
# where no rank j >= P is active (the top P - 1 negatives are the candidates).
# One shape (n, kp) per group, so that each path compiles few programs.
BIG, KP_BIG = 40000, 256
AP_BIG = [(200, 0.0), (200, 4.0), (200, 12.0), (200, 60.0)]
SMALL, KP_SMALL = 3000, 2048
AP_SMALL = [(30, 0.0), (30, 3.0), (1500, 0.0)]  # greedy and search too
AUC_BIG = [(200, 0.0), (200, 2.0), (200, 60.0), (20000, 0.3)]


def _case(n, n_pos, shift, seed):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.standard_normal(n) * 8) / 8  # many ties
    labels = np.zeros(n, bool)
    labels[rng.choice(n, n_pos, replace=False)] = True
    where = rng.random(n) < 0.97
    scores = (scores + shift * labels).astype(np.float32)
    scores[(rng.random(n) < 0.01) & ~labels] = -0.0
    return jnp.asarray(scores), jnp.asarray(labels), jnp.asarray(where)


def _np(r):
    return [np.asarray(x) for x in r if x is not None]


def _run_all():
    """Every result of the comparisons, on the current path."""
    out = {}
    for i, (n_pos, shift) in enumerate(AP_BIG):
        out["ap", "big", i] = _np(ap_oracle(*_case(BIG, n_pos, shift, i), kp=KP_BIG))
    for i, (n_pos, shift) in enumerate(AP_SMALL):
        for m in inf.METHODS:
            out["ap", m, i] = _np(ap_oracle(*_case(SMALL, n_pos, shift, 10 + i), kp=KP_SMALL,
                                            method=m))
    for i, (n_pos, shift) in enumerate(AUC_BIG):
        out["auc", i] = _np(auc_oracle(*_case(BIG, n_pos, shift, 100 + i)))
    # vmap over lists (as the batched sweep driver does), against the rows.
    S, Y, W = (jnp.stack(c) for c in zip(*(_case(BIG, n_pos, shift, i)
                                             for i, (n_pos, shift) in enumerate(AP_BIG[:3]))))
    out["ap_vmap"] = _np(jax.vmap(functools.partial(ap_oracle, kp=KP_BIG))(S, Y, W))
    out["ap_rows"] = [out["ap", "big", i] for i in range(3)]
    S, Y, W = (jnp.stack(c) for c in zip(*(_case(BIG, n_pos, shift, 100 + i)
                                             for i, (n_pos, shift) in enumerate(AUC_BIG[:3]))))
    out["auc_vmap"] = _np(jax.jit(jax.vmap(auc_oracle))(S, Y, W))
    out["auc_rows"] = [out["auc", i] for i in range(3)]
    return out


@pytest.fixture(scope="module")
def both_paths():
    # "host" runs the native kernels (rank.c) when the library is built,
    # "numpy" the NumPy host kernels: both against XLA's lax.sort path.
    res = {}
    for path in ("xla", "host", "numpy"):
        with jaxrank.inference.sort_path(path):
            res[path] = _run_all()
    return res


def _assert_same(a, b, what):
    assert len(a) == len(b), what
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y, err_msg=str(what))
        assert x.dtype == y.dtype


@pytest.mark.parametrize("host_path", ["host", "numpy"])
def test_ap_oracle_host_equals_xla_bitwise(both_paths, host_path):
    xla, host = both_paths["xla"], both_paths[host_path]
    keys = [k for k in xla if k[0] == "ap"]
    assert len(keys) == len(AP_BIG) + len(inf.METHODS) * len(AP_SMALL)
    for k in keys:
        _assert_same(host[k], xla[k], k)


@pytest.mark.parametrize("host_path", ["host", "numpy"])
def test_auc_oracle_host_equals_xla_bitwise(both_paths, host_path):
    xla, host = both_paths["xla"], both_paths[host_path]
    for i in range(len(AUC_BIG)):
        _assert_same(host["auc", i], xla["auc", i], ("auc", i))


@pytest.mark.parametrize("name", ["ap", "auc"])
def test_vmap_host_equals_xla_and_unbatched_rows(both_paths, name):
    for host_path in ("host", "numpy"):
        _assert_same(both_paths[host_path][f"{name}_vmap"], both_paths["xla"][f"{name}_vmap"],
                     (name, host_path))
    for path in ("xla", "host", "numpy"):
        # One batched call solves each row: the same loss and objective as the
        # unbatched call. (Not bitwise: XLA orders batched float work
        # differently, and where two delta values of the AP oracle tie within
        # float32 rounding an adjacent rank of the same objective may win, on
        # either path alike.)
        r = both_paths[path]
        loss, hinge = r[f"{name}_vmap"][0], r[f"{name}_vmap"][-1]
        for b, row in enumerate(r[f"{name}_rows"]):
            np.testing.assert_allclose(loss[b], row[0], rtol=1e-6)
            np.testing.assert_allclose(hinge[b], row[-1], rtol=1e-6)


def test_select_cases_cover_every_bucket(both_paths):
    # The comparison above is only as good as its cases: they must reach
    # every capacity bucket of the selective ranking and the "no j >= P
    # active" branch.
    sizes = set()
    for i, (n_pos, shift) in enumerate(AP_BIG):
        rank = both_paths["xla"]["ap", "big", i][2]
        _, y, w = _case(BIG, n_pos, shift, i)
        P = int(np.sum(y & w))
        active = int(np.sum(rank[np.asarray(~y & w)] <= P))
        sizes.add(int(np.searchsorted(inf._select_capacities(BIG), active)))
        if shift == 60.0:
            assert 0 < active < P
    assert sizes == {0, 1, 2}


def test_host_path_matches_brute_force_on_tiny_lists():
    rng = np.random.default_rng(3)
    cases = []
    for n in range(2, 8):
        for _ in range(6):
            labels = np.zeros(n, bool)
            labels[rng.choice(n, int(rng.integers(1, n)), replace=False)] = True
            cases.append((rng.integers(-3, 4, n).astype(np.float32) * 0.25, labels))
    with jaxrank.inference.sort_path("host"):
        for scores, labels in cases:
            n = len(scores)
            pad = 7 - n  # one compile per function
            s = jnp.asarray(np.r_[scores, np.zeros(pad, np.float32)])
            y = jnp.asarray(np.r_[labels, np.zeros(pad, bool)])
            w = jnp.asarray(np.r_[np.ones(n, bool), np.zeros(pad, bool)])
            best = reference.brute_force_ap_violation(scores, labels)
            for m in inf.METHODS:
                r = ap_oracle(s, y, w, kp=7, method=m)
                np.testing.assert_allclose(float(r.hinge), best, rtol=1e-6, atol=1e-6)
            # ROC area: swapped pairs counted one by one.
            r = auc_oracle(s, y, w)
            sp, sn = scores[labels], scores[~labels]
            swapped = (1 - 2 * (sp[:, None].astype(np.float64) - sn[None, :])) > 0
            np.testing.assert_allclose(float(r.loss), swapped.mean(), rtol=1e-6)
            coef = np.zeros(n)
            coef[labels] = 2 * swapped.sum(1) / swapped.size
            coef[~labels] = -2 * swapped.sum(0) / swapped.size
            np.testing.assert_allclose(np.asarray(r.coef)[:n], coef, rtol=1e-6, atol=1e-7)


def _has_callback(fn, *args):
    """The program calls a host kernel: a NumPy callback or a native FFI call."""
    text = str(jax.make_jaxpr(fn)(*args))
    return any(k in text for k in ("buffer_callback", "pure_callback", "jaxrank_ap_layout",
                                   "jaxrank_auc_counts"))


def _native_built():
    """The native library is loaded; with CI=true it must be (pip install builds it)."""
    if native.available():
        return True
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"native kernels not loaded: {native.reason()}")
    return False


def test_host_path_runs_the_native_kernels_when_built():
    if not _native_built():
        pytest.skip(f"native kernels not loaded: {native.reason()}")
    n = srt._HOST_MIN_LEN
    a = (jnp.zeros((n,), jnp.float32), jnp.arange(n) % 7 == 0, jnp.ones((n,), bool))
    ap = functools.partial(ap_oracle, kp=n // 4)
    for path, want, other in (("host", "jaxrank_ap_layout", "pure_callback"),
                              ("numpy", "pure_callback", "jaxrank_ap_layout")):
        with jaxrank.inference.sort_path(path):
            for fn in (ap, auc_oracle):
                text = str(jax.make_jaxpr(fn)(*a))
                assert (want in text or want.replace("ap_layout", "auc_counts") in text)
                assert other not in text and other.replace("ap_layout", "auc_counts") not in text


def test_path_switch_reaches_the_program():
    n = max(srt._HOST_MIN_LEN, aucsvm._HOST_MIN_LEN)
    a = (jnp.zeros((n,), jnp.float32), jnp.arange(n) % 7 == 0, jnp.ones((n,), bool))
    ap = functools.partial(ap_oracle, kp=n // 4)
    with jaxrank.inference.sort_path("xla"):
        assert not _has_callback(ap, *a) and not _has_callback(auc_oracle, *a)
    with jaxrank.inference.sort_path("host"):
        assert _has_callback(ap, *a) and _has_callback(auc_oracle, *a)
        small = tuple(x[:64] for x in a)
        assert _has_callback(functools.partial(ap_oracle, kp=16), *small)
    # Default: the host kernels on CPU only (platform_dependent), from their
    # minimum lengths on.
    for fn in (ap, auc_oracle):
        assert _has_callback(fn, *a) and "platform_index" in str(jax.make_jaxpr(fn)(*a))
    # (from _NATIVE_MIN_LEN with the native kernels, else the NumPy callbacks' own)
    small = tuple(x[: srt._host_min_len() - 1] for x in a)
    assert not _has_callback(functools.partial(ap_oracle, kp=16), *small)
    small = tuple(x[: srt._host_min_len(aucsvm._HOST_MIN_LEN) - 1] for x in a)
    assert not _has_callback(auc_oracle, *small)
    if native.available():
        at = tuple(x[: srt._NATIVE_MIN_LEN] for x in a)
        assert _has_callback(functools.partial(ap_oracle, kp=16), *at)
        assert _has_callback(auc_oracle, *at)
    with pytest.raises(ValueError, match="path"):
        with jaxrank.inference.sort_path("gpu"):
            pass


_BUFFER_SCRIPT = """
import numpy as np, jax, jax.numpy as jnp
import jaxrank
from jaxrank._src.oracles import sorting as srt
from jaxrank._src import native
from jaxrank.inference import ap_oracle, auc_oracle
rng = np.random.default_rng(7)
n = 40000
s = jnp.asarray((np.round(rng.standard_normal(n) * 8) / 8).astype(np.float32))
y = jnp.asarray(rng.random(n) < 0.005)
w = jnp.asarray(rng.random(n) < 0.97)
out = {}
for api, path in (("pure", "xla"), ("buffer", "numpy")):
    srt._CALLBACK = api
    with jaxrank.inference.sort_path(path):
        if path == "numpy":
            assert "buffer_callback" in str(jax.make_jaxpr(auc_oracle)(s, y, w))
        out[api] = [np.asarray(x) for r in (ap_oracle(s, y, w, kp=256), auc_oracle(s, y, w),
                                             jax.vmap(auc_oracle)(s[None], y[None], w[None]))
                    for x in r if x is not None]
assert all(np.array_equal(a, b) for a, b in zip(out["pure"], out["buffer"]))
print("same")
"""


@pytest.mark.skipif(srt._buffer_callback is None, reason="no jax.experimental.buffer_callback")
def test_buffer_callback_option_is_the_same():
    # The opt-in jax.experimental.buffer_callback host calls give the same
    # integers. Run in a child process: the API is experimental (see the
    # comment at inference._CALLBACK), so it never runs in the test process.
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", _BUFFER_SCRIPT], capture_output=True, text=True,
                         timeout=900, env=env, cwd=root)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().endswith("same")


def test_apsvm_fit_is_the_same_on_both_paths():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((3000, 8)).astype(np.float32)
    y = (X[:, 0] + 0.8 * rng.standard_normal(3000) > 1.2).astype(int)
    fits = {}
    for path in ("xla", "host", "numpy"):
        with jaxrank.inference.sort_path(path):
            fits[path] = jaxrank.APSVM(C=10.0).fit(X, y)
    a = fits["xla"]
    for b in (fits["host"], fits["numpy"]):
        assert a.n_iter_ == b.n_iter_ > 1
        np.testing.assert_array_equal(a.coef_, b.coef_)
        assert a.objective_ == b.objective_


@pytest.mark.parametrize("kind", ["extremes", "one_value", "two_positives"])
def test_host_kernels_on_extreme_keys_equal_xla(kind):
    # The radix sorts and the radix select of rank.c on keys at the ends of
    # the int32 range (+-3e38, +-1e37, denormals, -0.0 and 0.0), on a
    # list where every score is equal (every radix pass skipped), and with
    # only two positives (the head rows j < P are a single row).
    rng = np.random.default_rng(11)
    n = 9000
    if kind == "one_value":
        s = np.full(n, 0.25, np.float32)
    else:
        s = rng.standard_normal(n).astype(np.float32)
        # finite (the public oracles reject non-finite scores), with
        # differences that stay finite: keys near both ends of the range
        pick = rng.choice(n, 400, replace=False)
        ext = np.array([1e37, -1e37, 3e38, -3e38, 1e-45, -1e-45, 0.0, -0.0], np.float32)
        s[pick] = rng.choice(ext[[0, 1, 4, 5, 6, 7]], 400)
        s[pick[:2]] = ext[2:4]  # one each: their difference with 1e37 stays finite
    y = np.zeros(n, bool)
    y[rng.choice(n, 2 if kind == "two_positives" else 300, replace=False)] = True
    w = rng.random(n) < 0.98
    args = (jnp.asarray(s), jnp.asarray(y), jnp.asarray(w))
    res = {}
    for path in ("xla", "host", "numpy"):
        with jaxrank.inference.sort_path(path):
            res[path] = (_np(ap_oracle(*args, kp=512)), _np(auc_oracle(*args)))
    for path in ("host", "numpy"):
        for a, b in zip(res[path], res["xla"]):
            _assert_same(a, b, (kind, path))


@pytest.mark.parametrize("case", ["kp_above_n", "overflowing_scores"])
def test_paths_agree_beyond_the_usual_inputs(case):
    # kp > n is a valid (loose) bound on the positives: the native layout used
    # to reject it. Scores near 1e38 overflow the float stage (differences of
    # +-3e38), which can give head ranks outside [0, kp + 1]: every path must
    # count them as XLA's scatter-add does (the NumPy kernel used to crash).
    rng = np.random.default_rng(5)
    n = 600
    if case == "kp_above_n":
        s, kp = rng.standard_normal(n).astype(np.float32), n + 1
    else:
        s, kp = (np.clip(rng.standard_normal(n), -3, 3) * 1e38).astype(np.float32), 200
    y = rng.random(n) < (0.1 if case == "kp_above_n" else 0.2)
    args = (jnp.asarray(s), jnp.asarray(y), jnp.ones(n, bool))
    res = {}
    for path in ("xla", "host", "numpy"):
        with jaxrank.inference.sort_path(path):
            res[path] = _np(ap_oracle(*args, kp=kp))
    for path in ("host", "numpy"):
        _assert_same(res[path], res["xla"], (case, path))
