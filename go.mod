module github.com/tide-sched/tide

go 1.26.8

require (
	github.com/ebitengine/purego v0.11.3
	go.etcd.io/bbolt v1.5.0
	gonum.org/v1/gonum v0.17.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/tools v0.36.0 // indirect
)
