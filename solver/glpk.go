//go:build linux || darwin || freebsd

package solver

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// GLPK constants, from glpk.h (GLPK 4.x and 5.0 agree on all of them).
const (
	glpMin = 1
	glpMax = 2

	glpCV = 1
	glpIV = 2

	glpFR = 1
	glpLO = 2
	glpUP = 3
	glpDB = 4
	glpFX = 5

	glpUndef  = 1
	glpFeas   = 2
	glpInfeas = 3
	glpNoFeas = 4
	glpOpt    = 5
	glpUnbnd  = 6

	glpOn  = 1
	glpOff = 0

	glpEITLIM = 0x08
	glpETMLIM = 0x09
	glpENOPFS = 0x0A
	glpENODFS = 0x0B
	glpEMIPGP = 0x0E
	glpESTOP  = 0x0D
)

// Offsets of the parameter fields tide sets, in bytes, in glp_smcp and
// glp_iocp (glpk.h; checked with offsetof on GLPK 5.0, x86-64 and the same
// for every LP64 ABI). Everything else keeps the value glp_init_smcp and
// glp_init_iocp write.
const (
	smcpMsgLev   = 0  // int
	smcpTmLim    = 60 // int, ms
	smcpPresolve = 72 // int
	iocpMsgLev   = 0  // int
	iocpTmLim    = 32 // int, ms
	iocpCbFunc   = 48 // void (*)(glp_tree *, void *)
	iocpCbInfo   = 56 // void *
	iocpMipGap   = 72 // double
	iocpPresolve = 96 // int
	// paramWords is the parameter buffer in 8-byte words: 1 KiB, well over
	// sizeof(glp_smcp) = 352 and sizeof(glp_iocp) = 328 in GLPK 5.0, in
	// case a later version grows them.
	paramWords = 128
)

// glpk is the loaded library.
type glpk struct {
	version    func() string
	termOut    func(flag int32) int32
	createProb func() uintptr
	deleteProb func(p uintptr)
	setObjDir  func(p uintptr, dir int32)
	addRows    func(p uintptr, n int32) int32
	addCols    func(p uintptr, n int32) int32
	setRowBnds func(p uintptr, i, typ int32, lb, ub float64)
	setColBnds func(p uintptr, j, typ int32, lb, ub float64)
	setObjCoef func(p uintptr, j int32, c float64)
	setColKind func(p uintptr, j, kind int32)
	loadMatrix func(p uintptr, ne int32, ia, ja, ar unsafe.Pointer)
	initSmcp   func(parm unsafe.Pointer)
	simplex    func(p uintptr, parm unsafe.Pointer) int32
	initIocp   func(parm unsafe.Pointer)
	intopt     func(p uintptr, parm unsafe.Pointer) int32
	getStatus  func(p uintptr) int32
	getObjVal  func(p uintptr) float64
	getColPrim func(p uintptr, j int32) float64
	mipStatus  func(p uintptr) int32
	mipObjVal  func(p uintptr) float64
	mipColVal  func(p uintptr, j int32) float64
	// Branch-and-cut callback API (node limit).
	iosTreeSize  func(t uintptr, aCnt, nCnt, tCnt *int32)
	iosTerminate func(t uintptr)
	versionText  string
}

var (
	loadOnce sync.Once
	loaded   *glpk
	loadErr  error
	// solveMu serialises solves: GLPK keeps its environment in thread-local
	// (or, in builds without TLS, global) state.
	solveMu sync.Mutex

	// The node-limit callback: made once (purego callbacks are never
	// freed and their number is bounded), its state in nodeCB, which
	// solveMu guards like every other solve.
	nodeCBOnce sync.Once
	nodeCBPtr  uintptr
	nodeCB     struct {
		g       *glpk
		limit   int32 // stop once the search tree has had more nodes than this
		stopped bool  // the callback asked GLPK to terminate
	}
)

// nodeLimitCallback is glp_iocp.cb_func when Options.NodeLimit is set: GLPK
// calls it at each step of branch-and-cut (whatever the reason), and it
// stops the search once the tree has had more than the limit nodes in all
// (t_cnt of glp_ios_tree_size, which counts nodes already removed too). The
// count depends only on the model, so where the search stops does too.
func nodeLimitCallback(tree, _ uintptr) {
	if nodeCB.stopped {
		return
	}
	var active, current, total int32
	nodeCB.g.iosTreeSize(tree, &active, &current, &total)
	if total > nodeCB.limit {
		nodeCB.stopped = true
		nodeCB.g.iosTerminate(tree)
	}
}

