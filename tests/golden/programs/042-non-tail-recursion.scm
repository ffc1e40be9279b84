(define (sum-to n) (if (= n 0) 0 (+ (* a n) (sum-to (- n 1)))))
(sum-to 200)
