package policy

// presets are the knob settings of a policy that test suites run as
// policies of their own: a paper's or a simulator's preset, the specs
// tide sim's --preset rewrites a policy to, and the baselines the docs
// compare with. sim's conformance and state tests run every policy with
// each of its presets.
var presets = map[string][]string{
	"fifo":             {"fifo:backfill=true"},
	"tiresias":         {"tiresias:preset=pollux"},
	"tiresias-gittins": {"tiresias-gittins:preset=pollux"},
	"gandiva":          {"gandiva:preset=gavel", "gandiva:pack=true"},
	"gavel-fifo":       {"gavel-fifo:pick=gavel"},
	"optimus":          {"optimus:oracle=true"},
	"pollux":           {"pollux:restart_cost=job"},
	"deepboot":         {"deepboot:loan=false"},
	"aryl":             {"aryl:loan=false"},
	"tidal":            {"tidal:deadlines=false"},
	"edgeflow":         {"edgeflow:offload=missing"},
}

// Presets are the specs of the policy's presets (see presets), not
// counting its defaults.
func (i Info) Presets() []string { return presets[i.Name] }

// Specs lists every registered policy by name, each followed by its
// presets: what a suite that must cover every policy runs.
func Specs() []string {
	var out []string
	for _, i := range All() {
		out = append(out, i.Name)
		out = append(out, i.Presets()...)
	}
	return out
}
