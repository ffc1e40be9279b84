(cond ((< a -1) (* 2 a)) ((< a 1) (square a) (* a a a)) (else (+ a 10)))