// libraryNames are tried in order; TIDE_GLPK_LIB, when set, replaces them.
func libraryNames() []string {
	if p := os.Getenv("TIDE_GLPK_LIB"); p != "" {
		return []string{p}
	}
	if runtime.GOOS == "darwin" {
		return []string{"libglpk.40.dylib", "libglpk.dylib", "/opt/homebrew/lib/libglpk.dylib", "/usr/local/lib/libglpk.dylib"}
	}
	return []string{"libglpk.so.40", "libglpk.so"}
}

func load() (*glpk, error) {
	loadOnce.Do(func() { loaded, loadErr = open() })
	return loaded, loadErr
}

func open() (g *glpk, err error) {
	var handle uintptr
	var errs []error
	for _, name := range libraryNames() {
		h, e := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if e == nil {
			handle = h
			break
		}
		errs = append(errs, e)
	}
	if handle == 0 {
		return nil, fmt.Errorf("%w (%v)", ErrNoGLPK, errors.Join(errs...))
	}
	// RegisterLibFunc panics on a missing symbol: turn that into an error
	// naming it (a GLPK too old for this binding).
	defer func() {
		if r := recover(); r != nil {
			g, err = nil, fmt.Errorf("%w: the library found lacks a function tide needs (want GLPK >= 4.52): %v", ErrNoGLPK, r)
		}
	}()
	g = &glpk{}
	reg := func(fptr any, name string) { purego.RegisterLibFunc(fptr, handle, name) }
	reg(&g.version, "glp_version")
	reg(&g.termOut, "glp_term_out")
	reg(&g.createProb, "glp_create_prob")
	reg(&g.deleteProb, "glp_delete_prob")
	reg(&g.setObjDir, "glp_set_obj_dir")
	reg(&g.addRows, "glp_add_rows")
	reg(&g.addCols, "glp_add_cols")
	reg(&g.setRowBnds, "glp_set_row_bnds")
	reg(&g.setColBnds, "glp_set_col_bnds")
	reg(&g.setObjCoef, "glp_set_obj_coef")
	reg(&g.setColKind, "glp_set_col_kind")
	reg(&g.loadMatrix, "glp_load_matrix")
	reg(&g.initSmcp, "glp_init_smcp")
	reg(&g.simplex, "glp_simplex")
	reg(&g.initIocp, "glp_init_iocp")
	reg(&g.intopt, "glp_intopt")
	reg(&g.getStatus, "glp_get_status")
	reg(&g.getObjVal, "glp_get_obj_val")
	reg(&g.getColPrim, "glp_get_col_prim")
	reg(&g.mipStatus, "glp_mip_status")
	reg(&g.mipObjVal, "glp_mip_obj_val")
	reg(&g.mipColVal, "glp_mip_col_val")
	reg(&g.iosTreeSize, "glp_ios_tree_size")
	reg(&g.iosTerminate, "glp_ios_terminate")
	g.versionText = g.version()
	return g, nil
}

// Version is the version of the GLPK library loaded ("5.0"), or an error
// when it cannot be loaded.
func Version() (string, error) {
	g, err := load()
	if err != nil {
		return "", err
	}
	return g.versionText, nil
}

// boundType maps [lo, hi] to GLPK's bound type.
func boundType(lo, hi float64) (int32, float64, float64) {
	loInf, hiInf := math.IsInf(lo, -1), math.IsInf(hi, 1)
	switch {
	case loInf && hiInf:
		return glpFR, 0, 0
	case hiInf:
		return glpLO, lo, 0
	case loInf:
		return glpUP, 0, hi
	case lo == hi:
		return glpFX, lo, hi
	}
	return glpDB, lo, hi
}

// params is an 8-byte aligned buffer for glp_smcp / glp_iocp.
type params [paramWords]uint64

func (p *params) ptr() unsafe.Pointer { return unsafe.Pointer(&p[0]) }

func (p *params) setInt(off uintptr, v int32) {
	*(*int32)(unsafe.Add(p.ptr(), off)) = v
}

