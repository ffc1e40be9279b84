(define (f x) (begin (* x 2)))
(begin (f a) (begin (+ (f a) 1)))
(begin (define z 3) (* z (f b)))
