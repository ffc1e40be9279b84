(* b (cdr (assv (floor a) '((1 . 10) (2 . 20) (3 . 30)))))
