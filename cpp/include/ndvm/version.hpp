// ndvm native core: version and build facts. The core never includes Python headers.
#pragma once

namespace ndvm {

const char* core_version();

}  // namespace ndvm
