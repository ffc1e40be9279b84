"""Named constants of the language: a free name listed here is that number, unless the
program binds it (a local binding, a declared parameter or an input of that name wins).

The native front end reads this table through ``cpp/include/ndvm/constants.inc``, generated
by ``tools/gen_prims.py``. Euler's number is not a constant (``(exp 1)``): ``e`` is a common
parameter name, and a program that used it as one would silently change meaning.
"""

from __future__ import annotations

import math

CONSTANTS: dict[str, tuple[float, str]] = {
    "pi": (math.pi, "π = 3.141592653589793, the ratio of a circle's circumference to its diameter"),
}
