(define (mk a) (if (> a 0) (list a (* 2 a)) (* 3 a)))
(define v (mk a))
(if (pair? v) (+ (car v) (cadr v) b) (* v b))
