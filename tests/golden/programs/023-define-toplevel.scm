(define k 3)
(define (sq x) (* x x))
(define s (sq a))
(+ (* k s) b)
