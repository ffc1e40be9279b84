(let ((x a) (y b)) (let ((x y) (y x)) (- x (* 2 y))))
