(if (> x a) (* b (- x a)) (* c (square (- x a))))
