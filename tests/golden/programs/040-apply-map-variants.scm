(list (apply + '()) (apply max 1 '(5 3)) (map car '((1 2) (3 4)))
      (map (lambda (x y z) (+ x y z)) '(1 2) '(10 20) '(100 200 300))
      (fold-right list 'init '(1 2)) (fold-left list 'init '(1 2))
      (vector->list (vector-map + [1 2] [10 20])) (map (lambda (x) (* x x)) '()))
