"""ndvm: differentiate the evaluator, not the program.

One fixed, differentiable evaluator runs any program given as data over a batch of parameter
lanes and data lanes in one walk, and returns exact reverse-mode gradients.
"""

from ndvm.api import LaneArray as LaneArray
from ndvm.api import Program as Program
from ndvm.api import compile as compile  # noqa: A004
from ndvm.backends.inputs import const as const
from ndvm.calibrate import Calibration as Calibration
from ndvm.calibrate import calibrate as calibrate
from ndvm.calibrate.skeleton import SkeletonFit as SkeletonFit
from ndvm.calibrate.skeleton import fit_skeleton as fit_skeleton
from ndvm.errors import CompileError as CompileError
from ndvm.errors import FreeNameWarning as FreeNameWarning
from ndvm.errors import LimitExceeded as LimitExceeded
from ndvm.errors import MissingExtra as MissingExtra
from ndvm.errors import NdvmError as NdvmError
from ndvm.errors import ProgramError as ProgramError
from ndvm.errors import ReadError as ReadError
from ndvm.errors import ResultTooLarge as ResultTooLarge
from ndvm.errors import ShapeError as ShapeError
from ndvm.errors import UnsupportedForm as UnsupportedForm
from ndvm.eval.limits import Limits as Limits
from ndvm.lang.numpy_reader import from_numpy as from_numpy

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``ndvm.SymbolicRegressor``: the estimator of ``ndvm.search``, imported on first use (the
    search machinery is not loaded by ``import ndvm``)."""
    if name == "SymbolicRegressor":
        from ndvm.search.estimator import SymbolicRegressor

        return SymbolicRegressor
    raise AttributeError(f"module 'ndvm' has no attribute {name!r}")


__all__ = [
    "CompileError",
    "FreeNameWarning",
    "LaneArray",
    "LimitExceeded",
    "Limits",
    "MissingExtra",
    "NdvmError",
    "Program",
    "ProgramError",
    "ReadError",
    "ResultTooLarge",
    "ShapeError",
    "SkeletonFit",
    "SymbolicRegressor",
    "UnsupportedForm",
    "compile",
    "const",
    "fit_skeleton",
    "from_numpy",
]
