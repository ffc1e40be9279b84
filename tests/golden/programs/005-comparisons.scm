(list (= a b) (< a b) (> a b) (<= a a b) (>= b a) (< 1 2 3) (< 1 3 2) (= 1 1 1)
      (zero? (- a a)) (positive? a) (negative? a) (finite? (/ 1 a)) (nan? (log -1))
      (not (> a 0)) (not 0))
