package engine

// Wrapper is a Policy built around another (a quota, priority classes): it
// decides by editing the inner policy's plan. A wrapper must forward the
// whole inner plan it does not overrule: declines, pairs, reasons,
// warnings and memos. Optional interfaces of the inner policy
// (ReclaimCoster and those to come) are found through Unwrap by As, so a
// wrapper need not implement them itself.
type Wrapper interface {
	Policy
	// Unwrap returns the policy this one wraps.
	Unwrap() Policy
}

// As finds the first policy in p's chain of wrappers (p itself first, then
// each Unwrap) that implements T, as errors.As does for errors.
func As[T any](p Policy) (T, bool) {
	for p != nil {
		if t, ok := p.(T); ok {
			return t, true
		}
		w, ok := p.(Wrapper)
		if !ok {
			break
		}
		p = w.Unwrap()
	}
	var zero T
	return zero, false
}
