"""dpml.audit: score audits (against the CLI's --scores), LiRA, the one-run bound, f-DP lines."""

import json

import numpy as np
import pytest

from dpml import accounting, audit


def _scores(seed, n=2000, shift=1.0):
    rng = np.random.default_rng(seed)
    return rng.normal(shift, 1.0, n), rng.normal(0.0, 1.0, n)


def test_separated_scores_bound_epsilon_and_random_ones_do_not():
    members, non = _scores(0, shift=4.0)
    r = audit.audit_scores(members, non, delta=1e-5, confidence=0.95, seed=1)
    assert r.auc > 0.99 and r.advantage > 0.9
    assert r.epsilon_lower_bound > 1.0
    assert r.fpr.shape == r.tpr.shape and r.fpr[0] == 0.0 and r.fpr[-1] == 1.0
    # Keyed by the rate as a number; the command line's text keys are read too.
    assert set(r.tpr_at_fpr) == {0.01, 0.001, 0.0}
    assert r.tpr_at_fpr[0.01] == r.tpr_at_fpr["0.01"] and 0.001 in r.tpr_at_fpr
    assert set(r.to_dict()["tpr_at_fpr"]) == {"0.01", "0.001", "0"}
    assert r.members == r.non_members == 2000
    same = audit.audit_scores(non, non, delta=1e-5, confidence=0.95, seed=1)
    assert same.auc == pytest.approx(0.5) and same.epsilon_lower_bound < 0.2


def test_lower_bound_never_exceeds_the_accountants_epsilon_for_gaussian_scores():
    # Scores of a mu-GDP mechanism (mean shift mu): no attack may beat its f-DP curve.
    mu = 1.0
    members, non = _scores(2, n=20000, shift=mu)
    r = audit.audit_scores(members, non, delta=1e-5, confidence=0.95, seed=3)
    gdp = accounting.GaussianDpEvent(1.0 / mu)
    assert r.epsilon_lower_bound <= accounting.epsilon(gdp, 1e-5, "pld")
    fpr, tpr = audit.fdp_bound(gdp, fpr=r.fpr[r.fpr > 0.01])
    emp = np.interp(fpr, r.fpr, r.tpr)
    assert np.all(emp <= tpr + 0.03)


def test_fdp_bound_of_an_accountant():
    a = accounting.PLDAccountant()
    for _ in range(100):
        a.step(noise_multiplier=1.0, sample_rate=0.01)
    fpr, tpr = audit.fdp_bound(a)
    assert np.all(tpr >= fpr - 1e-12) and np.all(tpr <= 1.0)
    eps = a.get_epsilon(1e-5)
    assert np.all(tpr <= np.minimum(1.0, np.exp(eps) * fpr + 1e-5) + 1e-3)


def test_lira_separates_members_with_reference_models():
    rng = np.random.default_rng(4)
    n, k, classes = 200, 16, 3
    labels = rng.integers(0, classes, n)
    members = rng.random(n) < 0.5
    # Reference models are more confident on the records they trained on; so is the target.
    def logits(trained_on):
        z = rng.normal(0.0, 1.0, (n, classes))
        z[np.arange(n), labels] += 1.0 + 2.0 * trained_on
        return z

    mask = rng.random((k, n)) < 0.5
    refs = np.stack([logits(mask[i]) for i in range(k)])
    scores = audit.lira(logits(members), refs, mask, labels)
    r = audit.audit_scores(scores[members], scores[~members], seed=5)
    assert r.auc > 0.8
    offline = audit.lira(logits(members), refs, mask, labels, online=False)
    assert offline.shape == (n,)
    with pytest.raises(ValueError, match="shapes do not match"):
        audit.lira(logits(members), refs[:, :10], mask, labels)


def test_one_run_bound_grows_with_correct_guesses():
    weak = audit.one_run_bound(1000, 100, 60, 1e-5, 0.95)
    strong = audit.one_run_bound(1000, 100, 99, 1e-5, 0.95)
    assert 0.0 <= weak < strong
    scores = np.concatenate([np.full(50, 10.0), np.full(50, -10.0)])
    included = np.concatenate([np.ones(50, bool), np.zeros(50, bool)])
    r = audit.one_run(scores, included, 20, 20)
    assert r["correct"] == 40 and r["epsilon"] > 0



