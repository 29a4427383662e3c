// Package rules loads floodgate's rate-limit rules: the descriptor trees
// that Envoy's ShouldRateLimit is matched against, and the named policies
// of the Check API. It reads and validates the YAML files (every error as
// file:line:column), watches them, matches descriptors (Set.Match,
// Set.MatchRequest), explains a match (Set.Explain) and merges the sets of
// several sources (Merge). docs/rules.md is the reference of the format.
package rules
