"""dpml.accounting against published reference values, the CLI, and Opacus's interface."""

import math

import numpy as np
import pytest

from dpml import accounting as acc

Q = 256 / 60000
STEPS = 14063  # 60 epochs of 256 out of 60000


def test_reference_values_of_dp_accounting():
    # Google dp_accounting at delta = 1e-5 (the table in crates/accounting's RDP tests and
    # crates/dpml/tests/cli_accounting.rs): RDP 2.597, PLD 2.382, GDP (CLT) 2.324.
    event = acc.dp_sgd_event(1.1, Q, STEPS)
    assert acc.epsilon(event, 1e-5, "rdp") == pytest.approx(2.597, abs=2e-3)
    assert acc.epsilon(event, 1e-5, "pld") == pytest.approx(2.382, rel=0.01)
    assert acc.epsilon(event, 1e-5, "gdp") == pytest.approx(2.324, abs=2e-3)
    lower, upper = acc.pld_epsilon_bounds(event, 1e-5)
    assert lower <= upper <= acc.epsilon(event, 1e-5, "rdp")
    assert upper == acc.epsilon(event, 1e-5, "pld")


def test_accountants_merge_steps_like_opacus_and_agree_with_events():
    a = acc.RDPAccountant()
    assert len(a) == 0 and a.get_epsilon(1e-5) == 0.0
    for _ in range(100):
        a.step(noise_multiplier=1.1, sample_rate=Q)
    a.step(noise_multiplier=2.0, sample_rate=Q)
    a.step(noise_multiplier=1.1, sample_rate=Q)
    assert a.history == [(1.1, Q, 100), (2.0, Q, 1), (1.1, Q, 1)]
    assert len(a) == 3
    assert acc.RDPAccountant.mechanism() == "rdp"
    assert acc.PLDAccountant.mechanism() == "pld"
    assert acc.GDPAccountant.mechanism() == "gdp"
    event = acc.ComposedDpEvent(
        [acc.dp_sgd_event(1.1, Q, 100), acc.dp_sgd_event(2.0, Q, 1), acc.dp_sgd_event(1.1, Q, 1)]
    )
    assert a.get_epsilon(1e-5) == acc.epsilon(event, 1e-5, "rdp")
    # More steps never lower epsilon; PLD is tighter than RDP.
    p = acc.PLDAccountant()
    p.load_state_dict(a.state_dict())
    assert p.history == a.history
    assert p.get_epsilon(1e-5) < a.get_epsilon(1e-5)
    eps_before = a.get_epsilon(1e-5)
    a.step(noise_multiplier=1.1, sample_rate=Q)
    assert a.get_epsilon(1e-5) > eps_before


def test_a_restored_history_is_checked_as_steps_are():
    a = acc.PLDAccountant()
    for bad, message in [
        ((1.0, 0.01, 2.9), "whole number"),
        ((1.0, 0.01, -5), "in \\[1, 2\\*\\*64\\)"),
        ((1.0, 0.01, 2**70), "in \\[1, 2\\*\\*64\\)"),
        ((True, 0.01, 3), "must be a number"),
        (("1.0", 0.01, 3), "must be a number"),
        ((float("nan"), 0.01, 3), "noise_multiplier"),
        ((0.0, 0.01, 3), "noise_multiplier"),
        ((1.0, 1.5, 3), "sampling_rate"),
    ]:
        with pytest.raises(ValueError, match=message):
            a.load_state_dict({"history": [bad]})
    a.load_state_dict({"history": [(1.0, 0.01, 3.0)]})
    assert a.history == [(1.0, 0.01, 3)]
    for state, message in [
        (None, "state_dict must be a dict"),
        ({}, "no 'history'"),
        ({"history": "abc"}, "must be a list of steps"),
        ({"history": 5}, "must be a list of steps"),
        ({"history": [(1.0, 0.01, 2, 5)]}, r"\(noise_multiplier, sampling_rate, steps\), got"),
        ({"history": [(1.0, 0.01)]}, "a history entry must be"),
        ({"history": ["abc"]}, "a history entry must be"),
    ]:
        with pytest.raises(ValueError, match=message):
            a.load_state_dict(state)
    assert a.history == [(1.0, 0.01, 3)]  # a refused state leaves the history as it was
    a.load_state_dict({"history": [[2.0, 0.5, 1]]})  # as JSON gives it back
    assert a.history == [(2.0, 0.5, 1)]


