"""Type stubs of the compiled module (the Rust half of dpml), checked against the built module
by ``python -m mypy.stubtest dpml._native`` in CI."""

from os import PathLike
from typing import Any, Dict, List, Optional, Tuple, Union, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "Ledger",
    "SqlTable",
    "TrainedModel",
    "__version__",
    "alpha_grid",
    "audit_scores",
    "calibrate",
    "defaults",
    "delta",
    "discrete_gaussian",
    "discrete_laplace",
    "dpsgd_fit",
    "epsilon",
    "gaussian",
    "kmeans_fit",
    "label_dp_fit",
    "laplace",
    "lira",
    "one_run_audit",
    "one_run_bound",
    "pld_epsilon_bounds",
    "randomized_response",
    "rdp_epsilon_and_order",
    "rr_with_prior",
    "sql_explain",
    "sql_run",
    "statistic",
    "steps_for_epochs",
    "tradeoff",
    "tune_fit",
]

__version__: str

_Path = Union[str, PathLike[str]]

# accounting
def epsilon(event_json: str, delta: float, accountant: str) -> float: ...
def delta(event_json: str, epsilon: float, accountant: str) -> float: ...
def pld_epsilon_bounds(event_json: str, delta: float) -> Tuple[float, float]: ...
def calibrate(
    target_epsilon: float,
    delta: float,
    sampling_rate: float,
    steps: int,
    accountant: Optional[str] = None,
) -> str: ...
def rdp_epsilon_and_order(event_json: str, delta: float) -> Tuple[float, float]: ...
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
    values: npt.NDArray[np.float64],
    sensitivity: float,
    epsilon: float,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[npt.NDArray[np.float64], str]: ...
def gaussian(
    values: npt.NDArray[np.float64],
    sensitivity: float,
    epsilon: float,
    delta: float,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[npt.NDArray[np.float64], str]: ...
def discrete_laplace(
    values: npt.NDArray[np.int64],
    sensitivity: int,
    epsilon: float,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[npt.NDArray[np.int64], str]: ...
def discrete_gaussian(
    values: npt.NDArray[np.int64],
    sensitivity: int,
    epsilon: float,
    delta: float,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[npt.NDArray[np.int64], str]: ...
def randomized_response(
    values: npt.NDArray[np.int64],
    epsilon: float,
    categories: int,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[npt.NDArray[np.int64], str]: ...
def statistic(
    kind: str,
    values: npt.NDArray[np.float64],
    epsilon: float,
    bounds: Optional[Tuple[float, float]] = None,
    bins: int = 10,
    delta: Optional[float] = None,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
    label: Optional[str] = None,
) -> str: ...

@final
class Ledger:
    def __new__(
        cls,
        path: _Path,
        budget: Optional[float] = None,
        budget_delta: Optional[float] = None,
        key_file: Optional[_Path] = None,
        passphrase: Optional[str] = None,
    ) -> Ledger: ...
    def balance_json(self) -> str: ...
    def entries_json(self, over_time: bool = False) -> str: ...
    def spend(self, label: str, event_json: str, epsilon: float, delta: float) -> str: ...

# learning
@final
class TrainedModel:
    @property
    def n_features(self) -> int: ...
    @property
    def outputs(self) -> int: ...
    def predict_logits(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]: ...
    def facts_json(self) -> str: ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(bytes: bytes) -> TrainedModel: ...
    def save(self, path: _Path) -> None: ...
    @staticmethod
    def load(path: _Path) -> TrainedModel: ...

def dpsgd_fit(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.int64],
    classes: List[str],
    bounds: Optional[List[Tuple[float, float]]],
    recipe: Dict[str, Any],
    *,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[TrainedModel, str, str]: ...
def tune_fit(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.int64],
    classes: List[str],
    bounds: Optional[List[Tuple[float, float]]],
    recipe: Dict[str, Any],
    space_json: str,
    repetitions_json: str,
    *,
    validation_fraction: Optional[float] = None,
    score_epsilon: Optional[float] = None,
    release_trials: bool = False,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[Optional[TrainedModel], str, str]: ...
def label_dp_fit(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.int64],
    classes: List[str],
    bounds: Optional[List[Tuple[float, float]]],
    *,
    mechanism: Optional[str] = None,
    epsilon: Optional[float] = None,
    stages: Optional[int] = None,
    top_k_rule: Optional[str] = None,
    hidden: Optional[List[int]] = None,
    epochs: Optional[float] = None,
    batch_size: Optional[int] = None,
    learning_rate: Optional[float] = None,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[TrainedModel, str, str]: ...
def rr_with_prior(
    y: npt.NDArray[np.int64],
    priors: npt.NDArray[np.float64],
    epsilon: float,
    rule: Optional[str] = None,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], str]: ...
def kmeans_fit(
    x: npt.NDArray[np.float64],
    k: int,
    bounds: List[Tuple[float, float]],
    *,
    algorithm: Optional[str] = None,
    epsilon: Optional[float] = None,
    delta: Optional[float] = None,
    iterations: Optional[int] = None,
    seed: Optional[int] = None,
    ledger: Optional[Ledger] = None,
) -> Tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], str]: ...
def defaults() -> str: ...

# sql
@final
class SqlTable:
    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object: ...

def sql_run(
    query: str,
    tables: List[Tuple[str, str]],
    schema: str,
    epsilon: float,
    delta: float = 0.0,
    weights: Optional[Dict[str, float]] = None,
    ledger: Optional[Ledger] = None,
    seed: Optional[int] = None,
    memory_limit: Optional[str] = None,
    cluster: Optional[str] = None,
) -> Tuple[SqlTable, str]: ...
def sql_explain(
    query: str,
    tables: List[Tuple[str, str]],
    schema: str,
    epsilon: float,
    delta: float = 0.0,
    weights: Optional[Dict[str, float]] = None,
    memory_limit: Optional[str] = None,
    cluster: Optional[str] = None,
) -> str: ...
