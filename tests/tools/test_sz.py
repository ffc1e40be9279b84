"""tools/sz.py measures function lengths: Python from the AST, C++ by matching braces."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _sz() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sz", ROOT / "tools" / "sz.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CPP = """
#include <vector>
namespace ndvm {
static const int kTable[3] = {1, 2, 3};
struct Foo {
  int x{0};
  int get() const { return x; }
};
// a comment with a brace {
int Foo_sum(const std::vector<int>& v) noexcept {
  int s = 0;
  for (int a : v) {
    if (a > 0) { s += a; }
  }
  const char* t = "}";
  auto f = [](int y) { return y; };
  return s + f(1);
}
Bar::Bar(int a) : a_(a), b_(2) {
  run();
}
}  // namespace ndvm
"""

PY = '''
def short(x):
    """Doc.

    More doc.
    """
    return x


class K:
    def method(self):
        y = 1
        return y
'''


def test_cpp_functions_by_brace_matching() -> None:
    found = {name: (line, n) for name, line, n in _sz().cpp_functions(CPP)}
    assert found == {"get": (7, 1), "Foo_sum": (10, 9), "Bar::Bar": (19, 3)}


def test_python_functions_exclude_docstrings() -> None:
    found = {name: (line, n) for name, line, n in _sz().python_functions(PY)}
    assert found == {"short": (2, 2), "K.method": (11, 3)}
