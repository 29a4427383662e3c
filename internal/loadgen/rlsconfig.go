package loadgen

import (
	"fmt"
	"strings"

	"github.com/floodgate/floodgate/algorithms"
)

// RLSConfig is the server config an APIRLS run needs: a YAML file for
// `floodgate serve --config` with the domain and one rule per descriptor
// key (DescriptorKey(0..descriptors-1)), each counting every key
// separately under limit (burst = requests where the algorithm takes one).
func RLSConfig(domain string, descriptors int, limit algorithms.Limit) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# floodgate bench --api rls --domain %s --descriptors %d --limit %s --algorithm %s\n",
		domain, descriptors, FormatLimit(limit.Requests, limit.Period), limit.Algorithm)
	b.WriteString("# Serve with: floodgate serve --config THIS_FILE\n")
	fmt.Fprintf(&b, "domain: %q\ndescriptors:\n", domain)
	for j := range max(descriptors, 1) {
		fmt.Fprintf(&b, "  - key: %s\n    rate_limit: {algorithm: %s, requests_per_unit: %d, period: %s}\n",
			DescriptorKey(j), limit.Algorithm, limit.Requests, formatPeriod(limit.Period))
	}
	return b.String()
}
