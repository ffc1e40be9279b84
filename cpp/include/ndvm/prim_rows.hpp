// Row dispatch over the generated primitive list (prims.inc): including prims.inc after this
// header expands NDVM_ROW_<KIND>_<SHAPE>(UPPER, code) for every primitive. A table builder
// defines the NDVM_ROW_* it fills first; every other one expands to nothing. Not guarded:
// included once per table.
#ifndef NDVM_ROW_NUMERIC_ELEMENTWISE
#define NDVM_ROW_NUMERIC_ELEMENTWISE(upper, code)
#endif
#ifndef NDVM_ROW_NUMERIC_SCALAR
#define NDVM_ROW_NUMERIC_SCALAR(upper, code)
#endif
#ifndef NDVM_ROW_NUMERIC_CUSTOM
#define NDVM_ROW_NUMERIC_CUSTOM(upper, code)
#endif
#ifndef NDVM_ROW_PREDICATE_SCALAR
#define NDVM_ROW_PREDICATE_SCALAR(upper, code)
#endif
#ifndef NDVM_ROW_PREDICATE_ELEMENTWISE
#define NDVM_ROW_PREDICATE_ELEMENTWISE(upper, code)
#endif
#ifndef NDVM_ROW_STRUCTURAL_ELEMENTWISE
#define NDVM_ROW_STRUCTURAL_ELEMENTWISE(upper, code)
#endif
#ifndef NDVM_ROW_PRELUDE_ELEMENTWISE
#define NDVM_ROW_PRELUDE_ELEMENTWISE(upper, code)
#endif
#ifndef NDVM_ROW_CONTROL_ELEMENTWISE
#define NDVM_ROW_CONTROL_ELEMENTWISE(upper, code)
#endif
#define NDVM_PRIM(upper, code, name, lo, hi, kind, shape, domain) \
  NDVM_ROW_##kind##_##shape(upper, code)
