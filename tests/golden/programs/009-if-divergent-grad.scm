(if (> a 0) (* a a b) (* 3 b (sin a)))
