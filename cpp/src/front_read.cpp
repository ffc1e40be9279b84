// The reader: UTF-8 source -> data, in one pass over the bytes, without recursion.
//
// The syntax (docs/language.md): whitespace is " \t\n\v\f\r"; `;` comments run to the end of
// the line; `#| |#` comments nest; `#;` drops the next datum. An atom runs to whitespace (any
// Unicode whitespace), a delimiter ( ) [ ] " ; ' ` , or a '#' ('#' may only start an atom, so
// "a#b" reads as a, #b); Unicode whitespace other than the six above ends an atom but is not
// skipped (it starts an empty, bad token). `[a b]` reads as (vec a b), `'x` as (quote x), each
// synthesized symbol at the bracket's or the quote's position. Lines count '\n'; columns count
// code points. Every datum and every open list or prefix counts as a form against max_forms.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <locale.h>
#include <string>
#include <vector>

#include "ndvm/front.hpp"

namespace ndvm::front {
namespace {

// -- byte classes --------------------------------------------------------------------------
enum : uint8_t {
  STOP = 1,   // ends an atom: Unicode whitespace (ASCII part), ( ) [ ] " ; ' ` , #
  SYMCH = 2,  // a character of a plain symbol: A-Z a-z 0-9 ! $ % & * / : < = > ? ^ _ ~ + - . @
  DIGIT = 4,
};

struct ByteClasses {
  uint8_t c[256] = {};
  constexpr ByteClasses() {
    for (int b = 9; b <= 13; ++b) c[b] = STOP;
    for (int b = 0x1c; b <= 0x20; ++b) c[b] = STOP;  // \x1c-\x1f are whitespace to Python
    for (const char* p = "()[]\";'`,#"; *p != 0; ++p) c[static_cast<unsigned char>(*p)] = STOP;
    for (int b = 'A'; b <= 'Z'; ++b) c[b] = SYMCH;
    for (int b = 'a'; b <= 'z'; ++b) c[b] = SYMCH;
    for (int b = '0'; b <= '9'; ++b) c[b] = SYMCH | DIGIT;
    for (const char* p = "!$%&*/:<=>?^_~+-.@"; *p != 0; ++p) {
      c[static_cast<unsigned char>(*p)] = SYMCH;
    }
  }
};
constexpr ByteClasses kClass;

inline bool is_digit(char c) { return (kClass.c[static_cast<unsigned char>(c)] & DIGIT) != 0; }

// The byte length of the UTF-8 sequence led by `b` (1 for a stray continuation byte).
inline size_t utf8_len(unsigned char b) {
  if (b >= 0xf0) return 4;
  if (b >= 0xe0) return 3;
  if (b >= 0xc0) return 2;
  return 1;
}

// Whether the bytes at `p` (`left` of them) encode non-ASCII whitespace: U+0085 U+00A0
// U+1680 U+2000-U+200A U+2028 U+2029 U+202F U+205F U+3000 (what str.isspace() accepts).
inline bool unicode_space(const unsigned char* p, size_t left) {
  if (p[0] == 0xc2) return left >= 2 && (p[1] == 0x85 || p[1] == 0xa0);
  if (left < 3) return false;
  if (p[0] == 0xe1) return p[1] == 0x9a && p[2] == 0x80;
  if (p[0] == 0xe3) return p[1] == 0x80 && p[2] == 0x80;
  if (p[0] != 0xe2) return false;
  if (p[1] == 0x80) return p[2] <= 0x8a || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf;
  return p[1] == 0x81 && p[2] == 0x9f;
}

// `^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$` over ASCII
bool number_syntax(std::string_view t) {
  size_t i = 0;
  const size_t n = t.size();
  if (i < n && (t[i] == '+' || t[i] == '-')) ++i;
  if (i < n && is_digit(t[i])) {
    while (i < n && is_digit(t[i])) ++i;
    if (i < n && t[i] == '.') ++i;
    while (i < n && is_digit(t[i])) ++i;
  } else if (i + 1 < n && t[i] == '.' && is_digit(t[i + 1])) {
    ++i;
    while (i < n && is_digit(t[i])) ++i;
  } else {
    return false;
  }
  if (i < n && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < n && (t[i] == '+' || t[i] == '-')) ++i;
    if (i >= n || !is_digit(t[i])) return false;
    while (i < n && is_digit(t[i])) ++i;
  }
  return i == n;
}

// A plain decimal ([-]digits[.digits], no exponent) whose digits make an integer m <= 2^53
// with at most 22 after the point: m and 10^k are exact doubles, so one IEEE division gives the
// correctly rounded m / 10^k, as from_chars would (the common literal, at a fraction of its
// cost). False: the token is another form, or too long; from_chars reads it.
bool plain_decimal(const char* b, const char* e, double* out) {
  static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  const bool neg = b < e && *b == '-';
  if (neg) ++b;
  uint64_t m = 0;
  int digits = 0, after = 0;
  bool point = false;
  for (; b < e; ++b) {
    const char c = *b;
    if (c >= '0' && c <= '9') {
      if (++digits > 19) return false;  // m * 10 + 9 may not fit in 64 bits
      m = m * 10 + static_cast<uint64_t>(c - '0');
      after += point ? 1 : 0;
    } else if (c == '.' && !point) {
      point = true;
    } else {
      return false;
    }
  }
  if (digits == 0 || m > (uint64_t{1} << 53) || after > 22) return false;
  const double v = static_cast<double>(m) / kPow10[after];
  *out = neg ? -v : v;
  return true;
}

// Python's float() of a token number_syntax accepts (correctly rounded, as from_chars is;
// out of range: strtod in the C locale gives the infinity or the zero/subnormal).
double number_value(std::string_view t) {
  const char* b = t.data();
  const char* e = b + t.size();
  if (*b == '+') ++b;
  double v = 0.0;
  if (plain_decimal(b, e, &v)) return v;
  const auto r = std::from_chars(b, e, v);
  if (r.ec == std::errc() && r.ptr == e) return v;
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
  const std::string z(t);
  return strtod_l(z.c_str(), nullptr, c_locale);
}

// -- names ---------------------------------------------------------------------------------
// -- the reader's state ----------------------------------------------------------------------
enum FrameKind : uint8_t { PAREN, BRACKET, QUOTE_PREFIX, COMMENT_PREFIX };

struct Frame {
  FrameKind kind;
  int32_t line, column;
  int32_t base;  // this list's items start at Scratch::items[base]
  DRef tail;
  int32_t dot_line, dot_column;  // dot_line < 0: no '.' yet
};

// Buffers reused from one read to the next (per thread; a nested read gets its own).
struct Scratch {
  std::vector<Frame> frames;
  std::vector<DRef> items;
  std::vector<uint8_t> seen;  // by name id: in ReadOutput::symbols already
  std::string buf;            // a string's value with its escapes replaced
  bool busy = false;
};

[[noreturn]] void fail(ErrKind kind, std::string message, int32_t line, int32_t column) {
  throw FrontError{kind, std::move(message), line, column};
}

std::string quoted(char c) { return std::string{'\'', c, '\''}; }

class Reader {
 public:
  Reader(Arena& a, std::string_view src, const ReadLimits& lim, Scratch& sc, ReadOutput& out)
      : a_(a), s_(src.data()), n_(src.size()), max_forms_(lim.max_forms),
        forms_left_(lim.max_forms), sc_(sc), out_(out) {}

