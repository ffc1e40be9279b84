(list (length '(1 2 3)) (append '(1) '(2 3) '() '(4)) (append) (append '(1) 2)
      (reverse '(1 2 3)) (list-ref '(a b c) 2) (list-tail '(1 2 3) 2) (list-tail '(1) 1)
      (iota 3) (iota 3 1) (iota 3 0 0.5) (cons 1 2) (list) (length '()))
