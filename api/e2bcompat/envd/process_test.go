package envd_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/sandlot/sandlot/e2bwire/process"
	"github.com/sandlot/sandlot/e2bwire/process/processconnect"
)

// TestStreamInput: envd's client-streaming StreamInput (a start event
// naming the process, then stdin chunks, keepalives between) feeds the
// process's stdin in order; data before start is invalid_argument.
func TestStreamInput(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	auth := func(h http.Header) {
		h.Set("E2b-Sandbox-Id", sb.SandboxID)
		h.Set("E2b-Sandbox-Port", "49983")
		h.Set("X-Access-Token", sb.EnvdAccessToken)
	}
	c := processconnect.NewProcessClient(http.DefaultClient, e.Srv.URL, connect.WithProtoJSON())
	ctx := context.Background()
	req := connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", "read a; read b; echo got-$a-$b"}}, Stdin: ptr(true)})
	auth(req.Header())
	st, err := c.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() || st.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", st.Err())
	}
	pid := st.Msg().GetEvent().GetStart().GetPid()

	data := func(s string) *pb.StreamInputRequest {
		return &pb.StreamInputRequest{Event: &pb.StreamInputRequest_Data{Data: &pb.StreamInputRequest_DataEvent{
			Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte(s)}}}}}
	}
	in := c.StreamInput(ctx)
	auth(in.RequestHeader())
	for _, m := range []*pb.StreamInputRequest{
		{Event: &pb.StreamInputRequest_Start{Start: &pb.StreamInputRequest_StartEvent{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}}}},
		data("one\n"),
		{Event: &pb.StreamInputRequest_Keepalive{Keepalive: &pb.StreamInputRequest_KeepAlive{}}},
		data("two\n"),
	} {
		if err := in.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.CloseAndReceive(); err != nil {
		t.Fatal(err)
	}
	var out string
	for st.Receive() {
		out += string(st.Msg().GetEvent().GetData().GetStdout())
	}
	if !strings.Contains(out, "got-one-two") {
		t.Fatalf("output %q", out)
	}

	bad := c.StreamInput(ctx)
	auth(bad.RequestHeader())
	bad.Send(data("early\n"))
	if _, err := bad.CloseAndReceive(); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("data before start: %v", err)
	}
}
