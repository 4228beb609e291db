// Package runtimetest holds the isolation checks every sandbox must pass,
// shared by the runtime's tests (runtime/oci) and the provider's
// (provider/local), so the two layers hold the sandbox to one list.
package runtimetest

import (
	"fmt"
	"net"
	"testing"
)

// Case is a shell command run as the sandbox user.
type Case struct{ Name, Cmd string }

// Py is a shell command that runs code with python3.
func Py(code string) string { return fmt.Sprintf("python3 -c %q", code) }

// Hostile returns commands that must fail inside a sandbox. port is a TCP
// port open on the host's loopback (ListenLoopback), which the sandbox must
// not reach.
func Hostile(port int) []Case {
	return []Case{
		{"read /etc/shadow", "cat /etc/shadow"},
		{"read host root home", "ls /root/"},
		{"read host /work", "ls /work"},
		{"read host /var", "ls /var/lib"},
		{"read host /usr/local", "ls -A /usr/local/bin | grep -q ."},
		{"write /usr", "touch /usr/x"},
		{"write /usr/bin", "cp /bin/sh /usr/bin/sh2"},
		{"write /etc", "echo x >> /etc/passwd"},
		{"write /", "mkdir /x"},
		{"write /sys", "echo 1 > /sys/kernel/mm/ksm/run"},
		{"connect host loopback", Py(fmt.Sprintf("import socket; socket.create_connection(('127.0.0.1', %d), timeout=2)", port))},
		{"connect outside", Py("import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)")},
		{"unshare user ns", "unshare -U true"},
		{"python unshare user ns", Py("import os; os.unshare(os.CLONE_NEWUSER)")},
		{"unshare mount ns", "unshare -m true"},
		{"mount tmpfs", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m"},
		{"ptrace pid 1", Py("import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); sys.exit(0 if l.ptrace(16,1,0,0)==0 else 1)")},
		{"read pid 1 memory", Py("open('/proc/1/mem','rb')")},
		{"setuid root", Py("import os; os.setuid(0)")},
		{"chown", "touch /tmp/f && chown 0 /tmp/f"},
		{"raw socket", Py("import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)")},
		{"kernel keyring", Py("import ctypes,sys; l=ctypes.CDLL(None); sys.exit(0 if l.syscall(250,0,0,0,0,0)>=0 else 1)")}, // keyctl
		{"mknod", "mknod /tmp/null c 1 3"},
		{"write channel dir", "touch /run/sandlot/x"},
		{"write /run", "touch /run/x"},
		{"become root", Py("import os; os.setresuid(0, 0, 0)")},
	}
}

// ListenLoopback listens on the host's 127.0.0.1, accepting and closing
// connections until the test ends, and returns the port.
func ListenLoopback(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}
