(list (assoc 2 '((1 . a) (2 . b))) (assq 'c '((a 1) (c 2))) (assv 3 '((1 . x)))
      (member '(1) '(0 (1) 2)) (memq 'c '(a b c d)) (memv 2 '(1 2 3)) (member 9 '(1 2))
      (assoc "k" '(("j" . 1) ("k" . 2))))
