(let ((w (when (> a 0) 'ignored (* a 2)))
      (u (unless (> a 0) (* a 3))))
  (if (number? w) w u))
