(define (kind s) (case s ((a e i o u) 'vowel) ((w y) 'semi) (else 'consonant)))
(list (map kind '(a b w)) (case 5 ((1 2) 'low) (else => (lambda (k) (* k 2)))))
