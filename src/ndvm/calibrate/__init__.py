"""Calibration: fit program parameters from many starts as lanes (``ndvm.calibrate``)."""

from ndvm.calibrate.api import Calibration as Calibration
from ndvm.calibrate.api import calibrate as calibrate
from ndvm.calibrate.losses import MSE as MSE
from ndvm.calibrate.losses import GaussianNLL as GaussianNLL
from ndvm.calibrate.losses import Value as Value
from ndvm.calibrate.optim import LBFGS as LBFGS
from ndvm.calibrate.optim import Adam as Adam
from ndvm.calibrate.optim import Chain as Chain
from ndvm.calibrate.optim import EarlyStop as EarlyStop

__all__ = [
    "LBFGS",
    "MSE",
    "Adam",
    "Calibration",
    "Chain",
    "EarlyStop",
    "GaussianNLL",
    "Value",
    "calibrate",
]
