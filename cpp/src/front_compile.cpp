// Placeholder: the resolver and the driver (owner: the resolver's author).
#include "ndvm/front.hpp"

namespace ndvm::front {
Compiled compile(std::string_view, const ParamsFn&, const std::vector<std::string>&,
                 const CompileOptions&) {
  throw FrontError{ErrKind::COMPILE, "the native front end is not built yet", 0, 0};
}
std::vector<std::string> prelude_closure(const std::vector<std::string>&) { return {}; }
}  // namespace ndvm::front
