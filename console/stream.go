package console

import (
	"encoding/json"
	"net/http"
	"time"
)

// The live stream (GET /ui/api/stream) is server-sent events: an "update"
// event whenever what the views show has changed (checked every
// Options.Tick), carrying the snapshot's time and digest; the page then
// fetches the page of data it shows. A stream opens with the current
// digest, and never sends one digest twice in a row. A comment line every
// 15 s keeps proxies from closing an idle stream.

// Update is the data of an "update" event.
type Update struct {
	Time   time.Time `json:"time"`
	Digest string    `json:"digest"`
}

func (c *Console) subscribers() int {
	c.smu.Lock()
	defer c.smu.Unlock()
	return len(c.subs)
}

func (c *Console) broadcast(v *view) {
	u := Update{Time: v.snap.Time, Digest: hex(v.digest)}
	c.smu.Lock()
	defer c.smu.Unlock()
	for ch := range c.subs {
		// A slow reader's pending update gives way to this one: the
		// newest digest is the one the page must end on, and a stream
		// that kept the older one would never send it if nothing changes
		// after (only broadcast sends, under smu, so the second send
		// finds room).
		select {
		case ch <- u:
		default:
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- u:
			default:
			}
		}
	}
}

func hex(x uint64) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 16)
	for i := 15; i >= 0; i-- {
		b[i] = digits[x&15]
		x >>= 4
	}
	return string(b)
}

func (c *Console) handleStream(w http.ResponseWriter, r *http.Request, p Principal) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, http.StatusInternalServerError, "streaming is not supported by this connection")
		return
	}
	ch := make(chan Update, 1)
	c.smu.Lock()
	c.subs[ch] = true
	c.smu.Unlock()
	defer func() {
		c.smu.Lock()
		delete(c.subs, ch)
		c.smu.Unlock()
	}()
	secure(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// sent is the digest this stream sent last. Run broadcasts a digest
	// when it differs from the last one Run saw, which a stream opened
	// since may already have had as its first event: Run's first check
	// with a subscriber sent that stream's first digest again (an update
	// for nothing; TestStream).
	var sent string
	if v, err := c.snapshot(); err == nil {
		u := Update{Time: v.snap.Time, Digest: hex(v.digest)}
		sent = u.Digest
		writeEvent(w, u)
	}
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		case u := <-ch:
			if u.Digest == sent {
				continue
			}
			sent = u.Digest
			if writeEvent(w, u) != nil {
				return
			}
		case <-keep.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
		}
		fl.Flush()
	}
}

func writeEvent(w http.ResponseWriter, u Update) error {
	data, _ := json.Marshal(u)
	_, err := w.Write(append(append([]byte("event: update\ndata: "), data...), '\n', '\n'))
	return err
}
