// nanobind glue only: array conversions, GIL release, exception translation. No interpreter
// logic lives here.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <stdexcept>
#include <type_traits>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include "front_py.hpp"
#include "lower_ir.hpp"
#include "ndvm/interp.hpp"
#include "ndvm/kernels.hpp"
#include "ndvm/optimize.hpp"
#include "ndvm/prims.hpp"
#include "ndvm/program.hpp"
#include "ndvm/version.hpp"
#include "ndvm/vmath.hpp"
#include "ndvm/vm.hpp"

namespace nb = nanobind;

// Option structs bound as Python classes. They live in namespace ndvm (ndvm32 in the float32
// build) so that the two modules register distinct C++ types with nanobind.
namespace ndvm {

// The scalar options of one evaluation (Python: _core.RunOptions, built once per Limits).
struct RunOptions {
  uint64_t max_steps = Limits{}.max_steps;
  uint64_t max_heap = Limits{}.max_heap;
  uint64_t max_depth = Limits{}.max_depth;
  double deadline = 0.0;  // seconds; <= 0: none
  bool dmci = false;
  bool replay = true;  // trace replay (cpp/include/ndvm/trace.hpp)
  int client = 0;  // 0: the tree walker, 1: the bytecode VM
  bool fused = true;  // RunRequest::fused
  uint32_t block_rows = 0;  // RunRequest::block_rows
  uint32_t chain_lanes = 0;  // RunRequest::chain_lanes
  bool pairs = true;  // RunRequest::pairs
  bool updates = true;  // RunRequest::updates
};

// The options of the in-runtime Adam fit (Python: _core.AdamOptions); the arrays are checked
// and taken (float64, C-contiguous) when the fit starts.
struct AdamArgs {
  double weight = 1.0;
  uint32_t steps = 0;
  double lr = 0.05, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  nb::object lower = nb::none(), upper = nb::none();  // [P] each, or None
  bool early_stop = false;
  double rtol = 0.0, atol = 0.0;
  int64_t patience = 0;
  nb::object lr_schedule = nb::none();  // [steps] or None
  nb::object target = nb::none();       // [N] shared, [B, N] per lane, or None
  double time_limit = 0.0;              // seconds; <= 0: none
  bool lm = false;                      // Levenberg–Marquardt (needs a target) instead of Adam
  bool lbfgs = false;                   // L-BFGS instead of Adam
  uint32_t memory = 10, max_ls = 15;
  double c1 = 1e-4, c2 = 0.9, lbfgs_gtol = 1e-10, lbfgs_ftol = 1e-13;
  double ftol = 1.49012e-8, xtol = 1.49012e-8, gtol = 1e-8, lambda0 = 1e-3;
  nb::object residual_weight = nb::none();  // [N] or None
  // LM with adaptive starts (optimize_lm_waves): the first ``wave`` starts for at most
  // ``wave_steps`` iterations, the rest only when fewer than ``agree`` reached the best; 0: none
  uint32_t wave = 0, wave_steps = 0, agree = 0;
};

}  // namespace ndvm

namespace {

using ndvm::AdamArgs;
using ndvm::RunOptions;
using F64In = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;
using I32In = nb::ndarray<const int32_t, nb::c_contig, nb::device::cpu>;

// NumPy's type number of T.
template <class T>
constexpr int npy_type() {
  static_assert(std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
                    std::is_same_v<T, int32_t> || std::is_same_v<T, int8_t> ||
                    std::is_same_v<T, uint8_t>,
                "to_numpy: an element type NumPy knows");
  if constexpr (std::is_same_v<T, double>) return NPY_FLOAT64;
  if constexpr (std::is_same_v<T, int64_t>) return NPY_INT64;
  if constexpr (std::is_same_v<T, int32_t>) return NPY_INT32;
  if constexpr (std::is_same_v<T, int8_t>) return NPY_INT8;
  return NPY_UINT8;
}

// A writeable C-contiguous NumPy array of `shape` over v's elements, which it owns (a capsule
// as its base frees them). Built with NumPy's C API: a run hands out two or three of these,
// and at one lane nanobind's export (numpy.asarray of a DLPack view) cost about 2.5 k
// instructions each.
template <class T>
nb::object to_numpy(std::vector<T>&& v, const std::vector<size_t>& shape) {
  auto* heap = new std::vector<T>(std::move(v));
  if (heap->empty()) heap->reserve(1);
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  npy_intp dims[NPY_MAXDIMS];
  if (shape.size() > NPY_MAXDIMS) throw std::length_error("to_numpy: too many dimensions");
  for (size_t i = 0; i < shape.size(); ++i) dims[i] = static_cast<npy_intp>(shape[i]);
  PyObject* a = PyArray_New(&PyArray_Type, static_cast<int>(shape.size()), dims, npy_type<T>(),
                            nullptr, heap->data(), 0, NPY_ARRAY_CARRAY, nullptr);
  if (a == nullptr) throw nb::python_error();
  nb::object arr = nb::steal(a);
  // steals the capsule's reference, also when it fails
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(a), owner.release().ptr()) < 0) {
    throw nb::python_error();
  }
  return arr;
}

