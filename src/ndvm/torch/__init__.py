"""PyTorch boundary (optional extra ``torch``): a compiled program as a differentiable op."""

from ndvm.torch.function import ProgramFunction as ProgramFunction
from ndvm.torch.function import apply as apply
from ndvm.torch.function import op as op

__all__ = ["ProgramFunction", "apply", "op"]