func (p *params) setFloat(off uintptr, v float64) {
	*(*float64)(unsafe.Add(p.ptr(), off)) = v
}

func msLimit(opt Options) int32 {
	if opt.TimeLimit <= 0 {
		return math.MaxInt32
	}
	return int32(min(opt.TimeLimit.Milliseconds(), math.MaxInt32))
}

func (g *glpk) solve(m *Model, opt Options) (*Solution, error) {
	sol := &Solution{MILP: m.IsMILP()}
	// Integer variables with bounds that admit no integer are infeasible;
	// GLPK would refuse fractional bounds on them, so round them inward.
	for _, v := range m.vars {
		if v.integer && math.Ceil(v.lo) > math.Floor(v.hi) {
			sol.Status = Infeasible
			return sol, nil
		}
	}
	if len(m.vars) == 0 {
		// GLPK needs columns; with none, each row's sum is 0.
		sol.Status = Optimal
		for _, c := range m.cons {
			if c.lo > 0 || c.hi < 0 {
				sol.Status = Infeasible
			}
		}
		return sol, nil
	}

	solveMu.Lock()
	defer solveMu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g.termOut(glpOff)

	p := g.createProb()
	defer g.deleteProb(p)
	if m.sense == Maximize {
		g.setObjDir(p, glpMax)
	} else {
		g.setObjDir(p, glpMin)
	}
	g.addCols(p, int32(len(m.vars)))
	for j, v := range m.vars {
		lo, hi := v.lo, v.hi
		if v.integer {
			lo, hi = math.Ceil(lo), math.Floor(hi)
			g.setColKind(p, int32(j+1), glpIV)
		}
		t, l, u := boundType(lo, hi)
		g.setColBnds(p, int32(j+1), t, l, u)
		if m.obj[j] != 0 {
			g.setObjCoef(p, int32(j+1), m.obj[j])
		}
	}
	nnz := 0
	for _, c := range m.cons {
		nnz += len(c.terms)
	}
	if len(m.cons) > 0 {
		g.addRows(p, int32(len(m.cons)))
		// 1-based arrays: element 0 is unused.
		ia := make([]int32, 1, nnz+1)
		ja := make([]int32, 1, nnz+1)
		ar := make([]float64, 1, nnz+1)
		for i, c := range m.cons {
			t, l, u := boundType(c.lo, c.hi)
			g.setRowBnds(p, int32(i+1), t, l, u)
			for _, term := range c.terms {
				ia = append(ia, int32(i+1))
				ja = append(ja, int32(term.Var)+1)
				ar = append(ar, term.Coef)
			}
		}
		if nnz > 0 {
			g.loadMatrix(p, int32(nnz), unsafe.Pointer(&ia[0]), unsafe.Pointer(&ja[0]), unsafe.Pointer(&ar[0]))
		}
		runtime.KeepAlive(ia)
		runtime.KeepAlive(ja)
		runtime.KeepAlive(ar)
	}

	if sol.MILP {
		return g.solveMILP(p, m, opt, sol)
	}
	return g.solveLP(p, m, opt, sol, opt.Presolve)
}

func (g *glpk) solveLP(p uintptr, m *Model, opt Options, sol *Solution, presolve bool) (*Solution, error) {
	var parm params
	g.initSmcp(parm.ptr())
	parm.setInt(smcpMsgLev, 0)
	parm.setInt(smcpTmLim, msLimit(opt))
	if presolve {
		parm.setInt(smcpPresolve, glpOn)
	} else {
		parm.setInt(smcpPresolve, glpOff)
	}
	ret := g.simplex(p, parm.ptr())
	runtime.KeepAlive(&parm)
	switch ret {
	case 0:
	case glpENOPFS, glpENODFS:
		// The presolver proved there is no primal (or dual) feasible
		// solution without solving; solve without it for the exact status.
		if presolve {
			return g.solveLP(p, m, opt, sol, false)
		}
		sol.Status = Infeasible
		return sol, nil
	case glpETMLIM, glpEITLIM:
		if g.getStatus(p) != glpFeas {
			return sol, fmt.Errorf("solver: GLPK simplex stopped by its limit before finding a feasible solution")
		}
	default:
		return sol, fmt.Errorf("solver: GLPK simplex failed (glp_simplex returned %d: %s)", ret, retText(ret))
	}
	switch g.getStatus(p) {
	case glpOpt:
		sol.Status = Optimal
	case glpFeas:
		sol.Status = Feasible
	case glpNoFeas, glpInfeas:
		sol.Status = Infeasible
		return sol, nil
	case glpUnbnd:
		sol.Status = Unbounded
		return sol, nil
	default:
		return sol, fmt.Errorf("solver: GLPK simplex ended with an undefined solution")
	}
	return sol.fill(g.getObjVal(p), len(m.vars), func(j int32) float64 { return g.getColPrim(p, j) }), nil
}

