(list 'sym '(1 2 . 3) (quote (a b)) '#t '"str" '() ''x '[1 2])
