(list (if (> a 0) 'pos 'neg) (if (> a 0) (* 2 a)) (if #f 1 2) (if '() 'true 'false))