  void run(bool ascii);

 private:
  Arena& a_;
  const char* s_;
  size_t n_;
  size_t pos_ = 0;
  int32_t line_ = 1;
  size_t line_start_ = 0;  // the byte offset where line_ starts
  bool ascii_ = true;
  // columns of a non-ASCII source: code points counted from a line's start, incrementally
  size_t cur_start_ = 0, cur_pos_ = 0;
  int32_t cur_col_ = 1;
  int64_t max_forms_, forms_left_;
  int32_t comment_depth_ = 0;  // #; frames open: what is read now is dropped
  Scratch& sc_;
  ReadOutput& out_;

  int32_t column(size_t p, size_t line_start);
  void form(int32_t line, int32_t column) {
    if (--forms_left_ < 0) too_many(line, column);
  }
  [[noreturn]] void too_many(int32_t line, int32_t column);
  void push(FrameKind kind, int32_t line, int32_t column) {
    if (sc_.frames.size() >= static_cast<size_t>(kMaxNesting)) too_deep(line, column);
    sc_.frames.push_back(
        Frame{kind, line, column, static_cast<int32_t>(sc_.items.size()), -1, -1, 0});
  }
  [[noreturn]] void too_deep(int32_t line, int32_t column);
  void note(int32_t id) {
    const auto i = static_cast<size_t>(id);
    if (comment_depth_ == 0 && (i >= sc_.seen.size() || sc_.seen[i] == 0)) note_new(id);
  }
  void note_new(int32_t id);
  // the common case inline: a datum into an open list with no prefix or '.' pending
  void deliver(DRef d) {
    if (!sc_.frames.empty()) {
      const Frame& f = sc_.frames.back();
      if (f.kind < QUOTE_PREFIX && f.dot_line < 0) {
        sc_.items.push_back(d);
        return;
      }
    }
    deliver_other(d);
  }
  void deliver_other(DRef d);
  void close(char ch, int32_t line, int32_t column);
  void atom(int32_t line, int32_t column);
  void special(std::string_view token, int32_t line, int32_t column);
  void dot(int32_t line, int32_t column);
  void string(int32_t line, int32_t column);
  void block_comment(int32_t line, int32_t column);
  [[noreturn]] void unclosed(const Frame& f);
};

int32_t Reader::column(size_t p, size_t line_start) {
  if (ascii_) return static_cast<int32_t>(p - line_start + 1);
  if (cur_start_ != line_start || cur_pos_ > p) {
    cur_start_ = cur_pos_ = line_start;
    cur_col_ = 1;
  }
  for (; cur_pos_ < p; ++cur_pos_) {
    cur_col_ += (static_cast<unsigned char>(s_[cur_pos_]) & 0xc0) != 0x80;
  }
  return cur_col_;
}

void Reader::too_many(int32_t line, int32_t column) {
  fail(ErrKind::COMPILE,
       "program too large: more than " + std::to_string(max_forms_) + " forms (Limits.max_forms)",
       line, column);
}

void Reader::too_deep(int32_t line, int32_t column) {
  fail(ErrKind::READ, "nesting deeper than " + std::to_string(kMaxNesting) + " levels", line,
       column);
}

// (note: a name not yet seen, outside a dropped datum)
void Reader::note_new(int32_t id) {
  const auto i = static_cast<size_t>(id);
  if (i >= sc_.seen.size()) sc_.seen.resize(i + 64, 0);
  if (sc_.seen[i] == 0) {
    sc_.seen[i] = 1;
    out_.symbols.push_back(id);
  }
}

// Hand a datum to its container, through the prefix frames waiting for it (a quote wraps
// it, a #; drops it).
void Reader::deliver_other(DRef d) {
  auto& frames = sc_.frames;
  while (!frames.empty() && frames.back().kind >= QUOTE_PREFIX) {
    const Frame f = frames.back();
    frames.pop_back();
    if (f.kind == COMMENT_PREFIX) {
      --comment_depth_;
      return;
    }
    note(kw::QUOTE);
    const DRef pair[2] = {a_.sym(kw::QUOTE, f.line, f.column), d};
    d = a_.list(pair, 2, -1, f.line, f.column);
  }
  if (frames.empty()) {
    out_.top.push_back(d);
    return;
  }
  Frame& f = frames.back();
  if (f.dot_line < 0) {
    sc_.items.push_back(d);
  } else if (f.tail >= 0) {
    fail(ErrKind::READ, "more than one datum after '.'", a_[d].line, a_[d].column);
  } else {
    f.tail = d;
  }
}

void Reader::close(char ch, int32_t line, int32_t column) {
  auto& frames = sc_.frames;
  if (frames.empty()) {
    fail(ErrKind::READ, "unexpected " + quoted(ch) + " with no open list", line, column);
  }
  const Frame f = frames.back();
  if (f.kind == QUOTE_PREFIX || f.kind == COMMENT_PREFIX) {
    const char* what = f.kind == QUOTE_PREFIX ? "quote '" : "#;";
    fail(ErrKind::READ, std::string(what) + " with no datum before " + quoted(ch), line, column);
  }
  if (ch != (f.kind == PAREN ? ')' : ']')) {
    fail(ErrKind::READ,
         quoted(ch) + " does not match the " + quoted(f.kind == PAREN ? '(' : '[') +
             " opened at " + std::to_string(f.line) + ":" + std::to_string(f.column),
         line, column);
  }
  if (f.dot_line >= 0 && f.tail < 0) {
    fail(ErrKind::READ, "expected a datum after '.'", f.dot_line, f.dot_column);
  }
  frames.pop_back();
  ++pos_;
  const auto base = static_cast<size_t>(f.base);
  const DRef list = a_.list(sc_.items.data() + base, sc_.items.size() - base, f.tail, f.line,
                            f.column);
  sc_.items.resize(base);
  if (f.kind == BRACKET) note(kw::VEC);
  deliver(list);
}

void Reader::atom(int32_t line, int32_t column) {
  const auto* s = reinterpret_cast<const unsigned char*>(s_);
  const size_t start = pos_;
  size_t p = start;
  bool plain = true;  // every character a plain symbol's
  bool wide = false;  // a non-ASCII character
  uint32_t hash = 2166136261u;  // name_hash of the token, in the same pass
  if (s[p] == '#') {
    hash = (hash ^ static_cast<unsigned char>('#')) * 16777619u;
    ++p;
    plain = false;
  }
  while (p < n_) {
    const unsigned char c = s[p];
    if (c < 0x80) {
      const uint8_t k = kClass.c[c];
      if ((k & STOP) != 0) break;
      plain = plain && (k & SYMCH) != 0;
    } else {
      if (unicode_space(s + p, n_ - p)) break;
      wide = true;
    }
    hash = (hash ^ c) * 16777619u;
    ++p;
  }
  hash |= 1u;
  pos_ = p;
  const std::string_view t(s_ + start, p - start);
  if (wide) {
    double v = 0.0;
    const int what = hooks().classify_unicode ? hooks().classify_unicode(t, &v) : 2;
    if (what == 0) {
      const int32_t id = a_.intern(t);
      note(id);
      deliver(a_.sym(id, line, column));
    } else if (what == 1) {
      deliver(a_.num(v, t, line, column));
    } else {
      fail(ErrKind::READ, (what == 3 ? "bad number " : "bad token ") + py_repr(t), line, column);
    }
    return;
  }
  if (plain && !t.empty() && !is_digit(t[0])) {
    const char c0 = t[0];
    // only a token led by a sign or a '.' may be a number or '.'
    const bool sign = c0 == '+' || c0 == '-' || c0 == '.';
    const bool signed_number = sign && t.size() > 1 && (is_digit(t[1]) || t[1] == '.');
    if (!sign || (!signed_number && !(c0 == '.' && t.size() == 1) && t != "+inf.0" &&
                  t != "-inf.0" && t != "+nan.0" && t != "-nan.0")) {
      const int32_t id = a_.intern_hashed(t, hash);
      note(id);
      deliver(a_.sym(id, line, column));
      return;
    }
  }
  if (plain && number_syntax(t)) {
    deliver(a_.num(number_value(t), t, line, column));
    return;
  }
  special(t, line, column);
}

// The atoms that are neither plain symbols nor plain numbers: '#', '.', booleans, the
// special numbers, and bad tokens.
void Reader::special(std::string_view t, int32_t line, int32_t column) {
  if (t == "#") {
    // a lone '#' before a delimiter, e.g. '#(' vector syntax
    std::string next = "'end of input'";
    if (pos_ < n_) {
      const size_t len = utf8_len(static_cast<unsigned char>(s_[pos_]));
      next = py_repr(std::string_view(s_ + pos_, std::min(len, n_ - pos_)));
    }
    fail(ErrKind::READ, "bad token '#' before " + next + " (use [a b c] or (vec a b c))", line,
         column);
  }
  if (t == ".") {
    dot(line, column);
    return;
  }
  if (t == "#t" || t == "#true" || t == "#f" || t == "#false") {
    deliver(a_.boolean(t[1] == 't', line, column));
    return;
  }
  if (t == "+inf.0" || t == "-inf.0") {
    const double inf = std::numeric_limits<double>::infinity();
    deliver(a_.num(t[0] == '-' ? -inf : inf, t, line, column));
    return;
  }
  if (t == "+nan.0" || t == "-nan.0") {
    deliver(a_.num(std::numeric_limits<double>::quiet_NaN(), t, line, column));
    return;
  }
  bool plain = !t.empty();
  for (const char c : t) plain = plain && (kClass.c[static_cast<unsigned char>(c)] & SYMCH) != 0;
  if (!plain || is_digit(t[0])) fail(ErrKind::READ, "bad token " + py_repr(t), line, column);
  fail(ErrKind::READ, "bad number " + py_repr(t), line, column);  // +1x -.5a ..
}

void Reader::dot(int32_t line, int32_t column) {
  if (sc_.frames.empty() || sc_.frames.back().kind != PAREN) {
    fail(ErrKind::READ, "unexpected '.' outside a list", line, column);
  }
  Frame& f = sc_.frames.back();
  if (sc_.items.size() == static_cast<size_t>(f.base) || f.dot_line >= 0) {
    fail(ErrKind::READ, "misplaced '.' in list", line, column);
  }
  f.dot_line = line;
  f.dot_column = column;
}

// A string literal from the '"' at pos_: an unterminated string is reported before an unknown
// escape (at its backslash), as the whole literal is matched first.
void Reader::string(int32_t line, int32_t column) {
  const size_t start = pos_;
  size_t p = start + 1, run = p;
  bool escaped = false;
  size_t bad = std::string::npos, bad_line_start = 0;
  int32_t bad_line = 0;
  std::string& buf = sc_.buf;
  while (p < n_) {
    const char c = s_[p];
    if (c == '"') break;
    if (c == '\n') {
      ++line_;
      line_start_ = p + 1;
    } else if (c == '\\') {
      if (p + 1 >= n_) {
        p = n_;
        break;
      }
      if (!escaped) buf.clear();
      escaped = true;
      buf.append(s_ + run, p - run);
      const char e = s_[p + 1];
      // (escape, value) pairs
      static constexpr char kEsc[] = {'n', '\n', 't', '\t', 'r', '\r', '\\', '\\',
                                      '"', '"',  '0', '\0', 'a', '\a'};
      int found = -1;
      for (int k = 0; k < 14; k += 2) {
        if (kEsc[k] == e) {
          found = k;
          break;
        }
      }
      if (found >= 0) {
        buf += kEsc[found + 1];
      } else {
        if (bad == std::string::npos) {
          bad = p;
          bad_line = line_;
          bad_line_start = line_start_;
        }
        if (e == '\n') {
          ++line_;
          line_start_ = p + 2;
        }
      }
      p += 2;
      run = p;
      continue;
    }
    ++p;
  }
  if (p >= n_) fail(ErrKind::READ, "unterminated string", line, column);
  if (bad != std::string::npos) {
    const size_t len = std::min(utf8_len(static_cast<unsigned char>(s_[bad + 1])), n_ - bad - 1);
    fail(ErrKind::READ, "unknown string escape '\\" + std::string(s_ + bad + 1, len) + "'",
         bad_line, this->column(bad, bad_line_start));
  }
  pos_ = p + 1;
  if (!escaped) {
    deliver(a_.str(std::string_view(s_ + start + 1, p - start - 1), line, column));
    return;
  }
  buf.append(s_ + run, p - run);
  deliver(a_.str(buf, line, column));
}

// A nested #| |# comment from the "#|" at pos_.
void Reader::block_comment(int32_t line, int32_t column) {
  size_t p = pos_ + 2;
  int depth = 1;
  while (p + 1 < n_) {
    const char c = s_[p];
    if (c == '#' && s_[p + 1] == '|') {
      ++depth;
      p += 2;
    } else if (c == '|' && s_[p + 1] == '#') {
      p += 2;
      if (--depth == 0) {
        pos_ = p;
        return;
      }
    } else {
      if (c == '\n') {
        ++line_;
        line_start_ = p + 1;
      }
      ++p;
    }
  }
  fail(ErrKind::READ, "unterminated block comment '#|'", line, column);
}

void Reader::unclosed(const Frame& f) {
  if (f.kind == QUOTE_PREFIX) {
    fail(ErrKind::READ, "quote ' with nothing after it", f.line, f.column);
  }
  if (f.kind == COMMENT_PREFIX) fail(ErrKind::READ, "#; with no datum after it", f.line, f.column);
  const bool paren = f.kind == PAREN;
  fail(ErrKind::READ,
       std::string("unbalanced ") + (paren ? "'('" : "'['") + ": missing " +
           (paren ? "')'" : "']'"),
       f.line, f.column);
}

void Reader::run(bool ascii) {
  ascii_ = ascii;
  const char* s = s_;
  for (;;) {
    while (pos_ < n_) {  // whitespace and line comments
      const char c = s[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
        ++pos_;
      } else if (c == '\n') {
        ++line_;
        line_start_ = ++pos_;
      } else if (c == ';') {
        const void* nl = std::memchr(s + pos_, '\n', n_ - pos_);
        pos_ = nl == nullptr ? n_ : static_cast<size_t>(static_cast<const char*>(nl) - s);
      } else {
        break;
      }
    }
    if (pos_ >= n_) break;
    const char c = s[pos_];
    const int32_t line = line_, col = column(pos_, line_start_);
    if ((kClass.c[static_cast<unsigned char>(c)] & SYMCH) != 0) {  // most tokens: an atom
      form(line, col);
      atom(line, col);
      continue;
    }
    switch (c) {
      case '(':
      case '[':
        form(line, col);
        push(c == '(' ? PAREN : BRACKET, line, col);
        if (c == '[') sc_.items.push_back(a_.sym(kw::VEC, line, col));
        ++pos_;
        break;
      case ')':
      case ']': close(c, line, col); break;
      case '\'':
      case '`':
      case ',':
        form(line, col);
        if (c != '\'') {
          fail(ErrKind::READ, "quasiquote syntax " + quoted(c) + " is not supported", line, col);
        }
        push(QUOTE_PREFIX, line, col);
        ++pos_;
        break;
      case '"':
        form(line, col);
        string(line, col);
        break;
      case '#':
        if (pos_ + 1 < n_ && s[pos_ + 1] == ';') {
          form(line, col);
          push(COMMENT_PREFIX, line, col);
          ++comment_depth_;
          pos_ += 2;
          break;
        }
        if (pos_ + 1 < n_ && s[pos_ + 1] == '|') {
          block_comment(line, col);
          break;
        }
        form(line, col);
        atom(line, col);
        break;
      default:
        form(line, col);
        atom(line, col);
        break;
    }
  }
  if (!sc_.frames.empty()) unclosed(sc_.frames.back());
}

// Leaves the scratch buffers empty (and free) however the read ends.
struct ScratchLease {
  Scratch& sc;
  ReadOutput& out;
  ~ScratchLease() {
    for (const int32_t id : out.symbols) sc.seen[static_cast<size_t>(id)] = 0;
    sc.frames.clear();
    sc.items.clear();
    sc.busy = false;
  }
};

}  // namespace

