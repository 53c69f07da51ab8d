"""CLI round trip: train -> predict -> evaluate, overwrite protection, demo."""

import json

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

import jaxrank
from jaxrank import cli
from jaxrank._src.cli import commands as cli_commands
from jaxrank.cli import main


@pytest.fixture
def svmlight_files(tmp_path, page_blocks):
    X, y = page_blocks
    train, test = tmp_path / "train.svm", tmp_path / "test.svm"
    dump_svmlight_file(X[:800], y[:800], str(train), zero_based=False)
    dump_svmlight_file(X[800:1300], np.where(y[800:1300] > 0, 1, 0), str(test), zero_based=False)
    return train, test, X[800:1300], y[800:1300]


@pytest.mark.parametrize("model", ["apsvm", "svm", "apsvm-appx", "auc-svm", "kernelrank"])
def test_train_predict_evaluate_round_trip(tmp_path, svmlight_files, capsys, model):
    train, test, Xte, yte = svmlight_files
    mfile, sfile = tmp_path / "model.npz", tmp_path / "scores.txt"
    c = [] if model == "kernelrank" else ["-c", "0.5"]
    assert main(["train", "--model", model, *c, str(train), str(mfile)]) == 0
    assert main(["predict", str(mfile), str(test), "-o", str(sfile)]) == 0
    scores = np.loadtxt(sfile)
    m = jaxrank.load(mfile)
    np.testing.assert_allclose(scores, m.decision_function(Xte), rtol=1e-6, atol=1e-6)
    capsys.readouterr()
    assert main(["evaluate", str(mfile), str(test)]) == 0
    out = capsys.readouterr().out
    ap = float(out.split("AP")[1].split()[0])
    np.testing.assert_allclose(ap, jaxrank.metrics.average_precision(scores.astype(np.float32), yte > 0), atol=1e-4)
    assert "ROC-AUC" in out and "P@10" in out


def test_refuses_to_overwrite_without_force(tmp_path, svmlight_files, capsys):
    train, test, _, _ = svmlight_files
    mfile = tmp_path / "model.npz"
    mfile.write_text("precious")
    assert main(["train", str(train), str(mfile)]) == 2
    assert "--force" in capsys.readouterr().err
    assert mfile.read_text() == "precious"
    assert main(["train", "--force", str(train), str(mfile)]) == 0
    sfile = tmp_path / "s.txt"
    sfile.write_text("keep")
    assert main(["predict", str(mfile), str(test), "-o", str(sfile)]) == 2
    assert "--force" in capsys.readouterr().err
    assert sfile.read_text() == "keep"


def test_clear_errors(tmp_path, svmlight_files, capsys):
    train, _, _, _ = svmlight_files
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"junk")
    assert main(["evaluate", str(bad), str(train)]) == 2
    assert "not a readable" in capsys.readouterr().err
    assert main(["train", str(tmp_path / "nope.svm"), str(tmp_path / "m.npz")]) == 2
    with pytest.raises(SystemExit):
        main(["train", "-c", "-1", str(train), str(tmp_path / "m.npz")])


@pytest.mark.parametrize("cmd", [[], ["train"], ["predict"], ["evaluate"], ["demo"]])
def test_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main(cmd + ["--help"])
    assert e.value.code == 0
    assert "usage" in capsys.readouterr().out


def test_demo_prints_the_multi_dataset_table(capsys):
    assert main(["demo", "--cv", "2", "-q", "--datasets", "ecoli1,led7digit_0_2_4_5_6_7_8_9_vs_1"]) == 0
    out = capsys.readouterr().out
    assert "| dataset | BinarySVM | APSVM | AUCSVM | KernelRank |" in out
    assert "| ecoli1 |" in out and "| wins |" in out
    wins = [float(v) for v in out.split("| wins |")[1].splitlines()[0].split("|") if v.strip()]
    assert sum(wins) == 2  # one win per dataset, ties shared


def test_multi_task_model_round_trip(tmp_path, page_blocks):
    X, y = page_blocks[0][:300], page_blocks[1][:300]
    Y = np.stack([y > 0, y <= 0], axis=1).astype(int)  # two tasks on the same labels {0, 1}
    m = jaxrank.APSVM(C=1.0).fit(X, Y)
    jaxrank.save(m, tmp_path / "m.npz")
    back = jaxrank.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.decision_function(X), m.decision_function(X))
    np.testing.assert_array_equal(back.objective_, m.objective_)


