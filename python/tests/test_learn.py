"""dpml.learn: scikit-learn conventions, privacy attributes, accuracy, bad input."""

import numpy as np
import pytest

from dpml import learn


def _blobs(seed, n=600):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.normal(0.0, 0.7, (n, 2)) + np.where(y[:, None] == 1, 1.5, -1.5)
    return np.clip(x, -3, 3), np.where(y == 1, "yes", "no")


@pytest.mark.parametrize("cls", [learn.DPLogisticRegression, learn.DPMLPClassifier])
def test_classifiers_learn_privately_and_report_their_epsilon(cls):
    x, y = _blobs(1)
    est = cls(epsilon=3.0, bounds=(-3.0, 3.0), classes=["no", "yes"], epochs=10, random_state=2)
    assert est.fit(x, y) is est
    xt, yt = _blobs(3, n=400)
    assert est.score(xt, yt) > 0.9
    assert 0 < est.epsilon_ <= 3.0 and est.delta_ == 1e-5
    assert est.privacy_report_["epsilon"] == est.epsilon_
    assert list(est.classes_) == ["no", "yes"]
    proba = est.predict_proba(xt)
    assert proba.shape == (400, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert set(est.predict(xt)) <= {"no", "yes"}
    # Same seed, same model.
    again = cls(
        epsilon=3.0, bounds=(-3.0, 3.0), classes=["no", "yes"], epochs=10, random_state=2
    ).fit(x, y)
    assert np.array_equal(again.predict_proba(xt), proba)


def test_noise_multiplier_and_per_feature_bounds():
    x, y = _blobs(4)
    est = learn.DPLogisticRegression(
        epsilon=None,
        noise_multiplier=1.0,
        bounds=[(-3, 3), (-4, 4)],
        classes=["no", "yes"],
        epochs=5,
        random_state=1,
    ).fit(x, y)
    assert est.epsilon_ > 0
    assert est.privacy_report_["recipe"]["privacy"] == {"kind": "noise_multiplier", "value": 1.0}


def test_get_set_params_and_bad_input():
    est = learn.DPMLPClassifier(epsilon=2.0, bounds=(0, 1))
    p = est.get_params()
    assert p["epsilon"] == 2.0 and p["bounds"] == (0, 1) and "hidden_layer_sizes" in p
    assert est.set_params(epochs=3) is est and est.epochs == 3
    with pytest.raises(ValueError, match="invalid parameter"):
        est.set_params(gamma=1)
    x, y = _blobs(5, n=100)
    yes_no = ["no", "yes"]
    with pytest.raises(ValueError, match="classes are required"):
        learn.DPMLPClassifier(bounds=(-3, 3)).fit(x, y)
    with pytest.raises(ValueError, match="bounds are required"):
        learn.DPMLPClassifier(classes=yes_no).fit(x, y)
    with pytest.raises(ValueError, match="one \\(low, high\\) pair or 2 pairs"):
        learn.DPMLPClassifier(bounds=[(0, 1)] * 3, classes=yes_no).fit(x, y)
    with pytest.raises(ValueError, match="exactly one of epsilon and noise_multiplier"):
        learn.DPMLPClassifier(
            epsilon=1.0, noise_multiplier=1.0, bounds=(-3, 3), classes=yes_no
        ).fit(x, y)
    with pytest.raises(ValueError, match="epsilon"):
        learn.DPMLPClassifier(epsilon=-1.0, bounds=(-3, 3), classes=yes_no).fit(x, y)
    with pytest.raises(ValueError, match="not fitted"):
        learn.DPMLPClassifier().predict(x)
    with pytest.raises(ValueError, match="not one of the declared classes"):
        learn.DPMLPClassifier(bounds=(-3, 3), classes=["no"]).fit(x, y)


def test_kmeans_finds_separated_clusters():
    rng = np.random.default_rng(6)
    centres = np.array([[-5.0, -5.0], [5.0, 5.0], [-5.0, 5.0]])
    x = np.concatenate([c + rng.normal(0, 0.5, (2000, 2)) for c in centres])
    km = learn.DPKMeans(n_clusters=3, epsilon=1.0, bounds=(-10, 10), random_state=7).fit(x)
    assert km.cluster_centers_.shape == (3, 2)
    for c in centres:
        assert np.min(np.linalg.norm(km.cluster_centers_ - c, axis=1)) < 1.0
    assert km.epsilon_ == pytest.approx(1.0)
    assert km.predict(x).shape == (6000,)
    # An iteration count past the library's limit is refused (2**31 ran for hours before).
    with pytest.raises(ValueError, match="iterations must be at most 10000, got 2147483648"):
        learn.DPKMeans(n_clusters=3, epsilon=1.0, bounds=(-10, 10), max_iter=2**31).fit(x)


def test_sklearn_clone_and_cross_val_score():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.datasets import load_iris
    from sklearn.model_selection import cross_val_score

    est = learn.DPMLPClassifier(epsilon=3.0, bounds=(0.0, 8.0), classes=[0, 1, 2], random_state=1)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    x, y = load_iris(return_X_y=True)
    scores = cross_val_score(est, x, y, cv=5)
    assert scores.shape == (5,) and scores.mean() > 0.6
    assert sklearn.__version__


def test_an_architecture_dict_is_trained_instead_of_the_hidden_layers():
    x, y = _blobs(7)
    arch = {
        "name": "tiny",
        "input_shape": [2],
        "layers": [
            {"type": "linear", "in_features": 2, "out_features": 8},
            {"type": "gelu"},
            {"type": "linear", "in_features": 8, "out_features": 2},
        ],
    }
    est = learn.DPMLPClassifier(
        epsilon=3.0, bounds=(-3, 3), classes=["no", "yes"], arch=arch, random_state=3
    ).fit(x, y)
    assert est.privacy_report_["recipe"]["arch"]["name"] == "tiny"
    xt, yt = _blobs(8, n=400)
    assert est.score(xt, yt) > 0.9
    bad = dict(arch, input_shape=[3])
    with pytest.raises(ValueError, match="shape"):
        learn.DPMLPClassifier(bounds=(-3, 3), classes=["no", "yes"], arch=bad).fit(x, y)


@pytest.mark.parametrize("mechanism", ["rr-prior", "rr", "laplace"])
def test_label_dp_classifier_learns_from_private_labels(mechanism):
    x, y = _blobs(6, n=800)
    est = learn.LabelDPClassifier(
        epsilon=2.0,
        mechanism=mechanism,
        hidden_layer_sizes=(16,),
        epochs=30,
        batch_size=32,
        learning_rate=0.01,
        bounds=(-3.0, 3.0),
        classes=["no", "yes"],
        random_state=3,
    )
    assert est.fit(x, y) is est
    xt, yt = _blobs(7, n=400)
    assert est.score(xt, yt) > 0.85
    r = est.privacy_report_
    assert est.epsilon_ == 2.0 and est.delta_ == 0.0
    assert r["guarantee"] == "label-dp" and r["mechanism"] == mechanism
    # The noisy-label accuracy compares noisy with true labels: a diagnostic, kept apart.
    assert "noisy_label_accuracy" not in r and 0.0 < r["diagnostics"]["noisy_label_accuracy"] < 1.0
    assert "test_accuracy" not in r
    again = learn.LabelDPClassifier(**est.get_params()).fit(x, y)
    assert np.array_equal(again.predict_proba(xt), est.predict_proba(xt))


def test_label_dp_classifier_bad_input():
    x, y = _blobs(8, n=100)
    with pytest.raises(ValueError, match="unknown mechanism"):
        learn.LabelDPClassifier(mechanism="coin", bounds=(-3, 3), classes=["no", "yes"]).fit(x, y)
    with pytest.raises(ValueError, match="epsilon"):
        learn.LabelDPClassifier(epsilon=-1.0, bounds=(-3, 3), classes=["no", "yes"]).fit(x, y)
    with pytest.raises(ValueError, match="classes are required"):
        learn.LabelDPClassifier(bounds=(-3, 3)).fit(x, y)
