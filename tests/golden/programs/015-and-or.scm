(list (and) (and 1 2) (and #f (car 1)) (or) (or #f 3) (or (> a 0) 'neg)
      (and (> a 0) (* a 2)) (or #f #f))