def test_qid_files_train_grouped_models_and_are_refused_by_pooled_ones(tmp_path, capsys,
                                                                      page_blocks):
    X, y = page_blocks[0][:400], page_blocks[1][:400]
    qid = np.repeat(np.arange(20), 20)
    path = tmp_path / "q.svm"
    dump_svmlight_file(X, y, str(path), query_id=qid, zero_based=False)
    assert main(["train", "--model", "svm", str(path), str(tmp_path / "s.npz")]) == 2
    assert "qid" in capsys.readouterr().err
    assert main(["train", "-c", "10", str(path), str(tmp_path / "m.npz")]) == 0
    out = capsys.readouterr().out
    assert "20 queries" in out
    assert main(["evaluate", str(tmp_path / "m.npz"), str(path)]) == 0
    res = capsys.readouterr().out
    m = jaxrank.load(tmp_path / "m.npz")
    ref = m.score(X, y, groups=qid)
    assert abs(float(res.split("MAP")[1].split()[0]) - ref) < 1e-4


def test_pos_weight_balanced_on_the_command_line(tmp_path, svmlight_files):
    train = svmlight_files[0]
    assert main(["train", "--model", "svm", "--pos-weight", "balanced", "-c", "0.1", "-q",
                 str(train), str(tmp_path / "m.npz")]) == 0
    m = jaxrank.load(tmp_path / "m.npz")
    assert m.pos_weight == "balanced"
    X, y = jaxrank.load_data(str(train))
    ref = jaxrank.BinarySVM(C=0.1, pos_weight="balanced").fit(X, y)
    np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-5, atol=1e-6)
    with pytest.raises(SystemExit):  # neither a number nor "balanced"
        main(["train", "--model", "svm", "--pos-weight", "equal", str(train),
              str(tmp_path / "n.npz")])


