(letrec ((f (lambda (n acc) (if (= n 0) acc (g (- n 1) (+ acc a)))))
         (g (lambda (n acc) (if (= n 0) acc (f (- n 1) (* acc 0.999))))))
  (f 1000 0))
