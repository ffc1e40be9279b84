// nanobind glue only: array conversions, GIL release, exception translation. No interpreter
// logic lives here.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <stdexcept>

#include "ndvm/interp.hpp"
#include "ndvm/kernels.hpp"
#include "ndvm/optimize.hpp"
#include "ndvm/prims.hpp"
#include "ndvm/program.hpp"
#include "ndvm/version.hpp"

namespace nb = nanobind;

namespace {

using F64In = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;
using I32In = nb::ndarray<const int32_t, nb::c_contig, nb::device::cpu>;

template <class T>
nb::object to_numpy(std::vector<T>&& v, const std::vector<size_t>& shape) {
  auto* heap = new std::vector<T>(std::move(v));
  if (heap->empty()) heap->reserve(1);
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(heap->data(), shape.size(), shape.data(), owner));
}

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

ndvm::RunRequest make_request(const ndvm::Program& prog, F64In theta, I32In constraints,
                              const std::vector<int>& kinds, const std::vector<F64In>& arrays,
                              uint32_t Ng, uint64_t max_steps, uint64_t max_heap,
                              uint64_t max_depth, double deadline, bool dmci) {
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
  req.limits.max_steps = max_steps;
  req.limits.max_heap = max_heap;
  req.limits.max_depth = max_depth;
  req.limits.deadline = deadline;
  req.dmci = dmci;
  return req;
}

nb::object error_tuple(ndvm::ErrorOut& e, size_t B, size_t Ng) {
  return nb::make_tuple(mask_array(std::move(e.mask), B, Ng), static_cast<int>(e.cls),
                        e.message, e.line, e.column, e.lanes, e.error_prim,
                        export_obj(std::move(e.irritants)));
}

nb::dict run(ndvm::Interp& interp, const ndvm::Program& prog, F64In theta, I32In constraints,
             std::vector<int> kinds, std::vector<F64In> arrays, uint32_t Ng, bool grad,
             uint64_t max_steps, uint64_t max_heap, uint64_t max_depth,
             double deadline, bool dmci) {
  ndvm::RunRequest req = make_request(prog, theta, constraints, kinds, arrays, Ng, max_steps,
                                      max_heap, max_depth, deadline, dmci);
  req.grad = grad;
  ndvm::RunOutput out;
  {
    nb::gil_scoped_release release;
    out = interp.run(req);
  }
  const size_t B = req.B;
  nb::dict d;
  d["numeric"] = out.numeric;
  std::vector<size_t> vshape(out.value_shape.begin(), out.value_shape.end());
  d["value"] = out.numeric ? to_numpy<double>(std::move(out.value), vshape) : nb::none();
  d["status"] = to_numpy<int8_t>(std::move(out.status), {B, Ng});
  d["grad"] = out.has_grad ? to_numpy<double>(std::move(out.grad), {B, prog.n_params})
                           : nb::none();
  d["grad_needs_numeric"] = out.grad_needs_numeric;
  nb::list errors;
  for (ndvm::ErrorOut& e : out.errors) errors.append(error_tuple(e, B, Ng));
  d["errors"] = errors;
  nb::list groups;
  for (ndvm::GroupOut& g : out.groups) {
    groups.append(nb::make_tuple(mask_array(std::move(g.mask), B, Ng),
                                 export_obj(std::move(g.value))));
  }
  d["groups"] = groups;
  d["steps"] = out.steps;
  d["tape"] = out.tape;
  d["heap"] = out.heap;
  return d;
}

