(let loop ((i 0) (s 0)) (if (< i (* 3 a)) (loop (+ i 1) (+ s (* b (cos i)))) s))
