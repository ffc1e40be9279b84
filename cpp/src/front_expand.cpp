// Placeholder: the expander (owner: the expander's author).
#include "ndvm/front.hpp"

namespace ndvm::front {
struct Expander::State {};
Expander::Expander(Arena&, bool) : s_(new State) {}
Expander::~Expander() { delete s_; }
DRef Expander::expand_body(const DRef*, size_t, DRef) {
  throw FrontError{ErrKind::COMPILE, "the native expander is not built yet", 0, 0};
}
DRef Expander::expand(DRef) {
  throw FrontError{ErrKind::COMPILE, "the native expander is not built yet", 0, 0};
}
}  // namespace ndvm::front
