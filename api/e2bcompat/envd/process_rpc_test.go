package envd_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	pb "github.com/sandlot/sandlot/e2bwire/process"
	"github.com/sandlot/sandlot/e2bwire/process/processconnect"
)

// The process RPC surface: Connect framing of a stream start, and the
// generated client against the handler.

func readEnvelopes(t *testing.T, r io.Reader) []envelope {
	t.Helper()
	var out []envelope
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("envelope header: %v", err)
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatalf("envelope body: %v", err)
		}
		out = append(out, envelope{hdr[0], string(body)})
	}
}

func frame(msg string) io.Reader {
	var b bytes.Buffer
	b.WriteByte(0)
	binary.Write(&b, binary.BigEndian, uint32(len(msg)))
	b.WriteString(msg)
	return &b
}

func TestProcessStartFraming(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{"envVars":{"FROM_CREATE":"c"}}`)
	body := `{"process":{"cmd":"/bin/bash","args":["-c","echo out-$FOO-$FROM_CREATE; echo err >&2; exit 3"],"envs":{"FOO":"bar"}},"stdin":false}`
	hdr := append(e.Headers(sb, "49983"), "Content-Type", "application/connect+json", "Connect-Protocol-Version", "1")
	resp := e.Do("POST", "/process.Process/Start", frame(body), hdr...)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/connect+json" {
		t.Fatalf("status %d content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	envs := readEnvelopes(t, resp.Body)
	if len(envs) < 3 {
		t.Fatalf("envelopes %+v", envs)
	}
	type event struct {
		Event struct {
			Start *struct{ Pid int }
			Data  *struct{ Stdout, Stderr string }
			End   *struct {
				ExitCode int
				Exited   bool
				Status   string
			}
		}
	}
	var stdout, stderr string
	var evs []event
	for i, env := range envs[:len(envs)-1] {
		if env.Flag != 0 {
			t.Fatalf("envelope %d flag %d", i, env.Flag)
		}
		var ev event
		if err := json.Unmarshal([]byte(env.Body), &ev); err != nil {
			t.Fatalf("envelope %d: %v", i, err)
		}
		evs = append(evs, ev)
		if d := ev.Event.Data; d != nil {
			o, _ := base64.StdEncoding.DecodeString(d.Stdout)
			e, _ := base64.StdEncoding.DecodeString(d.Stderr)
			stdout, stderr = stdout+string(o), stderr+string(e)
		}
	}
	if evs[0].Event.Start == nil || evs[0].Event.Start.Pid == 0 {
		t.Fatalf("first event is not start: %s", envs[0].Body)
	}
	end := evs[len(evs)-1].Event.End
	if end == nil || end.ExitCode != 3 || !end.Exited || end.Status != "exit status 3" {
		t.Fatalf("last event is not end: %s", envs[len(envs)-2].Body)
	}
	if stdout != "out-bar-c\n" || stderr != "err\n" {
		t.Fatalf("stdout %q stderr %q", stdout, stderr)
	}
	if last := envs[len(envs)-1]; last.Flag != 2 || last.Body != "{}" {
		t.Fatalf("end-of-stream envelope %+v", last)
	}
}

// The generated Connect client (JSON codec) drives a background process:
// start with stdin, list, send input, close stdin, reconnect, kill.
func TestProcessClient(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	hdr := func(r connect.AnyRequest) {
		r.Header().Set("E2b-Sandbox-Id", sb.SandboxID)
		r.Header().Set("E2b-Sandbox-Port", "49983")
		r.Header().Set("X-Access-Token", sb.EnvdAccessToken)
	}
	c := processconnect.NewProcessClient(http.DefaultClient, e.Srv.URL, connect.WithProtoJSON())
	ctx := context.Background()
	req := connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", "read x; echo got-$x; sleep 30"}}, Stdin: ptr(true)})
	hdr(req)
	st, err := c.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() || st.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", st.Err())
	}
	pid := st.Msg().GetEvent().GetStart().GetPid()
	lreq := connect.NewRequest(&pb.ListRequest{})
	hdr(lreq)
	list, err := c.List(ctx, lreq)
	if err != nil || len(list.Msg.GetProcesses()) != 1 || list.Msg.GetProcesses()[0].GetPid() != pid {
		t.Fatalf("list %v %v", list, err)
	}
	in := connect.NewRequest(&pb.SendInputRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("hello\n")}}})
	hdr(in)
	if _, err := c.SendInput(ctx, in); err != nil {
		t.Fatal(err)
	}
	var out string
	for !strings.Contains(out, "got-hello") && st.Receive() {
		out += string(st.Msg().GetEvent().GetData().GetStdout())
	}
	st.Close() // the process keeps running
	creq := connect.NewRequest(&pb.ConnectRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}})
	hdr(creq)
	cs, err := c.Connect(ctx, creq)
	if err != nil {
		t.Fatal(err)
	}
	if !cs.Receive() || cs.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("connect: no start event %v", cs.Err())
	}
	kill := connect.NewRequest(&pb.SendSignalRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}, Signal: pb.Signal_SIGNAL_SIGKILL})
	hdr(kill)
	if _, err := c.SendSignal(ctx, kill); err != nil {
		t.Fatal(err)
	}
	var end *pb.ProcessEvent_EndEvent
	for cs.Receive() {
		if e := cs.Msg().GetEvent().GetEnd(); e != nil {
			end = e
		}
	}
	if end == nil || end.GetExitCode() == 0 || !strings.HasPrefix(end.GetStatus(), "signal:") {
		t.Fatalf("end after kill: %v (%v)", end, cs.Err())
	}
	// signalling a gone process: not_found
	if _, err := c.SendSignal(ctx, kill); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("kill of a gone process: %v", err)
	}
}
