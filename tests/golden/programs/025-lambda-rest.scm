(define (sum . xs) (fold-left + 0 xs))
(define (head-times-count h . rest) (* h (length rest)))
(+ (sum a b 1) (head-times-count b 1 2 3) ((lambda args (apply * args)) a b) (sum))
