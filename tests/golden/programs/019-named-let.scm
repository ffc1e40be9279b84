(let loop ((i 0) (acc 1)) (if (= i 5) acc (loop (+ i 1) (* acc a))))
