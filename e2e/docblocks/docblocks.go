// Package docblocks reads the shell blocks of Markdown documentation so a
// test can run every one of them: Extract finds the fenced blocks and the
// marks above them, Steps splits a console block into commands and the
// output each shows, and Match compares shown output with what a command
// printed.
//
// A shell block is a fenced block whose language is sh, bash, shell or
// console. A block that cannot run where the tests run (it needs docker,
// kubectl, a real Envoy, hosts of a real deployment) carries a visible mark
// on the line just above its fence, giving the reason:
//
//	<!-- doc-test: not run: needs docker -->
//
// Every other shell block is meant to be run. A mark that is malformed, has
// no reason, or is not followed by a shell block is an error, and so is a
// fence in a language Extract does not know, so that no block escapes the
// test by a typo.
package docblocks

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Block is one fenced shell block.
type Block struct {
	File string // the Markdown file's name, as given to Extract
	Line int    // the line of the opening fence, from 1
	Lang string // sh, bash, shell or console
	Body string // the lines between the fences, indentation removed, each ending in "\n"
	// NotRun is the reason given by a "not run" mark; empty when the block
	// is to be run.
	NotRun string
}

// Console reports whether the block shows commands after "$ " with their
// output.
func (b Block) Console() bool { return b.Lang == "console" }

// String names the block as file:line, the way a test reports it.
func (b Block) String() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// shellLangs are the fence languages whose blocks are shell.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// otherLangs are the fence languages that are not shell ("" is a picture
// or plain text).
var otherLangs = map[string]bool{
	"": true, "text": true, "json": true, "yaml": true, "yml": true, "go": true, "proto": true,
	"typescript": true, "ts": true, "javascript": true, "js": true, "lua": true, "promql": true,
	"dockerfile": true, "toml": true, "ini": true, "diff": true, "markdown": true, "md": true,
}

var (
	fenceRE = regexp.MustCompile("^( *)(```+|~~~+)[ \t]*([^ \t`]*)[ \t]*$")
	markRE  = regexp.MustCompile(`^\s*<!--\s*doc-test:(.*?)-->\s*$`)
	// notRunRE is the one mark there is.
	notRunRE = regexp.MustCompile(`^\s*not run:\s*(\S.*?)\s*$`)
)

// Extract returns the shell blocks of the Markdown text of file name, in
// order, each with the reason of the mark above it (if any).
func Extract(name, text string) ([]Block, error) {
	lines := strings.Split(text, "\n")
	var blocks []Block
	var mark string // the reason of a mark waiting for its block
	markLine := 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := markRE.FindStringSubmatch(line); m != nil {
			if markLine != 0 {
				return nil, fmt.Errorf("%s:%d: a doc-test mark is followed by another mark, not by a shell block", name, markLine)
			}
			r := notRunRE.FindStringSubmatch(m[1])
			if r == nil {
				return nil, fmt.Errorf("%s:%d: doc-test mark %q: want <!-- doc-test: not run: REASON -->", name, i+1, strings.TrimSpace(m[1]))
			}
			mark, markLine = r[1], i+1
			continue
		}
		f := fenceRE.FindStringSubmatch(line)
		if f == nil {
			if markLine != 0 && strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("%s:%d: a doc-test mark must stand just above a shell block's fence", name, markLine)
			}
			continue
		}
		indent, fence, lang := len(f[1]), f[2], strings.ToLower(f[3])
		if !shellLangs[lang] && !otherLangs[lang] {
			return nil, fmt.Errorf("%s:%d: a fenced block in %q: neither shell (sh, bash, shell, console) nor a language the doc test knows", name, i+1, f[3])
		}
		start := i + 1
		var body strings.Builder
		closed := false
		for i++; i < len(lines); i++ {
			l := lines[i]
			if t := strings.TrimLeft(l, " "); strings.HasPrefix(t, fence) && strings.TrimSpace(strings.TrimLeft(t, fence[:1])) == "" {
				closed = true
				break
			}
			body.WriteString(dedent(l, indent))
			body.WriteByte('\n')
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: a fenced block never closes", name, start)
		}
		if !shellLangs[lang] {
			if markLine != 0 {
				return nil, fmt.Errorf("%s:%d: a doc-test mark stands above a %q block, not a shell block", name, markLine, lang)
			}
			continue
		}
		blocks = append(blocks, Block{File: name, Line: start, Lang: lang, Body: body.String(), NotRun: mark})
		mark, markLine = "", 0
	}
	if markLine != 0 {
		return nil, fmt.Errorf("%s:%d: a doc-test mark with no block below it", name, markLine)
	}
	return blocks, nil
}

