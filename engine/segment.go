package engine

import "maps"

// A job's seconds per GPU type (Status.TypeExecuted) are counted by
// allocation: while a job holds GPUs the engine counts its current type's
// seconds in Status.typeNow, a plain float it adds each round's seconds to
// (the same additions, in the same order, as adding to the map entry in
// place), and writes the sum down when the allocation ends. A round that
// accounts thousands of running jobs so does no map work.
//
// Where the sum is written depends on how many types the job has held: the
// seconds of its first type are kept in Status.oneType and oneSecs, and
// only when it has been counted on a second type does TypeExecuted become a
// map holding every type (the first one moved into it). Most jobs only
// ever run on one type (every job on a homogeneous cluster), so a job
// that ends or is preempted makes no map; TypeSeconds and Engine.Snapshot's
// copies read both places and say the same as one map would.

// beginSegment starts counting st's current allocation (st.Alloc).
func (st *Status) beginSegment() {
	st.typeNow = st.recorded(st.Alloc.GPUType)
	st.typeLive, st.typeRan = true, false
}

// endSegment writes the current allocation's seconds down and stops
// counting it.
func (st *Status) endSegment() {
	if st.typeLive && st.typeRan {
		st.record(st.Alloc.GPUType, st.typeNow)
	}
	st.typeLive, st.typeRan = false, false
}

// recorded is the seconds written down for type t (up to the start of the
// current allocation, if the job holds GPUs of type t).
func (st *Status) recorded(t string) float64 {
	if st.oneSet && st.oneType == t {
		return st.oneSecs
	}
	return st.TypeExecuted[t]
}

// record writes down secs as the seconds held on type t: in the one-type
// slot while t is the only type the job has been counted on (and no map
// came with it, Carry), else in TypeExecuted, which then takes the slot's
// type too.
func (st *Status) record(t string, secs float64) {
	switch {
	case st.TypeExecuted != nil:
		st.TypeExecuted[t] = secs
	case !st.oneSet || st.oneType == t:
		st.oneType, st.oneSecs, st.oneSet = t, secs, true
	default:
		st.TypeExecuted = map[string]float64{st.oneType: st.oneSecs, t: secs}
		st.clearOne()
	}
}

// clearOne empties the one-type slot.
func (st *Status) clearOne() { st.oneType, st.oneSecs, st.oneSet = "", 0, false }

// restartSegment counts the current allocation afresh from what is
// written down, after it was replaced (Carry).
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
	return st.recorded(t)
}

// typeExecutedNow is a map of the seconds held on each type, the current
// allocation's included: what TypeExecuted means in Engine.Snapshot's
// copies (nil when the job never held GPUs). It is always a new map.
func (st *Status) typeExecutedNow() map[string]float64 {
	m := maps.Clone(st.TypeExecuted)
	if st.oneSet {
		m = map[string]float64{st.oneType: st.oneSecs} // TypeExecuted is nil (record)
	}
	if st.typeLive && st.typeRan {
		if m == nil {
			m = map[string]float64{}
		}
		m[st.Alloc.GPUType] = st.typeNow
	}
	return m
}
