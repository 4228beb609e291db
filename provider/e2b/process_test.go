package e2b_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/e2bwire"
	pb "github.com/sandlot/sandlot/e2bwire/process"
	"github.com/sandlot/sandlot/e2bwire/process/processconnect"
)

// endsWith is an envd whose every process starts and at once ends with
// the status given (envd says a signal's end as Go does: "signal: killed").
type endsWith struct {
	processconnect.UnimplementedProcessHandler
	status string
	exit   int32
}

func (e endsWith) Start(_ context.Context, _ *connect.Request[pb.StartRequest], st *connect.ServerStream[pb.StartResponse]) error {
	if err := st.Send(&pb.StartResponse{Event: &pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: 7}}}}); err != nil {
		return err
	}
	return st.Send(&pb.StartResponse{Event: &pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: &pb.ProcessEvent_EndEvent{ExitCode: e.exit, Status: e.status}}}})
}

// TestExecSignalNames: a process envd ends by a signal reports the
// signal's name, as a local sandbox does (SIGKILL), not Go's word for it
// ("killed"): the parity test saw "killed" when the server's deadline
// ended a timed-out command a moment before the client's own did.
func TestExecSignalNames(t *testing.T) {
	for status, want := range map[string]string{
		"signal: killed":     "SIGKILL",
		"signal: terminated": "SIGTERM",
		"signal: interrupt":  "SIGINT",
		"signal: mystery":    "mystery", // not one of Go's words: kept as it came
		"exit status 3":      "",
	} {
		_, h := processconnect.NewProcessHandler(endsWith{status: status, exit: 137})
		sb := interceptedSandbox(t, e2bwire.EnvdPort, processconnect.ProcessStartProcedure, func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) })
		res, err := sb.Exec(context.Background(), agent.ExecParams{Argv: []string{"true"}}, nil)
		if err != nil {
			t.Fatalf("%s: %v", status, err)
		}
		if res.Signal != want || res.ExitCode != 137 {
			t.Errorf("%q: signal %q exit %d, want %q 137", status, res.Signal, res.ExitCode, want)
		}
	}
}
