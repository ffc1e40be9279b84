(define v (if (> a 0) (vec a b) (vec a b (* a b))))
(* (vlen v) (vsum v))
