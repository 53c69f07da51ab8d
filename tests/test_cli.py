"""CLI round trip: train -> predict -> evaluate, overwrite protection, demo."""

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

import jaxrank
from jaxrank.cli import main


@pytest.fixture
def svmlight_files(tmp_path, page_blocks):
    X, y = page_blocks
    train, test = tmp_path / "train.svm", tmp_path / "test.svm"
    dump_svmlight_file(X[:800], y[:800], str(train))
    dump_svmlight_file(X[800:1300], np.where(y[800:1300] > 0, 1, 0), str(test))
    return train, test, X[800:1300], y[800:1300]


@pytest.mark.parametrize("model", ["apsvm", "svm", "apsvm-appx", "auc-svm", "kernelrank"])
def test_train_predict_evaluate_round_trip(tmp_path, svmlight_files, capsys, model):
    train, test, Xte, yte = svmlight_files
    mfile, sfile = tmp_path / "model.npz", tmp_path / "scores.txt"
    assert main(["train", "--model", model, "-c", "0.5", str(train), str(mfile)]) == 0
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
    with pytest.raises(SystemExit, match="--force"):
        main(["train", str(train), str(mfile)])
    assert mfile.read_text() == "precious"
    assert main(["train", "--force", str(train), str(mfile)]) == 0
    sfile = tmp_path / "s.txt"
    sfile.write_text("keep")
    with pytest.raises(SystemExit, match="--force"):
        main(["predict", str(mfile), str(test), "-o", str(sfile)])
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


def test_demo_prints_svm_vs_apsvm(capsys):
    assert main(["demo", "--Cs", "0.1,1", "--cv", "2"]) == 0
    out = capsys.readouterr().out
    assert "| BinarySVM |" in out and "| APSVM |" in out


def test_multi_task_model_cannot_be_saved(tmp_path, page_blocks):
    X, y = page_blocks[0][:300], page_blocks[1][:300]
    Y = np.stack([y, -y], axis=1)
    m = jaxrank.APSVM(C=1.0).fit(X, Y)
    with pytest.raises(ValueError, match="single-task"):
        jaxrank.save(m, tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()
