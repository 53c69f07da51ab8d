"""One process of the two-process data-parallel test (``test_data_parallel.py``).

Run as ``python distributed_worker.py PROCESS_ID NUM_PROCESSES PORT OUT.npz``:
joins JAX's multi-controller runtime on 127.0.0.1 (CPU collectives: gloo),
builds the global sample-sharded design from this process's rows only
(``jax.make_array_from_process_local_data``) and runs the public
``jaxrank.solvers.fit``. Process 0 writes the result to ``OUT.npz``.
"""

import sys

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")


def main():
    pid, nproc, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}",
                               num_processes=nproc, process_id=pid)
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from jaxrank.models import APModel, ItemProblem, design
    from jaxrank.solvers import Solver, fit

    data = np.load(out.replace(".npz", ".in.npz"))
    X, y, C = data["X"], data["y"], float(data["C"])
    n, d = X.shape
    mesh = Mesh(np.asarray(jax.devices()), ("samples",))
    rows = np.array_split(np.arange(n), nproc)[pid]  # this process's rows only

    def glob(a, spec):
        return jax.make_array_from_process_local_data(NamedSharding(mesh, spec), a[rows],
                                                      a.shape)

    Xg = glob(X, PartitionSpec("samples", None))
    prob = ItemProblem(glob(y, PartitionSpec("samples")),
                       glob(np.ones(n, bool), PartitionSpec("samples")))
    run = jax.jit(fit, static_argnames=("model",))
    res = run(APModel(kp=int(y.sum())), design(Xg), prob, C=C,
              solver=Solver(tol=1e-5, max_iter=2000))
    w = np.asarray(res.w.addressable_data(0))  # replicated: every process holds all of w
    # An estimator shards host arrays over this process's devices only: the
    # devices of the whole run (both processes) are a clear error.
    import jaxrank

    try:
        jaxrank.APSVM(devices=jax.devices()).fit(X[rows], y[rows])
        refused = ""
    except ValueError as e:
        refused = str(e)
    if pid == 0:
        np.savez(out, w=w, objective=float(res.objective), converged=bool(res.converged),
                 devices=len(jax.devices()), refused=refused)


if __name__ == "__main__":
    main()
