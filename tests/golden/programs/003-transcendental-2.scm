(+ (asin u) (acos u) (atan u) (atan u v) (sinh u) (cosh u) (tanh u) (asinh v)
   (acosh (+ 2 (square v))) (atanh u) (sigmoid v) (softplus v) (erf v) (hypot u v)
   (log1p (square u)) (expm1 u))
