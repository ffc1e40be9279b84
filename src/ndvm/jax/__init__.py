"""JAX boundary (optional extra ``jax``): a compiled program as a ``jax.custom_vjp`` function."""

from ndvm.extras import require

require("ndvm.jax", "jax")

from ndvm.jax.function import op as op  # noqa: E402

__all__ = ["op"]
