package docblocks

import (
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	doc := strings.Join([]string{
		"# Title",
		"",
		"```sh",
		"floodgate version",
		"```",
		"",
		"```yaml",
		"domain: api",
		"```",
		"",
		"<!-- doc-test: not run: needs docker -->",
		"",
		"```bash",
		"docker run floodgate",
		"```",
		"",
		"1. In a list:",
		"",
		"   ```console",
		"   $ floodgate version",
		"   dev",
		"   ```",
		"",
		"````shell",
		"echo '```'",
		"```",
		"````x",
		"````",
		"```",
		"a picture",
		"```",
		"~~~sh",
		"true",
		"~~~",
		"   ```SH",
		"   if true; then",
		"     echo",
		"   fi",
		"   ```",
	}, "\n")
	got, err := Extract("x.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{File: "x.md", Line: 3, Lang: "sh", Body: "floodgate version\n"},
		{File: "x.md", Line: 13, Lang: "bash", Body: "docker run floodgate\n", NotRun: "needs docker"},
		{File: "x.md", Line: 19, Lang: "console", Body: "$ floodgate version\ndev\n"},
		{File: "x.md", Line: 24, Lang: "shell", Body: "echo '```'\n```\n````x\n"},
		{File: "x.md", Line: 32, Lang: "sh", Body: "true\n"},
		{File: "x.md", Line: 35, Lang: "sh", Body: "if true; then\n  echo\nfi\n"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d blocks, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("block %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := got[1].String(); s != "x.md:13" {
		t.Errorf("String() = %q", s)
	}
	if got[0].Console() || got[1].Console() || got[3].Console() || !got[2].Console() {
		t.Errorf("Console(): sh %v, bash %v, shell %v, console %v", got[0].Console(), got[1].Console(), got[3].Console(), got[2].Console())
	}
}

// TestExtractRefuses: every way a block could slip past the test is an
// error naming the file and line.
func TestExtractRefuses(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"mark without reason", "<!-- doc-test: not run: -->\n```sh\ntrue\n```\n", "x.md:1: doc-test mark"},
		{"mark of another kind", "<!-- doc-test: skip -->\n```sh\ntrue\n```\n", `"skip"`},
		{"mark over text", "<!-- doc-test: not run: why -->\nsome text\n```sh\ntrue\n```\n", "x.md:1: a doc-test mark must stand just above"},
		{"mark over yaml", "<!-- doc-test: not run: why -->\n```yaml\na: 1\n```\n", `above a "yaml" block`},
		{"mark at the end", "```sh\ntrue\n```\n<!-- doc-test: not run: why -->\n", "x.md:4: a doc-test mark with no block"},
		{"two marks", "<!-- doc-test: not run: a -->\n<!-- doc-test: not run: b -->\n```sh\ntrue\n```\n", "followed by another mark"},
		{"unknown language", "```zsh\ntrue\n```\n", `"zsh"`},
		{"unclosed", "text\n```sh\ntrue\n", "x.md:2: a fenced block never closes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Extract("x.md", tc.doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Extract = %+v, %v; want an error containing %q", b, err, tc.want)
			}
		})
	}
}

func TestSteps(t *testing.T) {
	got, err := Steps("$ floodgate check \\\n>   --key a\nrow 1\n\n$2 of 3\n$ true\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Line: 1, Command: "floodgate check \\\n  --key a", Want: "row 1\n\n$2 of 3\n"},
		{Line: 6, Command: "true", Want: ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"output first\n$ true\n", "", "just text\n"} {
		if s, err := Steps(bad); err == nil {
			t.Errorf("Steps(%q) = %+v, want an error", bad, s)
		}
	}
}

func TestMatch(t *testing.T) {
	table := "#  ALLOWED  REMAINING  RETRY AFTER  WAIT\n1  yes      2          0s           100ms\n"
	for _, tc := range []struct {
		name, want, got string
		ok              bool
	}{
		{"same", table, table, true},
		{"realigned, trailing blanks and lines", table, "#  ALLOWED REMAINING RETRY AFTER WAIT  \n1 yes 2 0s 99ms\n\n", true},
		{"duration a little later", `{"retryAfter":"19.993s"}`, `{"retryAfter":"19.4s"}`, true},
		{"duration of another form", "reset 1m", "reset 59.987s", true},
		{"zero printed for non-zero", table, "#  ALLOWED  REMAINING  RETRY AFTER  WAIT\n1  yes      2          0s           0s\n", false},
		{"non-zero printed for zero", table, "#  ALLOWED  REMAINING  RETRY AFTER  WAIT\n1  yes      2          5ms          100ms\n", false},
		{"duration twice as long", "wait 100ms", "wait 200ms", false},
		{"duration less than half", "wait 100ms", "wait 49ms", false},
		{"duration at half", "wait 100ms", "wait 50ms", true},
		{"duration at one and a half", "wait 100ms", "wait 150ms", true},
		{"a word differs", table, strings.Replace(table, "yes", "no ", 1), false},
		{"a count differs", table, strings.Replace(table, " 2 ", " 1 ", 1), false},
		{"a line more", table, table + "3 of 5 allowed\n", false},
		{"a line less", table, "#  ALLOWED  REMAINING  RETRY AFTER  WAIT\n", false},
		{"a duration more", "a 1s", "a 1s 1s", false},
		{"a duration for a word", "after 1s", "after one", false},
		{"nothing shown, nothing printed", "", "\n", true},
		{"durations too long to parse", "x 9999999999999h", "x 9999999999998h", false},
		{"durations too long to parse, equal", "x 9999999999999h", "x 9999999999999h", true},
		{"nothing shown, something printed", "", "x\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Match(tc.want, tc.got)
			if (err == nil) != tc.ok {
				t.Fatalf("Match(%q, %q) = %v, want ok=%v", tc.want, tc.got, err, tc.ok)
			}
		})
	}
}
