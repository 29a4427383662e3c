// Package rules loads floodgate's rate-limit rules: the descriptor trees
// that Envoy's ShouldRateLimit is matched against, and the named policies
// of the Check API. This comment is the configuration reference.
//
// # Files
//
// --config names one YAML file or a folder. A folder is read
// non-recursively: every *.yaml and *.yml file directly inside it, in name
// order; names starting with '.' are skipped (editor swap files, and the
// "..data" and "..2026_xx" folders of a Kubernetes ConfigMap mount, whose
// visible files are symlinks into them; symlinks are followed). Each file
// holds one YAML document with one domain, or only policies:
//
//	domain: api                  # required unless the file holds only policies
//	default_algorithm: NAME      # optional; see "Extensions"
//	descriptors: [...]           # the rules of this domain
//	policies: {...}              # named limits for the Check API
//
// A domain defined in two files is an error (envoyproxy/ratelimit's
// default; it has no merging here), and so is a policy defined twice.
// Policies may live in any file, including a file with no domain.
//
// The config is hot-reloaded (see Watcher): a valid change is live within
// about 100ms of the write; an invalid one is logged and the previous
// config keeps serving. Only the config files count: other files in the
// folder (a log, say) never trigger a reload; a config file that is a
// symlink is followed to its target, wherever it is, and a ConfigMap's
// "..data" swap reloads. `floodgate config validate PATH` checks files
// offline.
//
// # envoyproxy/ratelimit's format, unchanged
//
// Every config written for the reference Envoy rate-limit service
// (github.com/envoyproxy/ratelimit) loads as it is:
//
//	domain: edge_proxy_per_ip
//	descriptors:
//	  - key: remote_address          # every address gets its own counter
//	    rate_limit:
//	      unit: second               # second|minute|hour|day|week|month|year
//	      requests_per_unit: 10
//	  - key: remote_address
//	    value: 50.0.0.5              # an exact value beats the key-only rule
//	    rate_limit:
//	      unit: second
//	      requests_per_unit: 0       # 0 denies every matching request
//	  - key: path
//	    value: /admin/*              # '*' is a wildcard: here a prefix
//	    share_threshold: true        # all /admin/... paths share one counter
//	    rate_limit: {unit: minute, requests_per_unit: 60}
//	  - key: path
//	    value: /api/*/items          # '*' anywhere: /api/v1/items, /api/a/b/items
//	    rate_limit: {unit: second, requests_per_unit: 5}   # each path counts apart
//	  - key: ldap
//	    rate_limit: {unlimited: true}   # OK without touching the store
//	  - key: message_type
//	    value: marketing
//	    descriptors:                 # nested: matched one level per entry
//	      - key: to_number
//	        shadow_mode: true        # decide and count, but answer OK
//	        detailed_metric: true
//	        rate_limit:
//	          name: marketing_per_number
//	          unit: day
//	          unit_multiplier: 2     # per 2 days
//	          requests_per_unit: 5
//	          replaces: [{name: per_number}]
//
// A descriptor node has `key` (required), `value` (optional: exact, or a
// wildcard pattern when it holds a '*', see Matching), `match` (only
// `cidr`: the value is a network, see "Networks"), `rate_limit`,
// nested `descriptors`, and the flags `shadow_mode` and `detailed_metric`
// (both for this node's own limits; they do not reach nested descriptors),
// `value_to_metric` (the request's value at this level appears in the
// metric names of the limits at or below it, only with serve's bounded
// opt-in --detailed-metric-series), `share_threshold` (only on
// wildcard values and networks: all values matching the wildcard or
// network share one counter instead of one each), `quota_mode` (this
// node's own limits are quotas for service selection, Limit.QuotaMode; a
// rate_limit may also set it for itself) and `metadata` (free-form,
// returned to Envoy in the response's dynamic_metadata, Limit.Metadata).
//
// A rate_limit has `unit` and `requests_per_unit`, optionally
// `unit_multiplier` (a positive integer) and `name`, and `replaces: [{name:
// x}]`; or `unlimited: true` with no unit. Month is 30 days and year 365,
// as in the reference. Unknown keys, a key+value defined twice at one
// level, a bad unit, a unit with unlimited, replaces naming its own limit
// or a name no limit in the domain has, and an empty domain are rejected.
//
// A file that validates does what it says; fields that would do nothing,
// or something else than they read, are rejected with their position:
// `shadow_mode`, `detailed_metric` or `quota_mode` on a node without a
// rate_limit, `value_to_metric` or `share_threshold` with no rate_limit at
// or below the node, `requests_per_unit` (or any rate setting) with
// `unlimited: true`, and `burst` with `requests_per_unit: 0`.
//
// Differences from the reference, on purpose: `requests_per_unit` is
// required (the reference silently treats a missing one as 0, deny all);
// keys and values are matched as given, so a key containing '_' can never
// be confused with a key_value pair; and no two different descriptors ever
// share a counter, whatever bytes their values hold (Limit.AppendKey),
// except two spellings of one address under a network (see Networks).
//
// # Matching
//
// Envoy sends a domain and descriptors, each a list of (key, value)
// entries. A descriptor is matched by walking the domain's tree one level
// per entry. At each level: the node with the entry's key and exactly its
// value wins; else the longest `match: cidr` network holding the value
// (an address; see Networks); else the first node (in file order) whose
// wildcard value matches; else the node with the key and no value. The
// first of these that exists is taken, even when it has no limit at this
// depth: there is no going back to try the next. In a value, each '*'
// stands for any run of characters, none included, '/' included, as in
// the reference: "/api/*" is a prefix, "*.pdf" a suffix, "/api/*/items"
// matches /api/v1/items and /api/a/b/items but not /api/items, and
// "svc*ep*rpc" needs its parts in that order. There is no escape: a value
// with a '*' is always a pattern (a request whose value is the pattern
// itself matches it exactly). A limit
// applies only when its node is at exactly the depth of the last entry: a
// rule on `remote_address` does not apply to the descriptor
// (remote_address, path), and vice versa. No matching node, or an unknown
// domain, means no limit: the descriptor is OK.
//
// When one request's descriptors match limits, and one of them lists
// another's name in `replaces`, the named limit is ignored for that
// request (Set.MatchRequest).
//
// Counters: a key-only rule counts every value separately (one counter per
// remote address), an exact rule counts its one value, a wildcard rule or
// a network counts every matching value separately unless share_threshold
// is set, whatever the wildcard's form.
//
// # Networks (match: cidr)
//
// Ban lists and allowlists by network, IPv4 and IPv6:
//
//	descriptors:
//	  - key: remote_address
//	    rate_limit: {unit: second, requests_per_unit: 50}   # per address
//	  - key: remote_address
//	    value: 10.0.0.0/8
//	    match: cidr
//	    rate_limit: {unit: second, requests_per_unit: 0}    # ban list
//	  - key: remote_address
//	    value: 10.1.0.0/16              # the longest network wins: allowed
//	    match: cidr
//	    rate_limit: {unlimited: true}
//	  - key: remote_address
//	    value: 2001:db8::/32
//	    match: cidr
//	    share_threshold: true           # the whole network shares 600/min
//	    rate_limit: {unit: minute, requests_per_unit: 600}
//
// With `match: cidr` the value must be a network in CIDR notation, as
// net/netip reads it (netip.ParsePrefix). Refused, with their position:
// a value that is no network (an address alone: write /32 or /128; a
// wildcard; a name), a length out of range (10.0.0.0/33), host bits set
// (10.0.0.1/8: the message names 10.0.0.0/8; a typo for /32 would widen
// a ban a millionfold if rewritten silently), an IPv4-mapped IPv6 network
// (::ffff:10.0.0.0/104, which nothing would match: write 10.0.0.0/8), a
// zone, and one network twice at one level in any spelling
// (2001:db8::/32 and 2001:0DB8::/32). Any other `match` is refused.
//
// A request value matches a network when net/netip parses it as an
// address (netip.ParseAddr) inside the network. An IPv4-mapped IPv6
// address (::ffff:10.1.2.3, what a dual-stack listener reports) is its
// IPv4 address (netip.Addr.Unmap): it matches 10.0.0.0/8, and no IPv6
// network, not even ::/0. A value with a zone (fe80::1%eth0), a port
// (10.1.2.3:80), a name or anything else that is no address matches no
// network and falls through to wildcards and the key-only rule.
//
// Precedence at one level is exact value, then the longest network, then
// wildcards, then key-only: the more specific rule wins, as an exact
// value already beats a wildcard. An exact value is compared as text: an
// exact `value: 10.1.2.3` does not see ::ffff:10.1.2.3; a /32 network
// sees every spelling. The literal text "10.0.0.0/8" without `match:
// cidr` is an exact value (as in the reference), and may sit beside the
// network of the same text.
//
// Counters: a network counts each address apart (per-address counters
// inside the network), keyed by the address in canonical form
// (netip.Addr.String after Unmap), so 10.0.0.1 and ::ffff:10.0.0.1, or
// 2001:DB8::1 and 2001:db8::1, count together; with share_threshold the
// whole network is one counter. The limit's ID and derived name hold the
// network in canonical form (the ID marks it apart from an exact value of
// the same text).
//
// Networks are looked up in a path-compressed binary trie per key and
// level (at most one node per bit of the address, about log2 of the
// number of networks in practice): with 100,000 networks a lookup costs
// about what the exact-value map lookup of a 100,000-address ban list
// costs, and no allocation (bench/RESULTS.md).
//
// # Extensions
//
// Inside any rate_limit:
//
//	algorithm: NAME           # one of algorithms.All (docs/algorithms.md); an unknown one names them
//	burst: 20                 # where the algorithm takes one (algorithms.Facts.Burst): its capacity,
//	                          # or the queue's size of one that waits (default requests)
//	period: 1500ms            # any Go duration, instead of unit/unit_multiplier (not both)
//	period: calendar_month    # or calendar_day | calendar_week (ISO, from Monday) | calendar_year:
//	time_zone: Asia/Jakarta   #   the local calendar period of an IANA zone (default UTC)
//	failure_mode: closed      # open | closed | local (any case): what to answer when the store is down
//	shadow_mode: true         # this limit only (the node's shadow_mode covers all of them)
//	warn_at: 80%              # the soft limit: units used (800) or a whole percentage of the
//	                          # capacity (80%) from which an allowed answer carries a warning
//
// warn_at is at most the capacity (burst for a bucket, else the requests
// per period) and positive; a percentage is whole, 1% to 100%, rounded up
// to units. An allowed answer that leaves at least that many units used
// (limit − remaining) warns: RateLimit-Warning on the Envoy API and the
// HTTP door, CheckResponse.warning on the Check API. It does not apply to
// an unlimited rule, to requests_per_unit: 0 or to a quota bucket.
//
// On a descriptor without a rate_limit of its own:
//
//	charge: after             # before (default) | after: usage known afterwards (Envoy's
//	                          # apply_on_stream_done): its hits_addend is charged as debt to
//	                          # the parent descriptor's limits, under their counters; answered OK
//
// The algorithm is the rate_limit's `algorithm`, else the file's
// `default_algorithm`, else algorithms.Compatible, which counts as the
// reference does, so an unchanged reference config behaves the same
// (including the double burst at window edges; choose an algorithm whose
// count does not start afresh at the edge to avoid it). failure_mode
// defaults to the server's
// --failure-mode. open allows and closed denies every request while the
// store cannot decide; local has each replica enforce its share of the
// limit in its own memory with the same algorithm: requests (and burst)
// divided by the live replicas known before the outage (serve's
// --replicas, else the replicas' heartbeats in Redis), rounded down but at
// least 1. Across replicas that admits at most the limit when the count
// was right (and the limit is at least the count). The local counts start
// empty at the outage and are dropped when the store answers again. On
// the embedded store, which does not fail, local is the store itself.
//
// A calendar period (an algorithm that counts in windows only,
// algorithms.Facts.Window) is the local
// day, week, month or year of time_zone, whose name is resolved once, at
// load: an unknown one is an error at its file:line:column. Its reset
// time is the next local midnight of the period's first day; Envoy's
// unit: month stays 30 days from the epoch, as in the reference.
//
// Several limits on one descriptor (the reference allows one): use
// `rate_limits`, a list of rate_limit objects, instead of `rate_limit`. A
// request is admitted only if every limit admits it:
//
//	descriptors:
//	  - key: api_key
//	    rate_limits:
//	      - {requests_per_unit: 10, unit: second, algorithm: NAME, burst: 20}
//	      - {requests_per_unit: 10000, unit: day, name: daily_quota}
//
// # Policies (the Check API)
//
//	policies:
//	  free:  {requests_per_min: 15, burst: 30}
//	  basic: {requests_per_min: 60, burst: 100}
//	  pro:   {requests_per_min: 240, burst: 500}
//	  login: {algorithm: NAME, requests: 5, period: 15m, failure_mode: closed}
//
// A policy has `requests` with `period` (a Go duration), or exactly one of
// the shorthands `requests_per_second`, `requests_per_min`,
// `requests_per_hour`; optionally `algorithm` (default: the file's
// default_algorithm, else algorithms.Default: policies serve our own API,
// with no compatibility to keep; algorithms.Compatible for a calendar
// period), `burst` (where the algorithm takes one), `time_zone` (a calendar period's),
// `failure_mode`, `shadow_mode` and `warn_at` (as a rate_limit's). A policy's period may be a calendar
// period: `{requests: 10000, period: calendar_month, time_zone: Asia/Jakarta}`.
//
// # Limits and names
//
// Every limit must pass algorithms.Limit.Validate (periods in whole
// milliseconds, requests × period bounded, and each algorithm's own
// bounds). Limit.Name is rate_limit.name or, for metrics, a name
// derived from the rule's place as the reference derives its stat keys:
// "domain.key_value.key2", with "#i" appended when one descriptor carries
// several unnamed limits. Limit.ID identifies the limit's counters: stable
// across reloads while the rule keeps its place, so a reload does not
// reset counters.
//
// # Errors
//
// Every problem is reported, not only the first, as file:line:column:
// message, e.g.
//
//	rules/api.yaml:12:15: invalid rate limit unit "minutes" (want second, minute, hour, day, week, month or year)
//
// YAML syntax errors name the line and column of the token at fault.
// Anchors and
// aliases work; merge keys (<<) are not supported. Files are bounded (32
// levels of descriptors; aliases may add at most 100,000 YAML nodes to
// what the parser reads, and may not contain themselves). The file's own
// size is not bounded: a 200,000-descriptor ban list loads (in seconds,
// see bench/RESULTS.md).
package rules
