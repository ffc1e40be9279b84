"""Task ``enso-lim``: a 611-parameter linear inverse model fitted by Kalman likelihood.

statsmodels' ``elnino`` data (monthly Niño 1+2 SST, 1950-2010, 732 values): anomalies from the
monthly climatology, standardized; a D-dimensional delay embedding y_t = (z_t, ..., z_{t-D+1})
is the observed state. Model: x_{t+1} = F x_t + w, w ~ N(0, L L^T); y_t = x_t + v,
v ~ N(0, r I). Parameters: F (D*D, dense), the lower-triangular L (D(D+1)/2) and r
(positive): 400 + 210 + 1 = 611 for D = 20. Fitted on the first 60 % of months by the
program's own negative log-likelihood (loss "value"); scored by held-out one-step and
6-month-lead forecast correlation of z. Success means the fit learned dynamics: an NLL below
the best model without any (the zero-mean Gaussian of the training rows' covariance,
``static_nll``: 4398.2 for D = 20) and a 6-month-lead correlation above persistence's
(z_{t-6} as the forecast of z_t: 0.354) by ``MARGIN``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from ndvm.backends.inputs import const
from ndvm.tasks.base import CalibSpec, Task, TaskData

D_DEFAULT = 20
LEAD = 6
MARGIN = 0.02  # success: corr_6 > persistence_6 + MARGIN


def param_names(D: int = D_DEFAULT) -> tuple[list[str], list[str]]:
    """Names of F's entries (row-major) and of L's lower triangle (row-major)."""
    f = [f"f{i}_{j}" for i in range(D) for j in range(D)]
    lt = [f"l{i}_{j}" for i in range(D) for j in range(i + 1)]
    return f, lt


def program_source(D: int = D_DEFAULT) -> str:
    """The Kalman NLL program over the observation matrix ``Y`` ([T, D]) with 611 params."""
    f, _ = param_names(D)
    header = ["(params"]
    for i in range(D):
        header.append(" ".join(f"(f{i}_{j} {0.5 if i == j else 0.0})" for j in range(D)))
    for i in range(D):
        header.append(" ".join(f"(l{i}_{j} {0.3 if i == j else 0.0})" for j in range(i + 1)))
    header.append("(r 0.5 positive))")
    f_rows = " ".join("(vec " + " ".join(f"f{i}_{j}" for j in range(D)) + ")" for i in range(D))
    l_rows = " ".join(
        "(vec " + " ".join(f"l{i}_{j}" if j <= i else "0" for j in range(D)) + ")" for i in range(D)
    )
    body = f"""
(define F (mat {f_rows}))
(define L (mat {l_rows}))
(define Q (+ (matmul L (transpose L)) (* (eye {D}) 1e-6)))
(define R (* (eye {D}) r))
(define T (rows Y))
(let loop ((t 0) (m (zeros {D})) (P (eye {D})) (nll 0))
  (if (= t T)
      nll
      (let* ((mp (matvec F m))
             (Pp (+ (matmul F (matmul P (transpose F))) Q))
             (v (- (ref Y t) mp))
             (S (+ Pp R))
             (Si (inv S))
             (K (matmul Pp Si))
             (step (* 0.5 (+ (logdet S) (dot v (matvec Si v)) {D * 1.8378770664093453!r}))))
        (loop (+ t 1) (+ mp (matvec K v)) (- Pp (matmul K Pp)) (+ nll step)))))
