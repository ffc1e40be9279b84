; a line comment
#| a block #| nested |# comment |#
(+ #;(ignored form) (vsum [a 1e-3 .5 -2.]) (if #true 1 0) (if #false 1 0) (min +inf.0 2)
   (* -2.5E1 b) (if (nan? +nan.0) 1 0) (max -inf.0 b))  ; trailing