ReadOutput read(Arena& arena, std::string_view source, const ReadLimits& limits,
                bool allow_empty) {
  // ASCII (the common case) is found 8 bytes at a time; other text counts its code points
  uint64_t any = 0;
  size_t at = 0;
  for (; at + 8 <= source.size(); at += 8) {
    uint64_t w;
    std::memcpy(&w, source.data() + at, 8);
    any |= w;
  }
  for (; at < source.size(); ++at) any |= static_cast<unsigned char>(source[at]);
  const unsigned char high = (any & 0x8080808080808080ull) != 0 ? 0x80 : 0;
  size_t continuation = 0;
  if (high != 0) {
    for (const char ch : source) continuation += (static_cast<unsigned char>(ch) & 0xc0) == 0x80;
  }
  const auto chars = static_cast<int64_t>(source.size() - continuation);
  if (chars > limits.max_source_chars) {
    fail(ErrKind::READ,
         "source longer than " + std::to_string(limits.max_source_chars) +
             " characters (Limits.max_source_chars)",
         1, 1);
  }
  thread_local Scratch shared;
  std::unique_ptr<Scratch> own;  // a read inside a read (from a hook) gets its own buffers
  if (shared.busy) own = std::make_unique<Scratch>();
  Scratch& sc = own ? *own : shared;
  sc.busy = true;
  ReadOutput out;
  out.top.reserve(4);
  out.symbols.reserve(32);  // a small program's names without regrowing
  {
    ScratchLease lease{sc, out};
    Reader(arena, source, limits, sc, out).run(high < 0x80);
  }
  if (out.top.empty() && !allow_empty) {
    fail(ErrKind::READ, "empty program: expected at least one expression", 1, 1);
  }
  return out;
}

}  // namespace ndvm::front