def test_options_that_do_not_apply_and_bad_values_are_clear_errors(tmp_path, svmlight_files,
                                                                  capsys):
    train, test, _, _ = svmlight_files
    assert main(["train", "--model", "apsvm", "--k", "0.5", str(train),
                 str(tmp_path / "m.npz")]) == 2
    assert "--k does not apply" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--model", "kernelrank", "--bandwidth", "wide", str(train),
              str(tmp_path / "m.npz")])
    assert main(["train", str(tmp_path), str(tmp_path / "m.npz")]) == 2  # a directory
    assert main(["train", str(train), str(tmp_path)]) == 2  # model path is a directory
    assert not list(tmp_path.glob("*.tmp*"))
    assert main(["train", str(train), str(tmp_path / "no" / "such" / "m.npz")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.fixture
def small_files(tmp_path):
    """A small SVMlight training file (60 samples) and a trained model."""
    rng = np.random.default_rng(0)
    y = (np.arange(60) % 4 == 0).astype(int)
    X = rng.normal(size=(60, 3)) + 1.5 * y[:, None]
    train = tmp_path / "small.svm"
    dump_svmlight_file(X, y, str(train), zero_based=False)
    model = tmp_path / "small.npz"
    jaxrank.save(jaxrank.BinarySVM(max_iter=50).fit(X, y), model)
    return train, model


def test_unwritable_outputs_are_refused_before_any_work(tmp_path, small_files, capsys,
                                                        monkeypatch):
    """Issue 9: an output location that cannot be written was found only after the fit/sweep."""
    train, model = small_files
    import jaxrank._src.data as data_mod
    import jaxrank._src.estimators.sweep as sweep_mod

    def boom(*a, **k):
        raise AssertionError("work started before the output location was checked")

    monkeypatch.setattr(data_mod, "load_data", boom)
    monkeypatch.setattr(sweep_mod, "sweep", boom)
    missing = tmp_path / "no" / "such"
    (tmp_path / "afile").write_text("")
    for argv in (["train", str(train), str(missing / "m.npz")],
                 ["predict", str(model), str(train), "-o", str(missing / "s.txt")],
                 ["sweep", str(train), "--output-prefix", str(tmp_path / "afile" / "sw")]):
        assert main(argv) == 2, argv
        assert "cannot write" in capsys.readouterr().err
    (tmp_path / "d.npz").mkdir()
    assert main(["train", str(train), str(tmp_path / "d.npz")]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_predict_into_a_closed_pipe_exits_quietly(small_files):
    """`jaxrank predict MODEL DATA | head`: no BrokenPipeError traceback, exit status 0."""
    import subprocess
    import sys

    train, model = small_files
    p = subprocess.Popen([sys.executable, "-m", "jaxrank", "--no-cache", "predict", str(model),
                          str(train)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader is gone before the first score is written
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_progress_with_progress_or_large_data_and_q_silences_it(tmp_path, small_files, capsys,
                                                                 monkeypatch):
    """Per-iteration lines (a host callback: never in JAX's persistent cache) only with
    --progress or for training sets of >= 1e7 stored values; the summary always."""
    train, _ = small_files
    assert main(["train", "--progress", "--model", "svm", str(train),
                 str(tmp_path / "a.npz")]) == 0
    out = capsys.readouterr().out
    assert "iter " in out and "objective" in out
    assert main(["train", "--model", "svm", str(train), str(tmp_path / "b.npz")]) == 0
    out = capsys.readouterr().out
    assert "iter " not in out and "trained BinarySVM" in out
    monkeypatch.setattr(cli_commands, "_PROGRESS_MIN_ENTRIES", 1)  # any file counts as large
    assert main(["train", "--model", "svm", str(train), str(tmp_path / "c.npz")]) == 0
    assert "iter " in capsys.readouterr().out
    assert main(["train", "-q", "--progress", "--model", "svm", str(train),
                 str(tmp_path / "d.npz")]) == 0
    assert "iter " not in capsys.readouterr().out


def test_values_outside_float32_are_refused(tmp_path, small_files, capsys):
    """Issue 9 #5: -c 1e39 / 1e-50 and --bandwidth 1e-50 wrote inf/zero models with status 0."""
    train, _ = small_files
    for argv in (["-c", "1e39"], ["-c", "1e-50"],
                 ["--model", "kernelrank", "--bandwidth", "1e-50"]):
        with pytest.raises(SystemExit) as e:
            main(["train", *argv, str(train), str(tmp_path / "m.npz")])
        assert e.value.code == 2
        assert "float32" in capsys.readouterr().err
    assert not (tmp_path / "m.npz").exists()


def test_labels_one_and_two_train_and_evaluate_alike(tmp_path, capsys):
    """One label rule in train and evaluate: {1, 2} is {negative, positive} (2 the larger)."""
    rng = np.random.default_rng(1)
    y = (np.arange(60) % 4 == 0).astype(int)
    X = rng.normal(size=(60, 3)) + 1.5 * y[:, None]
    path = tmp_path / "twelve.svm"
    dump_svmlight_file(X, y + 1, str(path), zero_based=False)
    for model in ("auc-svm", "svm"):
        mfile = tmp_path / f"{model}.npz"
        assert main(["train", "-q", "--model", model, str(path), str(mfile)]) == 0
        capsys.readouterr()
        assert main(["evaluate", str(mfile), str(path)]) == 0
        ap = float(capsys.readouterr().out.split("AP")[1].split()[0])
        m = jaxrank.load(mfile)
        assert list(m.classes_) == [1, 2]
        assert abs(ap - m.score(X, y + 1)) < 1e-4


def test_train_stores_its_program_for_the_next_run(tmp_path):
    """With its caches on, `jaxrank train` keeps the fit's compiled program on disk.

    20,000 samples: long enough for the CPU host sort of the AP oracle in a
    Python session, whose programs (host callbacks) cannot be stored; the
    command uses the XLA sort below 2^16 entries so that its next run loads
    the program instead of compiling it.
    """
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(0)
    X = rng.standard_normal((20000, 6)).astype(np.float32)
    y = (X[:, 0] + rng.standard_normal(20000) > 1.5).astype(int)
    train = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(train), zero_based=False)
    env = dict(os.environ, JAXRANK_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("XLA_FLAGS", None)
    outs = []
    for i in range(2):
        res = subprocess.run([sys.executable, "-m", "jaxrank", "train", "--model", "apsvm",
                              "-c", "10", str(train), str(tmp_path / f"m{i}.npz")],
                             capture_output=True, text=True, timeout=600, env=env)
        assert res.returncode == 0, res.stderr[-3000:]
        outs.append(res.stdout)
        stored = list((tmp_path / "cache" / "programs").glob("*.jaxexe"))
        assert len(stored) == 1, (i, stored)
    a, b = (jaxrank.load(tmp_path / f"m{i}.npz") for i in range(2))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    # The same fit of the file's data in this process (host sort): the same model.
    from sklearn.datasets import load_svmlight_file

    Xf, yf = load_svmlight_file(str(train), zero_based=False)
    ref = jaxrank.APSVM(C=10.0).fit(Xf, yf)  # sparse, as the command reads it
    assert a.objective_ == ref.objective_
    np.testing.assert_array_equal(a.coef_, ref.coef_)  # both sort paths: bitwise equal


class _Trap:
    """A pickle that, when loaded, creates the directory ``marker`` (code execution)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.mkdir, (self.marker,))


def _run_cli(args, env, timeout=600):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "jaxrank", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _cli_env(cache):
    import os

    env = dict(os.environ, JAXRANK_CACHE_DIR=str(cache))
    env.pop("XLA_FLAGS", None)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    return env


def test_program_cache_never_unpickles_planted_files(tmp_path):
    """Every file of the CLI caches replaced by a malicious pickle: nothing runs, fits work."""
    import os
    import pickle

    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 4)).astype(np.float32)
    y = (X[:, 0] + rng.standard_normal(300) > 1).astype(int)
    train = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(train), zero_based=False)
    cache = tmp_path / "cache"
    env = _cli_env(cache)
    res = _run_cli(["train", str(train), str(tmp_path / "m0.npz")], env)
    assert res.returncode == 0, res.stderr[-3000:]
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert any(p.parent.name == "programs" for p in files), files
    marker = tmp_path / "pwned"
    for p in files:
        p.write_bytes(pickle.dumps(_Trap(str(marker))))
    pickle.loads(files[0].read_bytes())  # the payload works when unpickled
    assert marker.is_dir()
    marker.rmdir()
    res = _run_cli(["train", str(train), str(tmp_path / "m1.npz")], env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert not marker.exists()
    a, b = (jaxrank.load(tmp_path / f"m{i}.npz") for i in range(2))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    # The planted program was replaced by a stored one (not a pickle).
    stored = list((cache / "programs").glob("*.jaxexe"))
    assert stored and all(not p.read_bytes().startswith(b"\x80") for p in stored)
    # ... which the next run loads without running anything else.
    res = _run_cli(["train", str(train), str(tmp_path / "m2.npz")], env)
    assert res.returncode == 0 and not marker.exists()
    np.testing.assert_array_equal(jaxrank.load(tmp_path / "m2.npz").coef_, a.coef_)
    assert os.stat(cache / "programs").st_mode & 0o077 == 0


@pytest.mark.parametrize("where", ["base", "programs"])
def test_cache_writable_by_others_is_refused_with_one_warning(tmp_path, where):
    import os

    rng = np.random.default_rng(2)
    X = rng.standard_normal((200, 3)).astype(np.float32)
    y = (X[:, 0] > 0.5).astype(int)
    train = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(train), zero_based=False)
    cache = tmp_path / "cache"
    (cache / "programs").mkdir(parents=True)
    shared = cache if where == "base" else cache / "programs"
    os.chmod(shared, 0o777)
    res = _run_cli(["train", str(train), str(tmp_path / "m.npz")], _cli_env(cache))
    assert res.returncode == 0, res.stderr[-3000:]
    warn = [line for line in res.stderr.splitlines() if "warning" in line]
    assert len(warn) == 1 and warn[0].startswith("jaxrank: warning: not using the compilation "
                                                 "cache"), res.stderr
    assert str(shared) in warn[0] and "writable by other users" in warn[0]
    assert not list((cache / "programs").iterdir())  # nothing stored
    assert not (cache / "jax").exists() or not list((cache / "jax").iterdir())


# ---------------------------------------------------------------------------
# Output names, progress, quiet runs, one-line warnings and clear messages.
# ---------------------------------------------------------------------------


def test_sweep_output_prefix_folders(tmp_path, small_files, capsys):
    train, _ = small_files
    base = ["sweep", str(train), "--model", "svm", "--Cs", "1", "--cv", "2", "-q"]
    adir = tmp_path / "adir"
    adir.mkdir()
    assert main(base + ["--output-prefix", str(adir) + "/"]) == 0
    assert sorted(p.name for p in adir.iterdir()) == ["sweep.csv", "sweep.json"]  # not .csv
    # A missing folder of the prefix is created (runs/a -> runs/a.csv, runs/a.json).
    assert main(base + ["--output-prefix", str(tmp_path / "runs" / "a")]) == 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["a.csv", "a.json"]
    # An existing folder given without the slash: the same files inside it.
    assert main(base + ["--output-prefix", str(adir)]) == 2
    assert "exists; use --force" in capsys.readouterr().err
    assert main(base + ["--output-prefix", str(adir), "--force"]) == 0
    assert sorted(p.name for p in adir.iterdir()) == ["sweep.csv", "sweep.json"]


def test_tol_zero_is_accepted_as_by_the_estimators(tmp_path, small_files):
    train, _ = small_files
    assert main(["train", "--model", "svm", "--tol", "0", "--max-iter", "30", "-q",
                 str(train), str(tmp_path / "m.npz")]) == 0
    assert jaxrank.load(tmp_path / "m.npz").tol == 0
    jaxrank.BinarySVM(tol=0.0, max_iter=30)  # the API's contract: tol >= 0
    with pytest.raises(SystemExit):
        main(["train", "--tol", "-1", str(train), str(tmp_path / "m2.npz")])


def test_train_summary_and_quiet(tmp_path, small_files, capsys):
    train, _ = small_files
    assert main(["train", "--model", "kernelrank", "--param", "max_iter=5", str(train),
                 str(tmp_path / "k.npz")]) == 0
    out = capsys.readouterr().out
    assert "n/a" not in out and "trained KernelRank(kernel=gaussian, bandwidth=" in out
    assert main(["train", "--model", "svm", "-c", "0.5", str(train),
                 str(tmp_path / "s.npz")]) == 0
    assert "trained BinarySVM(C=0.5)" in capsys.readouterr().out
    # -q: no summary lines at all (results, warnings and errors only).
    assert main(["train", "-q", "--model", "svm", str(train), str(tmp_path / "q.npz")]) == 0
    res = capsys.readouterr()
    assert res.out == "" and res.err == ""


def test_progress_help_says_what_it_prints(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "every 25th" in text and "every iteration" not in text
    assert "elapsed time" in text


def test_a_long_fit_shows_its_elapsed_time(tmp_path, small_files, capsys, monkeypatch):
    """A fit that runs over a few seconds shows a progress line, whatever the data's size."""
    import time

    train, _ = small_files
    fit = jaxrank.BinarySVM.fit

    def slow_fit(self, *a, **k):
        time.sleep(3.5)
        return fit(self, *a, **k)

    monkeypatch.setattr(jaxrank.BinarySVM, "fit", slow_fit)
    assert main(["train", "--model", "svm", str(train), str(tmp_path / "m.npz")]) == 0
    err = capsys.readouterr().err
    assert "training BinarySVM" in err and "elapsed" in err
    assert main(["train", "-q", "--model", "svm", str(train), str(tmp_path / "q.npz")]) == 0
    assert capsys.readouterr().err == ""


def test_warnings_are_one_line(tmp_path, small_files, capsys):
    train, _ = small_files
    assert main(["train", "--model", "apsvm", "-c", "1000", "--max-iter", "1", str(train),
                 str(tmp_path / "m.npz")]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    warn = [line for line in err if "warning" in line.lower()]
    assert warn and all(line.startswith("jaxrank: warning: ") for line in warn), err
    assert any("max_iter" in line and line.endswith("(ConvergenceWarning)") for line in warn)
    assert not any("warnings.warn" in line or ".py:" in line for line in err), err


def test_sweep_of_a_graph_model_takes_edges(tmp_path, small_files, capsys):
    train, _ = small_files
    X, y = load_svmlight_file(str(train))
    X = X.toarray().astype(np.float32)
    edges = np.array([(i, i + 1) for i in range(59) if (i + 1) % 3])  # components of 3
    np.savetxt(tmp_path / "edges.txt", edges, fmt="%d")
    args = ["sweep", str(train), "--model", "hob-svm", "--Cs", "0.01,0.1", "--cv", "2",
            "--output-prefix", str(tmp_path / "hob"), "-q"]
    assert main(args) == 2  # the graph model needs its edges
    assert "--model hob-svm needs --edges EDGES.txt (edges)" in capsys.readouterr().err
    assert main(args + ["--edges", str(tmp_path / "edges.txt")]) == 0
    got = json.loads((tmp_path / "hob.json").read_text())
    res = jaxrank.sweep(X, y, model="hob-svm", edges=edges, Cs=[0.01, 0.1], cv=2, refit=False)
    np.testing.assert_allclose(got["mean_val_score"]["label"], res.mean_val_score[0], atol=1e-6)
    assert main(["sweep", str(train), "--model", "svm", "--edges", str(tmp_path / "edges.txt"),
                 "--output-prefix", str(tmp_path / "svm"), "-q"]) == 2
    assert "--edges does not apply to --model svm" in capsys.readouterr().err


def test_sweep_on_a_csv_with_a_header_names_the_file_and_line(tmp_path, capsys):
    path = tmp_path / "with_header.csv"
    rng = np.random.default_rng(0)
    rows = np.column_stack([rng.normal(size=(30, 3)), np.arange(30) % 2, np.arange(30) % 3 == 0])
    path.write_text("a,b,c,t1,t2\n" + "\n".join(",".join(f"{v:g}" for v in r) for r in rows))
    assert main(["sweep", str(path), "--task-column", "-2", "-1", "--Cs", "1",
                 "--output-prefix", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "line 1" in err and "header" in err


def test_predict_with_a_npy_model_is_a_clear_error(tmp_path, small_files, capsys):
    train, _ = small_files
    np.save(tmp_path / "model.npy", np.zeros(3))
    assert main(["predict", str(tmp_path / "model.npy"), str(train)]) == 2
    err = capsys.readouterr().err
    assert "is a .npy array, not a jaxrank model file" in err and "context manager" not in err


def test_edges_files_with_no_edges_or_huge_indices(tmp_path, capsys):
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 0, 1], 4)
    X = rng.normal(size=(16, 3)) + y[:, None]
    train = tmp_path / "g.svm"
    dump_svmlight_file(X, y, str(train), zero_based=False)
    empty = tmp_path / "empty.txt"
    empty.write_text("# no edges yet\n")
    assert main(["train", "--model", "hob-svm", "--edges", str(empty), str(train),
                 str(tmp_path / "m.npz")]) == 2
    err = capsys.readouterr().err
    assert "holds no edges" in err and "UserWarning" not in err and "loadtxt" not in err
    huge = tmp_path / "huge.txt"
    huge.write_text(f"0 1\n0 {2**63}\n")
    assert main(["train", "--model", "hob-svm", "--edges", str(huge), str(train),
                 str(tmp_path / "m.npz")]) == 2
    err = capsys.readouterr().err
    assert "9223372036854775808" in err and "-9223372036854775808" not in err
    # The same through the API, edges as uint64.
    e = np.array([[0, 1], [0, 2**63]], dtype=np.uint64)
    with pytest.raises(ValueError, match=r"edges\[1\] = \[0, 9223372036854775808\]"):
        jaxrank.HOBSVM(max_iter=5).fit(X, y, edges=e)


def test_demo_progress_covers_kernelrank_and_quiet_prints_the_table_only(capsys):
    args = ["demo", "--cv", "2", "--datasets", "ecoli1"]
    assert main(args) == 0
    res = capsys.readouterr()
    assert "KernelRank" in res.err  # its progress bar (over the datasets)
    assert "KernelRank bandwidth by validation split" in res.out
    assert main(args + ["-q"]) == 0
    res = capsys.readouterr()
    lines = [line for line in res.out.splitlines() if line.strip()]
    assert lines and all(line.startswith("|") for line in lines), res.out
    assert res.err == ""


def test_version_is_the_installed_distributions(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"jaxrank {metadata.version('jaxrank')}"
    assert jaxrank.__version__ == metadata.version("jaxrank")
