(+ (* a (exp (* -0.5 (square (/ (- x b) c))))) (* 0.1 (tanh x)))
