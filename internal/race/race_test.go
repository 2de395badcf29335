package race

import "testing"

// TestSkipAllocs checks that SkipAllocs skips exactly when the detector is
// on: a test that counts allocations still runs in an ordinary go test.
func TestSkipAllocs(t *testing.T) {
	ran := false
	t.Run("inner", func(t *testing.T) {
		SkipAllocs(t)
		ran = true
	})
	if ran == Enabled {
		t.Fatalf("race detector on: %v, the test after SkipAllocs ran: %v", Enabled, ran)
	}
}
