package decodemsg_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tide-sched/tide/decodemsg"
)

type group struct {
	GPUs  int               `yaml:"gpus" json:"gpus"`
	Mem   float64           `yaml:"mem" json:"mem"`
	On    bool              `yaml:"on" json:"on"`
	Name  string            `yaml:"name" json:"name"`
	Every time.Duration     `yaml:"every" json:"every"`
	Tags  map[string]string `yaml:"tags" json:"tags"`
}

type spec struct {
	Groups []group `yaml:"groups" json:"groups"`
	One    *group  `yaml:"one" json:"one"`
}

// goNames are the Go spellings no message may show.
var goNames = []string{"int", "float64", "bool", "decodemsg_test", "[]", "map[", "time.Duration", "!!", "Go struct"}

func TestYAML(t *testing.T) {
	cases := []struct{ in, want string }{
		{"groups: [{gpus: four}]", "line 1: got `four`, want a whole number"},
		{"groups: [{mem: lots}]", "line 1: got `lots`, want a number"},
		{"groups: [{on: maybe}]", "line 1: got `maybe`, want true or false"},
		{"groups: [{every: soon}]", "line 1: got `soon`, want a duration such as 90s or 2h"},
		{"groups: [{name: [a, b]}]", "line 1: got a list, want text"},
		{"groups: {gpus: 4}", "line 1: got a mapping (key: value), want a list"},
		{"one: [1]", "line 1: got a list, want a mapping (key: value)"},
		{"groups:\n  - tags: [x]", "line 2: got a list, want a mapping (key: value)"},
		{"groups:\n  - gpus: 1\n    gpu_mem: 16", "line 3: field gpu_mem not found"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			dec := yaml.NewDecoder(strings.NewReader(tc.in))
			dec.KnownFields(true)
			var s spec
			raw := dec.Decode(&s)
			if raw == nil {
				t.Fatal("decoded without an error")
			}
			msg := decodemsg.YAML(raw).Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("got %q, want it to contain %q (decoder said %q)", msg, tc.want, raw)
			}
			for _, g := range goNames {
				if strings.Contains(msg, g) {
					t.Errorf("%q names %q", msg, g)
				}
			}
		})
	}
}

func TestJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"groups": [{"gpus": "4"}]}`, "line 1: field groups.gpus: got a string, want a whole number"},
		{"{\n\"groups\": [\n{\"on\": 1}]}", "line 3: field groups.on: got a number, want true or false"},
		{`{"groups": {"gpus": 4}}`, "field groups: got an object, want a list"},
		{`{"one": [1]}`, "field one: got a list, want an object"},
		{"{\n\"groups\": [}", "line 2: invalid character"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			var s spec
			raw := json.NewDecoder(bytes.NewReader([]byte(tc.in))).Decode(&s)
			if raw == nil {
				t.Fatal("decoded without an error")
			}
			msg := decodemsg.JSON(raw, []byte(tc.in)).Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("got %q, want it to contain %q (decoder said %q)", msg, tc.want, raw)
			}
			for _, g := range goNames {
				if strings.Contains(msg, g) {
					t.Errorf("%q names %q", msg, g)
				}
			}
		})
	}
}

// TestOtherErrors: errors that are not the decoders' pass through.
func TestOtherErrors(t *testing.T) {
	err := bytes.ErrTooLarge
	if decodemsg.YAML(err) != err || decodemsg.JSON(err, nil) != err {
		t.Error("an unrelated error was changed")
	}
}
