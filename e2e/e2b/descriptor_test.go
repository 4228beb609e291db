package e2b

import (
	"encoding/base64"
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/sandlot/sandlot/e2bwire/filesystem"
	"github.com/sandlot/sandlot/e2bwire/process"
)

// TestEnvdDescriptorsMatchSDK compares sandlot's envd protos with the file
// descriptors the official e2b package embeds (its generated protobuf-es
// code): same packages, services, methods, messages, field names, numbers,
// types and oneofs. json_name is left out: the SDK strips it and the
// default lowerCamelCase is what both sides use.
func TestEnvdDescriptorsMatchSDK(t *testing.T) {
	t.Parallel()
	npmReady(t)
	js, err := os.ReadFile("node_modules/e2b/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	sdk := map[string]*descriptorpb.FileDescriptorProto{}
	for _, m := range regexp.MustCompile(`fileDesc\)\("([A-Za-z0-9+/=]+)"`).FindAllSubmatch(js, -1) {
		b, err := base64.RawStdEncoding.DecodeString(string(m[1]))
		if err != nil {
			b, err = base64.StdEncoding.DecodeString(string(m[1]))
		}
		if err != nil {
			t.Fatal(err)
		}
		fd := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(b, fd); err != nil {
			t.Fatal(err)
		}
		sdk[fd.GetPackage()] = fd
	}
	for _, f := range []protoreflect.FileDescriptor{process.File_process_process_proto, filesystem.File_filesystem_filesystem_proto} {
		ours := protodesc.ToFileDescriptorProto(f)
		theirs, ok := sdk[ours.GetPackage()]
		if !ok {
			t.Fatalf("the SDK has no %s descriptor (found %d)", ours.GetPackage(), len(sdk))
		}
		for _, fd := range []*descriptorpb.FileDescriptorProto{ours, theirs} {
			fd.Name, fd.Options, fd.SourceCodeInfo, fd.Syntax, fd.Dependency = nil, nil, nil, nil, nil
			clearJSONNames(fd.MessageType)
		}
		if diff := cmp.Diff(theirs, ours, protocmp.Transform()); diff != "" {
			t.Errorf("%s differs from the SDK (-sdk +sandlot):\n%s", ours.GetPackage(), diff)
		}
	}
}

func clearJSONNames(ms []*descriptorpb.DescriptorProto) {
	for _, m := range ms {
		for _, f := range m.Field {
			f.JsonName = nil
		}
		clearJSONNames(m.NestedType)
	}
}
