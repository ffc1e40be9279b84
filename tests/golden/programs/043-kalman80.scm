; Negative log-likelihood of a 2-D local-level Kalman filter over an 80x2 observation matrix Y.
; Process noise q^2 I, observation noise r^2 I; state starts at 0 with covariance I.
(params (q 0.3 positive) (r 0.3 positive))
(define Q (* (eye 2) (* q q)))
(define R (* (eye 2) (* r r)))
(define T (rows Y))
(let loop ((t 0) (m (zeros 2)) (P (eye 2)) (nll 0))
  (if (= t T)
      nll
      (let* ((Pp (+ P Q))
             (y (ref Y t))
             (v (- y m))
             (S (+ Pp R))
             (Si (inv S))
             (K (matmul Pp Si))
             (m2 (+ m (matvec K v)))
             (P2 (- Pp (matmul K Pp)))
             (step (* 0.5 (+ (logdet S) (dot v (matvec Si v)) (* 2 1.8378770664093453)))))
        (loop (+ t 1) m2 P2 (+ nll step)))))
