// Package table implements perf.Model for measured throughput tables: a job's
// speed is read from a table of iterations per second rather than computed
// from a model of compute and communication.
//
// Two table formats are supported:
//
//   - Table: ElasticFlow's (ASPLOS'23, pkusys/ElasticFlow) per-model CSV files,
//     one per GPU type: rows are global batch sizes, columns GPU counts (1, 2,
//     4, ..., 64), values iterations/s. Load them with LoadElasticFlowDir or
//     LoadElasticFlowFS and merge GPU types with Table.Add.
//   - Gavel: Gavel's (OSDI'20, stanford-futuredata/gavel) JSON file of
//     isolated and co-located (space-shared) throughputs per GPU type, job
//     type and scale factor. Load it with LoadGavel or LoadGavelFS.
//
// Both count work in iterations (work given in samples is divided by the
// global batch size) and run at a constant rate on a given allocation, so
// Rate's second result is always +Inf. Neither extrapolates: an allocation
// larger than anything measured runs at the largest measured allocation's
// speed. The choices, and where they follow or depart from the authors' code,
// are written up in docs/throughput-tables.md.
//
// GPU type names compare case-insensitively ("A100" and "a100" are the same
// type); model and job-type names compare exactly.
//
// Loaded models are read-only and safe for concurrent use by readers; Add and
// AddCSV must not run concurrently with anything else on the same Table.
package table