def test_one_run_bound_huge_counts_return_or_are_refused():
    # The p-value once summed O(m) terms some 40 times: m = 10**9 never finished.
    assert audit.one_run_bound(10**9, 10**9, 10**9) > 1.0
    with pytest.raises(ValueError, match="got 1000000001"):
        audit.one_run_bound(10**9 + 1, 10, 10)
    with pytest.raises(ValueError, match=r"canaries must be in \[0, 2\*\*64\), got 1844674"):
        audit.one_run_bound(2**64, 10, 10)
    with pytest.raises(ValueError, match="k_plus"):
        audit.one_run(np.zeros(4), np.ones(4, bool), 2**64, 1)

def test_bad_input_raises_value_error():
    with pytest.raises(ValueError, match="non-member scores|nonmember"):
        audit.audit_scores([1.0, 2.0], [])
    with pytest.raises(ValueError, match="confidence"):
        audit.audit_scores([1.0, 2.0], [0.0, 1.5], confidence=1.5)
    with pytest.raises(ValueError, match="finite|NaN"):
        audit.audit_scores([1.0, float("nan")], [0.0, 1.5])
    with pytest.raises(ValueError, match="one-dimensional"):
        audit.audit_scores(np.zeros((2, 2)), [0.0, 1.5])
    for seed in (-1, 2**64):
        with pytest.raises(ValueError, match=rf"seed must be in \[0, 2\*\*64\), got {seed}"):
            audit.audit_scores([1.0, 2.0], [0.0, 1.5], seed=seed)
    for fpr, message in [([[0.5]], r"shape \(1, 1\)"), ([1.5], r"\[0, 1\], got 1.5")]:
        with pytest.raises(ValueError, match="fpr must be .*" + message) as e:
            audit.fdp_bound(accounting.GaussianDpEvent(1.0), fpr=fpr)
        assert "\n" not in str(e.value)


def test_python_and_cli_agree_on_a_scores_file(dpml_cli, tmp_path):
    members, non = _scores(6, n=500, shift=1.5)
    csv = tmp_path / "scores.csv"
    rows = [f"{float(s)!r},1" for s in members] + [f"{float(s)!r},0" for s in non]
    csv.write_text("score,member\n" + "\n".join(rows) + "\n")
    out_dir = tmp_path / "audit"
    cli = dpml_cli("audit", "--scores", csv, "--seed", 7, "--delta", 1e-5, "--out", out_dir)
    py = audit.audit_scores(members, non, delta=1e-5, confidence=0.95, seed=7)
    m = cli["attacks"]["scores"]
    assert m["auc"] == pytest.approx(py.auc, rel=1e-12)
    assert m["epsilon_lower_bound"] == pytest.approx(py.epsilon_lower_bound, rel=1e-12)
    assert m["tpr_at_fpr"] == pytest.approx(py.to_dict()["tpr_at_fpr"])
    written = json.loads((out_dir / "audit.json").read_text())
    assert written["epsilon_lower_bound"] == cli["epsilon_lower_bound"]
    assert (out_dir / "roc.png").exists() and (out_dir / "report.html").exists()


def test_labels_where_scores_belong_are_refused_and_scores_with_labels_are_taken():
    # scikit-learn's habit, audit_scores(scores, y_true), reported AUC 0.38 and an empirical
    # epsilon >= 5.5 on a 0/1 array: a leak that was not there.
    members, non = _scores(8, n=400, shift=0.0)
    scores = np.concatenate([members, non])
    y_true = np.concatenate([np.ones(400), np.zeros(400)])
    with pytest.raises(ValueError, match="nonmember_scores holds only 0s and 1s.*labels="):
        audit.audit_scores(scores, y_true)
    by_labels = audit.audit_scores(scores=scores, labels=y_true, seed=3)
    by_sides = audit.audit_scores(members, non, seed=3)
    assert by_labels.auc == by_sides.auc
    assert by_labels.epsilon_lower_bound == by_sides.epsilon_lower_bound
    # Random scores: no leak.
    assert by_labels.epsilon_lower_bound < 0.5
    with pytest.raises(ValueError, match="not both"):
        audit.audit_scores(members, non, scores=scores, labels=y_true)
    with pytest.raises(ValueError, match="1 \\(member\\) or 0"):
        audit.audit_scores(scores=scores, labels=y_true * 2)
