(cond ((> a 100)) ((< a 0) 'neg) (else 'other))
