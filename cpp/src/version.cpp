#include "ndvm/version.hpp"

namespace ndvm {

const char* core_version() { return "0.1.0"; }

}  // namespace ndvm
