(params (r 3.2) (x0 0.3 unit))
(let loop ((i 0) (x x0))
  (if (= i 16) x (loop (+ i 1) (* r x (- 1 x)))))
