; Negative log-likelihood of a univariate local-level model (statsmodels conventions):
; y_t = mu_t + eps_t, eps ~ N(0, exp(le)); mu_{t+1} = mu_t + eta_t, eta ~ N(0, exp(ll)).
; Approximate diffuse start (mean 0, variance 1e6), the first observation burned.
(params (le 7.0) (ll 7.0))
(define s2e (exp le))
(define s2l (exp ll))
(define T (vlen Y))
(let loop ((t 0) (a 0) (P 1e6) (nll 0))
  (if (= t T)
      nll
      (let* ((F (+ P s2e))
             (v (- (ref Y t) a))
             (K (/ P F))
             (step (if (< t 1) 0 (* 0.5 (+ 1.8378770664093453 (log F) (/ (* v v) F))))))
        (loop (+ t 1) (+ a (* K v)) (+ (* P (- 1 K)) s2l) (+ nll step)))))
