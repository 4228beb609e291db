package oci

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/runtimetest"
)

// Audit architectures and syscall numbers the ABI tests use.
const (
	auditArchX86_64 = 0xc000003e
	auditArchI386   = 0x40000003
	x32Bit          = 0x40000000
	nrGetpid        = 39  // x86_64
	nrModifyLDT     = 154 // x86_64
	nrGetpid32      = 20  // i386
	nrWrite32       = 4   // i386
)

// TestSeccompABIs: modify_ldt, the 32-bit (int 0x80) and the x32 ABIs are
// refused inside every sandbox. The calls are attempted from inside; where
// the host kernel itself lacks an ABI (this machine disables ia32 and has
// no x32), a live attempt cannot tell the filter's refusal from the
// kernel's, so the filter the sandbox's processes actually run under is
// also read back from the kernel (PTRACE_SECCOMP_GET_FILTER) and evaluated
// for those calls. gVisor applies the profile inside its own kernel, where
// no host filter can be read; there the bundle's profile is checked.
func TestSeccompABIs(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) { testSeccompABIs(t, kind) })
	}
}

func testSeccompABIs(t *testing.T, kind string) {
	r := newRuntime(t, kind)
	id, p := startProbe(t, r, runtime.Limits{})
	py := runtimetest.Py
	live := []struct{ name, cmd string }{
		{"modify_ldt", py("import ctypes,sys; l=ctypes.CDLL(None); b=ctypes.create_string_buffer(64); sys.exit(0 if l.syscall(154,0,b,64)>=0 else 1)")},
		{"x32 getpid", py("import ctypes,os,sys; l=ctypes.CDLL(None); sys.exit(0 if l.syscall(0x40000027)==os.getpid() else 1)")},
		// mov eax, 20 (getpid); int 0x80; ret
		{"int 0x80 getpid", py("import ctypes,mmap,os,sys; m=mmap.mmap(-1,4096,prot=7); m.write(bytes([0xb8,20,0,0,0,0xcd,0x80,0xc3])); f=ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m))); sys.exit(0 if f()==os.getpid() else 1)")},
	}
	for _, tc := range live {
		t.Run("live "+tc.name, func(t *testing.T) {
			if got := p.sh(t, tc.cmd); got.Code == 0 {
				t.Errorf("%s succeeded inside the sandbox: %s", tc.name, got.Out)
			}
		})
	}
	if kind == KindRunsc {
		t.Run("profile", func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(r.bundle(id), "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			var sp specs.Spec
			if err := json.Unmarshal(b, &sp); err != nil {
				t.Fatal(err)
			}
			sc := sp.Linux.Seccomp
			if sc == nil {
				t.Fatal("no seccomp profile in the bundle")
			}
			if !slices.Equal(sc.Architectures, []specs.Arch{specs.ArchX86_64}) {
				t.Errorf("profile architectures = %v, want only %s", sc.Architectures, specs.ArchX86_64)
			}
			for _, s := range sc.Syscalls {
				if s.Action == specs.ActAllow && slices.Contains(s.Names, "modify_ldt") {
					t.Errorf("profile allows modify_ldt")
				}
			}
		})
		return
	}
	t.Run("loaded filter", func(t *testing.T) {
		if got := p.sh(t, "setsid sleep 600 >/dev/null 2>&1 < /dev/null & echo ok"); got.Out != "ok\n" {
			t.Fatalf("sleep: %+v", got)
		}
		pid := findProc(t, id, "sleep")
		vm := loadedFilter(t, pid)
		cases := []struct {
			name     string
			arch, nr uint32
			allow    bool
		}{
			{"getpid (control)", auditArchX86_64, nrGetpid, true},
			{"modify_ldt", auditArchX86_64, nrModifyLDT, false},
			{"i386 getpid", auditArchI386, nrGetpid32, false},
			{"i386 write", auditArchI386, nrWrite32, false},
			{"x32 getpid", auditArchX86_64, x32Bit | nrGetpid, false},
			{"x32 write", auditArchX86_64, x32Bit | 1, false},
		}
		for _, tc := range cases {
			ret := runFilter(t, vm, tc.arch, tc.nr)
			action := ret & unix.SECCOMP_RET_ACTION_FULL
			allowed := action == unix.SECCOMP_RET_ALLOW || action == unix.SECCOMP_RET_LOG
			t.Logf("%s: %#x", tc.name, ret)
			if allowed != tc.allow {
				t.Errorf("%s: filter returns %#x (allowed %v), want allowed %v", tc.name, ret, allowed, tc.allow)
			}
		}
	})
}

// findProc returns the host pid of the process named comm in sandbox id's
// cgroup, waiting briefly for it to appear.
func findProc(t *testing.T, id, comm string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(cgroupRoot, "pids", cgroupParent, id, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if c, err := os.ReadFile("/proc/" + f + "/comm"); err == nil && strings.TrimSpace(string(c)) == comm {
				pid, _ := strconv.Atoi(f)
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s process in sandbox %s", comm, id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// loadedFilter reads the newest seccomp filter of host process pid with
// ptrace (the tracer is root; the tracee is stopped for the duration).
func loadedFilter(t *testing.T, pid int) *bpf.VM {
	t.Helper()
	goruntime.LockOSThread() // ptrace requests must come from the tracing thread
	defer goruntime.UnlockOSThread()
	if err := unix.PtraceAttach(pid); err != nil {
		t.Fatalf("ptrace attach %d: %v", pid, err)
	}
	defer unix.PtraceDetach(pid)
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
		t.Fatalf("wait %d: %v", pid, err)
	}
	n, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SECCOMP_GET_FILTER, uintptr(pid), 0, 0, 0, 0)
	if errno != 0 || n == 0 {
		t.Fatalf("PTRACE_SECCOMP_GET_FILTER: %d, %v", n, errno)
	}
	prog := make([]unix.SockFilter, n)
	if _, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SECCOMP_GET_FILTER, uintptr(pid), 0, uintptr(unsafe.Pointer(&prog[0])), 0, 0); errno != 0 {
		t.Fatalf("PTRACE_SECCOMP_GET_FILTER: %v", errno)
	}
	ins := make([]bpf.Instruction, len(prog))
	for i, f := range prog {
		ins[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}.Disassemble()
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatalf("filter of %d: %v", pid, err)
	}
	return vm
}

// runFilter evaluates a seccomp filter for a call with no arguments. The
// kernel's seccomp_data holds native-endian (little-endian) 32-bit words;
// the VM loads big-endian, so each word is stored big-endian here.
func runFilter(t *testing.T, vm *bpf.VM, arch, nr uint32) uint32 {
	t.Helper()
	data := make([]byte, 64) // struct seccomp_data: nr, arch, ip, args[6]
	binary.BigEndian.PutUint32(data[0:], nr)
	binary.BigEndian.PutUint32(data[4:], arch)
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatalf("run filter: %v", err)
	}
	return uint32(ret)
}