nb::object gradient(ndvm::Interp& interp, nb::object cotangent, size_t n_params) {
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

nb::dict optimize(ndvm::Interp& interp, const ndvm::Program& prog, F64In theta0,
                  I32In constraints, std::vector<int> kinds, std::vector<F64In> arrays,
                  uint32_t Ng, uint64_t max_steps, uint64_t max_heap, uint64_t max_depth,
                  double deadline, bool dmci, double weight, uint32_t steps, double lr,
                  double beta1, double beta2, double eps, std::optional<F64Opt> lower,
                  std::optional<F64Opt> upper, bool early_stop, double rtol, double atol,
                  int64_t patience, std::optional<F64Opt> lr_schedule,
                  std::optional<F64In> target, bool target_per_lane, double time_limit) {
  ndvm::OptimizeRequest req;
  req.run = make_request(prog, theta0, constraints, kinds, arrays, Ng, max_steps, max_heap,
                         max_depth, deadline, dmci);
  req.theta0 = theta0.data();
  req.weight = weight;
  req.steps = steps;
  req.adam = ndvm::AdamOptions{lr, beta1, beta2, eps};
  for (const auto* box : {&lower, &upper}) {
    if (*box && (*box)->shape(0) != prog.n_params) {
      throw std::invalid_argument("optimize: bounds must have one entry per parameter");
    }
  }
  req.lower = lower ? lower->data() : nullptr;
  req.upper = upper ? upper->data() : nullptr;
  req.early_stop = early_stop;
  req.rtol = rtol;
  req.atol = atol;
  req.patience = patience;
  if (lr_schedule) {
    if (lr_schedule->shape(0) < steps) {
      throw std::invalid_argument("optimize: lr_schedule needs one entry per step");
    }
    req.lr_schedule = lr_schedule->data();
  }
  if (target) {
    const size_t B0 = req.run.B;
    const size_t n = target_per_lane ? (target->ndim() == 2 && target->shape(0) == B0
                                            ? target->shape(1)
                                            : 0)
                                     : target->size();
    if (n == 0 || (target_per_lane && target->size() != B0 * n)) {
      throw std::invalid_argument("optimize: target must be [N] or [B, N] (per lane)");
    }
    req.target = target->data();
    req.target_len = n;
    req.target_per_lane = target_per_lane;
  }
  req.time_limit = time_limit;
  ndvm::OptimizeOutput out;
  {
    nb::gil_scoped_release release;
    out = ndvm::optimize_adam(interp, req);
  }
  const size_t B = req.run.B, P = prog.n_params;
  nb::dict d;
  d["non_numeric"] = out.non_numeric;
  d["target_mismatch"] = out.target_mismatch;
  d["timed_out"] = out.timed_out;
  d["stopped_at"] = out.stopped_at;
  d["theta"] = to_numpy<double>(std::move(out.theta), {B, P});
  d["best_theta"] = to_numpy<double>(std::move(out.best_theta), {B, P});
  d["best_loss"] = to_numpy<double>(std::move(out.best_loss), {B});
  d["history"] = to_numpy<double>(std::move(out.history), {size_t{out.iterates}, B});
  d["state"] = to_numpy<int8_t>(std::move(out.state), {B});
  d["reason"] = to_numpy<int32_t>(std::move(out.reason), {B});
  nb::list errors;
  for (ndvm::ErrorOut& e : out.errors) errors.append(error_tuple(e, B, Ng));
  d["errors"] = errors;
  d["evaluations"] = out.evaluations;
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

}  // namespace

#ifndef NDVM_MODULE
#define NDVM_MODULE _core
#endif

NB_MODULE(NDVM_MODULE, m) {
  m.doc() = "ndvm native core";
  m.def("core_version", &ndvm::core_version, "Version string of the native core.");
  m.attr("dtype") = sizeof(ndvm::Real) == 4 ? "float32" : "float64";
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
      .def_prop_ro("n_nodes", [](const ndvm::Program& p) { return p.nodes.size(); });
  nb::class_<ndvm::Interp>(m, "Context")
      .def(nb::init<>())
      .def("run", &run, nb::arg("program"), nb::arg("theta"), nb::arg("constraints"),
           nb::arg("input_kinds"), nb::arg("inputs"), nb::arg("n_data"), nb::arg("grad"),
           nb::arg("max_steps"), nb::arg("max_heap"), nb::arg("max_depth"),
           nb::arg("deadline"), nb::arg("dmci"))
      .def("gradient", &gradient, nb::arg("cotangent").none(), nb::arg("n_params"),
           "Gradient [B, P] of sum(cotangent * value) for the last run on this context.")
      .def("optimize", &optimize, nb::arg("program"), nb::arg("theta0"), nb::arg("constraints"),
           nb::arg("input_kinds"), nb::arg("inputs"), nb::arg("n_data"), nb::arg("max_steps"),
           nb::arg("max_heap"), nb::arg("max_depth"), nb::arg("deadline"), nb::arg("dmci"),
           nb::arg("weight"), nb::arg("steps"), nb::arg("lr"), nb::arg("beta1"),
           nb::arg("beta2"), nb::arg("eps"), nb::arg("lower").none(), nb::arg("upper").none(),
           nb::arg("early_stop"), nb::arg("rtol"), nb::arg("atol"), nb::arg("patience"),
           nb::arg("lr_schedule").none() = nb::none(), nb::arg("target").none() = nb::none(),
           nb::arg("target_per_lane") = false, nb::arg("time_limit") = 0.0,
           "Adam over the lanes of theta0 (optim.Adam semantics), all steps in the runtime.");
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
