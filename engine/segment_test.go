package engine

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// TestTypeSecondsOneTypeSlot drives a status through random allocations on
// random GPU types (seconds counted, preemptions, history carried in from a
// map) and checks after every step that TypeSeconds and the copies' map
// (typeExecutedNow) say what one map updated in place would: the one-type
// slot must not show.
func TestTypeSecondsOneTypeSlot(t *testing.T) {
	types := []string{"v100", "k80", "", "p100"}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		st := &Status{}
		ref := map[string]float64{} // the seconds per type, one map in place
		for step := range 60 {
			switch op := r.IntN(10); {
			case op < 3 && !st.typeLive: // start on a type
				st.Alloc.GPUType = types[r.IntN(len(types))]
				st.beginSegment()
			case op < 7 && st.typeLive: // count some seconds
				dt := float64(r.IntN(4)) + 0.1*float64(r.IntN(10))
				if dt == 0 {
					continue
				}
				st.typeNow += dt
				st.typeRan = true
				ref[st.Alloc.GPUType] += dt
			case op < 9: // the allocation ends
				st.endSegment()
			default: // history carried in (Carry) from a status with its own map
				prev := &Status{TypeExecuted: maps.Clone(ref)}
				if len(ref) == 0 {
					prev.TypeExecuted = nil
				}
				st.TypeExecuted = prev.typeExecutedNow()
				st.clearOne()
				st.restartSegment()
			}
			for _, ty := range types {
				if got := st.TypeSeconds(ty); got != ref[ty] {
					t.Fatalf("seed %d step %d: TypeSeconds(%q) = %v, want %v", seed, step, ty, got, ref[ty])
				}
			}
			got := st.typeExecutedNow()
			if len(ref) == 0 && got != nil {
				t.Fatalf("seed %d step %d: a job that never ran has a map %v", seed, step, got)
			}
			if !maps.Equal(got, ref) {
				t.Fatalf("seed %d step %d: copies' map %v, want %v", seed, step, got, ref)
			}
			if st.oneSet && st.TypeExecuted != nil {
				t.Fatalf("seed %d step %d: one-type slot beside a map", seed, step)
			}
		}
	}
}
