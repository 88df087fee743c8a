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
    # noise_multiplier alone: no epsilon=None needed beside it.
    est = learn.DPLogisticRegression(
        noise_multiplier=1.0,
        bounds=[(-3, 3), (-4, 4)],
        classes=["no", "yes"],
        epochs=5,
        random_state=1,
    ).fit(x, y)
    assert est.epsilon_ > 0
    assert est.privacy_report_["recipe"]["privacy"] == {"kind": "noise_multiplier", "value": 1.0}
    assert est.privacy_report_["noise_multiplier"] == 1.0


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
    with pytest.raises(ValueError, match="real numbers"):
        learn.DPMLPClassifier(bounds=(-3, 3), classes=yes_no).fit(x + 1j, y)
    with pytest.raises(ValueError, match="one \\(low, high\\) pair, 2 pairs"):
        learn.DPMLPClassifier(bounds=[(0, 1)] * 3, classes=yes_no).fit(x, y)
    with pytest.raises(ValueError, match="one of epsilon 1 and noise_multiplier 1"):
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
    # An iteration count past the library's limit is refused (2**31 ran for hours before),
    # by the keyword the user passed.
    with pytest.raises(ValueError, match="max_iter must be at most 10000, got 2147483648"):
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


def test_whole_number_parameters_are_not_truncated():
    # int(2.9) would be 2: a recipe other than the one asked for.
    x, y = _blobs(8, n=100)
    common = dict(bounds=(-3, 3), classes=["no", "yes"])
    for est, name in [
        (learn.DPLogisticRegression(batch_size=2.9, **common), "batch_size"),
        (learn.DPLogisticRegression(batch_size=True, **common), "batch_size"),
        (learn.LabelDPClassifier(stages=2.7, **common), "stages"),
        (learn.LabelDPClassifier(batch_size=7.5, **common), "batch_size"),
    ]:
        with pytest.raises(ValueError, match=f"{name} must be a whole number"):
            est.fit(x, y)
    with pytest.raises(ValueError, match="max_iter must be a whole number"):
        learn.DPKMeans(n_clusters=2, bounds=(-3, 3), max_iter=3.9).fit(x)



def test_a_batch_size_past_64_bits_is_named():
    x, y = _blobs(8, n=100)
    for est in [
        learn.DPLogisticRegression(batch_size=2**64, bounds=(-3, 3), classes=["no", "yes"]),
        learn.LabelDPClassifier(batch_size=-1, bounds=(-3, 3), classes=["no", "yes"]),
    ]:
        with pytest.raises(ValueError, match=r"batch_size must be in \[0, 2\*\*64\), got -?\d"):
            est.fit(x, y)

def _fitted_estimators():
    x, y = _blobs(11, n=300)
    common = dict(bounds=(-3, 3), classes=["no", "yes"], random_state=1)
    return x, [
        learn.DPMLPClassifier(epsilon=3.0, epochs=3, **common).fit(x, y),
        learn.DPLogisticRegression(epsilon=3.0, epochs=3, **common).fit(x, y),
        learn.LabelDPClassifier(epsilon=2.0, epochs=3, hidden_layer_sizes=(8,), **common).fit(x, y),
        learn.DPKMeans(n_clusters=2, epsilon=1.0, bounds=(-3, 3), random_state=1).fit(x),
    ]


def test_every_fitted_estimator_pickles_and_predicts_the_same():
    import pickle

    x, fitted = _fitted_estimators()
    for est in fitted:
        back = pickle.loads(pickle.dumps(est))
        assert type(back) is type(est)
        assert np.array_equal(back.predict(x), est.predict(x)), type(est).__name__
        assert back.privacy_report_ == est.privacy_report_
        assert back.get_params() == est.get_params()
    joblib = pytest.importorskip("joblib")
    import io

    for est in fitted:
        buf = io.BytesIO()
        joblib.dump(est, buf)
        buf.seek(0)
        assert np.array_equal(joblib.load(buf).predict(x), est.predict(x))


def test_save_model_never_writes_over_a_ledger_or_its_key(tmp_path):
    x, y = _blobs(3, n=60)
    est = learn.DPLogisticRegression(
        epsilon=3.0, epochs=1, bounds=(-3, 3), classes=["no", "yes"], random_state=1
    ).fit(x, y)
    ledger = tmp_path / "budget.db"
    ledger.write_bytes(b"SQLite format 3\0" + bytes(84))
    key = tmp_path / "any-name.svg"
    key.write_text("0123456789abcdef" * 4 + "\n")
    for path in [ledger, key]:
        before = path.read_bytes()
        with pytest.raises(ValueError, match="budget ledger"):
            est.save_model(path)
        assert path.read_bytes() == before
    with pytest.raises(ValueError, match="folder"):
        est.save_model(tmp_path)


def test_save_model_writes_the_command_lines_model_file(dpml_cli, tmp_path):
    x, fitted = _fitted_estimators()
    for est in fitted[:3]:
        path = tmp_path / f"{type(est).__name__}.safetensors"
        est.save_model(path)
        shown = dpml_cli("inspect", path)
        privacy = shown["privacy"]
        assert privacy["epsilon"] == est.epsilon_
        assert privacy["classes"] == ["no", "yes"]
        back = learn.load_model(path)
        # A DP-SGD network of any architecture comes back as a DPMLPClassifier.
        label_dp = isinstance(est, learn.LabelDPClassifier)
        assert type(back) is (learn.LabelDPClassifier if label_dp else learn.DPMLPClassifier)
        assert list(back.classes_) == ["no", "yes"]
        assert np.array_equal(back.predict(x), est.predict(x))
        assert back.epsilon_ == est.epsilon_


