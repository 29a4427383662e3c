package server

import (
	"cmp"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// dynamicMetadata is the response's dynamic_metadata as envoyproxy/
// ratelimit builds it (RESPONSE_DYNAMIC_METADATA=true):
//
//	domain       the request's domain
//	descriptors  one Struct per descriptor: entries ("key=value" each),
//	             limit (the override's text form, when it has one),
//	             hitsAddend (when the descriptor sets one)
//	hitsAddend   the request's hits_addend, when not 0
//	metadata     the metadata of the rules of the descriptors that passed
//	             (status OK and not unlimited), merged in request order:
//	             a key already present keeps its value, unless both are
//	             Structs, which merge the same way; left out when empty
//
// checks and statuses are the request's. Unlike the reference, merging
// never modifies the config's own metadata, and every string taken from
// the request is made UTF-8 (each run of other bytes becomes U+FFFD):
// Envoy copies header bytes into descriptor values, and a proto3 string
// that is not UTF-8 makes a strict parser refuse the whole response.
func dynamicMetadata(req *rlsv3.RateLimitRequest, checks []envoyCheck, statuses []*rlsv3.RateLimitResponse_DescriptorStatus) *structpb.Struct {
	fields := make(map[string]*structpb.Value, 4)
	fields["domain"] = structpb.NewStringValue(strings.ToValidUTF8(req.GetDomain(), "\uFFFD"))
	descs := make([]*structpb.Value, 0, len(req.GetDescriptors()))
	for _, d := range req.GetDescriptors() {
		if d == nil {
			continue
		}
		entries := make([]*structpb.Value, 0, len(d.GetEntries()))
		for _, en := range d.GetEntries() {
			entries = append(entries, structpb.NewStringValue(strings.ToValidUTF8(en.GetKey()+"="+en.GetValue(), "\uFFFD")))
		}
		df := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
		if l := d.GetLimit(); l != nil {
			df["limit"] = structpb.NewStringValue(l.String())
		}
		if h := d.GetHitsAddend(); h != nil {
			df["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
		}
		descs = append(descs, structpb.NewStructValue(&structpb.Struct{Fields: df}))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descs})
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	passed := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for d, st := range statuses {
		if st.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			continue
		}
		if m := metadataOf(checks, d); m != nil {
			mergeMetadata(passed, m)
		}
	}
	if len(passed.GetFields()) > 0 {
		fields["metadata"] = structpb.NewStructValue(passed)
	}
	return &structpb.Struct{Fields: fields}
}

// metadataOf is the metadata of descriptor d's rule (every limit of a
// descriptor carries the descriptor's), or nil; nil too when d's limits
// are all unlimited, which the reference leaves out of the passed ones.
func metadataOf(checks []envoyCheck, d int) *structpb.Struct {
	var m *structpb.Struct
	limited := false
	for i := range checks {
		if c := &checks[i]; c.desc == d {
			limited = limited || !c.limit.Unlimited
			m = cmp.Or(m, c.limit.Metadata)
		}
	}
	if !limited {
		return nil
	}
	return m
}

// mergeMetadata merges src into dest as the reference does: a new key is
// added (a copy, so that later merges never reach into the config), an
// existing one is kept, unless both values are Structs, which merge
// recursively.
func mergeMetadata(dest, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		cur, ok := dest.Fields[k]
		if !ok {
			dest.Fields[k] = proto.Clone(v).(*structpb.Value)
			continue
		}
		if ds, ss := cur.GetStructValue(), v.GetStructValue(); ds != nil && ss != nil {
			if ds.Fields == nil {
				ds.Fields = map[string]*structpb.Value{}
			}
			mergeMetadata(ds, ss)
		}
	}
}
