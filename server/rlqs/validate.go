package rlqs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Bounds on what a report may hold.
const (
	// maxBucketKeys bounds the keys of one bucket id.
	maxBucketKeys = 32
	// maxElapsed is the longest time_elapsed accepted: Envoy reports
	// every reporting_interval, seconds to minutes.
	maxElapsed = 24 * time.Hour
	// minElapsed is the shortest reporting interval Envoy accepts
	// (reporting_interval must be over 100ms): a report is never taken
	// to cover less time, whatever its time_elapsed says.
	minElapsed = 100 * time.Millisecond
	// keyOverhead is what one key of a held bucket id costs beyond its
	// bytes (its map entry), in the per-stream and total byte bounds.
	keyOverhead = 64
	// bucketOverhead is what a held bucket costs beyond its id's bytes,
	// as measured on the heap (TestHeldBytesMatchesTheHeap).
	bucketOverhead = 1536
)

// invalidf is an InvalidArgument status naming field.
func invalidf(field, format string, args ...any) error {
	return status.Error(codes.InvalidArgument, field+": "+fmt.Sprintf(format, args...))
}

func usageField(i int) string { return "bucket_quota_usages[" + strconv.Itoa(i) + "]" }

// checkUsage validates one bucket usage report and returns its elapsed
// time (0 when not given).
func (s *Service) checkUsage(u *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage, i int) (time.Duration, error) {
	f := usageField(i)
	if u == nil {
		return 0, invalidf(f, "empty usage report")
	}
	b := u.GetBucketId().GetBucket()
	switch {
	case len(b) == 0:
		return 0, invalidf(f+".bucket_id", "empty: a bucket id needs at least one key")
	case len(b) > maxBucketKeys:
		return 0, invalidf(f+".bucket_id", "%d keys, more than %d", len(b), maxBucketKeys)
	}
	n := 0
	for k, v := range b {
		switch {
		case k == "":
			return 0, invalidf(f+".bucket_id", "an empty key")
		case len(k) > s.keyBytes:
			return 0, invalidf(f+".bucket_id", "key of %d bytes, longer than %d (--max-key-bytes)", len(k), s.keyBytes)
		case len(v) > s.keyBytes:
			return 0, invalidf(f+".bucket_id", "value of key %q is %d bytes, longer than %d (--max-key-bytes)", trim(k), len(v), s.keyBytes)
		}
		n += len(k) + len(v)
	}
	if n > MaxBucketIDBytes {
		return 0, invalidf(f+".bucket_id", "%d bytes of keys and values, more than %d", n, MaxBucketIDBytes)
	}
	te := u.GetTimeElapsed()
	if te == nil {
		return 0, nil
	}
	if err := te.CheckValid(); err != nil {
		return 0, invalidf(f+".time_elapsed", "%v", err)
	}
	d := te.AsDuration()
	switch {
	case d < 0:
		return 0, invalidf(f+".time_elapsed", "negative (%v)", d)
	case d > maxElapsed:
		return 0, invalidf(f+".time_elapsed", "%v is longer than %v", d, maxElapsed)
	}
	return d, nil
}

// heldBytes is what holding a bucket costs: its id's copy, its canonical
// string, the id's map entries and the bucket's own bookkeeping.
func heldBytes(b map[string]string, canon string) int64 {
	n := bucketOverhead + len(canon) + keyOverhead*len(b)
	for k, v := range b {
		n += len(k) + len(v)
	}
	return int64(n)
}

// trim shortens s for an error message.
func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// canonical is a bucket id as one string, the same whatever the map's
// order, distinct for distinct ids: sorted keys, each key and value
// length-prefixed.
func canonical(b map[string]string) string {
	keys := make([]string, 0, len(b))
	n := 0
	for k, v := range b {
		keys = append(keys, k)
		n += len(k) + len(v) + 12
	}
	slices.Sort(keys)
	var s strings.Builder
	s.Grow(n)
	for _, k := range keys {
		v := b[k]
		s.WriteString(strconv.Itoa(len(k)))
		s.WriteByte(':')
		s.WriteString(k)
		s.WriteString(strconv.Itoa(len(v)))
		s.WriteByte(':')
		s.WriteString(v)
	}
	return s.String()
}

// A bucket id's keys and values are proto3 strings, which must be UTF-8:
// a strict parser refuses a whole response holding one that is not. Envoy
// copies header bytes into bucket ids, so such a bucket is decoded
// (lenientcodec) but dropped, logged and counted, never echoed.

// validID reports whether every key and value of b is UTF-8.
func validID(b map[string]string) bool {
	for k, v := range b {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	return true
}