// An array argument of run and optimize: a NumPy array of T that is C-contiguous, aligned and
// in native byte order is read in place through NumPy's C API (nanobind's ndarray caster
// costs about 1-2 k instructions an array, an int32 one a DLPack export); anything else goes
// through that caster, which converts where conversion is allowed and whose result is kept
// here. Either way the argument holds a reference to what it reads, so the elements outlive
// the call's released GIL.
template <class T>
struct ArrayArg {
  nb::object owner;  // the array read (or nanobind's converted one, kept in `held`)
  nb::ndarray<const T, nb::c_contig, nb::device::cpu> held;
  const T* ptr = nullptr;
  size_t nd = 0, count = 0;
  size_t dims[2] = {0, 0};  // the first two extents (the run's arrays have rank <= 2)

  const T* data() const { return ptr; }
  size_t ndim() const { return nd; }
  size_t size() const { return count; }
  size_t shape(size_t i) const { return i < 2 ? dims[i] : 0; }
};

}  // namespace

namespace nanobind::detail {

template <class T>
struct type_caster<ArrayArg<T>> {
  using Fallback = make_caster<ndarray<const T, c_contig, device::cpu>>;
  NB_TYPE_CASTER(ArrayArg<T>, Fallback::Name)

  bool from_python(handle src, uint32_t flags, cleanup_list* cleanup) noexcept {
    PyObject* o = src.ptr();
    if (PyArray_CheckExact(o)) {
      auto* a = reinterpret_cast<PyArrayObject*>(o);
      if (PyArray_TYPE(a) == npy_type<T>() && PyArray_ISCARRAY_RO(a) &&
          PyArray_ISNOTSWAPPED(a)) {
        value.owner = borrow(src);
        value.ptr = static_cast<const T*>(PyArray_DATA(a));
        value.nd = static_cast<size_t>(PyArray_NDIM(a));
        value.count = static_cast<size_t>(PyArray_SIZE(a));
        for (size_t i = 0; i < 2 && i < value.nd; ++i) {
          value.dims[i] = static_cast<size_t>(PyArray_DIM(a, static_cast<int>(i)));
        }
        return true;
      }
    }
    Fallback c;
    if (!c.from_python(src, flags, cleanup)) return false;
    value.held = c.value;
    value.ptr = value.held.data();
    value.nd = value.held.ndim();
    value.count = value.held.size();
    for (size_t i = 0; i < 2 && i < value.nd; ++i) value.dims[i] = value.held.shape(i);
    return true;
  }
};

}  // namespace nanobind::detail

