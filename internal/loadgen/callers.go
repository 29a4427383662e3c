package loadgen

import (
	"context"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// builder pre-builds every request of the run and returns a function that
// makes a worker's caller on one connection. Each caller reuses its own
// reply message; requests are shared read-only between workers.
func builder(cfg *Config) func(grpc.ClientConnInterface) caller {
	switch cfg.API {
	case APICheck:
		limit := &floodgatev1.Limit{Requests: cfg.Limit.Requests, Period: durationpb.New(cfg.Limit.Period)}
		reqs := make([]rawRequest, cfg.Keys)
		for i := range reqs {
			reqs[i] = marshalRequest(&floodgatev1.CheckRequest{
				Key:       KeyName(i),
				Algorithm: floodgatev1.Algorithm(cfg.Limit.Algorithm),
				Cost:      1,
				Source:    &floodgatev1.CheckRequest_Limit{Limit: limit},
			})
		}
		return invoker(floodgatev1.RateLimiter_Check_FullMethodName, reqs, func(allowed *verdict) (bool, bool) { // CheckResponse.allowed
			return *allowed == 1, true
		})
	case APIRLS:
		reqs := make([]rawRequest, cfg.Keys)
		for i := range reqs {
			ds := make([]*ratelimitv3.RateLimitDescriptor, cfg.Descriptors)
			for j := range ds {
				ds[j] = &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: DescriptorKey(j), Value: KeyName(i)}}}
			}
			reqs[i] = marshalRequest(&rlsv3.RateLimitRequest{Domain: cfg.Domain, Descriptors: ds, HitsAddend: 1})
		}
		return invoker(rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, reqs, func(r *rlsVerdict) (bool, bool) {
			return r.code == verdict(rlsv3.RateLimitResponse_OK), r.limited
		})
	default: // APIHealth: one request, whatever the key
		reqs := []rawRequest{marshalRequest(&healthpb.HealthCheckRequest{})}
		return invoker(healthpb.Health_Check_FullMethodName, reqs, func(status *verdict) (bool, bool) { // HealthCheckResponse.status
			return *status == verdict(healthpb.HealthCheckResponse_SERVING), false
		})
	}
}

// invoker makes the callers of method: the request of key is
// reqs[key%len(reqs)]; answer reads the reply (allowed, limited).
func invoker[R verdict | rlsVerdict](method string, reqs []rawRequest, answer func(*R) (bool, bool)) func(grpc.ClientConnInterface) caller {
	return func(conn grpc.ClientConnInterface) caller {
		reply := new(R)
		return func(ctx context.Context, key int) (bool, bool, error) {
			if err := conn.Invoke(ctx, method, reqs[key%len(reqs)], reply, callCodec); err != nil {
				return false, false, err
			}
			allowed, limited := answer(reply)
			return allowed, limited, nil
		}
	}
}
