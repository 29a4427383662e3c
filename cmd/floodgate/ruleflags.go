package main

import (
	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/internal/rules"
)

// ruleFlags are the flags that say how rules are loaded from files. Every
// command that reads rules (serve, config validate, config explain)
// registers them, so each reads a folder the same way.
type ruleFlags struct {
	mergeDomains bool
	allFiles     bool
}

func (f *ruleFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.mergeDomains, "merge-domains", false, "config files: several files may define one domain, each adding its top-level descriptors (one defined twice is refused), as the reference's MERGE_DOMAIN_CONFIG")
	fs.BoolVar(&f.allFiles, "config-all-files", false, "a config folder: read every file in it and in its sub-folders, whatever its extension (names starting with '.' skipped), and serve an empty folder with no rules, as the reference reads its runtime folder (the reference environment sets it); off, only the folder's own *.yaml and *.yml files, at least one")
}

// options are the loader's options for f.
func (f ruleFlags) options() rules.Options {
	return rules.Options{MergeDomains: f.mergeDomains, AnyFile: f.allFiles}
}
