// nanobind glue only: conversions, GIL release, exception translation. No interpreter logic.
#include <nanobind/nanobind.h>

#include "ndvm/version.hpp"

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "ndvm native core";
  m.def("core_version", &ndvm::core_version, "Version string of the native core.");
}
