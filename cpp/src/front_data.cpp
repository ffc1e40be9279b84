// The front end's data: the datum arena, printing data back as source, the message hooks.
#include <pthread.h>

#include <functional>
#include <iterator>
#include <string>
#include <utility>

#include "ndvm/front.hpp"

namespace ndvm::front {

namespace {
Hooks& installed() {
  static Hooks h;
  return h;
}

constexpr size_t kStackReserve = size_t(512) << 10;

}  // namespace

// The lowest address this thread's front end may recurse to (its stack's end plus a reserve).
const char* stack_floor() {
  thread_local const char* floor = [] {
    const char* here = static_cast<const char*>(__builtin_frame_address(0));
#if defined(__linux__)
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      const bool ok = pthread_attr_getstack(&attr, &addr, &size) == 0;
      pthread_attr_destroy(&attr);
      if (ok && addr != nullptr) return static_cast<const char*>(addr) + kStackReserve;
    }
#elif defined(__APPLE__)
    const char* top = static_cast<const char*>(pthread_get_stackaddr_np(pthread_self()));
    return top - pthread_get_stacksize_np(pthread_self()) + kStackReserve;
#endif
    return here - (size_t(1) << 20);  // unknown: 1 MiB below the first use
  }();
  return floor;
}

bool stack_nearly_exhausted() {
  return static_cast<const char*>(__builtin_frame_address(0)) < stack_floor();
}

const Hooks& hooks() { return installed(); }
void set_hooks(Hooks h) { installed() = std::move(h); }

std::string py_repr(std::string_view s) {
  bool plain = true;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '\'' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain || !hooks().repr) {
    std::string out;
    out.reserve(s.size() + 2);
    out += '\'';
    out += s;
    out += '\'';
    return out;
  }
  return hooks().repr(s);
}

Arena::Arena() {
  data.reserve(64);
  items.reserve(64);
  texts.reserve(kw::COUNT + 32);
  static const std::vector<std::string> keywords(std::begin(kKeywordNames),
                                                 std::end(kKeywordNames));
  texts.insert(texts.end(), keywords.begin(), keywords.end());
  slot_hash_.assign(128, 0);
  slot_id_.assign(128, -1);
  for (int32_t k = 0; k < kw::COUNT; ++k) place(name_hash(texts[size_t(k)]), k);
  interned_ = kw::COUNT;
}

void Arena::reset() {
  constexpr size_t kKeep = 4096;  // larger buffers are released, not kept
  if (data.capacity() > kKeep || items.capacity() > kKeep || slot_hash_.size() > kKeep) {
    *this = Arena();
    return;
  }
  data.clear();
  items.clear();
  texts.resize(static_cast<size_t>(kw::COUNT));
  // the keywords stay: they were placed first, so no probe sequence of theirs crosses a slot
  // emptied here
  for (const uint32_t u : used_) slot_hash_[u] = 0;
  used_.clear();
  interned_ = kw::COUNT;
}

size_t Arena::place(uint32_t hash, int32_t id) {
  const size_t mask = slot_hash_.size() - 1;
  size_t i = hash & mask;
  while (slot_hash_[i] != 0) i = (i + 1) & mask;
  slot_hash_[i] = hash;
  slot_id_[i] = id;
  if (id >= kw::COUNT) used_.push_back(static_cast<uint32_t>(i));
  return i;
}

int32_t Arena::intern(std::string_view name) { return intern_hashed(name, name_hash(name)); }

int32_t Arena::intern_other(std::string_view name) {
  return intern_hashed(name, name_hash(name));
}

int32_t Arena::intern_new(std::string_view name, uint32_t hash) {
  const auto id = static_cast<int32_t>(texts.size());
  texts.emplace_back(name);
  place(hash, id);
  if (2 * ++interned_ > slot_hash_.size()) {  // grow: the keywords first, then the others
    std::vector<uint32_t> hashes(slot_hash_.size() * 2, 0);
    std::vector<int32_t> ids(hashes.size(), -1);
    hashes.swap(slot_hash_);
    ids.swap(slot_id_);
    used_.clear();
    for (const bool keywords : {true, false}) {
      for (size_t j = 0; j < hashes.size(); ++j) {
        if (hashes[j] != 0 && (ids[j] < kw::COUNT) == keywords) place(hashes[j], ids[j]);
      }
    }
  }
  return id;
}

int32_t Arena::add_text(std::string_view text) {
  texts.emplace_back(text);
  return static_cast<int32_t>(texts.size() - 1);
}

DRef Arena::num(double value, std::string_view text, int32_t line, int32_t column) {
  Datum d;
  d.kind = DKind::NUM;
  d.num = value;
  d.text = add_text(text);
  return add(d, line, column);
}

DRef Arena::str(std::string_view value, int32_t line, int32_t column) {
  Datum d;
  d.kind = DKind::STR;
  d.text = add_text(value);
  return add(d, line, column);
}

DRef Arena::boolean(bool value, int32_t line, int32_t column) {
  Datum d;
  d.kind = DKind::BOOL;
  d.flag = value;
  return add(d, line, column);
}

int32_t Arena::head_id(DRef d) const {
  const Datum& x = (*this)[d];
  if (x.kind != DKind::LIST || x.count == 0) return -1;
  const Datum& h = (*this)[items[static_cast<size_t>(x.first)]];
  return h.kind == DKind::SYM ? h.text : -1;
}

namespace {
void print_atom(const Arena& a, const Datum& x, std::string& out, void* /*context*/) {
  switch (x.kind) {
    case DKind::SYM:
    case DKind::NUM: out += a.texts[static_cast<size_t>(x.text)]; break;
    case DKind::BOOL: out += x.flag ? "#t" : "#f"; break;
    case DKind::STR:
      out += '"';
      for (const char c : a.texts[static_cast<size_t>(x.text)]) {
        if (c == '\\') {
          out += "\\\\";
        } else if (c == '"') {
          out += "\\\"";
        } else if (c == '\n') {
          out += "\\n";
        } else {
          out += c;
        }
      }
      out += '"';
      break;
    case DKind::LIST: break;
  }
}
}  // namespace

std::string to_source(const Arena& a, DRef d) {
  std::string out;
  print_source(a, d, out, print_atom, nullptr);
  return out;
}

void print_source(const Arena& a, DRef d, std::string& out, AtomPrinter atom, void* context) {
  // an explicit stack: data nested as deep as the reader allows print without recursion
  struct Item {
    DRef d;
    int32_t next;  // LIST: the next item to print (count: the tail, count + 1: done)
  };
  std::vector<Item> stack{{d, -1}};
  while (!stack.empty()) {
    Item& it = stack.back();
    const Datum& x = a[it.d];
    if (x.kind != DKind::LIST) {
      atom(a, x, out, context);
      stack.pop_back();
      continue;
    }
    if (it.next < 0) {
      out += '(';
      it.next = 0;
    }
    if (it.next < x.count) {
      if (it.next > 0) out += ' ';
      const DRef child = a.items[static_cast<size_t>(x.first + it.next)];
      ++it.next;
      stack.push_back({child, -1});
      continue;
    }
    if (it.next == x.count && x.tail >= 0) {
      out += " . ";
      ++it.next;
      stack.push_back({x.tail, -1});
      continue;
    }
    out += ')';
    stack.pop_back();
  }
}

}  // namespace ndvm::front
