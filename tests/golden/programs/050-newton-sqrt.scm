(let loop ((x 1) (n 0))
  (if (or (< (abs (- (* x x) a)) 1e-12) (> n 60))
      x
      (loop (* 0.5 (+ x (/ a x))) (+ n 1))))
