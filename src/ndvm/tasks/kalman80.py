"""Task ``kalman-80``: 2-D local-level Kalman filter NLL over an 80x2 standard-normal Y.

Y from default_rng(0); q, r start at 0.30 (positive constraint); Adam lr 0.08, 30 steps of the
program's own NLL (loss "value"). Reported: NLL trajectory, final (NLL, q, r).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ndvm.backends.inputs import const
from ndvm.tasks.base import CalibSpec, Task, TaskData

PROGRAM = """\
; Negative log-likelihood of a 2-D local-level Kalman filter over an 80x2 observation matrix Y.
; Process noise q^2 I, observation noise r^2 I; state starts at 0 with covariance I.
(params (q 0.3 positive) (r 0.3 positive))
(define Q (* (eye 2) (* q q)))
(define R (* (eye 2) (* r r)))
(define T (rows Y))
(let loop ((t 0) (m (zeros 2)) (P (eye 2)) (nll 0))
  (if (= t T)
      nll
      (let* ((Pp (+ P Q))
             (y (ref Y t))
             (v (- y m))
             (S (+ Pp R))
             (Si (inv S))
             (K (matmul Pp Si))
             (m2 (+ m (matvec K v)))
             (P2 (- Pp (matmul K Pp)))
             (step (* 0.5 (+ (logdet S) (dot v (matvec Si v)) (* 2 1.8378770664093453)))))
        (loop (+ t 1) m2 P2 (+ nll step)))))
"""


def build() -> TaskData:
    Y = np.random.default_rng(0).standard_normal((80, 2))
    return TaskData({"Y": const(Y)}, None, meta={"Y": Y})


def score(cal: Any, data: TaskData) -> dict[str, float]:
    h = cal.history[:, cal.best]
    return {"nll": cal.loss, "nll0": float(h[0]), "q": cal.params["q"], "r": cal.params["r"]}


TASK = Task(
    name="kalman-80",
    description=__doc__.splitlines()[0],
    inputs=("Y",),
    build_data=build,
    calib=CalibSpec(loss="value", steps=30, lr=0.08, optimizer="adam", init_scale=None),
    score=score,
    success=lambda m: bool(np.isfinite(m["nll"]) and m["nll"] < m["nll0"]),
    program=PROGRAM,
)
