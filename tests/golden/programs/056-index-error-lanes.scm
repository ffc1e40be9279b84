(ref (vec a b) (if (> a 0) 1 5))
