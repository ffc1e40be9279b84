(let* ((l (list a b (* a b)))
       (r (reverse (append l (list 1)))))
  (+ (car r) (cadr r) (* 2 (list-ref r 3)) (length r) (apply + (iota 3 a b))
     (car (list-tail l 2))))
