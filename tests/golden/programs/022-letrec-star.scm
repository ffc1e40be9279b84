(letrec* ((p (* a 2)) (q (+ p 1)) (f (lambda (x) (* x q)))) (f b))
