package install

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// postgres is a Postgres server of the install's own, listening on one
// address (the pods' gateway), so the machine's other Postgres on
// 127.0.0.1 is never touched. Its data lives in a temporary directory
// removed by stop.
type postgres struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	url  string
}

// startPostgres runs initdb and postgres as the postgres user with a
// random password, listening on addr (a port picked free there), and
// accepting password logins from podNet.
func startPostgres(ctx context.Context, addr, podNet string) (*postgres, error) {
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		return nil, fmt.Errorf("initdb: %w", err)
	}
	server, err := exec.LookPath("postgres")
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("the postgres user (postgres refuses to run as root): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// Pdeathsig: a test binary killed by its timeout takes its Postgres
	// along rather than leaving it on the pods' bridge.
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Setpgid: true,
		Pdeathsig: syscall.SIGKILL}

	dir, err := os.MkdirTemp("", pgDirPrefix)
	if err != nil {
		return nil, err
	}
	p := &postgres{dir: dir, done: make(chan struct{})}
	fail := func(err error) (*postgres, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fail(err)
	}
	var pw [16]byte
	_, _ = rand.Read(pw[:])
	password := hex.EncodeToString(pw[:])
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return fail(err)
	}
	if err := os.Chown(pwfile, uid, gid); err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	cmd := exec.CommandContext(ctx, initdb, "-D", data, "-U", "sandlot", "--pwfile", pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync", "-E", "UTF8")
	cmd.SysProcAttr = cred
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fail(err)
	}
	_, err = fmt.Fprintf(hba, "host all all %s scram-sha-256\n", podNet)
	hba.Close()
	if err != nil {
		return fail(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return fail(fmt.Errorf("postgres's address %s: %w", addr, err))
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	log, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return fail(err)
	}
	p.cmd = exec.Command(server, "-D", data, "-p", port, "-c", "listen_addresses="+addr,
		"-c", "unix_socket_directories="+dir, "-c", "fsync=off", "-c", "max_connections=200")
	p.cmd.SysProcAttr = cred
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return fail(err)
	}
	go func() { _ = p.cmd.Wait(); log.Close(); close(p.done) }()
	hostPort := net.JoinHostPort(addr, port)
	p.url = fmt.Sprintf("postgres://sandlot:%s@%s/postgres?sslmode=disable", password, hostPort)
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", hostPort, time.Second)
		if err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.done:
			b, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres exited at start:\n%s", b)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("postgres on %s did not listen within a minute", hostPort)
		}
	}
}

// KillPostgres ends a Postgres that Install.PostgresProcess named (its
// process group) and removes its directory: make k8s-down's sweep after
// the process holding the install died.
func KillPostgres(pid int, dir string) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if strings.HasPrefix(filepath.Base(dir), pgDirPrefix) {
		_ = os.RemoveAll(dir)
	}
}

const pgDirPrefix = "sandlot-k8s-postgres-"

// stop ends the server (a fast shutdown, then a kill) and removes its data.
func (p *postgres) stop() {
	if p == nil {
		return
	}
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	_ = os.RemoveAll(p.dir)
}
