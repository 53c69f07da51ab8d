"""One convex LatentSVM step at large C: dual coordinate ascent vs the same hinges as one 1-slack plane.

Usage: python bench/results/latent_svm_one_step.py {tiny,protein} C [max_iter]
(from the repository root; protein reads ../shared/data/mil). Each positive bag is imputed at its
first candidate, J = (|P| + negative candidates) / |P| (the balanced default). Prints iterations,
objective, dual bound, converged, seconds (with compilation). docs/solver.md cites its output.
"""
import sys, numpy as np, jax, jax.numpy as jnp, time, dataclasses
from typing import NamedTuple
import jaxrank.solvers as solvers
from jaxrank.models import Model, design, Intercept, LinearFeatures, HingeTerms
from jaxrank.inference import Violation

class P(NamedTuple):
    labels: jax.Array
    weight: jax.Array   # u_i / C

@dataclasses.dataclass(frozen=True)
class OneSlackHinge(Model):
    def oracle(self, S, problem):
        m = problem.weight * (1 - problem.labels * S > 0)
        return Violation(loss=jnp.sum(m), coef=m * problem.labels)

@dataclasses.dataclass(frozen=True)
class NSlack(Model):
    def hinge_terms(self, data, problem, C):
        rows, bias = self.features.hinge_rows(data)
        return HingeTerms(rows, bias, problem.labels, C * problem.weight)

def setup(which, C):
    if which == "tiny":
        rng = np.random.default_rng(0)
        sizes = np.r_[np.full(6, 5), np.full(34, 40)]
        bags = np.repeat(np.arange(40), sizes)
        X = rng.normal(size=(len(bags), 5)).astype(np.float32)
        X[bags < 6, 0] += 2
        first = np.r_[0, np.cumsum(sizes)[:-1]]
        keep = np.r_[first[:6], np.arange(np.sum(sizes[:6]), len(bags))]
        Z = X[keep]; y = np.r_[np.ones(6), -np.ones(len(keep) - 6)]
    else:
        sys.path.insert(0, "bench"); import convergence as cv; from pathlib import Path
        X, bags, yb = cv.load_mil("mil:protein", Path("../shared/data"))
        ids, inv = np.unique(bags, return_inverse=True)
        pos = yb[inv] > 0
        # impute positive bags at their first instance
        firsts = np.r_[True, inv[1:] != inv[:-1]]
        keep = np.where(~pos | firsts)[0]
        Z = X[keep].astype(np.float32); y = np.where(pos[keep], 1., -1.)
    npos = (y > 0).sum(); nneg = (y < 0).sum(); J = (npos + nneg) / npos
    wgt = np.where(y > 0, J, 1.).astype(np.float32)
    return Z, y.astype(np.float32), wgt

which, C = sys.argv[1], float(sys.argv[2])
Z, y, wgt = setup(which, C)
data = design(Z)
prob = P(jnp.asarray(y), jnp.asarray(wgt))
for name, model in [("1-slack", OneSlackHinge(features=Intercept(LinearFeatures()))),
                    ("n-slack DCD", NSlack(features=Intercept(LinearFeatures())))]:
    for rep in range(1):
        t = time.time()
        r = solvers.fit(model, data, prob, C=jnp.float32(C), solver=solvers.Solver(tol=1e-4, max_iter=int(sys.argv[3]) if len(sys.argv)>3 else 5000))
        jax.block_until_ready(r.w)
        print(name, "it", int(r.num_steps), "obj", float(r.objective), "dual", float(r.dual), "conv", bool(r.converged), f"{time.time()-t:.2f}s")