def test_a_model_trained_by_the_command_line_loads_in_python(dpml_cli, tmp_path):
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 1, (300, 3))
    y = (x[:, 0] > 0.5).astype(int)
    csv = tmp_path / "t.csv"
    csv.write_text("a,b,c,label\n" + "\n".join(f"{r[0]},{r[1]},{r[2]},{c}" for r, c in zip(x, y)))
    model = tmp_path / "cli.safetensors"
    out = dpml_cli("train", "--dataset", f"csv:{csv}", "--bounds", "0,1", "--classes", "0,1",
                   "--epsilon", 2, "--epochs", 3, "--seed", 1, "--save-model", model)
    est = learn.load_model(model)
    assert isinstance(est, learn.DPMLPClassifier)
    assert list(est.classes_) == [0, 1]
    assert est.epsilon_ == pytest.approx(out["epsilon"])
    assert est.predict(x).shape == (300,)


def test_un_noised_figures_are_diagnostics_and_can_be_left_out():
    x, y = _blobs(12, n=300)
    est = learn.DPMLPClassifier(epsilon=3.0, epochs=2, bounds=(-3, 3), classes=["no", "yes"],
                                random_state=1).fit(x, y)
    r = est.privacy_report_
    for key in ("train_accuracy", "epoch_log", "samples_per_sec", "test_accuracy"):
        assert key not in r, key
    d = r["diagnostics"]
    assert 0 <= d["train_accuracy"] <= 1 and len(d["epoch_log"]) == 2
    quiet = learn.DPMLPClassifier(epsilon=3.0, epochs=2, bounds=(-3, 3), classes=["no", "yes"],
                                  random_state=1, diagnostics=False).fit(x, y)
    assert "diagnostics" not in quiet.privacy_report_
    assert quiet.epsilon_ == est.epsilon_
    label = learn.LabelDPClassifier(epochs=2, classes=["no", "yes"], diagnostics=False,
                                    random_state=1).fit(x, y)
    assert "diagnostics" not in label.privacy_report_
    assert "stage_noisy_label_accuracy" not in label.privacy_report_
    km = learn.DPKMeans(n_clusters=2, epsilon=1.0, bounds=(-3, 3), diagnostics=False).fit(x)
    assert km.inertia_ is None and "inertia" not in km.privacy_report_


def test_diffprivlib_bounds_and_scikit_learns_kmeans_attributes():
    rng = np.random.default_rng(6)
    centres = np.array([[-5.0, 0.0], [5.0, 10.0]])
    x = np.concatenate([c + rng.normal(0, 0.5, (1000, 2)) for c in centres])
    lower, upper = np.array([-10.0, -5.0]), np.array([10.0, 15.0])
    km = learn.DPKMeans(n_clusters=2, epsilon=2.0, bounds=(lower, upper), random_state=2).fit(x)
    assert km.privacy_report_["bounds"] == {"lo": [-10.0, -5.0], "hi": [10.0, 15.0]}
    assert km.labels_.shape == (2000,) and set(km.labels_) == {0, 1}
    assert np.array_equal(km.labels_, km.predict(x))
    assert km.n_iter_ >= 1 and km.inertia_ > 0
    dist = km.transform(x)
    assert dist.shape == (2000, 2)
    assert km.score(x) == pytest.approx(-(dist.min(axis=1) ** 2).sum())
    # Per-feature pairs still work; a tuple of two arrays is diffprivlib's (lower, upper).
    pairs = learn.DPKMeans(n_clusters=2, epsilon=2.0, bounds=[(-10, 10), (-5, 15)]).fit(x)
    assert pairs.privacy_report_["bounds"] == km.privacy_report_["bounds"]
    with pytest.raises(ValueError, match="epsilon is required for dplloyd"):
        learn.DPKMeans(n_clusters=2, bounds=(-10, 10)).fit(x)
    plain = learn.DPKMeans(n_clusters=2, algorithm="lloyd", bounds=(-10, 15)).fit(x)
    assert plain.epsilon_ is None


def test_label_dp_classifier_fits_iris_with_its_defaults():
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    # The default batch (128) exceeded RR-with-prior's first stage (75 records) and was refused.
    est = learn.LabelDPClassifier(classes=[0, 1, 2], random_state=1).fit(x, y)
    assert est.privacy_report_["mechanism"] == learn.DEFAULTS["label_dp"]["mechanism"]
    assert est.epsilon_ == learn.DEFAULTS["label_dp"]["epsilon"]


def test_a_default_batch_larger_than_the_records_is_fitted_and_said_so():
    x, y = _blobs(13, n=40)
    est = learn.DPLogisticRegression(bounds=(-3, 3), classes=["no", "yes"], epochs=2).fit(x, y)
    assert est.privacy_report_["batch_size"] == 10
    assert "batch_size 10" in est.privacy_report_["notes"][0]
    with pytest.raises(ValueError, match="batch_size must be <= .* got 64"):
        learn.DPLogisticRegression(bounds=(-3, 3), classes=["no", "yes"], batch_size=64).fit(x, y)


def test_help_shows_every_parameter_with_its_default():
    import pydoc

    for cls in (learn.DPMLPClassifier, learn.DPLogisticRegression, learn.LabelDPClassifier,
                learn.DPKMeans):
        text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
        for name in cls._param_names():
            assert f"{name} :" in text, (cls.__name__, name)
    text = pydoc.render_doc(learn.DPMLPClassifier, renderer=pydoc.plaintext)
    t = learn.DEFAULTS["table"]
    assert f"Default {t['epochs']}" in text and f"Default {t['learning_rate']}" in text
