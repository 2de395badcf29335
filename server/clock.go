package server

import "time"

// WallClock is the engine's clock in a live server: Unix time in seconds.
// The engine never reads the wall clock itself; this adapter is the only
// place a live system's time enters it.
type WallClock struct{}

// Now implements engine.Clock.
func (WallClock) Now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func toTime(unix float64) *time.Time {
	if unix <= 0 {
		return nil
	}
	t := time.Unix(0, int64(unix*1e9)).UTC()
	return &t
}