// dedent removes up to n leading spaces from line (a fence indented in a
// list indents its body as much).
func dedent(line string, n int) string {
	for n > 0 && strings.HasPrefix(line, " ") {
		line, n = line[1:], n-1
	}
	return line
}

// Step is one command of a console block and the output shown under it.
type Step struct {
	Line    int    // the command's line within the block, from 1
	Command string // after "$ ", continuation lines (a trailing \) joined with newlines
	Want    string // the lines shown below it up to the next command, each ending in "\n"
}

// Steps splits a console block's body into its commands. Text before the
// first "$ " line is an error (an empty block too).
func Steps(body string) ([]Step, error) {
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	var steps []Step
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "$ ") {
			if len(steps) == 0 {
				return nil, fmt.Errorf("console block line %d: %q comes before any \"$ \" command", i+1, l)
			}
			steps[len(steps)-1].Want += l + "\n"
			continue
		}
		s := Step{Line: i + 1, Command: strings.TrimPrefix(l, "$ ")}
		for strings.HasSuffix(s.Command, `\`) && i+1 < len(lines) {
			i++
			s.Command += "\n" + strings.TrimPrefix(lines[i], "> ")
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// durationRE finds Go durations (19.993s, 1m30s, 100ms) where they stand as
// words of their own or inside quotes.
var durationRE = regexp.MustCompile(`\b(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+\b`)

// Match reports how got (a command's output) differs from want (the output
// a document shows), or nil. Lines are compared in order with runs of
// blanks taken as one (columns realign as numbers change width) and
// trailing blanks ignored; durations may differ within tolerance, since a
// shown answer was printed at another instant: zero must be zero, and
// another duration may be from half to one and a half times the one shown.
func Match(want, got string) error {
	w, g := outputLines(want), outputLines(got)
	if len(w) != len(g) {
		return fmt.Errorf("%d lines shown, %d printed", len(w), len(g))
	}
	for i := range w {
		if err := matchLine(w[i], g[i]); err != nil {
			return fmt.Errorf("line %d: %w\n  shown:   %s\n  printed: %s", i+1, err, w[i], g[i])
		}
	}
	return nil
}

// outputLines splits s into lines, blank runs squeezed and trailing blanks
// and blank last lines dropped.
func outputLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

func matchLine(want, got string) error {
	wd, gd := durationRE.FindAllString(want, -1), durationRE.FindAllString(got, -1)
	if ws, gs := durationRE.ReplaceAllString(want, "<d>"), durationRE.ReplaceAllString(got, "<d>"); ws != gs || len(wd) != len(gd) {
		return fmt.Errorf("the text differs")
	}
	for j := range wd {
		a, errA := time.ParseDuration(wd[j])
		b, errB := time.ParseDuration(gd[j])
		if errA != nil || errB != nil {
			if wd[j] != gd[j] {
				return fmt.Errorf("%s shown, %s printed", wd[j], gd[j])
			}
			continue
		}
		if !closeEnough(a, b) {
			return fmt.Errorf("duration %s shown, %s printed", wd[j], gd[j])
		}
	}
	return nil
}

// closeEnough: zero only as zero, otherwise got within [want/2, 3·want/2].
func closeEnough(want, got time.Duration) bool {
	if want == 0 || got == 0 {
		return want == got
	}
	return 2*got >= want && 2*got <= 3*want
}
