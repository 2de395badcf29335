package api

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// engineTime is an engine time as policies write it in their reasons:
// "t=1795758441 s", "t=+Inf s".
var engineTime = regexp.MustCompile(`\bt=(\+Inf|[0-9]+(?:\.[0-9]+)?) s\b`)

// minUnix is the least engine time WallReason takes for a Unix time:
// 1e8 s is March 1973. A replay's engine clock starts at 0 and runs for
// weeks (about 1e6 s), so its times stay as they are.
const minUnix = 1e8

// maxUnix is 10000-01-01T00:00:00Z: RFC 3339 has four-digit years.
const maxUnix = 253402300800

// WallReason is a policy's reason (engine.Reason.Text) as a live
// scheduler shows it: the engine times it names ("deadline t=1795758441
// s", in seconds of the engine's clock, which is Unix time in tide serve
// and tide kube) become UTC times in RFC 3339 ("deadline
// 2026-11-27T05:47:21Z"), and "t=+Inf s" becomes "never". Times under
// 1e8 s (a replay's engine clock, not Unix time) and all other text stay
// as they are.
func WallReason(text string) string {
	return engineTime.ReplaceAllStringFunc(text, func(m string) string {
		v := engineTime.FindStringSubmatch(m)[1]
		if v == "+Inf" {
			return "never"
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < minUnix || f >= maxUnix {
			return m
		}
		return time.Unix(int64(math.Round(f)), 0).UTC().Format(time.RFC3339)
	})
}

// DeclineReason is a policy's reason for declining a job, as a live
// scheduler shows it: WallReason, less the word declined the reason may
// begin with ("declined; deadline ...", as policy/internal/explain words
// it).
func DeclineReason(text string) string {
	why := WallReason(text)
	if rest, ok := strings.CutPrefix(why, "declined"); ok && rest != "" && (rest[0] == ':' || rest[0] == ';') {
		why = strings.TrimLeft(rest[1:], " ")
	}
	return why
}

// Declined is "declined: " and DeclineReason(text), or def when that is
// empty.
func Declined(text, def string) string {
	why := DeclineReason(text)
	if why == "" {
		why = def
	}
	return "declined: " + why
}
