(+ (loop ((s 0) (k 0)) (if (= k 10) s (recur (+ s (* a (sin k))) (+ k 1))))
   (loop ((i 0) (acc 0))
     (if (= i 3)
         acc
         (recur (+ i 1)
                (+ acc (loop ((j 0) (t 0)) (if (= j 4) t (recur (+ j 1) (+ t (* a i j))))))))))
