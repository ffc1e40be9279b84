// Vector and matrix construction and indexing (structural primitives with a taped numeric
// side): vec, mat, make-vector, zeros, ones, eye, ref, vlen, rows, cols, vector<->list.
#include <string>

#include "ndvm/interp.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {

namespace {
constexpr int64_t kMaxSize = 10000000;
}

uint32_t Interp::size_arg(Value x, const char* who) {
  const int64_t n = index(x, who);
  if (n < 0 || n > kMaxSize) {
    throw error(std::string(who) + ": size " + std::to_string(n) + " out of range");
  }
  return static_cast<uint32_t>(n);
}

// Numbers (axis_rank 0) -> a vector, or equal-length vectors (axis_rank 1) -> matrix rows.
Value Interp::stack(const Value* items, uint32_t n, const char* who, int axis_rank) {
  uint32_t width = 1;
  bool taped = false;
  for (uint32_t i = 0; i < n; ++i) {
    if (axis_rank == 0 && (items[i].tag != Tag::NUM || items[i].rank != 0)) {
      throw error(std::string(who) + ": vector elements must be numbers, got " +
                  type_name(items[i]));
    }
    const Payload& p = pay_[items[i].id];
    if (p.width > 1) width = W_;
    taped = taped || p.taped;
  }
  if (n == 0) {
    const uint32_t pid = pay_.alloc(1, 1, 0, 1, false);
    return make_value(Tag::NUM, pid, 1);
  }
  const uint32_t m = axis_rank == 0 ? 1 : pay_[items[0].id].rows;
  alloc();
  const uint32_t out = axis_rank == 0 ? pay_.alloc(width, 1, n, 1, taped)
                                      : pay_.alloc(width, 2, n, m, taped);
  std::vector<uint32_t>& ids = ids_;
  ids.clear();
  for (uint32_t i = 0; i < n; ++i) ids.push_back(items[i].id);
  stack_into(out, ids.data(), n, m);
  if (taped) tape_op(TapeOp::STACK, ids.data(), n, out, m, 0);
  return make_value(Tag::NUM, out, static_cast<uint8_t>(axis_rank + 1));
}

// Item i's m elements become elements [i * m, (i + 1) * m) of `out`.
void Interp::stack_into(uint32_t out, const uint32_t* ids, uint32_t n, uint32_t m) {
  const uint32_t width = pay_[out].width;
  Real* o = pay_.ptr(out);
  for (uint32_t i = 0; i < n; ++i) {
    const Payload& p = pay_[ids[i]];
    const Real* src = pay_.ptr(ids[i]);
    for (uint32_t e = 0; e < m; ++e) {
      Real* oe = o + (static_cast<size_t>(i) * m + e) * width;
      const Real* se = src + static_cast<size_t>(e) * p.width;
      for (uint32_t l = 0; l < width; ++l) oe[l] = se[p.width > 1 ? l : 0];
    }
  }
}

Value Interp::gather(Value v, uint32_t first, uint32_t count, uint8_t rank) {
  const Payload src = pay_[v.id];
  const uint32_t out = pay_.alloc(src.width, rank, count, 1, src.taped);
  gather_into(out, v.id, first, count);
  if (src.taped) tape_op(TapeOp::GATHER, &v.id, 1, out, first, count);
  return make_value(Tag::NUM, out, rank);
}

void Interp::gather_into(uint32_t out, uint32_t src, uint32_t first, uint32_t count) {
  const uint32_t width = pay_[src].width;
  const Real* s = pay_.ptr(src) + static_cast<size_t>(first) * width;
  Real* o = pay_.ptr(out);
  for (size_t k = 0; k < static_cast<size_t>(count) * width; ++k) o[k] = s[k];
}

namespace {

Value filled_payload(Interp& in, double value, uint32_t rows, uint32_t cols, uint8_t rank,
                     bool eye) {
  in.alloc();
  const uint32_t pid = in.pay_.alloc(1, rank, rows, cols, false);
  Real* p = in.pay_.ptr(pid);
  for (size_t e = 0; e < static_cast<size_t>(rows) * cols; ++e) {
    p[e] = eye ? (e / cols == e % cols ? 1.0 : 0.0) : value;
  }
  return make_value(Tag::NUM, pid, rank);
}

}  // namespace

