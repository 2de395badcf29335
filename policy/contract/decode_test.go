package contract

import (
	"slices"
	"strings"
	"testing"
)

type testKnobs struct {
	Rate    float64   `knob:"rate"`
	Count   int       `knob:"count"`
	On      bool      `knob:"on"`
	Mode    string    `knob:"mode"`
	Limits  []float64 `knob:"limits"`
	Quantum *float64  `knob:"quantum"`
	Rotate  *bool     `knob:"rotate"`
	private int       // no tag: never read
}

// TestDecode: given knobs replace the defaults, others keep them, each
// tagged field counts as read (so unknown knobs are still found), and bad
// values name the knob and what it wants.
func TestDecode(t *testing.T) {
	def := testKnobs{Rate: 1.5, Count: 3, Mode: "a", Limits: []float64{1, 2}, private: 7}
	o := NewOptions("p", map[string]string{"count": "8", "on": "true", "limits": "5/6/7", "rotate": "false", "bogus": "1"})
	k := def
	if err := o.Decode(&k); err != nil {
		t.Fatal(err)
	}
	want := testKnobs{Rate: 1.5, Count: 8, On: true, Mode: "a", Limits: []float64{5, 6, 7}, private: 7}
	if k.Rate != want.Rate || k.Count != want.Count || k.On != want.On || k.Mode != want.Mode || !slices.Equal(k.Limits, want.Limits) || k.private != 7 {
		t.Errorf("decoded %+v, want %+v", k, want)
	}
	if k.Quantum != nil || k.Rotate == nil || *k.Rotate {
		t.Errorf("pointer knobs: quantum %v (want nil: not given), rotate %v (want false)", k.Quantum, k.Rotate)
	}
	if got := o.Read(); !slices.Equal(got, []string{"count", "limits", "mode", "on", "quantum", "rate", "rotate"}) {
		t.Errorf("read %v, want every tagged knob", got)
	}
	if got := o.Unread(); !slices.Equal(got, []string{"bogus"}) {
		t.Errorf("unread %v, want [bogus]", got)
	}
	for _, tc := range []struct{ key, val, want string }{
		{"rate", "fast", `policy p: rate="fast": want a number`},
		{"rate", "NaN", `policy p: rate="NaN": want a number`},
		{"count", "1.5", `policy p: count="1.5": want a whole number`},
		{"count", "x", `policy p: count="x": want a number`},
		{"on", "yes", `policy p: on="yes": want true or false`},
		{"limits", "1/x", `policy p: limits="1/x": want numbers separated by /`},
		{"quantum", "x", `policy p: quantum="x": want a number`},
		{"rotate", "2", `policy p: rotate="2": want true or false`},
	} {
		k := def
		err := NewOptions("p", map[string]string{tc.key: tc.val}).Decode(&k)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s=%s: error %v, want %q", tc.key, tc.val, err, tc.want)
		}
	}
	var notStruct int
	if err := o.Decode(&notStruct); err == nil || !strings.Contains(err.Error(), "pointer to a struct") {
		t.Errorf("decoding into an int: %v", err)
	}
	bad := struct {
		M map[string]int `knob:"m"`
	}{}
	if err := o.Decode(&bad); err == nil || !strings.Contains(err.Error(), "knob m") {
		t.Errorf("decoding into a map field: %v", err)
	}
}
