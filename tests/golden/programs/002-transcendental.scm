(+ (exp (* 0.1 a)) (log b) (log b 2) (sqrt b) (cbrt a) (square a) (expt b a) (pow b 0.5)
   (sin a) (cos a) (tan (* 0.1 a)))
