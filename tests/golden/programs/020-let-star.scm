(let* ((x (* a 2)) (y (+ x 1)) (x (* y y))) (- x a))
