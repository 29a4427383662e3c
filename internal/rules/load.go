package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Options change how Load reads config files; the zero value changes
// nothing.
type Options struct {
	// MergeDomains lets several files define one domain, as
	// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG does: each later file
	// (in name order) adds its top-level descriptors to the domain. A
	// top-level descriptor whose key and value another file of the
	// domain already defines is an error, whatever is nested below it
	// (trees are not merged deeper). A replaces entry may name a limit
	// of any file of the domain; quota_buckets and quota_unmatched stay
	// in one file of a domain.
	MergeDomains bool
	// AnyFile reads a folder as envoyproxy/ratelimit reads its runtime
	// folder: every file in it and in its sub-folders (in path order),
	// whatever its name's extension, and an empty folder as a config with
	// no rules. Names starting with '.' (files and folders) are skipped,
	// as without it. Off, only the *.yaml and *.yml files directly inside
	// the folder are read, and a folder without one is an error.
	AnyFile bool
}

// Load reads a YAML file, or every *.yaml and *.yml file directly inside a
// folder (not its subfolders; names starting with '.' are skipped, which
// covers editors' swap files and Kubernetes ConfigMap mounts, whose files
// are symlinks into a hidden "..data" folder). Symlinks are followed.
//
// An invalid configuration yields an ErrorList (wrapping ErrInvalid) whose
// lines read "file:line:column: message"; an unreadable path yields the
// os error.
func Load(path string, o Options) (*Set, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if st.IsDir() {
		if files, err = listDir(path, o); err != nil {
			return nil, err
		}
	}
	srcs := make([]source, 0, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, source{name: f, data: data})
	}
	return build(srcs, o)
}

// listDir lists the config files of a folder, sorted by name (with
// o.AnyFile, those of its sub-folders too, see walkDir).
func listDir(dir string, o Options) ([]string, error) {
	if o.AnyFile {
		files, _, err := walkDir(dir)
		return files, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if !isConfigName(name) {
			continue
		}
		full := filepath.Join(dir, name)
		st, err := os.Stat(full) // follows symlinks
		if err != nil {
			return nil, err
		}
		if st.Mode().IsRegular() {
			files = append(files, full)
		}
	}
	if len(files) == 0 {
		return nil, ErrorList{{File: dir, Msg: "no *.yaml or *.yml files in this folder"}}
	}
	return files, nil
}

// walkDir lists the files and the sub-folders under dir whose paths have
// no name starting with '.', in path order; symlinks to files are
// followed, symlinks to folders are not (as a walk of the runtime folder
// reads them).
func walkDir(dir string) (files, folders []string, err error) {
	// With a trailing separator, a walk starts in the folder a symlink dir
	// points to rather than at the link.
	root := strings.TrimSuffix(dir, string(filepath.Separator)) + string(filepath.Separator)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case path == root:
			return nil
		case strings.HasPrefix(d.Name(), ".") && d.IsDir():
			return filepath.SkipDir
		case strings.HasPrefix(d.Name(), "."):
			return nil
		case d.IsDir():
			folders = append(folders, path)
			return nil
		}
		st, err := os.Stat(path) // follows symlinks
		if err != nil {
			return err
		}
		if st.Mode().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	return files, folders, err
}

// isConfigName reports whether a folder's entry is read as a config file:
// a *.yaml or *.yml name not starting with '.'.
func isConfigName(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	ext := filepath.Ext(name)
	return ext == ".yaml" || ext == ".yml"
}

// Parse parses one file's bytes; name is used in error messages.
func Parse(name string, data []byte) (*Set, error) {
	return build([]source{{name: name, data: data}}, Options{})
}

type source struct {
	name string
	data []byte
	// resource and version name the xDS resource the data stands for
	// (ParseXDS); empty for a file.
	resource, version string
}

// build parses every source and merges them: a policy defined twice is an
// error, and so is a domain unless o.MergeDomains (then see mergeFile).
func build(srcs []source, o Options) (*Set, error) {
	c := &Set{domains: map[string]*node{}, policies: map[string]Policy{}, quota: map[string]*domainQuota{}, policyAt: map[string]Source{}}
	var errs ErrorList
	domainAt := map[string]string{}
	policyAt := map[string]string{}
	named := map[string]map[string]bool{} // explicit limit names by domain
	var unresolved []unresolvedRef        // replaces entries left to the domain (o.MergeDomains)
	h := sha256.New()
	for _, s := range srcs {
		c.files = append(c.files, s.name)
		hashField(h, []byte(s.name))
		hashField(h, s.data)

		fc, ferrs := parseFile(s, o)
		errs = append(errs, ferrs...)
		if fc == nil {
			continue
		}
		where := func(p pos) string { return fmt.Sprintf("%s:%d:%d", s.name, p.line, p.col) }
		if fc.hasDomain && fc.domain != "" {
			if _, dup := domainAt[fc.domain]; dup && o.MergeDomains {
				errs = append(errs, mergeFile(c, fc)...)
				c.limits = append(c.limits, fc.limits...)
			} else if first, dup := domainAt[fc.domain]; dup {
				errs = append(errs, &Error{File: s.name, Line: fc.domainPos.line, Column: fc.domainPos.col,
					Msg: fmt.Sprintf("duplicate domain %q: already defined at %s", fc.domain, first)})
			} else {
				domainAt[fc.domain] = where(fc.domainPos)
				c.domains[fc.domain] = fc.root
				c.quota[fc.domain] = fc.quota
				c.limits = append(c.limits, fc.limits...)
				named[fc.domain] = map[string]bool{}
			}
			maps.Copy(named[fc.domain], fc.named)
			unresolved = append(unresolved, fc.unresolved...)
		}
		for _, pa := range fc.policies {
			if first, dup := policyAt[pa.p.Name]; dup {
				errs = append(errs, &Error{File: s.name, Line: pa.pos.line, Column: pa.pos.col,
					Msg: fmt.Sprintf("duplicate policy %q: already defined at %s", pa.p.Name, first)})
				continue
			}
			policyAt[pa.p.Name] = where(pa.pos)
			c.policies[pa.p.Name] = pa.p
			c.policyAt[pa.p.Name] = pa.src
		}
	}
	errs = append(errs, stillUnresolved(unresolved, named)...)
	if len(errs) > 0 {
		return nil, errs
	}
	slices.SortFunc(c.limits, func(a, b *Limit) int { return strings.Compare(a.ID, b.ID) })
	c.digest = hex.EncodeToString(h.Sum(nil))
	c.loadedAt = time.Now()
	return c, nil
}
