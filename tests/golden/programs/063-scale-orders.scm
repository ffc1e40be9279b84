(+ (trace (matmul (scale a (eye 2)) (mat (vec 1 2) (vec 3 4))))
   (vsum (scale (vec a b) b)) (det (scale (mat (vec a 1) (vec b 2)) b))
   (vsum (scale 2 (vec a b))))