"""
    del f
    return "\n".join(header) + body


@cache
def series() -> np.ndarray:
    """Standardized monthly anomalies of Niño 1+2 SST (732 values, 1950-2010)."""
    import statsmodels.api as sm

    df = sm.datasets.elnino.load_pandas().data
    sst = df.iloc[:, 1:13].to_numpy(dtype=np.float64)  # [years, 12]
    anom = sst - sst.mean(axis=0, keepdims=True)
    z = anom.reshape(-1)
    return (z - z.mean()) / z.std()


def embed(z: np.ndarray, D: int) -> np.ndarray:
    """Rows y_t = (z_t, z_{t-1}, ..., z_{t-D+1}) for t = D-1 .. len(z)-1."""
    return np.stack([z[D - 1 - j : len(z) - j] for j in range(D)], axis=1)


def build(D: int = D_DEFAULT, months: int | None = None, train_frac: float = 0.6) -> TaskData:
    z = series()
    Y = embed(z, D)
    n_train = int(round(train_frac * len(z))) - (D - 1)
    if months is not None:
        n_train = min(n_train, months)
    return TaskData(
        {"Y": const(Y[:n_train])},
        None,
        meta={"Y": Y, "n_train": n_train, "D": D, "z": z},
    )


def unpack(values: np.ndarray, D: int = D_DEFAULT) -> tuple[np.ndarray, np.ndarray, float]:
    """(F, Q, r) from the 611 constrained parameter values in program order."""
    nF, nL = D * D, D * (D + 1) // 2
    F = np.asarray(values[:nF]).reshape(D, D)
    L = np.zeros((D, D))
    L[np.tril_indices(D)] = values[nF : nF + nL]
    return F, L @ L.T + 1e-6 * np.eye(D), float(values[nF + nL])


def forecast_corr(F: np.ndarray, Q: np.ndarray, r: float, Y: np.ndarray, start: int) -> dict:
    """Run the filter over all of ``Y``; correlate forecasts of z (component 0) after ``start``.

    Returns one-step and ``LEAD``-month-lead correlations over the held-out months.
    """
    D = Y.shape[1]
    m, P = np.zeros(D), np.eye(D)
    R = r * np.eye(D)
    one, lead = [], []
    filt = []
    for t in range(Y.shape[0]):
        mp, Pp = F @ m, F @ P @ F.T + Q
        one.append(mp[0])
        S = Pp + R
        K = Pp @ np.linalg.inv(S)
        m, P = mp + K @ (Y[t] - mp), Pp - K @ Pp
        filt.append(m)
    Fl = np.linalg.matrix_power(F, LEAD)
    lead = [(Fl @ filt[t])[0] for t in range(Y.shape[0] - LEAD)]
    z = Y[:, 0]
    c1 = np.corrcoef(np.asarray(one)[start:], z[start:])[0, 1]
    cl = np.corrcoef(np.asarray(lead)[start - LEAD :], z[start:])[0, 1]
    return {"corr_1": float(c1), f"corr_{LEAD}": float(cl)}


def persistence(z: np.ndarray, start: int, lead: int) -> float:
    """Held-out correlation of persistence (z_{t-lead} forecasts z_t) over months >= start."""
    return float(np.corrcoef(z[start - lead : len(z) - lead], z[start:])[0, 1])


def static_nll(Y: np.ndarray) -> float:
    """The NLL of the best model without dynamics: rows y_t i.i.d. N(0, C), C their second
    moment (the program's likelihood at F = 0, L L^T + r I = C)."""
    n, D = Y.shape
    _, logdet = np.linalg.slogdet(Y.T @ Y / n)
    return float(0.5 * n * (logdet + D + D * np.log(2.0 * np.pi)))


def score(cal: Any, data: TaskData) -> dict[str, float]:
    """The fit's NLL and held-out forecast correlations (``corr_1``, ``corr_6``), with the
    references success compares them to: ``static_nll`` and ``persistence_1`` / ``_6``."""
    D, n = int(data.meta["D"]), int(data.meta["n_train"])
    Y = data.meta["Y"]
    vals = np.array([cal.params[k] for k in cal.program.params])
    F, Q, r = unpack(vals, D)
    out = {"nll": float(cal.loss), **forecast_corr(F, Q, r, Y, n)}
    out["static_nll"] = static_nll(Y[:n])
    for lead in (1, LEAD):
        out[f"persistence_{lead}"] = persistence(Y[:, 0], n, lead)
    return out


def success(m: Any) -> bool:
    """An NLL below ``static_nll`` and a 6-month-lead correlation above persistence's by
    ``MARGIN`` (docs/tasks.md: the untrained LIM, a fit that never moved and persistence
    itself are not successes)."""
    keys = ("nll", "static_nll", f"corr_{LEAD}", f"persistence_{LEAD}")
    nll, floor, lead, persist = (float(m.get(k, np.nan)) for k in keys)
    if not np.isfinite([nll, floor, lead, persist]).all():
        return False
    return bool(nll < floor and lead > persist + MARGIN)


TASK = Task(
    name="enso-lim",
    description=__doc__.splitlines()[0],
    inputs=("Y",),
    build_data=build,
    calib=CalibSpec(loss="value", steps=100, lr=0.02, optimizer="adam", init_scale=None),
    score=score,
    success=success,
    program=program_source(),
)
