"""Worker of tests/test_data_parallel.py: problems x samples grids on 6 CPU devices.

Run as ``python tests/grid_worker.py``; prints one JSON line. JAX must see 6
devices before its first computation, so this runs in its own process.
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

import jaxrank
from jaxrank.models import APModel, ItemProblem, design
from jaxrank.solvers import Solver, fit_many


def main():
    # Here, not at import: the test suite imports every module (doctests), and
    # the setting would give the whole test process 6 devices.
    jax.config.update("jax_num_cpu_devices", 6)
    out = {"devices": len(jax.devices())}
    rng = np.random.default_rng(0)
    n, d = 601, 10
    Y = rng.random((n, 2)) < 0.15
    X = (rng.normal(size=(n, d)) + 0.8 * Y[:, :1] * rng.normal(size=d)
         - 0.6 * Y[:, 1:] * rng.normal(size=d)).astype(np.float32)
    # 1. The batched driver on a 2 x 2 grid: each problem row shares sample-sharded rows.
    grid = tuple(tuple(jax.devices()[2 * i:2 * i + 2]) for i in range(2))
    run = jax.jit(fit_many, static_argnames=("model", "batch_size", "devices"))
    solver = Solver(tol=1e-5, max_iter=3000)
    m = 600
    probs = ItemProblem(jnp.asarray(Y[:m].T), jnp.ones((2, m), bool))
    C = jnp.asarray([10.0, 100.0], jnp.float32)
    model = APModel(kp=m)
    one = run(model, design(X[:m]), probs, C, solver=solver, batch_size=1)
    from jax.sharding import Mesh, PartitionSpec
    mesh = Mesh(np.asarray(grid, dtype=object), ("devices", "samples"))
    Xs = jax.device_put(jnp.asarray(X[:m]), NamedSharding(mesh, PartitionSpec("samples", None)))
    two = run(model, design(Xs), probs, C, solver=solver, batch_size=1, devices=grid)
    out["driver"] = {k: np.asarray(getattr(r, k)).tolist() for r, k in
                     [(one, "objective"), (one, "dual"), (one, "converged")]}
    out["driver_grid"] = {k: np.asarray(getattr(two, k)).tolist() for k in
                          ("objective", "dual", "converged")}
    # 2. Estimators: devices=6 with 2 tasks -> a 2 x 3 grid, the 601 rows padded to a
    # multiple of 3 (not of 2: the rows are split over a grid row's 3 devices only).
    placed = []
    put = jax.device_put

    def spy(x, device=None, *args, **kwargs):
        placed.append(device)
        return put(x, device, *args, **kwargs)

    for name in sys.argv[1:]:
        cls = getattr(jaxrank, name)
        C = 0.1 if name == "BinarySVM" else 10.0
        a = cls(C=C, tol=1e-5).fit(X, Y)
        placed.clear()
        jax.device_put = spy
        try:
            b = cls(C=C, tol=1e-5, devices=6).fit(X, Y)
        finally:
            jax.device_put = put
        meshes = [tuple(s.mesh.shape.items()) for s in placed if isinstance(s, NamedSharding)]
        out[name] = {
            "meshes": [list(map(list, m_)) for m_ in meshes],
            "one": [a.objective_.tolist(), a.dual_objective_.tolist(), a.converged_.tolist()],
            "grid": [b.objective_.tolist(), b.dual_objective_.tolist(), b.converged_.tolist()],
            "coef_diff": float(np.linalg.norm(a.coef_ - b.coef_, axis=1).max()),
        }
    # 3. sweep on an explicit 3 x 2 grid (6 fits per C: 2 tasks x 3 folds, dealt to 3
    # rows; the 601 rows padded to a multiple of 2) against problems only.
    grid3 = [jax.devices()[2 * i:2 * i + 2] for i in range(3)]
    kw = dict(Cs=[1.0, 100.0], cv=3, tol=1e-5, return_weights=True)
    flat = jaxrank.sweep(X, Y, devices=1, **kw)
    placed.clear()
    jax.device_put = spy
    try:
        sg = jaxrank.sweep(X, Y, devices=grid3, **kw)
    finally:
        jax.device_put = put
    meshes = [tuple(s.mesh.shape.items()) for s in placed if isinstance(s, NamedSharding)]
    out["sweep"] = {
        "meshes": [list(map(list, m_)) for m_ in meshes],
        "one": [flat.objective.ravel().tolist(), flat.dual.ravel().tolist(),
                flat.converged.ravel().tolist()],
        "grid": [sg.objective.ravel().tolist(), sg.dual.ravel().tolist(),
                 sg.converged.ravel().tolist()],
        "val_score": [flat.val_score.ravel().tolist(), sg.val_score.ravel().tolist()],
        "best_C": [flat.best_C.tolist(), sg.best_C.tolist()],
        "refit": [[float(e.objective_) for e in r.best_estimators] for r in (flat, sg)],
        "refit_n_features": [e.n_features_in_ for e in sg.best_estimators],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
