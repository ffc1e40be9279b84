(begin (assert (> b 0)) (* a b))
