(* a (sin (+ (* b x) c)))
