(list->vector (map (lambda (k) (* a k)) (list 1 2 b)))
