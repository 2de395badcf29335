package engine

import "maps"

// A job's seconds per GPU type (Status.TypeExecuted) are counted by
// allocation: while a job holds GPUs the engine counts its current type's
// seconds in Status.typeNow, a plain float it adds each round's seconds to
// (the same additions, in the same order, as adding to the map entry in
// place), and writes the sum to the map when the allocation ends. A round
// that accounts thousands of running jobs so does no map work.

// beginSegment starts counting st's current allocation (st.Alloc).
func (st *Status) beginSegment() {
	st.typeNow = st.TypeExecuted[st.Alloc.GPUType]
	st.typeLive, st.typeRan = true, false
}

// endSegment writes the current allocation's seconds to TypeExecuted and
// stops counting it.
func (st *Status) endSegment() {
	if st.typeLive && st.typeRan {
		if st.TypeExecuted == nil {
			st.TypeExecuted = map[string]float64{}
		}
		st.TypeExecuted[st.Alloc.GPUType] = st.typeNow
	}
	st.typeLive, st.typeRan = false, false
}

// restartSegment counts the current allocation afresh from TypeExecuted,
// after it was replaced (Carry).
func (st *Status) restartSegment() {
	if st.typeLive {
		st.beginSegment()
	}
}

// TypeSeconds is the seconds st has held GPUs of type t so far (up to the
// snapshot's time).
func (st *Status) TypeSeconds(t string) float64 {
	if st.typeLive && st.Alloc.GPUType == t {
		return st.typeNow
	}
	return st.TypeExecuted[t]
}

// typeExecutedNow is a copy of TypeExecuted with the current allocation's
// seconds in it (nil when the job never held GPUs).
func (st *Status) typeExecutedNow() map[string]float64 {
	m := maps.Clone(st.TypeExecuted)
	if st.typeLive && st.typeRan {
		if m == nil {
			m = map[string]float64{}
		}
		m[st.Alloc.GPUType] = st.typeNow
	}
	return m
}
