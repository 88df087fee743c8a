"""Type stubs of the compiled module (the Rust half of dpml)."""

from typing import List, Optional, Tuple

import numpy as np
import numpy.typing as npt

__version__: str

# accounting
def epsilon(event_json: str, delta: float, accountant: str) -> float: ...
def delta(event_json: str, epsilon: float, accountant: str) -> float: ...
def pld_epsilon_bounds(event_json: str, delta: float) -> Tuple[float, float]: ...
def calibrate(
    target_epsilon: float, delta: float, sampling_rate: float, steps: int, accountant: str
) -> Tuple[float, float]: ...
def steps_for_epochs(epochs: float, batch_size: int, dataset_size: int) -> Tuple[float, int]: ...
def tradeoff(
    event_json: str, alphas: npt.NDArray[np.float64], accountant: str
) -> npt.NDArray[np.float64]: ...
def alpha_grid(n: int) -> npt.NDArray[np.float64]: ...

# audit
def audit_scores(
    member_scores: npt.NDArray[np.float64],
    nonmember_scores: npt.NDArray[np.float64],
    delta: float,
    confidence: float,
    seed: Optional[int] = None,
) -> Tuple[str, Tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]: ...
def lira(
    target_logits: npt.NDArray[np.float64],
    reference_logits: npt.NDArray[np.float64],
    reference_in_mask: npt.NDArray[np.bool_],
    labels: npt.NDArray[np.int64],
    online: bool = True,
    per_example_variance: bool = False,
) -> npt.NDArray[np.float64]: ...
def one_run_audit(
    scores: npt.NDArray[np.float64],
    included: npt.NDArray[np.bool_],
    k_plus: int,
    k_minus: int,
    delta: float,
    confidence: float,
) -> str: ...
def one_run_bound(
    canaries: int, guesses: int, correct: int, delta: float, confidence: float
) -> float: ...

# mechanisms and statistics
def laplace(
    values: npt.NDArray[np.float64], sensitivity: float, epsilon: float, seed: Optional[int] = None
) -> Tuple[npt.NDArray[np.float64], str]: ...
def gaussian(
    values: npt.NDArray[np.float64],
    sensitivity: float,
    epsilon: float,
    delta: float,
    seed: Optional[int] = None,
) -> Tuple[npt.NDArray[np.float64], str]: ...
def discrete_laplace(
    values: npt.NDArray[np.int64], sensitivity: int, epsilon: float, seed: Optional[int] = None
) -> Tuple[npt.NDArray[np.int64], str]: ...
def discrete_gaussian(
    values: npt.NDArray[np.int64],
    sensitivity: int,
    epsilon: float,
    delta: float,
    seed: Optional[int] = None,
) -> Tuple[npt.NDArray[np.int64], str]: ...
def randomized_response(
    values: npt.NDArray[np.int64], epsilon: float, categories: int, seed: Optional[int] = None
) -> Tuple[npt.NDArray[np.int64], str]: ...
def statistic(
    kind: str,
    values: npt.NDArray[np.float64],
    epsilon: float,
    bounds: Optional[Tuple[float, float]] = None,
    bins: int = 10,
    delta: Optional[float] = None,
    seed: Optional[int] = None,
    ledger: Optional["Ledger"] = None,
    label: Optional[str] = None,
) -> str: ...

class Ledger:
    def __init__(
        self, path: str, budget: Optional[float] = None, budget_delta: Optional[float] = None
    ) -> None: ...
    def balance_json(self) -> str: ...
    def entries_json(self) -> str: ...
    def spend(self, label: str, event_json: str, epsilon: float, delta: float) -> str: ...

# learning
class TrainedModel:
    def predict_logits(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]: ...

def dpsgd_fit(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.int64],
    classes: int,
    ranges: List[Tuple[float, float]],
    overrides_json: str,
    seed: Optional[int] = None,
) -> Tuple[TrainedModel, str]: ...
def tune_fit(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.int64],
    classes: int,
    ranges: List[Tuple[float, float]],
    overrides_json: str,
    space_json: str,
    repetitions_json: str,
    validation_fraction: float,
    score_epsilon: Optional[float] = None,
    seed: Optional[int] = None,
) -> Tuple[Optional[TrainedModel], str]: ...
def label_dp_fit(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.int64],
    classes: int,
    ranges: List[Tuple[float, float]],
    mechanism: str,
    epsilon: float,
    overrides_json: str,
    stages: Optional[int] = None,
    seed: Optional[int] = None,
) -> Tuple[TrainedModel, str]: ...
def rr_with_prior(
    y: npt.NDArray[np.int64],
    priors: npt.NDArray[np.float64],
    epsilon: float,
    rule: str = "expected-accuracy",
    seed: Optional[int] = None,
) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], str]: ...
def kmeans_fit(
    x: npt.NDArray[np.float64],
    k: int,
    epsilon: Optional[float],
    ranges: List[Tuple[float, float]],
    iterations: Optional[int] = None,
    seed: Optional[int] = None,
) -> Tuple[npt.NDArray[np.float64], str]: ...
