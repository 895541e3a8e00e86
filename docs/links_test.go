/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// mdFiles are the pages whose links are checked: the README, every page
// of docs/ and the chart's README.
func mdFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../README.md", "../deployments/helm/gpudra/README.md"}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	fence     = regexp.MustCompile("(?ms)^```.*?^```")
)

// anchors are the heading anchors GitHub gives a Markdown page: the
// heading in lower case, without punctuation, spaces as hyphens, and a
// -N suffix for the Nth repeat.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range mdHeading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestLinks: every relative link of the README, the docs and the chart's
// README names a file or directory of the repository, and every anchor
// a heading of the page it names, so that moving a section (the README's
// reference went to docs/) cannot leave a reader at a dead link.
func TestLinks(t *testing.T) {
	pages := map[string]map[string]bool{} // cleaned path → anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := pages[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		pages[path] = anchors(string(data))
		return pages[path]
	}
	checked := 0
	for _, file := range mdFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(data), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			checked++
			target, anchor, _ := strings.Cut(link, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), target)
				info, err := os.Stat(path)
				if err != nil {
					t.Errorf("%s links to %s, which does not exist", file, link)
					continue
				}
				if info.IsDir() || !strings.HasSuffix(path, ".md") {
					if anchor != "" {
						t.Errorf("%s links to %s: an anchor into something that is no Markdown page", file, link)
					}
					continue
				}
			}
			if anchor != "" && !anchorsOf(filepath.Clean(path))[anchor] {
				t.Errorf("%s links to %s, but %s has no heading with the anchor #%s", file, link, path, anchor)
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d links checked: is the test still reading the pages?", checked)
	}
}

// TestAlertsHaveRunbooks: each alert of the chart's PrometheusRule has a
// section in troubleshooting.md whose heading is the alert's name (the
// anchor is the name in lower case), and an alert's runbook_url, where it
// has one, points at that anchor.
func TestAlertsHaveRunbooks(t *testing.T) {
	data, err := os.ReadFile("../deployments/helm/gpudra/templates/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(string(page), -1) {
		headings[m[1]] = true
	}
	blocks := regexp.MustCompile(`(?m)^\s*- alert: `).Split(string(data), -1)[1:]
	if len(blocks) < 5 {
		t.Fatalf("found only %d alerts", len(blocks))
	}
	for _, b := range blocks {
		name := strings.Fields(b)[0]
		if !headings[name] {
			t.Errorf("alert %s has no section \"## %s\" in troubleshooting.md", name, name)
		}
		if m := regexp.MustCompile(`runbook_url:\s*['"]?([^'"\s]+)`).FindStringSubmatch(b); m != nil {
			if want := "troubleshooting.md#" + strings.ToLower(name); !strings.HasSuffix(m[1], want) {
				t.Errorf("alert %s: runbook_url %s does not end in %s", name, m[1], want)
			}
		}
	}
}
