;;; ndvm.meta: a metacircular evaluator for the ndvm language, written in the ndvm language.
;;;
;;; (meta-run program bindings) evaluates PROGRAM, the list of a program's top-level forms as
;;; data, in an environment where BINDINGS (an association list: the host's parameters and
;;; inputs, as numbers) are visible. ndvm.meta.compile wraps this file around a quoted program;
;;; the wrapper also defines meta-primitives and meta-prelude from the one primitive table.
;;;
;;; Object values are host values, except procedures:
;;;   - a host primitive (+, car, matvec, ...) is itself, and is called with the host's apply,
;;;     so numeric primitives run on the host and are differentiated by the host's tape;
;;;   - an object closure is the list (%closure parameters body environment).
;;; A test on a per-lane boolean is a test of this evaluator's own `if`, so the object program's
;;; lanes diverge (and rejoin, or regroup) exactly where the evaluator's lanes do.
;;; Tail calls: meval calls apply-procedure, which calls eval-body, which calls meval, each in
;;; tail position, so object tail calls are host tail calls and run in constant space.
;;;
;;; Environments are association lists, innermost binding first. The definitions of one body
;;; (define, letrec, letrec*, named let) are one entry (%rec lambdas values): VALUES holds the
;;; definitions evaluated so far, LAMBDAS the procedure definitions as (name . (lambda ...)).
;;; Looking up a procedure of a group builds its closure over the environment from the group's
;;; entry on, so the procedures of a group see each other, and the values defined before the
;;; lookup, without mutation. The outermost entry is the global group: the host primitives as
;;; values and the prelude (map, fold-left, assq, ...) as lambdas, read from the primitive table.
;;;
;;; Before it runs, a program is linked: each reference to a primitive or prelude procedure that
;;; no binding shadows becomes (quote <the procedure>), so running it looks up only the
;;; program's own variables (and, in the tower, the evaluator's own references to car, eq?, ...
;;; cost nothing at the level below).
;;;
;;; The dialect is the host's: under dmci (the host's plain `let` sequential) the object's plain
;;; `let` is linked as let*; every numeric rule is the host primitive's own.
;;;
;;; The symbols %closure and %rec are reserved. Special-form names are reserved too, except
;;; `loop`, which is an ordinary variable wherever it is bound (the usual named-let name): the
;;; linker, which knows the bindings, rewrites the loop/recur form into a named let.

;; ---------------------------------------------------------------------------------------------
;; Expressions

(define (meval x env)
  (cond ((symbol? x) (lookup x env))
        ((pair? x) (meval-form x env))
        (else x)))

(define (meval-form x env)
  (let ((head (car x)))
    (if (symbol? head)
        (meval-special head x env)
        (apply-procedure (meval head env) (meval-list (cdr x) env)))))

