(cond ((> a 100))
      ((assv 2 '((1 . 10) (2 . 20))) => (lambda (p) (* a (cdr p))))
      (else (- a)))
