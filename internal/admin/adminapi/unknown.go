package adminapi

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// newerRequest refuses a request carrying fields this build's schema does
// not know: a newer schedctl's. protobuf would drop them and the call
// would go on with the rest, a drain without the option its caller gave,
// say; instead the caller is told which fields, and what to do
// (docs/design.md, "Compatibility across releases").
func newerRequest(req any) error {
	m, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	where := unknownFields(m.ProtoReflect(), nil)
	if len(where) == 0 {
		return nil
	}
	return status.Errorf(codes.FailedPrecondition, "the request has fields this center's release does not know (%s): a newer schedctl's? Nothing was done: use the center's release's schedctl, or upgrade the center first",
		strings.Join(where, ", "))
}

// unknownFields appends to out each message of m (m and the messages in
// it) with fields its schema does not know, as "<message> field <n>".
func unknownFields(m protoreflect.Message, out []string) []string {
	if raw := m.GetUnknown(); len(raw) > 0 {
		var nums []string
		for len(raw) > 0 {
			n, _, size := protowire.ConsumeField(raw)
			if size < 0 {
				break
			}
			if s := fmt.Sprint(n); !slices.Contains(nums, s) {
				nums = append(nums, s)
			}
			raw = raw[size:]
		}
		out = append(out, fmt.Sprintf("%s field %s", m.Descriptor().FullName(), strings.Join(nums, ", ")))
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := range l.Len() {
				out = unknownFields(l.Get(i).Message(), out)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				out = unknownFields(mv.Message(), out)
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			out = unknownFields(v.Message(), out)
		}
		return true
	})
	return out
}
