package policy

import "testing"

// Every family registers at least one policy, and no name is registered
// twice (Lookup would silently take the first).
func TestRegistryNamesUnique(t *testing.T) {
	seen := map[string]int{}
	for n, f := range families {
		count := 0
		f(func(i Info) {
			count++
			if i.Name == "" || i.Build == nil {
				t.Errorf("family %d registers %+v: want a name and a builder", n, i.Name)
			}
			seen[i.Name]++
		})
		if count == 0 {
			t.Errorf("family %d registers no policy", n)
		}
	}
	for name, c := range seen {
		if c > 1 {
			t.Errorf("%s registered %d times", name, c)
		}
	}
	if len(registry) != len(seen) {
		t.Errorf("registry holds %d policies, families register %d names", len(registry), len(seen))
	}
}
