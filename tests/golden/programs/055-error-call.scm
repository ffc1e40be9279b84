(if (< a 0) (error "negative a:" a) (sqrt a))
