(+ (* a (floor b)) (ceiling b) (round b) (truncate (- b)) (* a (sign b)) (quotient 7 2)
   (remainder b 2) (modulo (- b) 2) (abs a) (min a b 0.5) (max a b) (clamp a -1 1)
   (quotient (- 7) 2) (remainder (- 7) 2) (modulo 7 (- 2)))
