package rules

import (
	"strconv"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// A descriptor's `metadata` is free-form YAML that envoyproxy/ratelimit
// hands back to Envoy, as a protobuf Struct, in the response's
// dynamic_metadata when the descriptor passes (quota-based service
// selection reads it there). It is read as the reference reads it: a
// mapping whose keys become strings, integers and floats as Struct
// numbers, booleans, null, every other scalar (timestamps too) as its
// text, nested mappings and lists as Structs and lists.

// maxMetadataNodes bounds the nodes one metadata expands to (aliases can
// multiply them). The nodes reached through an alias are also charged to
// the file's alias budget (maxAliased), so that many metadata aliasing
// one large mapping cannot make a small file take memory out of
// proportion to its size.
const maxMetadataNodes = 10000

// metadata converts a descriptor's metadata node to a Struct; nil when
// there is none or it is empty. Errors point at the offending node.
func (p *parser) metadata(n *yaml.Node) *structpb.Struct {
	if n == nil {
		return nil
	}
	budget := maxMetadataNodes
	v, ok := p.metaValue(n, &budget, false)
	if !ok {
		return nil
	}
	switch s := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		return nil
	case *structpb.Value_StructValue:
		if len(s.StructValue.GetFields()) == 0 {
			return nil
		}
		return s.StructValue
	}
	p.errorf(n, "metadata must be a mapping, got %s", kindName(n))
	return nil
}

// metaValue converts one node, spending budget, and, when the node is
// reached through an alias (aliased), the file's alias budget.
func (p *parser) metaValue(n *yaml.Node, budget *int, aliased bool) (*structpb.Value, bool) {
	at := n
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n, aliased = n.Alias, true
	}
	if *budget--; *budget < 0 {
		p.errorf(n, "metadata expands to more than %d nodes", maxMetadataNodes)
		return nil, false
	}
	if aliased {
		if p.visited++; p.visited > p.budget {
			if !p.tooBig {
				p.tooBig = true
				p.errorf(at, "metadata: aliases expand too far (more than %d YAML nodes beyond the file's own)", maxAliased)
			}
			return nil, false
		}
	}
	switch n.Kind {
	case yaml.MappingNode:
		fields := make(map[string]*structpb.Value, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			for k.Kind == yaml.AliasNode && k.Alias != nil {
				k = k.Alias
			}
			if k.Kind != yaml.ScalarNode {
				p.errorf(k, "metadata: keys must be scalars, got %s", kindName(k))
				return nil, false
			}
			v, ok := p.metaValue(n.Content[i+1], budget, aliased)
			if !ok {
				return nil, false
			}
			fields[k.Value] = v
		}
		return structpb.NewStructValue(&structpb.Struct{Fields: fields}), true
	case yaml.SequenceNode:
		vals := make([]*structpb.Value, 0, len(n.Content))
		for _, c := range n.Content {
			v, ok := p.metaValue(c, budget, aliased)
			if !ok {
				return nil, false
			}
			vals = append(vals, v)
		}
		return structpb.NewListValue(&structpb.ListValue{Values: vals}), true
	case yaml.ScalarNode:
		return metaScalar(n), true
	}
	p.errorf(n, "metadata: unexpected %s", kindName(n))
	return nil, false
}

// metaScalar is a scalar as YAML types it.
func metaScalar(n *yaml.Node) *structpb.Value {
	switch n.ShortTag() {
	case "!!null":
		return structpb.NewNullValue()
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return structpb.NewBoolValue(b)
		}
	case "!!int":
		var i int64
		if n.Decode(&i) == nil {
			return structpb.NewNumberValue(float64(i))
		}
		var u uint64
		if n.Decode(&u) == nil {
			return structpb.NewNumberValue(float64(u))
		}
	case "!!float":
		var f float64
		if n.Decode(&f) == nil {
			return structpb.NewNumberValue(f)
		}
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
			return structpb.NewNumberValue(f)
		}
	}
	return structpb.NewStringValue(n.Value)
}
