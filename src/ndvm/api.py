"""Public API: ``compile`` a program once, then evaluate it over lanes with gradients.

Parameters are passed as an unconstrained vector ``theta`` (``[P]`` or ``[B, P]``): a
parameter declared ``positive``/``unit``/``signed-unit`` sees softplus/sigmoid/tanh of its
theta entry, and gradients are with respect to theta. ``Program.init_theta()`` gives the
theta of the declared initial values; ``constrain``/``unconstrain`` convert.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from ndvm.backends import registry
from ndvm.backends.base import STATUS_ERROR, RunResult
from ndvm.backends.inputs import F64, as_inputs, real_array
from ndvm.errors import BackendUnsupported, FreeNameWarning, NdvmError
from ndvm.eval.limits import Limits
from ndvm.frozen import frozen
from ndvm.lang.front import compile_source, skeleton_of
from ndvm.lang.ir import CompiledProgram, ParamSpec, ParamSpecs
from ndvm.lang.suggest import did_you_mean
from ndvm.prims import CONSTANTS, constraints
from ndvm.values import show

DIALECTS = (None, "dmci")
DTYPES = ("float64", "float32")
_DEFAULT_LIMITS = Limits()
# (one theta, data lanes) -> the index of a [B, Ng, ...] result dropping B and/or Ng
_LANE_INDEX = {(True, True): 0, (True, False): (0, 0), (False, True): None,
               (False, False): (slice(None), 0)}  # fmt: skip


class LaneArray(np.ndarray):
    """A NumPy array of per-lane results with ``status`` and ``errors`` attached.

    status: int8 codes of the same lane shape (0 ok, 1 non-finite, 2 error);
    errors: list of ``(lane_mask, NdvmError)``.
    """

    status: np.ndarray | None
    errors: list[tuple[np.ndarray, NdvmError]]

    def __array_finalize__(self, obj: Any) -> None:
        self.status = getattr(obj, "status", None)
        self.errors = getattr(obj, "errors", [])

    def __repr__(self) -> str:
        if self.dtype != object:
            return super().__repr__()
        return f"LaneArray({show(self.tolist())}, dtype=object)"

    def __str__(self) -> str:
        return super().__str__() if self.dtype != object else show(self.tolist())

    @property
    def ok(self) -> bool:
        return self.status is None or not bool((self.status != 0).any())


def _backend(name: str | None) -> Any:
    return registry.get(name)


@frozen
class Program:
    """A compiled program bound to a backend. Immutable; safe to share across threads."""

    compiled: CompiledProgram
    backend: str
    dtype: str = "float64"
    dialect: str | None = None
    limits: Limits = Limits()
    strict: bool | None = None
    replay: bool = True

    # -- names -------------------------------------------------------------------------
    @property
    def params(self) -> tuple[str, ...]:
        specs = self.compiled.params
        kept = specs.__dict__ if type(specs) is ParamSpecs else {}  # names kept with the specs
        if (names := kept.get("names")) is None:
            names = kept["names"] = tuple(s.name for s in specs)
        return names  # type: ignore[no-any-return]

    @property
    def param_specs(self) -> tuple[ParamSpec, ...]:
        return self.compiled.params

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.compiled.inputs

    @property
    def skeleton(self) -> str:
        """Structure string: parameters -> ``P``, numeric literals -> ``C`` (dedupe key)."""
        return skeleton_of(self.compiled)

    @property
    def source(self) -> str:
        return self.compiled.source

    def with_options(self, **changes: Any) -> Program:
        """A copy with other ``backend``/``dtype``/``dialect``/``limits``/``strict``/``replay``;
        a new dialect recompiles the source (the dmci dialect's ``let`` is sequential)."""
        dialect = changes.get("dialect", self.dialect)
        if dialect not in DIALECTS:
            raise NdvmError(f"dialect must be one of {DIALECTS}, got {dialect!r}")
        if dialect != self.compiled.dialect:
            c = self.compiled
            limits = changes.get("limits", self.limits)
            # a program whose source is a host text (ndvm.meta) keeps how to recompile it
            recompile = c.derived.get("recompile")
            if recompile is not None:
                compiled = recompile(limits, dialect)
            else:
                compiled = compile_source(c.source, c.params, c.inputs, limits, dialect)
            changes = {**changes, "compiled": compiled}
        return Program(**{**vars(self), **changes})

    # -- parameter spaces --------------------------------------------------------------
    def init_theta(self) -> np.ndarray:
        """Unconstrained theta ``[P]`` of the declared initial values."""
        specs = self.compiled.params
        memo = specs.__dict__ if type(specs) is ParamSpecs else {}  # kept with the specs
        theta = memo.get("init_theta")
        if theta is None:
            theta = memo["init_theta"] = constraints.init_theta(specs)
            theta.flags.writeable = False
        return theta.copy()

    def constrain(self, theta: Any) -> np.ndarray:
        """Parameter values the program sees for unconstrained ``theta`` (``[P]``/``[B, P]``)."""
        return constraints.constrain(self.compiled.params, theta)

    def constrain_jacobian(self, theta: Any) -> np.ndarray:
        """d value / d theta per parameter (diagonal), to turn theta-gradients into value ones."""
        return constraints.constrain_jacobian(self.compiled.params, theta)

    def unconstrain(self, values: Any) -> np.ndarray:
        """Inverse of ``constrain``; raises ValueError for values outside a constraint."""
        return constraints.unconstrain(self.compiled.params, values)

    # -- evaluation --------------------------------------------------------------------
    def evaluate(
        self,
        theta: Any = None,
        inputs: Mapping[str, Any] | None = None,
        *,
        grad: bool = False,
        cotangent: Any = None,
    ) -> RunResult:
        """Full-control evaluation: the raw ``RunResult`` on the lane grid."""
        th, _ = self._theta(theta)
        ct = None if cotangent is None else np.asarray(cotangent, dtype=np.float64)
        result = _backend(self.backend).run(
            self.compiled,
            th,
            as_inputs(inputs, self.inputs),
            grad=grad,
            cotangent=ct,
            limits=self.limits,
            dialect=self.dialect,
            dtype=self.dtype,
            replay=self.replay,
        )
        self._raise_if_strict(result)
        return result

    def eval(
        self, theta: Any = None, inputs: Mapping[str, Any] | None = None, /, **named: Any
    ) -> LaneArray:
        """Values: ``[B]``, ``[B, N]`` (data lanes), ``[...,*struct]``; no B axis for 1-D theta.

        Inputs by name: a mapping as the second argument, keywords, or both. ``theta`` and
        ``inputs`` are positional-only, so an input may be named ``theta`` or ``inputs``.
        """
        th, single = self._theta(theta)
        inputs = merge_inputs(inputs, named, self.compiled.inputs)
        result = _backend(self.backend).run(
            self.compiled,
            th,
            inputs,
            grad=False,
            cotangent=None,
            limits=self.limits,
            dialect=self.dialect,
            dtype=self.dtype,
            replay=self.replay,
        )
        self._raise_if_strict(result)
        return self._shape(result, single)

    def value_and_grad(
        self,
        theta: Any = None,
        cotangent: Any = None,
        inputs: Mapping[str, Any] | None = None,
        /,
        **named: Any,
    ) -> tuple[LaneArray, np.ndarray]:
        """Values and the gradient of ``sum(cotangent * value)`` w.r.t. theta (theta's shape).

        Inputs as in ``eval``. ``cotangent`` may also be given as a keyword when the program has
        no input of that name.
        """
        th, single = self._theta(theta)
        if "cotangent" in named and "cotangent" not in self.compiled.inputs:
            if cotangent is not None:
                raise NdvmError("value_and_grad: cotangent given twice")
            cotangent = named.pop("cotangent")
        inputs = merge_inputs(inputs, named, self.compiled.inputs)
        ct = None
        if cotangent is not None:
            ct = real_array(cotangent, lambda why: NdvmError(f"cotangent {why}"))
        result = _backend(self.backend).run(
            self.compiled,
            th,
            inputs,
            grad=True,
            cotangent=None if ct is None else self._cotangent_grid(ct, single, inputs),
            limits=self.limits,
            dialect=self.dialect,
            dtype=self.dtype,
            replay=self.replay,
        )
        self._raise_if_strict(result)
        grad = result.grad
        assert grad is not None
        if self.dtype == "float32":
            grad = grad.astype(np.float32)
        return self._shape(result, single), (grad[0] if single else grad)

    def jacobian(
        self, theta: Any = None, inputs: Mapping[str, Any] | None = None, /, **named: Any
    ) -> np.ndarray:
        """d value / d theta per lane, in the unconstrained space of ``value_and_grad``.

        Shape ``[B, N, *struct, P]`` for ``[B, P]`` theta with N data lanes; the N axis is
        absent without data lanes and the B axis for a ``[P]`` theta (a scalar program over N
        data points at one theta gives ``[N, P]``). Summed over the data lanes (and
        elements), it is ``value_and_grad``'s gradient. For d value / d(the value a
        constrained parameter sees), divide by ``constrain_jacobian(theta)``. A parameter
        lane where some data lane fails is NaN. Cost: one reverse pass per output element
        (N * elements), batched as parameter lanes.
        """
        th, single = self._theta(theta)
        inputs = merge_inputs(inputs, named, self.compiled.inputs)
        run = _backend(self.backend).run
        opts = {"limits": self.limits, "dialect": self.dialect, "replay": self.replay}
        first = run(self.compiled, th, inputs, grad=False, cotangent=None, **opts)
        self._raise_if_strict(first)
        if not first.numeric:
            raise NdvmError("jacobian needs a numeric result (a number, vector or matrix)")
        B, P = th.shape
        out_shape = first.value.shape[1:]  # (Ng, *struct)
        K = int(np.prod(out_shape))
        jac = np.empty((B, K, P))
        chunk = max(1, min(K, (1 << 22) // max(1, B * K)))
        for start in range(0, K, chunk):
            ks = np.arange(start, min(start + chunk, K))
            c = ks.size
            ct = np.zeros((B * c, K))
            ct[np.arange(B * c), np.tile(ks, B)] = 1.0
            result = run(self.compiled, np.repeat(th, c, axis=0), inputs, grad=True,
                         cotangent=ct.reshape((B * c, *out_shape)), **opts)  # fmt: skip
            assert result.grad is not None
            jac[:, ks, :] = result.grad.reshape(B, c, P)
        jac = jac.reshape((B, *out_shape, P))
        if not first.data_lanes:
            jac = jac[:, 0]
        return jac[0] if single else jac

    # -- helpers ------------------------------------------------------------------------
    def _theta(self, theta: Any) -> tuple[np.ndarray, bool]:
        P = len(self.compiled.params)
        if theta is None:
            theta = self.init_theta()
        if type(theta) is np.ndarray and theta.dtype is F64:
            th = theta  # what real_array returns for it
        else:
            th = real_array(theta, lambda why: NdvmError(f"theta {why}: a numeric [{P}] or "
                                                         f"[B, {P}] array is needed"))  # fmt: skip
        single = th.ndim <= 1
        th = th.reshape(1, -1) if single else th
        if th.ndim != 2 or th.shape[1] != P:
            raise NdvmError(
                f"theta must have shape [{P}] or [B, {P}] for parameters "
                f"{list(self.params)}, got {np.shape(theta)}"
            )
        if th.shape[0] == 0:
            raise NdvmError("theta has zero lanes")
        return th, single

    def _cotangent_grid(self, ct: np.ndarray, single: bool, inputs: Mapping[str, Any]) -> Any:
        if single:
            ct = ct[None]
        data = any(np.ndim(v) == 1 and not hasattr(v, "array") for v in inputs.values())
        if not data and ct.ndim >= 1:
            ct = ct[:, None]
        return ct

    def _raise_if_strict(self, result: RunResult) -> None:
        if not result.errors:
            return
        if self.strict or (self.strict is None and bool((result.status == STATUS_ERROR).all())):
            raise result.errors[0][1]

    def _shape(self, result: RunResult, single: bool) -> LaneArray:
        value, status = result.value, result.status
        at = _LANE_INDEX[single, bool(result.data_lanes)]
        if at is not None:
            value = value[at]
            status = status[at]
        if result.numeric and self.dtype == "float32":
            value = np.asarray(value, dtype=np.float32)
        if not result.numeric and single:  # one structural value (maybe a ragged list)
            cell = np.empty((), dtype=object)
            cell[()] = value
            value = cell
        out = (value if type(value) is np.ndarray else np.asarray(value)).view(LaneArray)
        out.status = np.asarray(status)
        out.errors = result.errors
        return out


def merge_inputs(
    inputs: Any, named: Mapping[str, Any], names: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """One dict of inputs from a mapping (or a pandas DataFrame: one input per column, only
    the columns in ``names`` when given) and keywords (a name in both is an error)."""
    if inputs is None:
        return dict(named)
    if not isinstance(inputs, Mapping):
        if type(inputs).__name__ != "DataFrame":
            raise NdvmError(
                f"inputs must be a mapping of input names to values, got {type(inputs).__name__}"
            )
        inputs = as_inputs(inputs, names)
    both = sorted(set(inputs) & set(named))
    if both:
        raise NdvmError(f"input(s) {both} given both in the mapping and as keywords")
    return {**inputs, **named}


def compile(  # noqa: A001 - the public name is part of the contract
    source: str,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
    inputs: Sequence[str] = (),
    *,
    backend: str | None = None,
    dtype: str = "float64",
    dialect: str | None = None,
    limits: Limits | None = None,
    strict: bool | None = None,
    replay: bool = True,
    free_params: bool | None = None,
) -> Program:
    """Compile ``source`` once; evaluate it many times over lanes.

    Args:
        source: program text (docs/language.md).
        params: parameter names (or ``(name, init[, constraint])`` specs / a mapping); None
            means the ``params`` header if present, else every free variable that is not an
            input or a named constant (``pi``), in order of first appearance (see
            ``free_params``).
        inputs: names of data inputs bound at evaluation time.
        backend: "reference", "native" (the native core's tree walker) or "vm" (its bytecode VM)
            (None: the default backend).
        dtype: "float64" or "float32" (the native backend computes in float32, within the
            tolerances of docs/native.md; the reference backend computes in float64 and casts).
        dialect: None or "dmci": the published reference system's semantics (protected
            sqrt/log, sequential let, its modulo/remainder, normalize with a norm floor;
            docs/language.md).
        limits: limits of compilation (source size, forms) and of every evaluation (steps,
            heap cells, depth, deadline).
        strict: True raises on any failing lane; False never raises for lane errors;
            None (default) raises only when every lane failed.
        replay: the native backend replays the numeric trace of the last evaluation when the
            next one has the same inputs and its guards (branch outcomes, indices read from
            parameter-dependent values) hold; results are bitwise those of a full walk
            (docs/native.md, "Trace replay"). False walks every evaluation.
        free_params: what free names become without a ``params`` header or ``params=``:
            None (default) parameters, with a ``FreeNameWarning`` naming them; True
            parameters, silently; False a ``CompileError`` at the first one, with a "did
            you mean" (an input, a constant or a primitive of a close name).
    """
    if dtype not in DTYPES:
        raise NdvmError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if dialect not in DIALECTS:
        raise NdvmError(f"dialect must be one of {DIALECTS}, got {dialect!r}")
    if isinstance(inputs, str):
        inputs = (inputs,)
    limits = limits or _DEFAULT_LIMITS
    compiled = compile_source(source, params, tuple(inputs), limits, dialect)
    # free_names_guessed(compiled, params), inline: this is the path of every compile
    if params is None and not compiled.has_header and compiled.params and not free_params:
        if free_params is False:
            compile_source(source, (), tuple(inputs), limits, dialect)  # raises, positioned
        # free_name_message(compiled), kept with the specs per inputs
        specs = compiled.params
        memo = specs.__dict__ if type(specs) is ParamSpecs else {}
        message = memo.get(compiled.inputs)
        if message is None:
            message = memo[compiled.inputs] = free_name_message(compiled)
        warnings.warn(message, FreeNameWarning, 2)  # stacklevel 2: the caller's line
    impl = registry.INSTANCES.get(backend) if backend is not None else None
    if impl is not None and (prepare := getattr(impl, "prepare", None)) is not None:
        prepare(compiled)  # a named backend already built (_choose_backend's first case, inline)
    name = impl.name if impl is not None else _choose_backend(backend, compiled)
    return Program(compiled, name, dtype, dialect, limits, strict, replay)


def free_names_guessed(compiled: CompiledProgram, params: Any) -> bool:
    """Whether the parameters of ``compiled`` are its free names (no header, no ``params``)."""
    return params is None and not compiled.has_header and bool(compiled.params)


def free_name_message(compiled: CompiledProgram, names: Sequence[str] | None = None) -> str:
    """One line naming the free names taken as parameters (``names``: those of them to name),
    with a "did you mean" for the ones close to an input or a named constant."""
    if names is None:
        specs = compiled.params
        return _free_params_message(
            specs if isinstance(specs, tuple) else tuple(specs), tuple(compiled.inputs)
        )
    return _free_name_message(tuple(names), tuple(compiled.inputs))


@lru_cache(maxsize=1024)
def _free_params_message(specs: tuple[ParamSpec, ...], inputs: tuple[str, ...]) -> str:
    """``free_name_message`` naming every parameter (kept per specs: they hash once)."""
    return _free_name_message(tuple(s.name for s in specs), inputs)


# conventional parameter names (Greek letters): no "did you mean" for them (phi is not pi)
CONVENTIONAL = frozenset(
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron rho "
    "sigma tau upsilon phi chi psi omega".split()
)


@lru_cache(maxsize=1024)
def _free_name_message(names: tuple[str, ...], inputs: tuple[str, ...]) -> str:
    """``free_name_message`` of these names and inputs (kept: the "did you mean" search costs
    several times a whole compilation, and a program's variants share their free names)."""
    known = [*inputs, *CONSTANTS]
    hints = [
        f"{n}: {h}" for n in names if n not in CONVENTIONAL and (h := did_you_mean(n, known))
    ]
    return (
        f"free name(s) {', '.join(names)} taken as parameters (no params header or params=)"
        + (f" ({'; '.join(hints)})" if hints else "")
        + "; declare them in a (params ...) header (API: params=, or free_params=True to "
        "accept free names silently, False to reject them)"
    )


def _choose_backend(name: str | None, compiled: CompiledProgram) -> str:
    """The named backend, or the first available one that supports the program.

    A backend may define ``prepare(compiled)``; it raises ``BackendUnsupported`` for a program
    it cannot run. An explicitly named backend raises that error; auto-selection moves on.
    """
    names = None
    if name is None:  # auto-selection: the default backend first (the path of most compiles)
        names = registry.available()
        name = names[0]
    impl = registry.INSTANCES.get(name) or registry.get(name)  # (a built one: no call)
    prepare = getattr(impl, "prepare", None)
    if prepare is None:
        return impl.name  # type: ignore[no-any-return]
    if names is None:  # one backend: its error is the caller's
        prepare(compiled)
        return impl.name  # type: ignore[no-any-return]
    try:
        prepare(compiled)
    except BackendUnsupported:
        if len(names) == 1:
            raise
    else:
        return impl.name  # type: ignore[no-any-return]
    for i, candidate in enumerate(names[1:], 1):  # the others, in order
        impl = registry.get(candidate)
        prepare = getattr(impl, "prepare", None)
        if prepare is None:
            return impl.name
        try:
            prepare(compiled)
        except BackendUnsupported:
            if i == len(names) - 1:
                raise
            continue
        return impl.name
    raise NdvmError("no backend available")