(define (meval-special head x env)
  ;; A form whose head is a symbol: a special form, or the application of a variable.
  (cond ((eq? head 'quote) (cadr x))
          ((eq? head 'if)
           (if (meval (cadr x) env)
               (meval (caddr x) env)
               (if (null? (cdddr x)) (void) (meval (car (cdddr x)) env))))
          ((eq? head 'lambda) (make-closure x env))
          ((eq? head 'let)
           (if (symbol? (cadr x))
               (meval-named-let (cadr x) (caddr x) (cdddr x) env)
               (eval-body (cddr x) (bind-inits (cadr x) env env))))
          ((eq? head 'let*) (eval-body (cddr x) (bind-sequentially (cadr x) env)))
          ((or (eq? head 'letrec) (eq? head 'letrec*))
           (eval-body (append (map (lambda (b) (cons 'define b)) (cadr x)) (cddr x)) env))
          ((eq? head 'begin) (meval-sequence (cdr x) env))
          ((eq? head 'cond) (meval-cond (cdr x) env))
          ((eq? head 'case) (meval-case (meval (cadr x) env) (cddr x) env))
          ((eq? head 'and) (meval-and (cdr x) env))
          ((eq? head 'or) (meval-or (cdr x) env))
          ((eq? head 'when) (if (meval (cadr x) env) (meval-sequence (cddr x) env) (void)))
          ((eq? head 'unless) (if (meval (cadr x) env) (void) (meval-sequence (cddr x) env)))
          ((eq? head 'do) (meval-do (cadr x) (caddr x) (cdddr x) env))
          ((eq? head 'assert)
           (if (meval (cadr x) env) (void) (error "assertion failed:" (cadr x))))
          ((eq? head 'define) (error "define is only allowed at the start of a body:" x))
          (else (apply-procedure (lookup head env) (meval-list (cdr x) env)))))

(define (meval-list xs env)
  (if (null? xs) '() (cons (meval (car xs) env) (meval-list (cdr xs) env))))

(define (meval-sequence forms env)
  (cond ((null? forms) (void))
        ((null? (cdr forms)) (meval (car forms) env))
        (else (meval (car forms) env) (meval-sequence (cdr forms) env))))

(define (bind-inits bindings env target)
  ;; let: every init is evaluated in ENV; the names are bound in front of TARGET.
  (if (null? bindings)
      target
      (bind-inits (cdr bindings) env
                  (cons (cons (car (car bindings)) (meval (cadr (car bindings)) env)) target))))

(define (bind-sequentially bindings env)
  ;; let*: each init sees the names bound before it.
  (if (null? bindings)
      env
      (bind-sequentially (cdr bindings) (bind-inits (list (car bindings)) env env))))

(define (meval-named-let name bindings body env)
  ;; (let name ((v init) ...) body ...): a one-procedure group, called on the inits.
  (let* ((procedure (cons 'lambda (cons (map car bindings) body)))
         (group (cons (rec-group (list (cons name procedure)) '()) env)))
    (apply-procedure (make-closure procedure group) (meval-list (map cadr bindings) env))))

(define (meval-cond clauses env)
  (if (null? clauses)
      (void)
      (let ((clause (car clauses)))
        (if (eq? (car clause) 'else)
            (meval-sequence (cdr clause) env)
            (let ((test (meval (car clause) env)))
              (if test
                  (cond ((null? (cdr clause)) test)
                        ((eq? (cadr clause) '=>)
                         (apply-procedure (meval (caddr clause) env) (list test)))
                        (else (meval-sequence (cdr clause) env)))
                  (meval-cond (cdr clauses) env)))))))

(define (meval-case key clauses env)
  (if (null? clauses)
      (void)
      (let ((clause (car clauses)))
        (if (or (eq? (car clause) 'else) (memv key (car clause)))
            (if (eq? (cadr clause) '=>)
                (apply-procedure (meval (caddr clause) env) (list key))
                (meval-sequence (cdr clause) env))
            (meval-case key (cdr clauses) env)))))

(define (meval-and xs env)
  (cond ((null? xs) #t)
        ((null? (cdr xs)) (meval (car xs) env))
        ((meval (car xs) env) (meval-and (cdr xs) env))
        (else #f)))

(define (meval-or xs env)
  (cond ((null? xs) #f)
        ((null? (cdr xs)) (meval (car xs) env))
        (else (let ((v (meval (car xs) env))) (if v v (meval-or (cdr xs) env))))))

(define (meval-do specs exit commands env)
  ;; (do ((var init step) ...) (test result ...) command ...)
  (let iterate ((vals (meval-list (map cadr specs) env)))
    (let ((inner (extend (map car specs) vals env)))
      (if (meval (car exit) inner)
          (meval-sequence (cdr exit) inner)
          (begin
            (meval-sequence commands inner)
            (iterate (map (lambda (spec)
                            (if (null? (cddr spec)) (lookup (car spec) inner)
                                (meval (caddr spec) inner)))
                          specs)))))))

;; ---------------------------------------------------------------------------------------------
;; Procedures

(define (make-closure lambda-form env) (list '%closure (cadr lambda-form) (cddr lambda-form) env))

(define (closure? x) (and (pair? x) (eq? (car x) '%closure)))

(define (apply-procedure f args)
  (cond ((closure? f) (eval-body (caddr f) (extend (cadr f) args (car (cdddr f)))))
        ((procedure? f) (apply f args))
        (else (error "not a procedure:" f))))

(define (spread args)
  ;; (a b (c d)) -> (a b c d): the argument list of (apply f a b '(c d)).
  (if (null? (cdr args)) (car args) (cons (car args) (spread (cdr args)))))

(define (meta-apply f . args) (apply-procedure f (spread args)))

(define (meta-procedure? x) (or (procedure? x) (closure? x)))

;; ---------------------------------------------------------------------------------------------
;; Environments

(define (rec-group lambdas vals) (list '%rec lambdas vals))

(define (find-entry name env)
  ;; The environment from NAME's binding entry on, or #f when NAME is unbound.
  (cond ((null? env) #f)
        ((eq? (car (car env)) name) env)
        ((and (eq? (car (car env)) '%rec)
              (or (assq name (caddr (car env))) (assq name (cadr (car env)))))
         env)
        (else (find-entry name (cdr env)))))

(define (lookup name env)
  (let ((e (find-entry name env)))
    (cond ((not e) (error "unbound variable:" name))
          ((eq? (car (car e)) name) (cdr (car e)))
          (else
           (let ((value (assq name (caddr (car e)))))
             (if value
                 (cdr value)
                 (make-closure (cdr (assq name (cadr (car e)))) e)))))))

(define (extend names args env)
  ;; Bind a lambda list (fixed, dotted or a single rest symbol) to a list of arguments.
  (cond ((symbol? names) (cons (cons names args) env))
        ((null? names) (if (null? args) env (error "too many arguments:" args)))
        ((null? args) (error "too few arguments, missing:" names))
        (else (extend (cdr names) (cdr args) (cons (cons (car names) (car args)) env)))))

(define (add-definition name value env)
  ;; ENV starts with a group: the same group with one more value.
  (let ((group (car env)))
    (cons (rec-group (cadr group) (cons (cons name value) (caddr group))) (cdr env))))

;; ---------------------------------------------------------------------------------------------
;; Bodies: definitions (and begin forms that contain them) first, then expressions

(define (definition? form) (and (pair? form) (eq? (car form) 'define)))

(define (begin-form? form) (and (pair? form) (eq? (car form) 'begin)))

(define (has-definitions? forms)
  (and (pair? forms)
       (or (definition? (car forms))
           (and (begin-form? (car forms)) (has-definitions? (cdr (car forms))))
           (has-definitions? (cdr forms)))))

(define (splice-begins forms)
  (cond ((null? forms) '())
        ((begin-form? (car forms))
         (append (splice-begins (cdr (car forms))) (splice-begins (cdr forms))))
        (else (cons (car forms) (splice-begins (cdr forms))))))

(define (definition-name form) (if (pair? (cadr form)) (car (cadr form)) (cadr form)))

(define (definition-value form)
  ;; (define (f . params) body ...) is (define f (lambda params body ...)).
  (if (pair? (cadr form))
      (cons 'lambda (cons (cdr (cadr form)) (cddr form)))
      (caddr form)))

(define (lambda-form? x) (and (pair? x) (eq? (car x) 'lambda)))

(define (procedure-definitions forms)
  (cond ((null? forms) '())
        ((and (definition? (car forms)) (lambda-form? (definition-value (car forms))))
         (cons (cons (definition-name (car forms)) (definition-value (car forms)))
               (procedure-definitions (cdr forms))))
        (else (procedure-definitions (cdr forms)))))

(define (eval-body forms env)
  (if (has-definitions? forms)
      (let ((forms (splice-begins forms)))
        (eval-group forms (cons (rec-group (procedure-definitions forms) '()) env)))
      (meval-sequence forms env)))

(define (eval-group forms env)
  ;; The forms of a body whose group (the first entry of ENV) holds its procedures.
  (cond ((null? forms) (void))
        ((definition? (car forms))
         (let ((value (definition-value (car forms))))
           (if (lambda-form? value)
               (eval-group (cdr forms) env)
               (eval-group (cdr forms)
                           (add-definition (definition-name (car forms)) (meval value env) env)))))
        ((null? (cdr forms)) (meval (car forms) env))
        (else (meval (car forms) env) (eval-group (cdr forms) env))))

;; ---------------------------------------------------------------------------------------------
;; Linking: before a program runs, every reference to a global (a primitive or a prelude
;; procedure) that no binding form shadows becomes (quote <its value>), so running the program
;; looks up only its own variables. BOUND lists the names lexically bound around a form; GLOBALS
;; is the environment of the globals.

(define (link x bound globals)
  (cond ((symbol? x)
         (if (or (memq x bound) (not (find-entry x globals))) x (list 'quote (lookup x globals))))
        ((not (pair? x)) x)
        ((and (symbol? (car x)) (not (memq (car x) bound))) (link-form (car x) x bound globals))
        (else (link-list x bound globals))))

(define (link-list xs bound globals) (map (lambda (x) (link x bound globals)) xs))

(define (link-bindings bindings bound globals)
  (map (lambda (b) (list (car b) (link (cadr b) bound globals))) bindings))

(define (lambda-list-names formals)
  (cond ((symbol? formals) (list formals))
        ((pair? formals) (cons (car formals) (lambda-list-names (cdr formals))))
        (else '())))

(define (link-form head x bound globals)
  (cond ((eq? head 'quote) x)
        ((eq? head 'lambda)
         (cons 'lambda (cons (cadr x) (link-body (cddr x)
                                                 (append (lambda-list-names (cadr x)) bound)
                                                 globals))))
        ((and (eq? head 'let) (symbol? (cadr x)))
         (cons 'let (cons (cadr x)
                          (cons (link-bindings (caddr x) bound globals)
                                (link-body (cdddr x)
                                           (cons (cadr x) (append (map car (caddr x)) bound))
                                           globals)))))
        ((and (eq? head 'let) meta-sequential-let) (link-let* (cadr x) (cddr x) bound globals '()))
        ((eq? head 'let)
         (cons 'let (cons (link-bindings (cadr x) bound globals)
                          (link-body (cddr x) (append (map car (cadr x)) bound) globals))))
        ((eq? head 'let*) (link-let* (cadr x) (cddr x) bound globals '()))
        ((or (eq? head 'letrec) (eq? head 'letrec*))
         (let ((inner (append (map car (cadr x)) bound)))
           (cons head (cons (link-bindings (cadr x) inner globals)
                            (link-body (cddr x) inner globals)))))
        ((eq? head 'loop)  ; (loop ((v init) ...) body ...) is (let recur ((v init) ...) body ...)
         (link-form 'let (cons 'let (cons 'recur (cdr x))) bound globals))
        ((eq? head 'do)
         (let ((inner (append (map car (cadr x)) bound)))
           (cons 'do (cons (map (lambda (spec)
                                  (cons (car spec) (cons (link (cadr spec) bound globals)
                                                         (link-list (cddr spec) inner globals))))
                                (cadr x))
                           (cons (link-list (caddr x) inner globals)
                                 (link-list (cdddr x) inner globals))))))
        ((eq? head 'case)
         (cons 'case (cons (link (cadr x) bound globals)
                           (map (lambda (clause)
                                  (cons (car clause) (link-list (cdr clause) bound globals)))
                                (cddr x)))))
        ((eq? head 'cond)
         (cons 'cond (map (lambda (clause) (link-list clause bound globals)) (cdr x))))
        ((memq head '(if begin and or when unless assert))
         (cons head (link-list (cdr x) bound globals)))
        ((eq? head 'define) x)
        (else (link-list x bound globals))))

(define (link-let* bindings body bound globals done)
  (if (null? bindings)
      (cons 'let* (cons (reverse done) (link-body body bound globals)))
      (link-let* (cdr bindings) body (cons (car (car bindings)) bound) globals
                 (cons (list (car (car bindings)) (link (cadr (car bindings)) bound globals))
                       done))))

(define (link-body forms bound globals)
  ;; The body's definitions are bound in all of its forms (letrec* scope).
  (let* ((forms (if (has-definitions? forms) (splice-begins forms) forms))
         (inner (append (definition-names forms) bound)))
    (map (lambda (form)
           (if (definition? form)
               (list 'define (definition-name form) (link (definition-value form) inner globals))
               (link form inner globals)))
         forms)))

(define (definition-names forms)
  (cond ((null? forms) '())
        ((definition? (car forms))
         (cons (definition-name (car forms)) (definition-names (cdr forms))))
        (else (definition-names (cdr forms)))))

;; ---------------------------------------------------------------------------------------------
;; Programs

;; The dialect: the host compiled this file under the dialect the object program runs in, and
;; a plain `let` is sequential under dmci (as let*), parallel otherwise. This probe is a plain
;; let whose second init reads the name its first binds: the linker then writes the object's
;; plain lets as let* under dmci.
(define meta-let-probe #f)
(define meta-sequential-let (let ((meta-let-probe #t) (seen meta-let-probe)) seen))

(define primitive-values
  (cons (cons 'apply meta-apply) (cons (cons 'procedure? meta-procedure?) meta-primitives)))

(define global-environment
  ;; The prelude's own references to primitives are linked too.
  (let ((unlinked (list (rec-group meta-prelude primitive-values))))
    (list (rec-group (map (lambda (definition)
                            (cons (car definition)
                                  (link (cdr definition) (map car meta-prelude) unlinked)))
                          meta-prelude)
                     primitive-values))))

(define (meta-run program bindings)
  ;; A leading (params ...) header is the host's business: its names arrive in BINDINGS.
  (let ((forms (if (and (pair? (car program)) (eq? (car (car program)) 'params))
                   (cdr program)
                   program)))
    (meta-result (eval-body (link-body forms (map car bindings) global-environment)
                            (append bindings global-environment)))))

(define (meta-result v)
  ;; An object closure leaves the evaluator as a host procedure that applies it (the program's
  ;; value is then a procedure, as in direct evaluation); inside a list or vector it stays the
  ;; list (%closure ...).
  (if (closure? v) (lambda args (apply-procedure v args)) v))
