"""JAX boundary (optional extra ``jax``): a compiled program as a ``jax.custom_vjp`` function."""

from ndvm.jax.function import op as op

__all__ = ["op"]
