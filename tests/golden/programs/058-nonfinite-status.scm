(+ (/ b a) (log b))
