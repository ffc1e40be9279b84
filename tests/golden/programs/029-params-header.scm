(params (a 1.0) (k 0.1 positive) (p 0.5 unit) (s 0.0 signed-unit) (f 0.0 free) g)
(+ a (* k 2) (* p 3) (* s 4) (* f 5) (* k p s) g)
