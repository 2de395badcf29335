// Package decodemsg words the errors of the YAML and JSON decoders for the
// people who wrote the file: a value of the wrong kind says what the field
// wants ("want a whole number", "want a list") instead of naming the Go
// type it was decoded into ("int", "[]cluster.NodeSpec").
package decodemsg

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// YAML rewords the messages of a gopkg.in/yaml.v3 error; any other error
// is returned as it is. The result keeps each message's "line N:" prefix.
func YAML(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = YAMLMessage(m)
	}
	return &yaml.TypeError{Errors: msgs}
}

var (
	// yaml.v3: "cannot unmarshal !!str `four` into int"
	yamlKind = regexp.MustCompile("cannot unmarshal (!!\\w+)( `[^`]*`)? into (\\S+)")
	// yaml.v3: "field gpu_mem not found in type cluster.NodeSpec" (and
	// "already set in type ...")
	yamlField = regexp.MustCompile(`(field \S+ (?:not found|already set)) in type \S+`)
)

// YAMLMessage rewords one yaml.v3 message, such as "line 3: cannot
// unmarshal !!str `four` into int" ("line 3: got `four`, want a whole
// number").
func YAMLMessage(m string) string {
	m = yamlKind.ReplaceAllStringFunc(m, func(s string) string {
		g := yamlKind.FindStringSubmatch(s)
		got := strings.TrimSpace(g[2])
		if got == "" {
			got = yamlTags[g[1]]
			if got == "" {
				got = g[1]
			}
		}
		return fmt.Sprintf("got %s, want %s", got, wantOf(g[3]))
	})
	return yamlField.ReplaceAllString(m, "$1")
}

var yamlTags = map[string]string{
	"!!map": "a mapping (key: value)", "!!seq": "a list", "!!str": "text",
	"!!int": "a whole number", "!!float": "a number", "!!bool": "true or false",
	"!!null": "nothing (null)", "!!timestamp": "a date",
}

// wantOf says in words what a Go type, as reflect prints it, holds.
func wantOf(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case strings.HasPrefix(t, "[]"), strings.HasPrefix(t, "["):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping (key: value)"
	case t == "time.Duration":
		return "a duration such as 90s or 2h"
	case t == "string":
		return "text"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.Contains(t, "."):
		return "a mapping (key: value)"
	}
	return "a value of another kind"
}

// JSON rewords an encoding/json error about data, naming its line: "json:
// cannot unmarshal string into Go struct field NodeSpec.nodes.gpus of type
// int" becomes "line 3: field nodes.gpus: got a string, want a whole
// number", and a syntax error gets its line. Other errors are returned as
// they are.
func JSON(err error, data []byte) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("line %d: %s", lineAt(data, se.Offset), strings.TrimPrefix(se.Error(), "json: "))
	}
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	want := "a value of another kind"
	if te.Type != nil {
		want = wantOfType(te.Type)
	}
	got := te.Value
	switch got {
	case "string", "number":
		got = "a " + got
	case "array":
		got = "a list"
	case "object":
		got = "an object"
	case "bool":
		got = "true or false"
	}
	field := ""
	if te.Field != "" {
		field = "field " + te.Field + ": "
	}
	return fmt.Errorf("line %d: %sgot %s, want %s", lineAt(data, te.Offset), field, got, want)
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return 1 + strings.Count(string(data[:off]), "\n")
}

// wantOfType is wantOf for a reflect.Type, with JSON's word for a mapping.
func wantOfType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return wantOf(t.String())
}
