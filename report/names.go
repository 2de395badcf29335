package report

import "strconv"

// DistinctNames renames runs that share a policy name so that every table,
// JSON document and report tells them apart: such a run takes its spec
// (specs[i], as the user wrote it, e.g. "tiresias:limits=600/1200"), and
// runs whose specs are equal too get "#2", "#3"... in order. A run whose
// name is unique keeps it. specs is parallel to runs.
func DistinctNames(runs []*Run, specs []string) {
	count := map[string]int{}
	for _, r := range runs {
		count[r.Policy]++
	}
	seen := map[string]int{}
	for i, r := range runs {
		if count[r.Policy] < 2 {
			continue
		}
		name := r.Policy
		if i < len(specs) && specs[i] != "" {
			name = specs[i]
		}
		seen[name]++
		if k := seen[name]; k > 1 {
			name += " #" + strconv.Itoa(k)
		}
		r.Policy = name
	}
}
