"""Build a reactive Graph from a torch module traced by ``torch.fx`` (torch imported lazily).

Placeholders become input leaves, ``get_attr`` nodes parameter leaves, every call a rule node.
Calls of submodules are named by their module path (``blocks.0.mlp``), others by fx's node name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ndvm.graph.dag import Graph
from ndvm.graph.errors import GraphError

OUTPUT = "output"


def _caller(node: Any, owner: Any) -> Callable[..., Any]:
    """The function computing ``node`` from its input nodes' values, in first-use order."""
    import torch.fx

    order: dict[Any, int] = {}

    def index(n: Any) -> Any:
        order.setdefault(n, len(order))
        return n

    torch.fx.node.map_arg((node.args, node.kwargs), index)
    args, kwargs, target, op = node.args, node.kwargs, node.target, node.op
    if op == "call_module":
        target = owner.get_submodule(target)

    def run(*vals: Any) -> Any:
        a, kw = torch.fx.node.map_arg((args, kwargs), lambda n: vals[order[n]])
        if op == "call_method":
            return getattr(a[0], target)(*a[1:], **kw)
        return target(*a, **kw)

    run.inputs = list(order)  # type: ignore[attr-defined]
    return run


def _fetch(module: Any, qualname: str) -> Any:
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj.detach() if hasattr(obj, "detach") else obj


def from_fx(
    module: Any, *example_inputs: Any, concrete_args: dict[str, Any] | None = None
) -> Graph:
    """Trace ``module`` and return its Graph, with leaves bound to ``example_inputs``.

    The module's result is node ``output``. Submodule calls are opaque rule nodes (their
    parameters stay inside them); ``get_attr`` parameters are leaves of kind ``param``.
    Arguments of ``forward`` after the example inputs that have defaults (masks, flags) are
    specialised to their defaults unless ``concrete_args`` names them, and the trace runs
    with torch's fused attention fast path off, so ``nn.TransformerEncoderLayer`` traces to
    its plain path (norms, ``self_attn``, the feed-forward linears, residual adds).
    """
    traced = _trace(module, len(example_inputs), concrete_args)
    g = Graph()
    names: dict[Any, str] = {}
    feeds = iter(example_inputs)
    for node in traced.graph.nodes:
        if node.op == "placeholder":
            try:
                value = next(feeds)
            except StopIteration:
                if node.args:  # a specialised (concrete) argument: its value is the default
                    names[node] = node.name
                    g.leaf(node.name, node.args[0], kind="input")
                    continue
                raise GraphError(f"no example input for placeholder {node.target!r}") from None
            names[node] = node.name
            g.leaf(node.name, value, kind="input")
        elif node.op == "get_attr":
            names[node] = str(node.target)
            g.leaf(names[node], _fetch(traced, node.target), kind="param")
        elif node.op in ("call_function", "call_method", "call_module"):
            name = str(node.target) if node.op == "call_module" else node.name
            if name in g:
                name = node.name
            fn = _caller(node, traced)
            names[node] = name
            inputs = [names[n] for n in fn.inputs]  # type: ignore[attr-defined]
            g.rule(name, fn, inputs, fx_op=node.op, fx_target=str(node.target))
        elif node.op == "output":
            fn = _output_fn(node)
            inputs = [names[n] for n in fn.inputs]  # type: ignore[attr-defined]
            g.rule(OUTPUT, fn, inputs, fx_op="output")
    return g


def _trace(module: Any, n_inputs: int, concrete_args: dict[str, Any] | None) -> Any:
    import inspect

    import torch
    import torch.fx

    concrete = dict(concrete_args or {})
    params = list(inspect.signature(module.forward).parameters.values())
    for p in params[n_inputs:]:
        if p.default is not inspect.Parameter.empty and p.name not in concrete:
            concrete[p.name] = p.default
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # its checks branch on traced values
    try:
        return torch.fx.symbolic_trace(module, concrete_args=concrete or None)
    except torch.fx.proxy.TraceError as exc:
        raise GraphError(f"torch.fx cannot trace {type(module).__name__}: {exc}") from exc
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)


def _output_fn(node: Any) -> Callable[..., Any]:
    import torch.fx

    order: dict[Any, int] = {}
    torch.fx.node.map_arg(node.args[0], lambda n: order.setdefault(n, len(order)))
    result = node.args[0]

    def run(*vals: Any) -> Any:
        return torch.fx.node.map_arg(result, lambda n: vals[order[n]])

    run.inputs = list(order)  # type: ignore[attr-defined]
    return run