def test_optimizer_hook_steps_the_accountant():
    a = acc.PLDAccountant()

    class Optim:
        noise_multiplier = 1.0
        accumulated_iterations = 1

    hook = a.get_optimizer_hook_fn(sample_rate=0.01)
    hook(Optim())
    hook(Optim())
    assert a.history == [(1.0, 0.01, 2)]


def test_events_compose_and_pure_mechanisms_are_exact():
    lap = acc.LaplaceDpEvent(2.0)  # epsilon = 1/2 per use
    assert acc.epsilon(lap, 1e-6, "rdp") <= 0.5 + 1e-9
    assert acc.epsilon(acc.SelfComposedDpEvent(lap, 4), 1e-6, "pld") <= 2.0 + 1e-6
    rr = acc.RandomizedResponse(math.log(3), 2)
    assert acc.epsilon(rr, 1e-6, "pld") == pytest.approx(math.log(3), abs=1e-3)
    composed = acc.ComposedDpEvent([acc.GaussianDpEvent(2.0), acc.GaussianDpEvent(2.0)])
    same = acc.SelfComposedDpEvent(acc.GaussianDpEvent(2.0), 2)
    assert acc.epsilon(composed, 1e-5, "rdp") == pytest.approx(acc.epsilon(same, 1e-5, "rdp"))
    sampled = acc.PoissonSampledDpEvent(0.01, acc.GaussianDpEvent(1.0))
    assert acc.epsilon(sampled, 1e-5) < acc.epsilon(acc.GaussianDpEvent(1.0), 1e-5)
    # delta and epsilon are inverse along the curve.
    eps = acc.epsilon(same, 1e-5, "pld")
    assert acc.delta(same, eps, "pld") == pytest.approx(1e-5, rel=0.05)
    # Events round-trip through dicts.
    assert acc.event_from_dict(sampled.to_dict()) == sampled
    with pytest.raises(ValueError, match="not a dpml event"):
        acc.event_from_dict({"type": "laplace"})


def test_calibrate_reaches_the_target_from_below():
    sigma = acc.calibrate(3.0, 1e-5, Q, steps=STEPS, accountant="rdp")
    eps = acc.epsilon(acc.dp_sgd_event(sigma, Q, STEPS), 1e-5, "rdp")
    assert 3.0 * (1 - 2e-3) < eps <= 3.0
    by_epochs = acc.calibrate(3.0, 1e-5, Q, epochs=60, accountant="rdp")
    assert by_epochs == pytest.approx(sigma, rel=1e-2)
    assert acc.steps_for_epochs(60, 256, 60000) == (Q, STEPS)


def test_tradeoff_curves_are_arrays_between_the_lines():
    event = acc.dp_sgd_event(1.1, Q, 1000)
    alphas, beta = acc.tradeoff(event)
    assert isinstance(beta, np.ndarray) and beta.shape == alphas.shape
    eps = acc.epsilon(event, 1e-5, "pld")
    assert np.all(beta <= 1 - alphas + 1e-12)
    assert np.all(beta >= 1 - 1e-5 - np.exp(eps) * alphas - 1e-3)
    _, gdp = acc.tradeoff(event, alphas, "gdp")
    assert np.all(np.abs(gdp - beta) < 0.05)