Value Interp::make_vectors(int code, const Value* args, uint32_t n) {
  const Prim p = static_cast<Prim>(code);
  switch (p) {
    case Prim::VEC: return stack(args, n, "vec", 0);
    case Prim::MAT: {
      std::vector<Value> rows(n);
      std::vector<Value> items;
      for (uint32_t i = 0; i < n; ++i) {
        const Value r = args[i];
        if (r.tag == Tag::NUM && r.rank == 1) {
          rows[i] = r;
        } else if (r.tag == Tag::PAIR || r.tag == Tag::NIL) {
          list_items(r, items, "mat", true);
          rows[i] = stack(items.data(), static_cast<uint32_t>(items.size()), "vec", 0);
        } else {
          throw error("mat: each row must be a vector or a list of numbers, got " +
                      type_name(r));
        }
      }
      if (n == 0) throw error("mat: expected at least one row");
      const uint32_t len0 = pay_[rows[0].id].rows;
      for (uint32_t i = 1; i < n; ++i) {
        const uint32_t len = pay_[rows[i].id].rows;
        if (len != len0) {
          throw error("mat: rows of lengths " + std::to_string(len0) + " and " +
                          std::to_string(len) + " differ",
                      ErrClass::SHAPE);
        }
      }
      return stack(rows.data(), n, "mat", 1);
    }
    case Prim::MAKE_VECTOR: {
      const uint32_t size = size_arg(args[0], "make-vector");
      const Value fill = n > 1 ? args[1] : number(0.0);
      std::vector<Value> items(size, fill);
      return stack(items.data(), size, "vec", 0);
    }
    case Prim::ZEROS:
    case Prim::ONES: {
      const char* who = p == Prim::ZEROS ? "zeros" : "ones";
      const uint32_t r = size_arg(args[0], who);
      const uint32_t c = n > 1 ? size_arg(args[1], who) : 1;
      const double value = p == Prim::ZEROS ? 0.0 : 1.0;
      if (static_cast<uint64_t>(r) * c > 100000000ull) throw error(std::string(who) + ": too large");
      return filled_payload(*this, value, r, c, n > 1 ? 2 : 1, false);
    }
    case Prim::EYE: {
      const uint32_t size = size_arg(args[0], "eye");
      if (static_cast<uint64_t>(size) * size > 100000000ull) throw error("eye: too large");
      return filled_payload(*this, 0.0, size, size, 2, true);
    }
    default: throw no_row(code);
  }
}

Value Interp::read_vectors(int code, const Value* args, uint32_t n) {
  const Prim p = static_cast<Prim>(code);
  switch (p) {
    case Prim::REF: {
      const Value v = args[0];
      if (v.tag != Tag::NUM || v.rank == 0) {
        throw error("ref: expected a vector or matrix, got " + type_name(v));
      }
      const Payload shape = pay_[v.id];
      const int64_t i = index(args[1], "ref");
      if (i < 0 || i >= shape.rows) {
        throw error("ref: index " + std::to_string(i) + " out of range for length " +
                    std::to_string(shape.rows));
      }
      if (v.rank == 1) {
        if (n > 2) throw error("ref: a vector takes one index");
        return gather(v, static_cast<uint32_t>(i), 1, 0);
      }
      if (n == 2) return gather(v, static_cast<uint32_t>(i) * shape.cols, shape.cols, 1);
      const int64_t j = index(args[2], "ref");
      if (j < 0 || j >= shape.cols) {
        throw error("ref: index " + std::to_string(j) + " out of range for length " +
                    std::to_string(shape.cols));
      }
      return gather(v, static_cast<uint32_t>(i * shape.cols + j), 1, 0);
    }
    case Prim::VLEN:
    case Prim::ROWS:
    case Prim::COLS:
    case Prim::VECTOR_TO_LIST: {
      const uint8_t rank = (p == Prim::ROWS || p == Prim::COLS) ? 2 : 1;
      const char* who = p == Prim::VLEN ? "vlen" : p == Prim::ROWS ? "rows"
                        : p == Prim::COLS ? "cols" : "vector->list";
      const Value v = args[0];
      if (v.tag != Tag::NUM || v.rank != rank) {
        throw error(std::string(who) + ": expected a " + (rank == 1 ? "vector" : "matrix") +
                    ", got " + type_name(v));
      }
      const Payload shape = pay_[v.id];
      if (p == Prim::COLS) return number(shape.cols);
      if (p != Prim::VECTOR_TO_LIST) return number(shape.rows);
      alloc(shape.rows);
      std::vector<Value> items(shape.rows);
      for (uint32_t i = 0; i < shape.rows; ++i) items[i] = gather(v, i, 1, 0);
      return list_from(items.data(), items.size(), make_value(Tag::NIL));
    }
    case Prim::LIST_TO_VECTOR: {
      std::vector<Value> items;
      list_items(args[0], items, "list->vector", true);
      return stack(items.data(), static_cast<uint32_t>(items.size()), "vec", 0);
    }
    default: throw no_row(code);
  }
}

}  // namespace ndvm
