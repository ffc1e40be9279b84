// Placeholder: the reader (owner: the reader's author).
#include "ndvm/front.hpp"

namespace ndvm::front {
ReadOutput read(Arena&, std::string_view, const ReadLimits&, bool) {
  throw FrontError{ErrKind::READ, "the native reader is not built yet", 0, 0};
}
}  // namespace ndvm::front