namespace {

using F64Arg = ArrayArg<double>;
using I32Arg = ArrayArg<int32_t>;

nb::object mask_array(std::vector<uint8_t>&& m, size_t B, size_t Ng) {
  return to_numpy<uint8_t>(std::move(m), {B, Ng});
}

nb::object export_obj(ndvm::Export&& ex) {
  const size_t rows = ex.enc.size() / 4;
  nb::list arrays;
  for (size_t i = 0; i < ex.arrays.size(); ++i) {
    std::vector<size_t> shape(ex.shapes[i].begin(), ex.shapes[i].end());
    arrays.append(to_numpy<double>(std::move(ex.arrays[i]), shape));
  }
  return nb::make_tuple(to_numpy<int64_t>(std::move(ex.enc), {rows, 4}), arrays);
}

ndvm::Program make_program(I32In nodes, I32In kids, I32In aux, I32In consts, F64In nums,
                           std::vector<std::string> strings, uint32_t root, uint32_t n_params,
                           uint32_t n_inputs) {
  if (nodes.ndim() != 2 || nodes.shape(1) != ndvm::kNodeColumns || consts.ndim() != 2 ||
      consts.shape(1) != 3 || nums.shape(0) != consts.shape(0)) {
    throw std::invalid_argument("malformed program table: shapes");
  }
  return ndvm::build_program(nodes.data(), nodes.shape(0), kids.data(), kids.shape(0),
                             aux.data(), aux.shape(0), consts.data(), nums.data(),
                             consts.shape(0), std::move(strings), root, n_params, n_inputs);
}

void check_options(const RunOptions& o) {
  if (o.max_steps == 0 || o.max_heap == 0 || o.max_depth == 0) {
    throw std::invalid_argument("RunOptions: max_steps, max_heap and max_depth must be positive");
  }
  if (o.client != 0 && o.client != 1) {
    throw std::invalid_argument("RunOptions: client must be 0 (walker) or 1 (vm)");
  }
}

ndvm::RunRequest make_request(const ndvm::Program& prog, const F64Arg& theta,
                              const I32Arg& constraints, const std::vector<int>& kinds,
                              const std::vector<F64Arg>& arrays,
                              uint32_t Ng, const RunOptions& opt) {
  ndvm::RunRequest req;
  req.program = &prog;
  if (theta.ndim() != 2 || theta.shape(1) != prog.n_params || theta.shape(0) == 0 ||
      constraints.shape(0) != prog.n_params || kinds.size() != prog.n_inputs ||
      arrays.size() != prog.n_inputs || Ng == 0) {
    throw std::invalid_argument("run: arguments do not match the program");
  }
  req.B = static_cast<uint32_t>(theta.shape(0));
  req.Ng = Ng;
  req.theta = theta.data();
  for (size_t i = 0; i < prog.n_params; ++i) {
    const int32_t t = constraints.data()[i];
    const ndvm::PrimInfo& info = ndvm::prim_info(t > 0 && t < ndvm::kPrimCodeLimit ? t : 0);
    const bool unary = info.name != nullptr && info.kind == ndvm::PrimKind::NUMERIC &&
                       info.shape == ndvm::PrimShape::ELEMENTWISE && info.min_args <= 1 &&
                       (info.max_args < 0 || info.max_args >= 1);
    if (t != 0 && !unary) throw std::invalid_argument("run: a constraint is not a unary opcode");
  }
  req.transforms = constraints.data();
  for (size_t i = 0; i < arrays.size(); ++i) {
    ndvm::InputSpec in;
    in.kind = static_cast<ndvm::InputKind>(kinds[i]);
    in.data = arrays[i].data();
    in.rank = static_cast<uint8_t>(in.kind == ndvm::InputKind::CONST ? arrays[i].ndim() : 0);
    if (in.rank >= 1) in.rows = static_cast<uint32_t>(arrays[i].shape(0));
    if (in.rank == 2) in.cols = static_cast<uint32_t>(arrays[i].shape(1));
    const size_t need = in.kind == ndvm::InputKind::DATA ? Ng : size_t{in.rows} * in.cols;
    if (arrays[i].size() < need || need == 0 || in.rank > 2) {
      throw std::invalid_argument("run: input array has the wrong size");
    }
    req.inputs.push_back(in);
  }
  check_options(opt);
  req.limits.max_steps = opt.max_steps;
  req.limits.max_heap = opt.max_heap;
  req.limits.max_depth = opt.max_depth;
  req.limits.deadline = opt.deadline;
  req.dmci = opt.dmci;
  req.replay = opt.replay;
  req.client = static_cast<uint8_t>(opt.client);
  req.fused = opt.fused;
  req.block_rows = opt.block_rows;
  req.chain_lanes = opt.chain_lanes;
  req.pairs = opt.pairs;
  req.updates = opt.updates;
  return req;
}

nb::object error_tuple(ndvm::ErrorOut& e, size_t B, size_t Ng) {
  return nb::make_tuple(mask_array(std::move(e.mask), B, Ng), static_cast<int>(e.cls),
                        e.message, e.line, e.column, e.lanes, e.error_prim,
                        export_obj(std::move(e.irritants)));
}

// A cotangent broadcast (NumPy rules) to the value's shape; nullptr data: ones.
struct Cotangent {
  const double* data = nullptr;
  std::vector<double> owned;
};

Cotangent broadcast_cotangent(const F64In& ct, const std::vector<int64_t>& shape) {
  Cotangent out;
  const size_t nd = shape.size(), sd = ct.ndim();
  bool same = sd == nd;
  std::vector<size_t> stride(nd, 0);  // element stride of the source along each value axis
  size_t step = 1;
  for (size_t k = 0; k < sd; ++k) {
    const size_t s = sd - 1 - k;
    const size_t n = ct.shape(s);
    if (k >= nd || (n != 1 && static_cast<int64_t>(n) != shape[nd - 1 - k])) {
      // ValueError, as NumPy's broadcast_to raises in the reference backend
      throw nb::value_error("run: the cotangent does not broadcast to the value's shape");
    }
    same = same && static_cast<int64_t>(n) == shape[nd - 1 - k];
    if (n != 1) stride[nd - 1 - k] = step;
    step *= n;
  }
  if (same) {
    out.data = ct.data();
    return out;
  }
  size_t total = 1;
  for (int64_t n : shape) total *= static_cast<size_t>(n);
  out.owned.resize(total);
  std::vector<int64_t> idx(nd, 0);
  size_t src = 0;
  for (size_t i = 0; i < total; ++i) {
    out.owned[i] = ct.data()[src];
    for (size_t k = nd; k-- > 0;) {  // odometer over the value's index
      src += stride[k];
      if (++idx[k] < shape[k]) break;
      src -= stride[k] * static_cast<size_t>(shape[k]);
      idx[k] = 0;
    }
  }
  out.data = out.owned.data();
  return out;
}

// A run's result: _core.Run, a named tuple (C's PyStructSequence) made once per run and filled
// in place. A dict, even one copied from a template of interned keys, cost about 8 k
// instructions a run (its 15 inserts, and its key table freed with it).
enum RunField : int {
  F_NUMERIC, F_VALUE, F_STATUS, F_GRAD, F_GRAD_NEEDS_NUMERIC, F_ERRORS, F_GROUPS, F_STEPS,
  F_TAPE, F_HEAP, F_REPLAYED, F_BLOCKS, F_CHAINS, F_PAIRS, F_UPDATES, F_COUNT
};
PyStructSequence_Field g_run_fields[F_COUNT + 1] = {
    {"numeric", "the value is a number, vector or matrix in every lane"},
    {"value", "float64 [B, Ng, *struct] (numeric results), else None"},
    {"status", "int8 [B, Ng]: 0 ok, 1 non-finite, 2 error"},
    {"grad", "float64 [B, P], the gradient of sum(cotangent * value) (grad runs), else None"},
    {"grad_needs_numeric", "a gradient was asked of a non-numeric result"},
    {"errors", "(mask, class, message, line, column, lanes, error_prim, irritants) per group"},
    {"groups", "non-numeric results: (mask, export) per group of lanes with one value"},
    {"steps", "evaluation steps (a replay: those of the walk it replays)"},
    {"tape", "records on the tape"},
    {"heap", "heap cells"},
    {"replayed", "the result came from replaying the recorded trace"},
    {"blocks", "lane blocks the run was split into (0: one)"},
    {"chains", "fused chains"},
    {"pairs", "fused pairs"},
    {"updates", "fused updates"},
    {nullptr, nullptr}};
#define NDVM_STR2(x) #x
#define NDVM_STR(x) NDVM_STR2(x)
PyStructSequence_Desc g_run_desc = {
    "ndvm." NDVM_STR(NDVM_MODULE) ".Run",
    "One run's result (Context.run): a named tuple of its arrays, errors and counters.",
    g_run_fields, F_COUNT};
PyTypeObject* g_run_type = nullptr;  // owned by the module (its attribute Run)

template <class T>
void put(PyObject* run, RunField f, T&& v) {
  PyStructSequence_SetItem(run, f, nb::cast(std::forward<T>(v)).release().ptr());
}

nb::object run_result(ndvm::RunOutput& out, size_t B, size_t Ng, size_t P) {
  nb::object r = nb::steal(PyStructSequence_New(g_run_type));
  if (!r.is_valid()) throw nb::python_error();
  PyObject* run = r.ptr();
  put(run, F_NUMERIC, out.numeric);
  std::vector<size_t> vshape(out.value_shape.begin(), out.value_shape.end());
  put(run, F_VALUE, out.numeric ? to_numpy<double>(std::move(out.value), vshape) : nb::none());
  put(run, F_STATUS, to_numpy<int8_t>(std::move(out.status), {B, Ng}));
  put(run, F_GRAD, out.has_grad ? to_numpy<double>(std::move(out.grad), {B, P}) : nb::none());
  put(run, F_GRAD_NEEDS_NUMERIC, out.grad_needs_numeric);
  nb::list errors;
  for (ndvm::ErrorOut& e : out.errors) errors.append(error_tuple(e, B, Ng));
  put(run, F_ERRORS, std::move(errors));
  nb::list groups;
  for (ndvm::GroupOut& g : out.groups) {
    groups.append(nb::make_tuple(mask_array(std::move(g.mask), B, Ng),
                                 export_obj(std::move(g.value))));
  }
  put(run, F_GROUPS, std::move(groups));
  put(run, F_STEPS, out.steps);
  put(run, F_TAPE, out.tape);
  put(run, F_HEAP, out.heap);
  put(run, F_REPLAYED, out.replayed);
  put(run, F_BLOCKS, out.blocks);
  put(run, F_CHAINS, out.chains);
  put(run, F_PAIRS, out.pairs);
  put(run, F_UPDATES, out.updates);
  return r;
}

// The core's interrupt poll: Python's pending signals (Ctrl-C raises KeyboardInterrupt here).
// Python runs signal handlers in the main thread only, so only a run called from it polls
// (elsewhere the poll would take the GIL for nothing).
bool python_interrupted(void*) {
  nb::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

unsigned long g_main_thread = 0;  // threading.main_thread().ident, set at import

void poll_if_main(ndvm::RunRequest& req) {
  if (PyThread_get_thread_ident() == g_main_thread) req.interrupted = &python_interrupted;
}

// One evaluation and, with grad, its gradient of sum(cotangent * value) in the same call.
nb::object run(ndvm::Interp& interp, const ndvm::Program& prog, const F64Arg& theta,
             const I32Arg& constraints, const std::vector<int>& kinds,
             const std::vector<F64Arg>& arrays, uint32_t Ng,
             const RunOptions& options, bool grad, std::optional<F64In> cotangent) {
  ndvm::RunRequest req = make_request(prog, theta, constraints, kinds, arrays, Ng, options);
  poll_if_main(req);
  ndvm::RunOutput out;
  try {
    nb::gil_scoped_release release;
    // with ones, the gradient comes with the run (in lane blocks, each block's sweep right
    // after its forward); a given cotangent is broadcast to the value's shape once it is known
    req.grad = grad && !cotangent;
    out = interp.run(req);
    if (grad && out.numeric && !out.has_grad) {
      const Cotangent ct = cotangent ? broadcast_cotangent(*cotangent, out.value_shape)
                                     : Cotangent{};
      out.grad = interp.gradient(ct.data);
      out.has_grad = true;
    }
    out.grad_needs_numeric = grad && !out.numeric;
  } catch (const ndvm::Interrupted&) {
    throw nb::python_error();  // the KeyboardInterrupt that PyErr_CheckSignals raised
  }
  return run_result(out, req.B, Ng, prog.n_params);
}

nb::object gradient(ndvm::Interp& interp, nb::object cotangent, size_t n_params) {
  if (interp.ran_blocked()) {
    throw std::invalid_argument("gradient: the last run ran in lane blocks and kept no tape");
  }
  if (!interp.can_differentiate()) {
    throw std::invalid_argument("gradient: the last run has no numeric result");
  }
  F64In ct;
  const double* ptr = nullptr;
  if (!cotangent.is_none()) {
    ct = nb::cast<F64In>(cotangent);
    if (ct.size() != interp.value_size()) {
      throw std::invalid_argument("gradient: cotangent has the wrong size");
    }
    ptr = ct.data();
  }
  std::vector<double> grad;
  {
    nb::gil_scoped_release release;
    grad = interp.gradient(ptr);
  }
  const size_t B = n_params ? grad.size() / n_params : interp.lanes_b();
  return to_numpy<double>(std::move(grad), {B, n_params});
}

using F64Opt = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <class A>
std::optional<A> take_array(const nb::object& obj, const char* what) {
  if (obj.is_none()) return std::nullopt;
  A arr;
  if (!nb::try_cast<A>(obj, arr, false)) {
    throw std::invalid_argument(std::string("AdamOptions.") + what +
                                ": expected a C-contiguous float64 array or None");
  }
  return arr;
}

// AdamArgs' arrays, taken with the GIL held; they keep the arrays alive during the fit.
struct AdamArrays {
  std::optional<F64Opt> lower, upper, lr_schedule;
  std::optional<F64In> target;
  std::optional<F64Opt> residual_weight;
};

void fill_adam(ndvm::OptimizeRequest& req, const AdamArgs& o, const AdamArrays& arr,
               size_t n_params) {
  req.weight = o.weight;
  req.steps = o.steps;
  req.adam = ndvm::AdamOptions{o.lr, o.beta1, o.beta2, o.eps};
  for (const auto* box : {&arr.lower, &arr.upper}) {
    if (*box && (*box)->shape(0) != n_params) {
      throw std::invalid_argument("optimize: bounds must have one entry per parameter");
    }
  }
  req.lower = arr.lower ? arr.lower->data() : nullptr;
  req.upper = arr.upper ? arr.upper->data() : nullptr;
  req.early_stop = o.early_stop;
  req.rtol = o.rtol;
  req.atol = o.atol;
  req.patience = o.patience;
  if (arr.lr_schedule) {
    if (arr.lr_schedule->shape(0) < o.steps) {
      throw std::invalid_argument("optimize: lr_schedule needs one entry per step");
    }
    req.lr_schedule = arr.lr_schedule->data();
  }
  if (const auto& t = arr.target) {  // [B, N]: one target per lane; any other shape: shared
    const size_t B0 = req.run.B;
    const bool per_lane = t->ndim() == 2;
    const size_t n = per_lane ? (t->shape(0) == B0 ? t->shape(1) : 0) : t->size();
    if (n == 0) throw std::invalid_argument("optimize: target must be [N] or [B, N] (per lane)");
    req.target = t->data();
    req.target_len = n;
    req.target_per_lane = per_lane;
  }
  req.time_limit = o.time_limit;
  req.lm = ndvm::LMOptions{o.ftol, o.xtol, o.gtol, o.lambda0};
  req.lbfgs = ndvm::LBFGSOptions{o.memory, o.c1, o.max_ls, o.lbfgs_gtol, o.lbfgs_ftol, o.c2};
  if (arr.residual_weight) {
    if (req.target == nullptr || arr.residual_weight->shape(0) != req.target_len) {
      throw std::invalid_argument("optimize: residual_weight needs one entry per target entry");
    }
    req.residual_weight = arr.residual_weight->data();
  }
  if (o.lm && req.target == nullptr) {
    throw std::invalid_argument("optimize: Levenberg-Marquardt needs a target");
  }
}

nb::dict optimize(ndvm::Interp& interp, const ndvm::Program& prog, const F64Arg& theta0,
                  const I32Arg& constraints, const std::vector<int>& kinds,
                  const std::vector<F64Arg>& arrays,
                  uint32_t Ng, const RunOptions& options, const AdamArgs& adam) {
  ndvm::OptimizeRequest req;
  req.run = make_request(prog, theta0, constraints, kinds, arrays, Ng, options);
  req.theta0 = theta0.data();
  const AdamArrays arr{take_array<F64Opt>(adam.lower, "lower"),
                       take_array<F64Opt>(adam.upper, "upper"),
                       take_array<F64Opt>(adam.lr_schedule, "lr_schedule"),
                       take_array<F64In>(adam.target, "target"),
                       take_array<F64Opt>(adam.residual_weight, "residual_weight")};
  fill_adam(req, adam, arr, prog.n_params);
  poll_if_main(req.run);
  ndvm::OptimizeOutput out;
  try {
    nb::gil_scoped_release release;
    out = adam.lm      ? ndvm::optimize_lm_waves(interp, req, adam.wave, adam.wave_steps, adam.agree)
          : adam.lbfgs ? ndvm::optimize_lbfgs(interp, req)
                       : ndvm::optimize_adam(interp, req);
  } catch (const ndvm::Interrupted&) {
    throw nb::python_error();  // the KeyboardInterrupt that PyErr_CheckSignals raised
  }
  // the lanes that ran: B, or a first wave that was enough (optimize_lm_waves)
  const size_t B = out.state.size() ? out.state.size() : req.run.B, P = prog.n_params;
  nb::dict d;
  d["non_numeric"] = out.non_numeric;
  d["target_mismatch"] = out.target_mismatch;
  d["timed_out"] = out.timed_out;
  d["stopped_at"] = out.stopped_at;
  d["theta"] = to_numpy<double>(std::move(out.theta), {B, P});
  d["best_theta"] = to_numpy<double>(std::move(out.best_theta), {B, P});
  d["best_loss"] = to_numpy<double>(std::move(out.best_loss), {B});
  d["best_grad"] = to_numpy<double>(std::move(out.best_grad), {B, P});
  d["best_sse"] = to_numpy<double>(std::move(out.best_sse), {B});
  d["history"] = to_numpy<double>(std::move(out.history), {size_t{out.iterates}, B});
  d["state"] = to_numpy<int8_t>(std::move(out.state), {B});
  d["reason"] = to_numpy<int32_t>(std::move(out.reason), {B});
  nb::list errors;
  for (ndvm::ErrorOut& e : out.errors) errors.append(error_tuple(e, B, Ng));
  d["errors"] = errors;
  d["evaluations"] = out.evaluations;
  if (adam.lm) {
    d["why"] = to_numpy<int8_t>(std::move(out.why), {B});
    d["jtj"] = to_numpy<double>(std::move(out.jtj), {B, P, P});
  }
  return d;
}

std::vector<int> missing_kernels() {
  std::vector<int> out;
  for (int code = 0; code < ndvm::kPrimCodeLimit; ++code) {
    const ndvm::PrimInfo& info = ndvm::prim_info(code);
    if (info.name == nullptr) continue;
    bool missing = false;
    switch (info.kind) {
      case ndvm::PrimKind::NUMERIC: missing = !ndvm::has_numeric_kernels(code); break;
      case ndvm::PrimKind::PREDICATE: missing = !ndvm::has_predicate_row(code); break;
      case ndvm::PrimKind::STRUCTURAL:
      case ndvm::PrimKind::CONTROL: missing = !ndvm::Interp::has_row(code); break;
      case ndvm::PrimKind::PRELUDE: break;  // ndvm source, compiled with the program
    }
    if (missing) out.push_back(code);
  }
  return out;
}

void raise_limit(const ndvm::LimitError& e) {
  static const char* const names[4] = {"StepLimitExceeded", "HeapLimitExceeded",
                                       "DepthLimitExceeded", "DeadlineExceeded"};
  nb::object errors = nb::module_::import_("ndvm.errors");
  nb::object cls = errors.attr(names[static_cast<int>(e.kind)]);
  PyErr_SetObject(cls.ptr(), cls(e.what()).ptr());
}

void raise_native(const char* msg) {
  nb::object cls = nb::module_::import_("ndvm.errors").attr("NativeError");
  PyErr_SetObject(cls.ptr(), cls(msg).ptr());
}

void bind_options(nb::module_& m) {
  nb::class_<RunOptions>(m, "RunOptions", "Limits and dialect of one evaluation.")
      .def(
          "__init__",
          [](RunOptions* self, uint64_t max_steps, uint64_t max_heap, uint64_t max_depth,
             double deadline, bool dmci, bool replay, int client, bool fused,
             uint32_t block_rows, uint32_t chain_lanes, bool pairs, bool updates) {
            new (self) RunOptions{max_steps, max_heap, max_depth, deadline, dmci, replay, client,
                                  fused, block_rows, chain_lanes, pairs, updates};
            check_options(*self);
          },
          nb::kw_only(), nb::arg("max_steps") = RunOptions{}.max_steps,
          nb::arg("max_heap") = RunOptions{}.max_heap,
          nb::arg("max_depth") = RunOptions{}.max_depth, nb::arg("deadline") = 0.0,
          nb::arg("dmci") = false, nb::arg("replay") = true, nb::arg("client") = 0,
          nb::arg("fused") = true, nb::arg("block_rows") = 0,
          nb::arg("chain_lanes") = 0, nb::arg("pairs") = true, nb::arg("updates") = true)
      .def_rw("max_steps", &RunOptions::max_steps)
      .def_rw("max_heap", &RunOptions::max_heap)
      .def_rw("max_depth", &RunOptions::max_depth)
      .def_rw("deadline", &RunOptions::deadline)
      .def_rw("dmci", &RunOptions::dmci)
      .def_rw("replay", &RunOptions::replay)
      .def_rw("fused", &RunOptions::fused)
      .def_rw("block_rows", &RunOptions::block_rows)
      .def_rw("chain_lanes", &RunOptions::chain_lanes)
      .def_rw("pairs", &RunOptions::pairs)
      .def_rw("updates", &RunOptions::updates)
      .def_ro("client", &RunOptions::client);
  nb::class_<AdamArgs>(m, "AdamOptions", "Options of the in-runtime Adam fit.")
      .def(nb::init<>())
      .def_rw("weight", &AdamArgs::weight)
      .def_rw("steps", &AdamArgs::steps)
      .def_rw("lr", &AdamArgs::lr)
      .def_rw("beta1", &AdamArgs::beta1)
      .def_rw("beta2", &AdamArgs::beta2)
      .def_rw("eps", &AdamArgs::eps)
      .def_rw("lower", &AdamArgs::lower, nb::arg("value").none())
      .def_rw("upper", &AdamArgs::upper, nb::arg("value").none())
      .def_rw("early_stop", &AdamArgs::early_stop)
      .def_rw("rtol", &AdamArgs::rtol)
      .def_rw("atol", &AdamArgs::atol)
      .def_rw("patience", &AdamArgs::patience)
      .def_rw("lr_schedule", &AdamArgs::lr_schedule, nb::arg("value").none())
      .def_rw("target", &AdamArgs::target, nb::arg("value").none())
      .def_rw("time_limit", &AdamArgs::time_limit)
      .def_rw("lm", &AdamArgs::lm)
      .def_rw("lbfgs", &AdamArgs::lbfgs)
      .def_rw("memory", &AdamArgs::memory)
      .def_rw("max_ls", &AdamArgs::max_ls)
      .def_rw("c1", &AdamArgs::c1)
      .def_rw("c2", &AdamArgs::c2)
      .def_rw("lbfgs_gtol", &AdamArgs::lbfgs_gtol)
      .def_rw("lbfgs_ftol", &AdamArgs::lbfgs_ftol)
      .def_rw("ftol", &AdamArgs::ftol)
      .def_rw("xtol", &AdamArgs::xtol)
      .def_rw("gtol", &AdamArgs::gtol)
      .def_rw("lambda0", &AdamArgs::lambda0)
      .def_rw("wave", &AdamArgs::wave)
      .def_rw("wave_steps", &AdamArgs::wave_steps)
      .def_rw("agree", &AdamArgs::agree)
      .def_rw("residual_weight", &AdamArgs::residual_weight, nb::arg("value").none());
}

nb::dict trace_dict(const ndvm::Interp& in) {
  const ndvm::Trace& t = in.trace();
  nb::dict d;
  d["valid"] = t.valid;
  d["guards"] = t.guards.size();
  d["replays"] = t.replays;
  d["failures"] = t.failures;
  return d;
}

// The opcodes of a program's bytecode for the VM client (Program.vm_ops).
std::vector<std::string> vm_ops(const ndvm::Program& p) {
  std::vector<std::string> ops;
  for (const ndvm::VmIns& in : ndvm::vm_code(p).code) ops.push_back(ndvm::vm_op_name(in.op));
  return ops;
}

}  // namespace

#ifndef NDVM_MODULE
#define NDVM_MODULE _core
#endif

NB_MODULE(NDVM_MODULE, m) {
  m.doc() = "ndvm native core";
  m.def("core_version", &ndvm::core_version, "Version string of the native core.");
  m.attr("dtype") = sizeof(ndvm::Real) == 4 ? "float32" : "float64";
  m.def("vector_math", &ndvm::vmath::kind,
        "The exp/log/sin/cos implementation of this process: 'libmvec-avx2', 'libmvec-sse2' "
        "(glibc's vector math library, <= 4 ulp) or 'libm' (NDVM_NO_LIBMVEC set, or none found).");
  if (_import_array() < 0) throw nb::python_error();  // NumPy's C API (to_numpy)
  g_run_type = PyStructSequence_NewType(&g_run_desc);
  if (g_run_type == nullptr) throw nb::python_error();
  m.attr("Run") = nb::steal(reinterpret_cast<PyObject*>(g_run_type));
  g_main_thread = nb::cast<unsigned long>(
      nb::module_::import_("threading").attr("main_thread")().attr("ident"));
  m.def("missing_kernels", &missing_kernels,
        "Opcodes of primitives without their row: NUMERIC (forward, VJP; shape rule and operand "
        "ranks for CUSTOM), PREDICATE, STRUCTURAL and CONTROL (the member applying it); "
        "PRELUDE primitives are ndvm source. Should be empty.");
  nb::class_<ndvm::Program>(m, "Program")
      .def("__init__",
           [](ndvm::Program* self, I32In nodes, I32In kids, I32In aux, I32In consts, F64In nums,
              std::vector<std::string> strings, uint32_t root, uint32_t n_params,
              uint32_t n_inputs) {
             new (self) ndvm::Program(make_program(nodes, kids, aux, consts, nums,
                                                   std::move(strings), root, n_params,
                                                   n_inputs));
           })
      .def_prop_ro("n_nodes", [](const ndvm::Program& p) { return p.nodes.size(); })
      .def_prop_ro("vm_ops", &vm_ops,
                   "The opcodes of this program's bytecode for the VM client (built on first use).");
  nb::enum_<ndvm::ExportTag>(m, "ExportTag", "Tags of the exported value records.")
      .value("NUM", ndvm::ExportTag::NUM)
      .value("BOOL", ndvm::ExportTag::BOOL)
      .value("BOOLS", ndvm::ExportTag::BOOLS)
      .value("NIL", ndvm::ExportTag::NIL)
      .value("VOID", ndvm::ExportTag::VOID)
      .value("PAIR", ndvm::ExportTag::PAIR)
      .value("SYMBOL", ndvm::ExportTag::SYMBOL)
      .value("STRING", ndvm::ExportTag::STRING)
      .value("CLOSURE", ndvm::ExportTag::CLOSURE)
      .value("PRIMPROC", ndvm::ExportTag::PRIMPROC)
      .value("OTHER", ndvm::ExportTag::OTHER)
      .value("SHARED", ndvm::ExportTag::SHARED);
  bind_options(m);
  ndvm::bind_lower_ir(m);
  ndvm::bind_front_data(m);
  ndvm::bind_front_expand(m);
  ndvm::bind_front(m);
  nb::class_<ndvm::Interp>(m, "Context")
      .def(nb::init<>())
      .def("run", &run, nb::arg("program"), nb::arg("theta"), nb::arg("constraints"),
           nb::arg("input_kinds"), nb::arg("inputs"), nb::arg("n_data"), nb::arg("options"),
           nb::arg("grad") = false, nb::arg("cotangent").none() = nb::none(),
           "One evaluation; with grad, also the gradient [B, P] of sum(cotangent * value) "
           "(cotangent broadcast to the value's shape; None: ones).")
      .def("gradient", &gradient, nb::arg("cotangent").none(), nb::arg("n_params"),
           "Gradient [B, P] of sum(cotangent * value) for the last run on this context.")
      .def("optimize", &optimize, nb::arg("program"), nb::arg("theta0"), nb::arg("constraints"),
           nb::arg("input_kinds"), nb::arg("inputs"), nb::arg("n_data"), nb::arg("options"),
           nb::arg("adam"),
           "Adam over the lanes of theta0 (optim.Adam semantics), all steps in the runtime.")
      .def_prop_ro("trace", &trace_dict,
                   "The recorded trace of this context: whether it is valid, its guard count, "
                   "its successful replays and the failed ones since the last success.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ndvm::LimitError& e) {
      raise_limit(e);
    } catch (const std::logic_error& e) {
      raise_native(e.what());
    } catch (const std::bad_alloc&) {
      raise_native("native core: out of memory");
    } catch (const ndvm::LaneError& e) {
      raise_native(("internal: uncaught lane error: " + e.message).c_str());
    } catch (const ndvm::Diverge&) {
      raise_native("internal: uncaught lane divergence");
    }
  });
}