func (g *glpk) solveMILP(p uintptr, m *Model, opt Options, sol *Solution) (*Solution, error) {
	var parm params
	g.initIocp(parm.ptr())
	parm.setInt(iocpMsgLev, 0)
	parm.setInt(iocpTmLim, msLimit(opt))
	parm.setFloat(iocpMipGap, opt.MIPGap)
	parm.setInt(iocpPresolve, glpOn) // solve the LP relaxation itself
	nodeCB.stopped = false
	if opt.NodeLimit > 0 {
		nodeCBOnce.Do(func() { nodeCBPtr = purego.NewCallback(nodeLimitCallback) })
		nodeCB.g, nodeCB.limit = g, int32(min(opt.NodeLimit, math.MaxInt32))
		*(*uintptr)(unsafe.Add(parm.ptr(), iocpCbFunc)) = nodeCBPtr
		*(*uintptr)(unsafe.Add(parm.ptr(), iocpCbInfo)) = 0
	}
	ret := g.intopt(p, parm.ptr())
	runtime.KeepAlive(&parm)
	if ret == glpESTOP && nodeCB.stopped {
		sol.NodeLimited = true
		if g.mipStatus(p) != glpFeas && g.mipStatus(p) != glpOpt {
			return sol, fmt.Errorf("solver: GLPK branch-and-cut passed its node limit (%d) before finding an integer solution: %w", opt.NodeLimit, ErrNodeLimit)
		}
		sol.Status = Feasible
		return sol.fill(g.mipObjVal(p), len(m.vars), func(j int32) float64 { return g.mipColVal(p, j) }), nil
	}
	switch ret {
	case 0, glpETMLIM, glpEMIPGP:
	case glpENOPFS:
		sol.Status = Infeasible
		return sol, nil
	case glpENODFS:
		// The LP relaxation is unbounded (or infeasible): no finite optimum.
		sol.Status = Unbounded
		return sol, nil
	default:
		return sol, fmt.Errorf("solver: GLPK branch-and-cut failed (glp_intopt returned %d: %s)", ret, retText(ret))
	}
	switch g.mipStatus(p) {
	case glpOpt:
		sol.Status = Optimal
		if ret != 0 {
			sol.Status = Feasible
		}
	case glpFeas:
		sol.Status = Feasible
	case glpNoFeas:
		sol.Status = Infeasible
		return sol, nil
	default:
		if ret == glpETMLIM {
			return sol, fmt.Errorf("solver: GLPK branch-and-cut reached its time limit before finding an integer solution")
		}
		return sol, fmt.Errorf("solver: GLPK branch-and-cut ended with no solution (status undefined)")
	}
	return sol.fill(g.mipObjVal(p), len(m.vars), func(j int32) float64 { return g.mipColVal(p, j) }), nil
}

// fill records the objective and the n column values, read by col (1-based).
func (sol *Solution) fill(obj float64, n int, col func(j int32) float64) *Solution {
	sol.Objective = obj
	sol.Values = make([]float64, n)
	for j := range sol.Values {
		sol.Values[j] = col(int32(j + 1))
	}
	return sol
}

func retText(ret int32) string {
	switch ret {
	case 0x01:
		return "invalid initial basis"
	case 0x02:
		return "singular basis matrix"
	case 0x03:
		return "ill-conditioned basis matrix"
	case 0x04:
		return "invalid bounds"
	case 0x05:
		return "solver failure"
	case 0x0C:
		return "LP relaxation not optimal"
	case 0x0D:
		return "terminated by the application"
	}
	return "see glpk.h"
}
