"""Baselines that make ndvm's speed claims measurable; importing this package needs no torch/jax.

``tagged`` (eager PyTorch, every value a 14-float tagged tensor), ``staged_jax`` (the program
translated to a ``jax.jit`` function) and ``programs`` (the benchmark program set). The
reference backend (``ndvm.backends.reference``) is the "representation alone" tier.
"""
