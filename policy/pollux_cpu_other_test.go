//go:build !unix

package policy

// pxCPUSeconds is unknown here.
func pxCPUSeconds() float64 { return -1 }
