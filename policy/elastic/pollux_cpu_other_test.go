//go:build !unix

package elastic

// pxCPUSeconds is unknown here.
func pxCPUSeconds() float64 { return -1 }
