"""Arguments checked rather than converted silently: ``int(1.9)`` is 1, and a discrete
mechanism's sensitivity of 1.9 taken as 1 would add half the noise its release needs; a
complex value converted to float keeps its real part, with only a warning."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np


def whole(value: Any, name: str) -> int:
    """``value`` as an ``int`` when it is a whole number (an integer, or a float such as 2.0).

    Raises
    ------
    ValueError
        Naming ``name`` for anything else: 1.9, NaN, a text, a boolean.
    """
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        as_float = float(value)
        if as_float.is_integer():
            return int(as_float)
    raise ValueError(f"{name} must be a whole number, got {value!r}")


def count(value: Any, name: str) -> int:
    """``value`` as a whole number the core's unsigned 64-bit counts can hold (past them the
    native call fails with an unclear TypeError or OverflowError).

    Raises
    ------
    ValueError
        Naming ``name`` for anything :func:`whole` refuses, or outside [0, 2**64).
    """
    n = whole(value, name)
    if not 0 <= n < 2**64:
        raise ValueError(f"{name} must be in [0, 2**64), got {n}")
    return n


def number(value: Any, name: str) -> float:
    """``value`` as a ``float`` when it is a real number (``float("1")`` would take a text, and
    ``float(True)`` a boolean, for the number the caller meant to write).

    Raises
    ------
    ValueError
        Naming ``name`` for anything else: a text, a boolean, a complex number, None.
    """
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    raise ValueError(f"{name} must be a real number, got {value!r}")


def real(values: Any, name: str) -> np.ndarray:
    """``values`` as an array, refusing complex numbers (a float conversion would drop their
    imaginary parts).

    Raises
    ------
    ValueError
        Naming ``name`` when the values are complex.
    """
    arr = np.asarray(values)
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} must hold real numbers, got complex ones")
    return arr


def text(value: Any, name: str) -> str:
    """``value`` when it is a text (the native call would refuse anything else with a
    TypeError that does not name the argument).

    Raises
    ------
    ValueError
        Naming ``name`` for anything but a ``str``: a number, bytes, None.
    """
    if isinstance(value, str):
        return value
    raise ValueError(f"{name} must be a text (str), got {value!r}")


def shown(value: Any) -> str:
    """``value`` as an error message shows it: its repr when that is one short line, else its
    type (a table's or a large array's repr spans many lines)."""
    r = repr(value)
    return r if "\n" not in r and len(r) <= 80 else f"an object of type {type(value).__qualname__}"


def seed(value: Any, name: str = "seed") -> Any:
    """``value`` as a seed: None (the operating system's entropy) or a :func:`count`.

    Raises
    ------
    ValueError
        Naming ``name`` for anything :func:`count` refuses (-1, 1.5, a ``RandomState``).
    """
    return None if value is None else count(value, name)
