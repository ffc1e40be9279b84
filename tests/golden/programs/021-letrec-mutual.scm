(letrec ((ev (lambda (n acc) (if (= n 0) acc (od (- n 1) (* acc a)))))
         (od (lambda (n acc) (if (= n 0) (- acc) (ev (- n 1) (+ acc b))))))
  (ev 7 1))
