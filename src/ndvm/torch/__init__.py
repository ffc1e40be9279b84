"""PyTorch boundary (optional extra ``torch``): a compiled program as a differentiable op."""

from ndvm.extras import require

require("ndvm.torch", "torch")

from ndvm.torch.function import ProgramFunction as ProgramFunction  # noqa: E402
from ndvm.torch.function import apply as apply  # noqa: E402
from ndvm.torch.function import op as op  # noqa: E402

__all__ = ["ProgramFunction", "apply", "op"]
