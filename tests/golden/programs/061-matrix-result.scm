(matmul (mat (vec a 1) (vec 0 b)) (mat [1 2] [3 4]))
