package gavel

// pyRandom is the random number generator of CPython's random module
// (MT19937 seeded by init_by_array), enough of it to draw the same numbers
// as random.Random(seed).randrange(n). gavel-fifo:pick=gavel draws with it
// because which GPU type Gavel's FIFO takes off its list depends on those
// draws: with another generator the policy is the same rule but a different
// run, and on Gavel's traces the average JCT moves by 10-15% between seeds.
type pyRandom struct {
	mt  [624]uint32
	idx int
}

// newPyRandom is random.Random(seed) for a seed >= 0.
func newPyRandom(seed uint64) *pyRandom {
	// CPython splits the seed's absolute value into 32-bit words, least
	// significant first; 0 is the one word 0.
	key := []uint32{uint32(seed)}
	if hi := uint32(seed >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &pyRandom{}
	r.initGenrand(19650218)
	i, j := 1, 0
	for k := max(len(r.mt), len(key)); k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= len(r.mt) {
			r.mt[0] = r.mt[len(r.mt)-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := len(r.mt) - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= len(r.mt) {
			r.mt[0] = r.mt[len(r.mt)-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
	return r
}

func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < len(r.mt); i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.idx = len(r.mt)
}

// uint32 is genrand_uint32: the next 32-bit output.
func (r *pyRandom) uint32() uint32 {
	const n, m = 624, 397
	if r.idx >= n {
		for k := 0; k < n; k++ {
			y := (r.mt[k] & 0x80000000) | (r.mt[(k+1)%n] & 0x7fffffff)
			v := r.mt[(k+m)%n] ^ (y >> 1)
			if y&1 != 0 {
				v ^= 0x9908b0df
			}
			r.mt[k] = v
		}
		r.idx = 0
	}
	y := r.mt[r.idx]
	r.idx++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// float64 is random.random(): 53 random bits in [0, 1).
func (r *pyRandom) float64() float64 {
	a, b := r.uint32()>>5, r.uint32()>>6
	return (float64(a)*67108864 + float64(b)) / 9007199254740992
}

// randrange is random.randrange(n) for 0 < n < 2^32: CPython draws
// bit_length(n) bits and retries while the result is >= n.
func (r *pyRandom) randrange(n int) int {
	k := 0
	for v := n; v > 0; v >>= 1 {
		k++
	}
	for {
		if v := int(r.uint32() >> (32 - k)); v < n {
			return v
		}
	}
}
