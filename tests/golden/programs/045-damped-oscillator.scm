; A damped oscillator observed at data points x: y = a * exp(-k x) * cos(w x + phi).
(params (a 1.0) (k 0.3 positive) (w 2.0) (phi 0.0))
(* a (exp (- (* k x))) (cos (+ (* w x) phi)))
