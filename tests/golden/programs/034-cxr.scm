(define t '(((1 2) 3 4) (5 6) 7 8))
(list (car t) (cdr t) (caar t) (cadr t) (cdar t) (cddr t) (caaar t) (caadr t) (cadar t)
      (caddr t) (cdaar t) (cdadr t) (cddar t) (cdddr t))
