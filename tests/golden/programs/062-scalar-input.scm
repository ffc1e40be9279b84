(+ (* a s) (ref v 2) (vsum v))
