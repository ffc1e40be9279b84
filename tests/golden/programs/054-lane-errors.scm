(define l (if (> a 0) (list a) a))
(+ (car l) b)