def test_bad_input_raises_value_error_with_the_cli_message():
    with pytest.raises(ValueError, match="accountant must be one of"):
        acc.epsilon(acc.GaussianDpEvent(1.0), 1e-5, "moments")
    with pytest.raises(ValueError, match="delta"):
        acc.epsilon(acc.GaussianDpEvent(1.0), 1.5, "rdp")
    with pytest.raises(ValueError, match="noise_multiplier"):
        acc.epsilon(acc.GaussianDpEvent(-1.0), 1e-5, "rdp")
    with pytest.raises(ValueError, match="sampling_rate"):
        acc.epsilon(acc.dp_sgd_event(1.0, 2.0, 1), 1e-5, "rdp")
    with pytest.raises(ValueError, match="invalid privacy event"):
        acc.epsilon({"type": "cauchy"}, 1e-5)
    # A grid of 2**31 points filled the memory for minutes before it was refused by size.
    with pytest.raises(ValueError, match="got 2147483648"):
        acc.alpha_grid(2**31)
    with pytest.raises(ValueError, match="got -1"):
        acc.alpha_grid(-1)
    assert acc.alpha_grid(acc.MAX_ALPHA_GRID // 1000).shape == (acc.MAX_ALPHA_GRID // 1000,)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"sampling_rate": 0, "epochs": 1}, r"sampling_rate must be in \(0, 1\], got 0"),
        ({"sampling_rate": -0.5, "epochs": 1}, r"sampling_rate must be in \(0, 1\], got -0.5"),
        ({"sampling_rate": math.nan, "epochs": 1}, r"sampling_rate must be in \(0, 1\], got nan"),
        ({"sample_rate": 0, "steps": 10}, r"sample_rate must be in \(0, 1\], got 0"),
        ({"sampling_rate": "0.1", "steps": 10}, "sampling_rate must be a real number"),
        ({"sampling_rate": 1e-310, "epochs": 1}, "epochs / sampling_rate must be fewer than"),
        ({"sampling_rate": Q, "epochs": math.inf}, "epochs must be finite and > 0, got inf"),
        ({"sampling_rate": Q, "epochs": 0}, "epochs must be finite and > 0, got 0"),
        ({"sampling_rate": Q, "epochs": "1"}, "epochs must be a real number, got '1'"),
        ({"sampling_rate": Q, "steps": -1}, r"steps must be in \[0, 2\*\*64\), got -1"),
        ({"sampling_rate": Q, "steps": 2**64}, r"steps must be in \[0, 2\*\*64\)"),
    ],
)
def test_calibrate_names_each_bad_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        acc.calibrate(3.0, 1e-5, **kwargs)


@pytest.mark.parametrize(
    "alphas, message",
    [
        ([[0.5]], r"alphas must be a one-dimensional array, got shape \(1, 1\)"),
        (np.zeros((2, 3)), r"alphas must be a one-dimensional array, got shape \(2, 3\)"),
        ([[0.5], [0.1, 0.2]], "alphas must be a one-dimensional array of numbers"),
        (["x"], "alphas must be a one-dimensional array of numbers"),
        ([0.5 + 1j], "alphas must be a one-dimensional array of numbers"),
        ([0.5, 2.0], r"alphas must be in \[0, 1\], got 2.0"),
    ],
)
def test_tradeoff_refuses_alphas_that_are_not_rates_in_one_line(alphas, message):
    with pytest.raises(ValueError, match=message) as e:
        acc.tradeoff(acc.GaussianDpEvent(1.0), alphas)
    assert "\n" not in str(e.value)


def test_python_and_cli_agree(dpml_cli):
    out = dpml_cli("account", "--noise-multiplier", 1.1, "--sampling-rate", Q, "--steps", STEPS,
                   "--delta", 1e-5)
    event = acc.dp_sgd_event(1.1, Q, STEPS)
    assert acc.epsilon(event, 1e-5, "rdp") == pytest.approx(out["epsilon"]["rdp"], rel=1e-12)
    assert acc.epsilon(event, 1e-5, "pld") == pytest.approx(out["epsilon"]["pld"], rel=1e-12)
    assert acc.epsilon(event, 1e-5, "gdp") == pytest.approx(out["epsilon"]["gdp"], rel=1e-12)
    assert acc.pld_epsilon_bounds(event, 1e-5)[0] == pytest.approx(out["pld_lower"], rel=1e-12)


