"""Calibration: fit program parameters from many starts as lanes (``ndvm.calibrate``).

``ndvm.calibrate`` is both this package and, as an attribute of ``ndvm``, the ``calibrate``
function. So that every documented spelling works either way, the function carries this
package's public names and submodules as attributes: ``ndvm.calibrate.GaussianNLL``,
``ndvm.calibrate.optim.Adam`` and ``import ndvm.calibrate.optim`` all name the same objects as
``from ndvm.calibrate import GaussianNLL``.
"""

from ndvm.calibrate import api as api
from ndvm.calibrate import losses as losses
from ndvm.calibrate import native as native
from ndvm.calibrate import objective as objective
from ndvm.calibrate import optim as optim
from ndvm.calibrate import plot as plot
from ndvm.calibrate import result as result
from ndvm.calibrate import uncertainty as uncertainty
from ndvm.calibrate.api import Calibration as Calibration
from ndvm.calibrate.api import Plan as Plan
from ndvm.calibrate.api import calibrate as calibrate
from ndvm.calibrate.api import plan as plan
from ndvm.calibrate.losses import MSE as MSE
from ndvm.calibrate.losses import GaussianNLL as GaussianNLL
from ndvm.calibrate.losses import Value as Value
from ndvm.calibrate.optim import LBFGS as LBFGS
from ndvm.calibrate.optim import Adam as Adam
from ndvm.calibrate.optim import Chain as Chain
from ndvm.calibrate.optim import EarlyStop as EarlyStop
from ndvm.calibrate.result import ConvergenceWarning as ConvergenceWarning

__all__ = [
    "LBFGS",
    "MSE",
    "Adam",
    "Calibration",
    "Chain",
    "ConvergenceWarning",
    "EarlyStop",
    "GaussianNLL",
    "Plan",
    "Value",
    "calibrate",
    "plan",
]

SUBMODULES = ("api", "losses", "native", "objective", "optim", "plot", "result", "uncertainty")

for _name in (*__all__, *SUBMODULES):
    setattr(calibrate, _name, globals()[_name])
del _name