def test_bad_arguments_raise_value_error_before_any_step_too():
    for cls in (acc.PLDAccountant, acc.RDPAccountant, acc.GDPAccountant):
        with pytest.raises(ValueError, match="delta"):
            cls().get_epsilon(-1.0)
        with pytest.raises(ValueError, match="noise_multiplier"):
            cls().step(noise_multiplier=-1.0, sampling_rate=0.01)
        with pytest.raises(ValueError, match="sampling_rate"):
            cls().step(noise_multiplier=1.0, sampling_rate=1.5)
    with pytest.raises(ValueError, match="delta"):
        acc.RDPAccountant().get_privacy_spent(delta=2.0)
    with pytest.raises(ValueError, match="one of sampling_rate and sample_rate"):
        acc.PLDAccountant().step(noise_multiplier=1.0, sampling_rate=0.1, sample_rate=0.1)


def test_opacus_names_are_aliases_of_dpmls():
    a, b = acc.RDPAccountant(), acc.RDPAccountant()
    for _ in range(50):
        a.step(noise_multiplier=1.1, sample_rate=Q)
        b.step(noise_multiplier=1.1, sampling_rate=Q)
    assert a.history == b.history == [(1.1, Q, 50)]
    eps, order = a.get_privacy_spent(delta=1e-5)
    assert eps == pytest.approx(a.get_epsilon(1e-5)) and order > 1
    assert acc.calibrate(3.0, 1e-5, sample_rate=Q, steps=1000) == acc.calibrate(
        3.0, 1e-5, sampling_rate=Q, steps=1000
    )
    event = acc.PoissonSampledDpEvent(sampling_probability=0.01, event=acc.GaussianDpEvent(1.0))
    assert event == acc.PoissonSampledDpEvent(0.01, acc.GaussianDpEvent(1.0))
    assert event.sampling_probability == event.sampling_rate == 0.01
    assert event.to_dict()["sampling_rate"] == 0.01


def test_calibration_defaults_to_the_tight_accountant():
    # RDP's sigma was the default here while `dpml calibrate` used PLD's.
    pld = acc.calibrate(3.0, 1e-5, Q, steps=STEPS)
    assert pld == acc.calibrate(3.0, 1e-5, Q, steps=STEPS, accountant="pld")
    assert pld < acc.calibrate(3.0, 1e-5, Q, steps=STEPS, accountant="rdp")
    with pytest.raises(ValueError, match="pld or rdp"):
        acc.calibrate(3.0, 1e-5, Q, steps=STEPS, accountant="gdp")


def test_dp_accountings_own_events_are_accepted():
    dpa = pytest.importorskip("dp_accounting")
    theirs = dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(1.1)), STEPS
    )
    assert acc.epsilon(theirs, 1e-5) == acc.epsilon(acc.dp_sgd_event(1.1, Q, STEPS), 1e-5)
    rr = dpa.RandomizedResponseDpEvent(noise_parameter=0.5, num_buckets=2)
    assert acc.epsilon(rr, 1e-9, "pld") == pytest.approx(math.log(3), abs=1e-3)
    with pytest.raises(ValueError, match="cannot account"):
        acc.epsilon(dpa.NonPrivateDpEvent(), 1e-5)


def test_dp_accounting_conversion_without_the_package():
    # The same conversion on stand-ins named as dp_accounting names its classes.
    class RandomizedResponseDpEvent:
        __module__ = "dp_accounting.dp_event"

        def __init__(self, noise_parameter, num_buckets):
            self.noise_parameter, self.num_buckets = noise_parameter, num_buckets

    # p = 0.5 over 2 buckets: the true answer with probability 3/4, epsilon = ln 3.
    converted = acc.from_dp_accounting(RandomizedResponseDpEvent(0.5, 2))
    assert converted.epsilon == pytest.approx(math.log(3))
    with pytest.raises(ValueError, match="noise_parameter"):
        acc.epsilon(RandomizedResponseDpEvent(0.0, 2), 1e-5)
